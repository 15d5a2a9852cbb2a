package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

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
	return sh
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
