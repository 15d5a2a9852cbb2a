package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services/catalog"
	"switchyard/views"
)

// shell builds the layout model of a page and takes the pending flash messages. path is the
// page's own GET address, used by the language switch when the request was a POST.
func (d *Dashboard) shell(c echo.Context, active, title string, path ...string) views.Shell {
	return pageShell(c, d.Sessions, active, title, path...)
}

func pageShell(c echo.Context, s *Sessions, active, title string, path ...string) views.Shell {
	sh := views.Shell{Title: title, Active: active, Path: c.Request().URL.RequestURI()}
	if c.Request().Method != http.MethodGet {
		sh.Path = "/"
		if len(path) > 0 {
			sh.Path = path[0]
		}
	}
	if s != nil {
		sh.Flashes = s.takeFlashes(c)
	}
	return sh
}

const flashKey = "flash"

// addFlash stores a message to show once on the next page of this session.
func (s *Sessions) addFlash(c echo.Context, kind, text string) {
	sess := s.get(c.Request())
	sess.AddFlash(kind+"\x1f"+text, flashKey)
	if err := sess.Save(c.Request(), c.Response()); err != nil {
		c.Logger().Warn("save flash: ", err)
	}
}

// takeFlashes returns and clears the session's pending messages. It writes a cookie, so it
// runs before the response body.
func (s *Sessions) takeFlashes(c echo.Context) []views.Flash {
	sess := s.get(c.Request())
	raw := sess.Flashes(flashKey)
	if len(raw) == 0 {
		return nil
	}
	if err := sess.Save(c.Request(), c.Response()); err != nil {
		c.Logger().Warn("clear flash: ", err)
	}
	out := make([]views.Flash, 0, len(raw))
	for _, r := range raw {
		if str, ok := r.(string); ok {
			kind, text, _ := strings.Cut(str, "\x1f")
			out = append(out, views.Flash{Kind: kind, Text: text})
		}
	}
	return out
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

// redact removes any connection credential of the registry from a text that came from an
// upstream (an error body may echo the key it was sent).
func redact(reg *catalog.Registry, text string, ids ...int64) string {
	hide := func(secret string) {
		if len(secret) >= 4 {
			text = strings.ReplaceAll(text, secret, "[redacted]")
		}
	}
	for _, id := range ids {
		if c, ok := reg.Connection(id); ok {
			hide(c.APIKey.Reveal())
		}
	}
	for _, p := range reg.Providers() {
		for _, c := range p.Conns {
			hide(c.APIKey.Reveal())
		}
	}
	return text
}

// discovery is a provider's model discovery state for the views.
func (d *Dashboard) discovery(provider string) views.Discovery {
	reg := d.Catalog.Registry()
	st, ok := d.Inventory.ProviderStatus(provider)
	switch {
	case ok && st.OK:
		return views.Discovery{State: "ok", Models: st.Models, FetchedAt: st.FetchedAt}
	case ok:
		return views.Discovery{State: "failed", Error: redact(reg, st.Error), Models: st.Models}
	}
	if p, found := reg.Provider(provider); found && len(p.Conns) > 0 {
		return views.Discovery{State: "pending"}
	}
	return views.Discovery{State: "idle"}
}
