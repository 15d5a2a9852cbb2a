package web

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/sessions"
	"switchyard/views"
)

// sessionCookie holds the session's random id, nothing else; the session lives on the server.
const sessionCookie = "switchyard_session"

// sessionKey caches the request's session lookup on the echo context.
const sessionKey = "switchyard.session"

// Sessions is the dashboard's session store (handlers.Sessions): the cookie carries a random
// id, the sessions service keeps the session, its lifetimes and its one-time messages.
type Sessions struct {
	svc *sessions.Service
	log *slog.Logger
}

// NewSessions builds the store on the sessions service.
func NewSessions(svc *sessions.Service, log *slog.Logger) *Sessions {
	return &Sessions{svc: svc, log: log}
}

type lookup struct{ sess *sessions.Session }

// current is the request's live session, nil when none; it is looked up once per request.
func (s *Sessions) current(c echo.Context) *sessions.Session {
	if l, ok := c.Get(sessionKey).(lookup); ok {
		return l.sess
	}
	var sess *sessions.Session
	if ck, err := c.Cookie(sessionCookie); err == nil {
		if sess, err = s.svc.Lookup(c.Request().Context(), ck.Value); err != nil {
			// The visitor is treated as logged out; the cause is worth a line (never the id).
			s.log.Warn("session lookup", "request_id", requestIDOf(c), "error", err)
			sess = nil
		}
	}
	c.Set(sessionKey, lookup{sess})
	return sess
}

func (s *Sessions) setCookie(c echo.Context, id string, maxAge int) {
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: c.Scheme() == "https"})
}

// IsAdmin reports whether the request carries a live admin session.
func (s *Sessions) IsAdmin(c echo.Context) bool { return s.current(c) != nil }

// Login starts a new session (a fresh id, whatever cookie came in) and sets its cookie.
func (s *Sessions) Login(c echo.Context) error {
	ctx := c.Request().Context()
	if old := s.current(c); old != nil {
		if err := s.svc.End(ctx, old.IDHash); err != nil {
			return err
		}
	}
	id, err := s.svc.Create(ctx)
	if err != nil {
		return err
	}
	s.setCookie(c, id, int(s.svc.Settings().Absolute().Seconds()))
	c.Set(sessionKey, lookup{})
	return nil
}

// Logout ends the request's session on the server and drops its cookie.
func (s *Sessions) Logout(c echo.Context) error {
	if sess := s.current(c); sess != nil {
		if err := s.svc.End(c.Request().Context(), sess.IDHash); err != nil {
			return err
		}
	}
	s.setCookie(c, "", -1)
	c.Set(sessionKey, lookup{})
	return nil
}

// LogoutEverywhere ends every session, the request's own included, and drops its cookie.
func (s *Sessions) LogoutEverywhere(c echo.Context) (int64, error) {
	n, err := s.svc.EndAll(c.Request().Context())
	if err != nil {
		return 0, err
	}
	s.setCookie(c, "", -1)
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
