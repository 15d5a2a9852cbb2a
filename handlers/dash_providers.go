package handlers

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/health"
	"switchyard/services/ops"
	"switchyard/services/resilience"
	"switchyard/views"
)

// providerFields are the fields of the provider forms, for placing service errors.
var providerFields = []string{"name", "type", "base_url"}

// providersModel lists every provider with its connections; the forms start empty.
func (d *Dashboard) providersModel(c echo.Context) (views.ProvidersModel, error) {
	provs, err := d.Catalog.ListProviders(ctx(c))
	if err != nil {
		return views.ProvidersModel{}, err
	}
	conns, err := d.Catalog.ListConnections(ctx(c))
	if err != nil {
		return views.ProvidersModel{}, err
	}
	provStates, connStates := d.liveState()
	byProvider := map[int64][]views.ConnectionRow{}
	for _, cn := range conns {
		st, ok := connStates[cn.ID]
		if !ok { // not in the registry yet: nothing has happened to it
			st = views.ConnectionState{ID: cn.ID, Name: cn.Name, Enabled: cn.Enabled, Status: string(resilience.StatusActive)}
		}
		row := views.ConnectionRow{ID: cn.ID, Name: cn.Name, AuthType: cn.AuthType, Priority: cn.Priority,
			MaxConcurrent: cn.MaxConcurrent, State: st}
		byProvider[cn.ProviderID] = append(byProvider[cn.ProviderID], row)
	}
	m := views.ProvidersModel{
		Shell:          d.shell(c, "providers", i18n.T(ctx(c), "providers.title"), "/providers"),
		Types:          catalog.ProviderTypes,
		ProviderForm:   views.ProviderForm{Type: catalog.TypeOpenAICompatible},
		ConnectionForm: views.ConnectionForm{Enabled: true},
	}
	for _, p := range provs {
		st, ok := provStates[p.Name]
		if !ok {
			st = views.ProviderState{ID: p.ID, Name: p.Name, Status: string(health.StatusUnhealthy), Idle: true,
				Breaker: string(resilience.CircuitClosed)}
		}
		m.Providers = append(m.Providers, views.ProviderRow{ID: p.ID, Name: p.Name, Type: p.Type, BaseURL: p.BaseURL,
			Discovery: d.discovery(p.Name), State: st, Connections: byProvider[p.ID]})
	}
	return m, nil
}

// liveState gathers every provider's and connection's live state from memory (no database
// read, so the page can poll it), keyed by provider name and connection id.
func (d *Dashboard) liveState() (map[string]views.ProviderState, map[int64]views.ConnectionState) {
	reg := d.Catalog.Registry()
	now := d.Ops.Now()
	provs := map[string]views.ProviderState{}
	for _, st := range d.Ops.ProviderStatuses() {
		if p, ok := reg.Provider(st.Provider); ok {
			provs[st.Provider] = providerState(p, st, now)
		}
	}
	conns := map[int64]views.ConnectionState{}
	for _, v := range d.Ops.ConnectionStates() {
		conns[v.ID] = connectionState(reg, v)
	}
	return provs, conns
}

// providerState turns a provider's status into its view.
func providerState(p *catalog.ProviderEntry, st ops.ProviderStatus, now time.Time) views.ProviderState {
	v := views.ProviderState{ID: p.ID, Name: p.Name, Status: string(st.Status), Idle: len(p.Conns) == 0, Breaker: st.Breaker}
	if st.NextProbeAt != nil && st.Breaker != string(resilience.CircuitClosed) {
		v.ProbeAt = *st.NextProbeAt
		v.ProbeInMS = max(st.NextProbeAt.Sub(now).Milliseconds(), 0)
	}
	for _, b := range st.ModelBreakers {
		if b.State == resilience.CircuitOpen || b.State == resilience.CircuitHalfOpen {
			mb := views.ModelBreaker{Model: b.Model, State: string(b.State)}
			if !b.NextProbeAt.IsZero() {
				mb.ProbeInMS = max(b.NextProbeAt.Sub(now).Milliseconds(), 0)
			}
			v.ModelBreakers = append(v.ModelBreakers, mb)
		}
	}
	for _, c := range st.DegradedModels {
		v.Degraded = append(v.Degraded, views.DegradedModel{Model: c.Model, OK: c.OK, Fail: c.Fail})
	}
	for _, f := range st.LastFailures {
		v.Failures = append(v.Failures, views.Failure{At: f.At, Model: f.Model, Status: f.Status, Message: f.Message})
	}
	return v
}

// ProvidersState answers GET /providers/state, the providers page's poll: every provider's and
// connection's state as out-of-band fragments.
func (d *Dashboard) ProvidersState(c echo.Context) error {
	reg := d.Catalog.Registry()
	provStates, connStates := d.liveState()
	var provs []views.ProviderState
	var conns []views.ConnectionState
	for _, p := range reg.Providers() {
		if st, ok := provStates[p.Name]; ok {
			provs = append(provs, st)
		}
		for _, cn := range reg.ConnectionsOf(p.ID) {
			if st, ok := connStates[cn.ID]; ok {
				conns = append(conns, st)
			}
		}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, http.StatusOK, views.LiveState(provs, conns))
}

// ResetBreaker answers POST /providers/:id/reset-breaker: closes the provider's breaker and every
// model breaker of it. htmx gets the provider's breaker back (its state strip and status pill
// out of band); a plain form is redirected.
func (d *Dashboard) ResetBreaker(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	p, err := d.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	if err := d.Ops.ResetBreaker(ctx(c), p.Name, ""); err != nil {
		return err
	}
	if isHTMX(c) {
		provStates, _ := d.liveState()
		if st, ok := provStates[p.Name]; ok {
			return Render(c, http.StatusOK, views.ProviderStateFragment(st))
		}
	}
	d.flash(c, "success", i18n.T(ctx(c), "state.breaker_reset", p.Name))
	return seeOther(c, "/providers#provider-"+p.Name)
}

// ProvidersPage answers GET /providers; ?provider=<name> preselects the add-connection form.
func (d *Dashboard) ProvidersPage(c echo.Context) error {
	m, err := d.providersModel(c)
	if err != nil {
		return err
	}
	m.ConnectionForm.Provider = c.QueryParam("provider")
	return Render(c, http.StatusOK, views.ProvidersPage(m))
}

// CreateProvider answers POST /providers.
func (d *Dashboard) CreateProvider(c echo.Context) error {
	f := views.ProviderForm{Name: strings.TrimSpace(c.FormValue("name")), Type: c.FormValue("type"),
		BaseURL: strings.TrimSpace(c.FormValue("base_url"))}
	p, err := d.Catalog.CreateProvider(ctx(c), catalog.ProviderInput{Name: &f.Name, Type: &f.Type, BaseURL: &f.BaseURL}, nil)
	if err != nil {
		fields, form, ok := formErrors(ctx(c), err, providerFields...)
		if !ok {
			return err
		}
		m, err := d.providersModel(c)
		if err != nil {
			return err
		}
		f.Errors, f.Error = fields, form
		m.ProviderForm = f
		return Render(c, http.StatusUnprocessableEntity, views.ProvidersPage(m))
	}
	d.flash(c, "success", i18n.T(ctx(c), "providers.created", p.Name))
	return seeOther(c, "/providers#provider-"+p.Name)
}

// EditProviderPage answers GET /providers/:id/edit.
func (d *Dashboard) EditProviderPage(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	p, err := d.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	return Render(c, http.StatusOK, views.ProviderEditPage(d.providerEditModel(c, p,
		views.ProviderForm{Type: p.Type, BaseURL: p.BaseURL})))
}

func (d *Dashboard) providerEditModel(c echo.Context, p catalog.Provider, f views.ProviderForm) views.ProviderEditModel {
	path := "/providers/" + c.Param("id") + "/edit"
	return views.ProviderEditModel{Shell: d.shell(c, "providers", i18n.T(ctx(c), "providers.edit_title", p.Name), path),
		ID: p.ID, Name: p.Name, Types: catalog.ProviderTypes, Form: f}
}

// UpdateProvider answers POST /providers/:id/edit: type and base URL.
func (d *Dashboard) UpdateProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	old, err := d.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	f := views.ProviderForm{Type: c.FormValue("type"), BaseURL: strings.TrimSpace(c.FormValue("base_url"))}
	p, err := d.Catalog.UpdateProvider(ctx(c), id, catalog.ProviderInput{Type: &f.Type, BaseURL: &f.BaseURL}, nil)
	if err != nil {
		fields, form, ok := formErrors(ctx(c), err, providerFields...)
		if !ok {
			return err
		}
		f.Errors, f.Error = fields, form
		return Render(c, http.StatusUnprocessableEntity, views.ProviderEditPage(d.providerEditModel(c, old, f)))
	}
	d.flash(c, "success", i18n.T(ctx(c), "providers.updated", p.Name))
	return seeOther(c, "/providers#provider-"+p.Name)
}

// DeleteProvider answers POST /providers/:id/delete; its connections go with it.
func (d *Dashboard) DeleteProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	p, err := d.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	if err := d.Catalog.DeleteProvider(ctx(c), id); err != nil {
		return d.missing(c, err, "/providers")
	}
	d.flash(c, "success", i18n.T(ctx(c), "providers.deleted", p.Name))
	return seeOther(c, "/providers")
}

// missing answers a not-found error with gone and returns any other error.
func (d *Dashboard) missing(c echo.Context, err error, back string) error {
	if errs.CodeOf(err) == errs.NotFound {
		return d.gone(c, back)
	}
	return err
}

// gone answers an action on something that no longer exists: back to the list with a message.
func (d *Dashboard) gone(c echo.Context, back string) error {
	d.flash(c, "error", i18n.T(ctx(c), "err.not_found"))
	return seeOther(c, back)
}
