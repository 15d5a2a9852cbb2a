package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/resilience"
)

// ModelCooldownView is one active model lockout.
type ModelCooldownView struct {
	Provider     string    `json:"provider"`
	ConnectionID int64     `json:"connection_id"`
	Connection   string    `json:"connection"`
	Model        string    `json:"model"`
	Target       string    `json:"target"`
	Scope        string    `json:"scope"`
	Reason       string    `json:"reason"`
	FailureCount int       `json:"failure_count"`
	ExpiresAt    time.Time `json:"expires_at"`
	RemainingMS  int64     `json:"remaining_ms"`
}

// ModelCooldowns lists the active lockouts, soonest to end first.
func (a *API) ModelCooldowns() []ModelCooldownView {
	now := a.Lockouts.Now()
	reg := a.Catalog.Registry()
	list := a.Lockouts.List(now)
	out := make([]ModelCooldownView, 0, len(list))
	for _, l := range list {
		v := ModelCooldownView{Provider: l.Provider, ConnectionID: l.ConnectionID, Model: l.Model, Target: l.Target,
			Scope: string(l.Scope), Reason: l.Reason, FailureCount: l.FailureCount, ExpiresAt: l.ExpiresAt.UTC(),
			RemainingMS: l.Remaining(now).Milliseconds()}
		if c, ok := reg.Connection(l.ConnectionID); ok {
			v.Connection = c.Name
		}
		out = append(out, v)
	}
	return out
}

// ListModelCooldowns answers GET /api/resilience/model-cooldowns.
func (a *API) ListModelCooldowns(c echo.Context) error {
	return c.JSON(http.StatusOK, Items(a.ModelCooldowns()))
}

// ReenableRequest selects lockouts to clear: one (provider, connection, model), a model on every
// connection (provider, model), or everything (all).
type ReenableRequest struct {
	Provider   string          `json:"provider"`
	Connection json.RawMessage `json:"connection"` // connection id or name
	Model      string          `json:"model"`
	All        bool            `json:"all"`
}

// Reenable clears the lockouts the request selects and returns how many ended.
func (a *API) Reenable(in ReenableRequest) (int, error) {
	if in.All {
		return a.Lockouts.ClearAll(), nil
	}
	fields := map[string]errs.Msg{}
	if in.Provider == "" {
		fields["provider"] = errs.M("err.provider_or_all")
	}
	if in.Model == "" {
		fields["model"] = errs.M("err.required")
	}
	if len(fields) > 0 {
		return 0, errs.Fields(fields)
	}
	if len(in.Connection) == 0 || string(in.Connection) == "null" {
		return a.Lockouts.ClearModel(in.Provider, in.Model), nil
	}
	id, err := a.connectionRef(in.Provider, in.Connection)
	if err != nil {
		return 0, err
	}
	return a.Lockouts.Clear(in.Provider, id, in.Model), nil
}

// connectionRef resolves a connection given by id or by name within a provider.
func (a *API) connectionRef(provider string, raw json.RawMessage) (int64, error) {
	var id int64
	if json.Unmarshal(raw, &id) == nil {
		return id, nil
	}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if n, err := strconv.ParseInt(name, 10, 64); err == nil {
			return n, nil
		}
		reg := a.Catalog.Registry()
		if p, ok := reg.Provider(provider); ok {
			for _, c := range reg.ConnectionsOf(p.ID) {
				if c.Name == name {
					return c.ID, nil
				}
			}
		}
	}
	return 0, errs.Field("connection", "err.no_connection_of_provider")
}

// DeleteModelCooldowns answers DELETE /api/resilience/model-cooldowns.
func (a *API) DeleteModelCooldowns(c echo.Context) error {
	var in ReenableRequest
	if err := bindJSON(c, &in); err != nil {
		return APIError(c, err)
	}
	n, err := a.Reenable(in)
	if err != nil {
		return APIError(c, err)
	}
	return c.JSON(http.StatusOK, map[string]int{"removed": n})
}

// breakerViews is the "breakers" part of GET /api/resilience/state.
func breakerViews(states []resilience.BreakerState) []map[string]any {
	out := make([]map[string]any, 0, len(states))
	for _, b := range states {
		v := map[string]any{"provider": b.Provider, "model": b.Model, "state": string(b.State),
			"consecutive_failures": b.ConsecutiveFailures, "last_failure": b.LastFailure}
		if !b.NextProbeAt.IsZero() && b.State != resilience.CircuitClosed {
			v["next_probe_at"] = b.NextProbeAt.UTC()
		}
		out = append(out, v)
	}
	return out
}

// ResetBreaker answers POST /api/resilience/breakers/reset {"provider", "model"?}.
func (a *API) ResetBreaker(c echo.Context) error {
	var in struct {
		Provider string `json:"provider"`
		Model    string `json:"model"`
	}
	if err := bindJSON(c, &in); err != nil {
		return APIError(c, err)
	}
	if _, ok := a.Catalog.Registry().Provider(in.Provider); !ok {
		return APIError(c, errs.Field("provider", "err.no_provider"))
	}
	if in.Model == "" {
		a.Breakers.ResetProvider(in.Provider)
	} else {
		a.Breakers.Reset(in.Provider, in.Model)
	}
	return c.NoContent(http.StatusNoContent)
}

// ResetAll answers POST /api/resilience/reset: ends every cooldown, lockout and open breaker
// (terminal connection states stay; reset those per connection).
func (a *API) ResetAll(c echo.Context) error {
	for _, st := range a.Cooldowns.All() {
		a.Cooldowns.Clear(st.ConnectionID, false)
	}
	lockouts := a.Lockouts.ClearAll()
	for _, p := range a.Catalog.Registry().Providers() {
		a.Breakers.ResetProvider(p.Name)
	}
	return c.JSON(http.StatusOK, map[string]int{"lockouts_removed": lockouts})
}
