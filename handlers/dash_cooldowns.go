package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/ops"
	"switchyard/views"
)

// lockoutsModel lists the running model lockouts, the soonest to end first; expired ones are
// left out, so a polled table loses them by itself.
func (d *Dashboard) lockoutsModel() views.LockoutsModel {
	m := views.LockoutsModel{Enabled: d.Settings.Svc.Snapshot().Resilience().ModelLockout.Enabled}
	for _, l := range d.Ops.ModelCooldowns() {
		if l.RemainingMS <= 0 {
			continue
		}
		m.Rows = append(m.Rows, views.LockoutRow{Provider: l.Provider, ConnectionID: l.ConnectionID, Connection: l.Connection,
			Model: l.Model, Target: l.Target, Scope: l.Scope, Reason: l.Reason, FailureCount: l.FailureCount,
			ExpiresAt: l.ExpiresAt, RemainingMS: l.RemainingMS})
	}
	shape := make([]views.LockoutRow, len(m.Rows))
	for i, r := range m.Rows {
		r.RemainingMS = 0 // the browser ticks it down; only a change of the lockouts counts
		shape[i] = r
	}
	m.Version = stateVersion(m.Enabled, shape)
	return m
}

// ModelCooldownsPage answers GET /model-cooldowns.
func (d *Dashboard) ModelCooldownsPage(c echo.Context) error {
	return Render(c, http.StatusOK, views.ModelCooldownsPage(views.ModelCooldownsModel{
		Shell:    d.shell(c, "cooldowns", i18n.T(ctx(c), "cooldowns.title")),
		Lockouts: d.lockoutsModel()}))
}

// ModelCooldownsTable answers GET /model-cooldowns/table, the page's poll: the lockouts card
// out of band, or 204 while the lockouts are still the version the page sent (?v=).
func (d *Dashboard) ModelCooldownsTable(c echo.Context) error {
	m := d.lockoutsModel()
	return renderPoll(c, m.Version, views.LockoutsCard(m, true))
}

// ReenableModel answers POST /model-cooldowns/reenable (provider, connection id, model): the
// model is used on that connection again at once. htmx gets the lockouts card back; a plain
// form is redirected to the page with a message.
func (d *Dashboard) ReenableModel(c echo.Context) error {
	in := ops.Reenable{Provider: strings.TrimSpace(c.FormValue("provider")), Model: strings.TrimSpace(c.FormValue("model"))}
	connName := i18n.T(ctx(c), "cooldowns.all_connections")
	if conn := strings.TrimSpace(c.FormValue("connection")); conn != "" {
		in.Connection, connName = conn, conn
		if id, err := strconv.ParseInt(conn, 10, 64); err == nil {
			if e, ok := d.Catalog.Registry().Connection(id); ok {
				connName = e.Name
			}
		}
	}
	n, err := d.Ops.ReenableModels(ctx(c), in)
	kind, text := "success", i18n.T(ctx(c), "cooldowns.reenabled", in.Model, in.Provider, connName)
	switch {
	case err != nil:
		_, form, ok := formErrors(ctx(c), err)
		if !ok {
			return err
		}
		kind, text = "error", form
	case n == 0:
		kind, text = "info", i18n.T(ctx(c), "cooldowns.nothing")
	}
	return d.afterLockoutAction(c, kind, text)
}

// ReenableAllModels answers POST /model-cooldowns/reenable-all. It acts only with
// confirmed=true (sent by htmx after the browser asked); a plain form gets a confirmation page.
func (d *Dashboard) ReenableAllModels(c echo.Context) error {
	if c.FormValue("confirmed") != "true" {
		n := len(d.lockoutsModel().Rows)
		return Render(c, http.StatusOK, views.ConfirmPage(views.ConfirmModel{
			Shell:   d.shell(c, "cooldowns", i18n.T(ctx(c), "cooldowns.reenable_all"), "/model-cooldowns"),
			Heading: i18n.T(ctx(c), "cooldowns.reenable_all"),
			Text:    i18n.T(ctx(c), "cooldowns.reenable_all_confirm", n),
			Action:  "/model-cooldowns/reenable-all",
			Confirm: i18n.T(ctx(c), "cooldowns.reenable_all"),
			Back:    "/model-cooldowns",
		}))
	}
	n, err := d.Ops.ReenableModels(ctx(c), ops.Reenable{All: true})
	if err != nil {
		return err
	}
	return d.afterLockoutAction(c, "success", i18n.T(ctx(c), "cooldowns.reenabled_all", n))
}

// afterLockoutAction answers a lockout action: htmx gets the refreshed card, a plain form the
// page again with the message.
func (d *Dashboard) afterLockoutAction(c echo.Context, kind, text string) error {
	if isHTMX(c) {
		return Render(c, http.StatusOK, views.LockoutsCard(d.lockoutsModel(), false))
	}
	d.flash(c, kind, text)
	return c.Redirect(http.StatusSeeOther, "/model-cooldowns")
}
