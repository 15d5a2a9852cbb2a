package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/ops"
)

// ResilienceState answers GET /api/resilience/state: every connection's state, the breakers,
// the providers' statuses and the active model lockouts.
func (a *API) ResilienceState(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"connections": a.Ops.ConnectionStates(), "breakers": a.Ops.BreakerStates(),
		"providers": a.Ops.ProviderStatuses(), "model_cooldowns": a.Ops.ModelCooldowns()})
}

// ResetConnection answers POST /api/connections/:id/reset: clears the cooldown and backoff; with
// {"terminal": true} it also clears a terminal state (banned, expired, credits exhausted).
func (a *API) ResetConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	var in struct {
		Terminal bool `json:"terminal"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	st, err := a.Ops.ResetConnection(ctx(c), id, in.Terminal)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// ListModelCooldowns answers GET /api/resilience/model-cooldowns.
func (a *API) ListModelCooldowns(c echo.Context) error {
	return c.JSON(http.StatusOK, Items(a.Ops.ModelCooldowns()))
}

// DeleteModelCooldowns answers DELETE /api/resilience/model-cooldowns with {provider,
// connection (id or name), model}, {provider, model} (every connection) or {all: true}.
func (a *API) DeleteModelCooldowns(c echo.Context) error {
	var in struct {
		Provider   string          `json:"provider"`
		Connection json.RawMessage `json:"connection"`
		Model      string          `json:"model"`
		All        bool            `json:"all"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	req := ops.Reenable{Provider: in.Provider, Model: in.Model, All: in.All}
	if len(in.Connection) > 0 && string(in.Connection) != "null" {
		var id int64
		var name string
		switch {
		case json.Unmarshal(in.Connection, &id) == nil:
			req.Connection = strconv.FormatInt(id, 10)
		case json.Unmarshal(in.Connection, &name) == nil:
			req.Connection = name
		default:
			return errs.Field("connection", "err.no_connection_of_provider")
		}
	}
	n, err := a.Ops.ReenableModels(ctx(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]int{"removed": n})
}

// ResetBreaker answers POST /api/resilience/breakers/reset {"provider", "model"?}.
func (a *API) ResetBreaker(c echo.Context) error {
	var in struct {
		Provider string `json:"provider"`
		Model    string `json:"model"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if err := a.Ops.ResetBreaker(ctx(c), in.Provider, in.Model); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// ResetAll answers POST /api/resilience/reset: ends every cooldown, lockout and open breaker
// (terminal connection states stay; reset those per connection).
func (a *API) ResetAll(c echo.Context) error {
	n, err := a.Ops.ResetAll(ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]int{"lockouts_removed": n})
}
