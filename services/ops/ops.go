// Package ops is what an operator sees of the live resilience state and what they can do about
// it: connection states, provider statuses, breakers and model lockouts as views, and the
// actions that clear them. The admin API and the dashboard both call it; an action returns only
// once its change is committed to the state store.
package ops

import (
	"context"
	"strconv"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/health"
	"switchyard/services/proxy"
	"switchyard/services/redact"
	"switchyard/services/resilience"
)

// Registry gives the current routing table.
type Registry interface {
	Registry() *catalog.Registry
}

// Discovery reports a provider's model discovery state.
type Discovery interface {
	ProviderStatus(provider string) (proxy.Status, bool)
}

// Syncer commits pending state changes (statestore.Store).
type Syncer interface {
	Sync(ctx context.Context) error
}

// Service holds the live state tables the operator looks at.
type Service struct {
	Catalog    Registry
	Discovery  Discovery
	Cooldowns  *resilience.Cooldowns
	Breakers   *resilience.Breakers
	Lockouts   *resilience.Lockouts
	Queues     *resilience.Queues
	Semaphores *resilience.Semaphores
	Health     *health.Tracker
	Store      Syncer
	// Accounts, Lanes, Usage and OAuthSettings describe subscription accounts (Claude,
	// ChatGPT, Copilot); nil leaves their token, usage and lane out of the views.
	Accounts      TokenStates
	Lanes         *resilience.Lanes
	Usage         *resilience.Usage
	OAuthSettings OAuthSettings
	// Pins are the session affinity pins; nil leaves the counts at 0.
	Pins *resilience.Pins
	// Routing says what a combo would do with a target now (the engine's own verdict); nil
	// leaves the combos' live state to the connection states alone.
	Routing TargetRouter
}

// TargetRouter is the engine's verdict on a combo target.
type TargetRouter interface {
	TargetVerdict(provider, model, connection string) proxy.TargetVerdict
}

// ConnectionState is one connection's live state; never secrets.
type ConnectionState struct {
	ID           int64      `json:"id"`
	Provider     string     `json:"provider"`
	Name         string     `json:"name"`
	Enabled      bool       `json:"enabled"`
	Status       string     `json:"status"`
	Until        *time.Time `json:"until"`
	RemainingMS  int64      `json:"remaining_ms"`
	Reason       string     `json:"reason"`
	BackoffLevel int        `json:"backoff_level"`
	LastError    string     `json:"last_error"`
	ErrorCode    int        `json:"error_code"`
	LastErrorAt  *time.Time `json:"last_error_at"`
	Queue        Queue      `json:"queue"`
	// Pins is how many client sessions are pinned to the connection now (session affinity).
	Pins int `json:"pins"`
	// AuthType is api_key or oauth. For oauth connections AccountKind is the kind of account (the
	// provider's type: anthropic, codex or copilot), and its token, usage windows and lane follow
	// as far as the kind has them.
	AuthType    string      `json:"auth_type"`
	AccountKind string      `json:"account_kind,omitempty"`
	Usage       *UsageState `json:"usage,omitempty"`
	Token       *TokenState `json:"token,omitempty"`
	Lane        *LaneState  `json:"lane,omitempty"`
}

// Queue is a connection's live queue and quota-share numbers.
type Queue struct {
	Executing int   `json:"executing"`
	Waiting   int   `json:"waiting"`
	Holding   int   `json:"holding"`
	Rejected  int64 `json:"rejected"`
	TimedOut  int64 `json:"timed_out"`
	FailOpen  int64 `json:"fail_open"`
}

// Now is the time of the resilience clock.
func (s *Service) Now() time.Time { return s.Cooldowns.Now() }

// ConnectionStates lists every connection of the registry, in registry order.
func (s *Service) ConnectionStates() []ConnectionState {
	now := s.Cooldowns.Now()
	reg := s.Catalog.Registry()
	out := []ConnectionState{}
	for _, p := range reg.Providers() {
		for _, c := range reg.ConnectionsOf(p.ID) {
			out = append(out, s.connectionState(reg, now, p.Name, c))
		}
	}
	return out
}

// ConnectionState returns one connection's live state.
func (s *Service) ConnectionState(id int64) (ConnectionState, error) {
	reg := s.Catalog.Registry()
	c, ok := reg.Connection(id)
	if !ok {
		return ConnectionState{}, errs.New(errs.NotFound, "err.connection_not_found", id)
	}
	return s.connectionState(reg, s.Cooldowns.Now(), c.Provider, c), nil
}

func (s *Service) connectionState(reg *catalog.Registry, now time.Time, provider string, c *catalog.ConnEntry) ConnectionState {
	st := s.Cooldowns.Get(c.ID)
	status := st.Status(now)
	v := ConnectionState{ID: c.ID, Provider: provider, Name: c.Name, Enabled: c.Enabled, Status: string(status),
		Reason: string(st.LastErrorType), BackoffLevel: st.Level, LastError: Redact(reg, st.LastError), ErrorCode: st.ErrorCode}
	if status == resilience.StatusCooling {
		u := st.Until.UTC()
		v.Until, v.RemainingMS = &u, st.Until.Sub(now).Milliseconds()
	}
	q, sem := s.Queues.Stats(c.ID), s.Semaphores.Stats(c.ID)
	v.Queue = Queue{Executing: q.Executing, Waiting: q.Waiting + sem.Waiting, Holding: sem.Holding,
		Rejected: q.Rejected, TimedOut: q.TimedOut, FailOpen: sem.FailOpenFull + sem.FailOpenTimeout}
	if !st.LastErrorAt.IsZero() {
		at := st.LastErrorAt.UTC()
		v.LastErrorAt = &at
	}
	if s.Pins != nil {
		v.Pins = s.Pins.OnConnection(c.ID)
	}
	v.AuthType = c.AuthType
	s.account(&v, c, now)
	return v
}

// ResetConnection ends a connection's cooldown and backoff; with terminal it also clears a
// terminal state (banned, expired, credits exhausted). It returns once the change is committed.
func (s *Service) ResetConnection(ctx context.Context, id int64, terminal bool) (ConnectionState, error) {
	if _, ok := s.Catalog.Registry().Connection(id); !ok {
		return ConnectionState{}, errs.New(errs.NotFound, "err.connection_not_found", id)
	}
	s.Cooldowns.Clear(id, terminal)
	if err := s.sync(ctx); err != nil {
		return ConnectionState{}, err
	}
	return s.ConnectionState(id)
}

// ModelCooldown is one active model lockout.
type ModelCooldown struct {
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
func (s *Service) ModelCooldowns() []ModelCooldown {
	now := s.Lockouts.Now()
	reg := s.Catalog.Registry()
	list := s.Lockouts.List(now)
	out := make([]ModelCooldown, 0, len(list))
	for _, l := range list {
		v := ModelCooldown{Provider: l.Provider, ConnectionID: l.ConnectionID, Model: l.Model, Target: l.Target,
			Scope: string(l.Scope), Reason: l.Reason, FailureCount: l.FailureCount, ExpiresAt: l.ExpiresAt.UTC(),
			RemainingMS: l.Remaining(now).Milliseconds()}
		if c, ok := reg.Connection(l.ConnectionID); ok {
			v.Connection = c.Name
		}
		out = append(out, v)
	}
	return out
}

// Reenable selects lockouts to clear: one (provider, connection, model), a model on every
// connection of a provider (no connection), or everything (All). Connection is an id or a name.
type Reenable struct {
	Provider   string
	Connection string
	Model      string
	All        bool
}

// ReenableModels clears the lockouts the request selects and returns how many ended, once the
// change is committed.
func (s *Service) ReenableModels(ctx context.Context, in Reenable) (int, error) {
	var n int
	switch {
	case in.All:
		n = s.Lockouts.ClearAll()
	default:
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
		if in.Connection == "" {
			n = s.Lockouts.ClearModel(in.Provider, in.Model)
			break
		}
		id, err := s.connectionRef(in.Provider, in.Connection)
		if err != nil {
			return 0, err
		}
		n = s.Lockouts.Clear(in.Provider, id, in.Model)
	}
	return n, s.sync(ctx)
}

// connectionRef resolves a connection given by id or by name within a provider.
func (s *Service) connectionRef(provider, ref string) (int64, error) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		return id, nil
	}
	reg := s.Catalog.Registry()
	if p, ok := reg.Provider(provider); ok {
		for _, c := range reg.ConnectionsOf(p.ID) {
			if c.Name == ref {
				return c.ID, nil
			}
		}
	}
	return 0, errs.Field("connection", "err.no_connection_of_provider")
}

// Breaker is one circuit breaker's state.
type Breaker struct {
	Provider            string     `json:"provider"`
	Model               string     `json:"model"`
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastFailure         string     `json:"last_failure"`
	NextProbeAt         *time.Time `json:"next_probe_at,omitempty"`
}

// BreakerStates lists every breaker that has something to say (open, half-open or counting).
func (s *Service) BreakerStates() []Breaker {
	states := s.Breakers.States()
	out := make([]Breaker, 0, len(states))
	for _, b := range states {
		v := Breaker{Provider: b.Provider, Model: b.Model, State: string(b.State), ConsecutiveFailures: b.ConsecutiveFailures,
			LastFailure: b.LastFailure}
		if !b.NextProbeAt.IsZero() && b.State != resilience.CircuitClosed {
			at := b.NextProbeAt.UTC()
			v.NextProbeAt = &at
		}
		out = append(out, v)
	}
	return out
}

// ResetBreaker closes a provider's breaker (model "" closes the provider's and every model
// breaker of it), once committed.
func (s *Service) ResetBreaker(ctx context.Context, provider, model string) error {
	if _, ok := s.Catalog.Registry().Provider(provider); !ok {
		return errs.Field("provider", "err.no_provider")
	}
	if model == "" {
		s.Breakers.ResetProvider(provider)
	} else {
		s.Breakers.Reset(provider, model)
	}
	return s.sync(ctx)
}

// ResetAll ends every cooldown, lockout and open breaker (terminal connection states stay; reset
// those per connection) and returns how many lockouts ended, once committed.
func (s *Service) ResetAll(ctx context.Context) (int, error) {
	for _, st := range s.Cooldowns.All() {
		s.Cooldowns.Clear(st.ConnectionID, false)
	}
	n := s.Lockouts.ClearAll()
	for _, p := range s.Catalog.Registry().Providers() {
		s.Breakers.ResetProvider(p.Name)
	}
	return n, s.sync(ctx)
}

func (s *Service) sync(ctx context.Context) error {
	if s.Store == nil {
		return nil
	}
	if err := s.Store.Sync(ctx); err != nil {
		return errs.Wrap(err, errs.Internal, "err.internal")
	}
	return nil
}

// Redact removes from a text that came from an upstream (an error body may echo the key it was
// sent) every credential the registry holds (API keys, and the tokens of OAuth connections), the
// further secrets named in more (accounts' live tokens), and anything shaped like a key.
func Redact(reg *catalog.Registry, text string, more ...string) string {
	if text == "" {
		return text
	}
	secrets := append([]string(nil), more...)
	for _, p := range reg.Providers() {
		for _, c := range reg.ConnectionsOf(p.ID) {
			secrets = append(secrets, c.APIKey.Reveal())
			if c.OAuth != nil {
				secrets = append(secrets, c.OAuth.AccessToken.Reveal(), c.OAuth.RefreshToken.Reveal())
			}
		}
	}
	return redact.String(text, secrets...)
}
