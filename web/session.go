package web

import (
	"log/slog"

	gsessions "github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"switchyard/services/sessions"
	"switchyard/views"
)

// sessionCookie names the dashboard's session cookie; its value is the session's random id,
// signed (serverStore).
const sessionCookie = "switchyard_session"

// sessionKey caches the request's session lookup on the echo context.
const sessionKey = "switchyard.session"

// Sessions is the dashboard's session store (handlers.Sessions), on gorilla/sessions: its
// Store (serverStore) keeps each session as a server-side row behind a signed cookie, so logout,
// log out everywhere and the lifetimes end sessions at once; one-time messages live in the row.
type Sessions struct {
	store *serverStore
	svc   *sessions.Service
	log   *slog.Logger
}

// NewSessions builds the store on the sessions service; cookieKey (derived from the instance
// secret, 32 bytes) signs the cookies, so a new secret logs everyone out.
func NewSessions(svc *sessions.Service, cookieKey []byte, log *slog.Logger) *Sessions {
	return &Sessions{store: newServerStore(svc, cookieKey), svc: svc, log: log}
}

type lookup struct{ sess *sessions.Session }

// current is the request's live session, nil when none; it is looked up once per request.
func (s *Sessions) current(c echo.Context) *sessions.Session {
	if l, ok := c.Get(sessionKey).(lookup); ok {
		return l.sess
	}
	gs, err := s.store.Get(c.Request(), sessionCookie)
	if err != nil {
		// The visitor is treated as logged out; the cause is worth a line (never the id).
		s.log.Warn("session lookup", "request_id", requestIDOf(c), "error", err)
	}
	sess := liveOf(gs)
	c.Set(sessionKey, lookup{sess})
	return sess
}

// save writes a session's cookie with the request's Secure flag (the client came over TLS).
func (s *Sessions) save(c echo.Context, gs *gsessions.Session, maxAge int) error {
	gs.Options.MaxAge, gs.Options.Secure = maxAge, c.Scheme() == "https"
	return gs.Save(c.Request(), c.Response())
}

// operator names the request's session for binding sign-in flows to it ("" without one).
func (s *Sessions) operator(c echo.Context) string {
	if sess := s.current(c); sess != nil {
		return "session:" + sess.IDHash
	}
	return ""
}

// IsAdmin reports whether the request carries a live admin session.
func (s *Sessions) IsAdmin(c echo.Context) bool { return s.current(c) != nil }

// Login starts a new session (a fresh id, whatever cookie came in) and sets its cookie.
func (s *Sessions) Login(c echo.Context) error {
	if old := s.current(c); old != nil {
		if err := s.svc.End(c.Request().Context(), old.IDHash); err != nil {
			return err
		}
	}
	if err := s.save(c, s.store.fresh(sessionCookie), int(s.svc.Settings().Absolute().Seconds())); err != nil {
		return err
	}
	c.Set(sessionKey, lookup{})
	return nil
}

// Logout ends the request's session on the server and drops its cookie.
func (s *Sessions) Logout(c echo.Context) error {
	gs, err := s.store.Get(c.Request(), sessionCookie)
	if err != nil {
		return err
	}
	if err := s.save(c, gs, -1); err != nil {
		return err
	}
	c.Set(sessionKey, lookup{})
	return nil
}

// LogoutEverywhere ends every session, the request's own included, and drops its cookie.
func (s *Sessions) LogoutEverywhere(c echo.Context) (int64, error) {
	n, err := s.svc.EndAll(c.Request().Context())
	if err != nil {
		return 0, err
	}
	if err := s.save(c, s.store.fresh(sessionCookie), -1); err != nil {
		return 0, err
	}
	c.Set(sessionKey, lookup{})
	return n, nil
}

// AddFlash stores a message to show once on the next page of this session (none without one).
func (s *Sessions) AddFlash(c echo.Context, kind, text string) error {
	sess := s.current(c)
	if sess == nil {
		return nil
	}
	return s.svc.AddFlash(c.Request().Context(), sess.IDHash, sessions.Flash{Kind: kind, Text: text})
}

// TakeFlashes returns and clears the session's pending messages.
func (s *Sessions) TakeFlashes(c echo.Context) []views.Flash {
	sess := s.current(c)
	if sess == nil || len(sess.Flashes) == 0 {
		return nil
	}
	got, err := s.svc.TakeFlashes(c.Request().Context(), sess.IDHash)
	if err != nil {
		s.log.Warn("take flashes", "request_id", requestIDOf(c), "error", err)
		return nil
	}
	out := make([]views.Flash, 0, len(got))
	for _, f := range got {
		out = append(out, views.Flash{Kind: f.Kind, Text: f.Text})
	}
	return out
}
