package web

import (
	"net/http"
	"strings"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"switchyard/views"
)

const sessionName = "switchyard_session"

// Sessions keeps the dashboard login in a signed and encrypted cookie. It is the dashboard's
// session store (handlers.Sessions).
type Sessions struct {
	store *sessions.CookieStore
}

// NewSessions builds the cookie store from a 64-byte signing key and a 32-byte encryption key.
func NewSessions(hashKey, blockKey []byte) *Sessions {
	st := sessions.NewCookieStore(hashKey, blockKey)
	st.Options = &sessions.Options{Path: "/", MaxAge: 7 * 24 * 3600, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	return &Sessions{store: st}
}

// IsTLS reports whether the client reached us over TLS, directly or through a proxy that says so.
func IsTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (s *Sessions) get(r *http.Request) *sessions.Session {
	sess, _ := s.store.Get(r, sessionName) // a bad or old cookie yields a fresh session
	sess.Options.Secure = IsTLS(r)
	return sess
}

// IsAdmin reports whether the request carries a logged-in admin session.
func (s *Sessions) IsAdmin(c echo.Context) bool {
	v, _ := s.get(c.Request()).Values["admin"].(bool)
	return v
}

// Login marks the session as the admin's.
func (s *Sessions) Login(c echo.Context) error {
	sess := s.get(c.Request())
	sess.Values["admin"] = true
	return sess.Save(c.Request(), c.Response())
}

// Logout ends the session.
func (s *Sessions) Logout(c echo.Context) error {
	sess := s.get(c.Request())
	sess.Values = map[any]any{}
	sess.Options.MaxAge = -1
	return sess.Save(c.Request(), c.Response())
}

const flashKey = "flash"

// AddFlash stores a message to show once on the next page of this session.
func (s *Sessions) AddFlash(c echo.Context, kind, text string) error {
	sess := s.get(c.Request())
	sess.AddFlash(kind+"\x1f"+text, flashKey)
	return sess.Save(c.Request(), c.Response())
}

// TakeFlashes returns and clears the session's pending messages. It writes a cookie, so it runs
// before the response body.
func (s *Sessions) TakeFlashes(c echo.Context) []views.Flash {
	sess := s.get(c.Request())
	raw := sess.Flashes(flashKey)
	if len(raw) == 0 {
		return nil
	}
	_ = sess.Save(c.Request(), c.Response()) // a flash shown twice is the worst outcome
	out := make([]views.Flash, 0, len(raw))
	for _, r := range raw {
		if str, ok := r.(string); ok {
			kind, text, _ := strings.Cut(str, "\x1f")
			out = append(out, views.Flash{Kind: kind, Text: text})
		}
	}
	return out
}
