package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/resilience"
)

// ConnectionStateView is one connection in GET /api/resilience/state; never secrets.
type ConnectionStateView struct {
	ID           int64      `json:"id"`
	Provider     string     `json:"provider"`
	Name         string     `json:"name"`
	Status       string     `json:"status"`
	Until        *time.Time `json:"until"`
	RemainingMS  int64      `json:"remaining_ms"`
	Reason       string     `json:"reason"`
	BackoffLevel int        `json:"backoff_level"`
	LastError    string     `json:"last_error"`
	ErrorCode    int        `json:"error_code"`
	LastErrorAt  *time.Time `json:"last_error_at"`
	Queue        QueueView  `json:"queue"`
}

// QueueView is a connection's live queue and quota-share numbers.
type QueueView struct {
	Executing int   `json:"executing"`
	Waiting   int   `json:"waiting"`
	Holding   int   `json:"holding"`
	Rejected  int64 `json:"rejected"`
	TimedOut  int64 `json:"timed_out"`
	FailOpen  int64 `json:"fail_open"`
}

// ConnectionStates joins the registry with the cooldown table, in registry order.
func (a *API) ConnectionStates() []ConnectionStateView {
	now := a.Cooldowns.Now()
	var out []ConnectionStateView
	reg := a.Catalog.Registry()
	for _, p := range reg.Providers() {
		for _, c := range reg.ConnectionsOf(p.ID) {
			s := a.Cooldowns.Get(c.ID)
			v := ConnectionStateView{ID: c.ID, Provider: p.Name, Name: c.Name, Status: string(s.Status(now)),
				Reason: string(s.LastErrorType), BackoffLevel: s.Level, LastError: s.LastError, ErrorCode: s.ErrorCode}
			if s.Status(now) == resilience.StatusCooling {
				u := s.Until.UTC()
				v.Until, v.RemainingMS = &u, s.Until.Sub(now).Milliseconds()
			}
			q, sem := a.Queues.Stats(c.ID), a.Semaphores.Stats(c.ID)
			v.Queue = QueueView{Executing: q.Executing, Waiting: q.Waiting + sem.Waiting, Holding: sem.Holding,
				Rejected: q.Rejected, TimedOut: q.TimedOut, FailOpen: sem.FailOpenFull + sem.FailOpenTimeout}
			if !s.LastErrorAt.IsZero() {
				at := s.LastErrorAt.UTC()
				v.LastErrorAt = &at
			}
			out = append(out, v)
		}
	}
	return out
}

// ResilienceState answers GET /api/resilience/state.
func (a *API) ResilienceState(c echo.Context) error {
	conns := a.ConnectionStates()
	if conns == nil {
		conns = []ConnectionStateView{}
	}
	return c.JSON(http.StatusOK, map[string]any{"connections": conns, "breakers": breakerViews(a.Breakers.States()),
		"providers": a.Statuses(), "model_cooldowns": a.ModelCooldowns()})
}

// ResetConnection answers POST /api/connections/:id/reset: clears the cooldown and backoff; with
// {"terminal": true} it also clears a terminal state (banned, expired, credits exhausted).
func (a *API) ResetConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return APIError(c, err)
	}
	var in struct {
		Terminal bool `json:"terminal"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return APIError(c, err)
		}
	}
	if _, ok := a.Catalog.Registry().Connection(id); !ok {
		return APIError(c, errs.New(errs.NotFound, "err.connection_not_found", id))
	}
	a.Cooldowns.Clear(id, in.Terminal)
	for _, v := range a.ConnectionStates() {
		if v.ID == id {
			return c.JSON(http.StatusOK, v)
		}
	}
	return c.NoContent(http.StatusNoContent)
}
