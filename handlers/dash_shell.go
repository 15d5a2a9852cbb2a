package handlers

import (
	"context"
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/errs"
	"switchyard/views"
)

// shell builds the layout model of a page and takes the pending flash messages. path is the
// page's own GET address, used by the language switch when the request was a POST.
func (d *Dashboard) shell(c echo.Context, active, title string, path ...string) views.Shell {
	return pageShell(c, d.Sessions, active, title, path...)
}

func pageShell(c echo.Context, s Sessions, active, title string, path ...string) views.Shell {
	sh := views.Shell{Title: title, Active: active, Path: c.Request().URL.RequestURI()}
	if c.Request().Method != http.MethodGet {
		sh.Path = "/"
		if len(path) > 0 {
			sh.Path = path[0]
		}
	}
	if s != nil {
		sh.Flashes = s.TakeFlashes(c)
	}
	sh.Degraded = DegradedOf(c)
	return sh
}

// DegradedOf is what MarkDegraded noted on the request: what this replica runs without.
func DegradedOf(c echo.Context) []string {
	what, _ := c.Get(degradedKey).([]string)
	return what
}

// degradedKey marks, on the echo context, what this replica runs without (Health.Degraded).
const degradedKey = "switchyard.degraded"

// MarkDegraded notes on a dashboard request what this replica runs without, for the page's
// banners.
func MarkDegraded(c echo.Context, what []string) {
	if len(what) > 0 {
		c.Set(degradedKey, what)
	}
}

// flash stores a one-time message for the next page; losing it loses only the message.
func (d *Dashboard) flash(c echo.Context, kind, text string) {
	_ = d.Sessions.AddFlash(c, kind, text)
}

// isHTMX reports whether htmx sent the request (and so expects a fragment or HX-Redirect).
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// seeOther ends a successful form post: a 303 for a plain form, HX-Redirect for htmx (whose
// XMLHttpRequest would otherwise follow the redirect and swap a whole page into the form).
func seeOther(c echo.Context, url string) error {
	if isHTMX(c) {
		c.Response().Header().Set("HX-Redirect", url)
		return c.NoContent(http.StatusNoContent)
	}
	return c.Redirect(http.StatusSeeOther, url)
}

// connAnchor is a connection's row on the providers page.
func connAnchor(id int64) string { return "/providers#conn-" + strconv.FormatInt(id, 10) }

// listGone answers an action on something that no longer exists: back to its list at back with
// a message.
func listGone(c echo.Context, s Sessions, back string) error {
	_ = s.AddFlash(c, "error", i18n.T(ctx(c), "err.not_found"))
	return seeOther(c, back)
}

// listMissing answers a not-found error with listGone, a conflict (something still in use, such
// as a provider a combo names) with its message on the list it came from, and returns any other
// error.
func listMissing(c echo.Context, s Sessions, back string, err error) error {
	switch errs.CodeOf(err) {
	case errs.NotFound:
		return listGone(c, s, back)
	case errs.Conflict:
		_ = s.AddFlash(c, "error", Text(ctx(c), errs.As(err).Msg))
		return seeOther(c, back)
	}
	return err
}

// itemAt loads what the path's :id names for a page or an action of the list at back. A bad id
// or a missing item is answered there (listGone, listMissing): ok is false and the handler
// returns err as it is.
func itemAt[T any](c echo.Context, s Sessions, back string, get func(context.Context, int64) (T, error)) (item T, id int64, ok bool, err error) {
	if id, err = PathID(c); err != nil {
		return item, 0, false, listGone(c, s, back)
	}
	if item, err = get(ctx(c), id); err != nil {
		return item, id, false, listMissing(c, s, back, err)
	}
	return item, id, true, nil
}

// deleteAt answers a delete of what the path's :id names on the list at back: del removes it and
// the list shows done's message; a missing item, or one still in use, is answered there
// (itemAt, listMissing).
func deleteAt[T any](c echo.Context, s Sessions, back string, get func(context.Context, int64) (T, error),
	del func(context.Context, int64) error, done func(T) string) error {
	item, id, ok, err := itemAt(c, s, back, get)
	if !ok {
		return err
	}
	if err := del(ctx(c), id); err != nil {
		return listMissing(c, s, back, err)
	}
	_ = s.AddFlash(c, "success", done(item))
	return seeOther(c, back)
}

// renderPoll answers a page's poll of its live state, never cached: 204 while the state is still
// the version the page sent (?v=), else comp with the new one.
func renderPoll(c echo.Context, version string, comp templ.Component) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	if v := c.QueryParam("v"); v != "" && v == version {
		return c.NoContent(http.StatusNoContent)
	}
	return Render(c, http.StatusOK, comp)
}

// discovery is a provider's model discovery state for the views.
func (d *Dashboard) discovery(c echo.Context, provider string) views.Discovery {
	reg := d.Catalog.Registry()
	st, ok := d.Inventory.ProviderStatus(provider)
	switch {
	case ok && st.OK:
		return views.Discovery{State: "ok", Models: st.Models, FetchedAt: st.FetchedAt}
	case ok:
		return views.Discovery{State: "failed", Problem: fetchProblem(ctx(c), reg, st.Cause), Models: st.Models}
	}
	if p, found := reg.Provider(provider); found && len(p.Conns) > 0 {
		return views.Discovery{State: "pending"}
	}
	return views.Discovery{State: "idle"}
}
