package resilience

import (
	"sort"
	"time"

	"github.com/jonboulle/clockwork"
)

// ConnStatus is what an operator sees of a connection.
type ConnStatus string

// Connection statuses.
const (
	StatusActive           ConnStatus = "active"
	StatusCooling          ConnStatus = "cooling"
	StatusBanned           ConnStatus = "banned"
	StatusExpired          ConnStatus = "expired"
	StatusCreditsExhausted ConnStatus = "credits_exhausted"
)

// Terminal-state probing: an expired credential is tried again up to ExpiredProbes times with
// backoff before it sticks; exhausted credits are re-probed every CreditsProbeInterval.
const (
	ExpiredProbes        = 3
	ExpiredProbeBase     = 30 * time.Second
	CreditsProbeInterval = 30 * time.Minute
)

// CooldownPolicy is the connection cooldown setting for one auth type.
type CooldownPolicy struct {
	Base     time.Duration // base cooldown; until = now + base × 2^level
	MaxSteps int           // the level stops rising here
	Max      time.Duration // cap of computed cooldowns (upstream hints are honoured exactly)
	UseHints bool          // honour the upstream's reset hint instead of backoff
}

// ConnState is the cooldown and terminal state of one connection.
type ConnState struct {
	ConnectionID  int64     `json:"connection_id"`
	Terminal      Terminal  `json:"terminal,omitempty"`
	Until         time.Time `json:"until,omitzero"`  // end of the current cooldown; zero = none
	Level         int       `json:"level,omitempty"` // backoff level: how many cooldowns in a row
	LastError     string    `json:"last_error,omitempty"`
	LastErrorType Reason    `json:"last_error_type,omitempty"`
	ErrorCode     int       `json:"error_code,omitempty"`
	LastErrorAt   time.Time `json:"last_error_at,omitzero"`
	Rejections    int       `json:"rejections,omitempty"`    // consecutive request_rejected answers
	Probes        int       `json:"probes,omitempty"`        // failed probes of an expired credential
	NextProbe     time.Time `json:"next_probe,omitzero"`     // when a terminal connection may be probed again; zero = never
	FromUpstream  bool      `json:"from_upstream,omitempty"` // the running cooldown is the upstream's own hint
}

// Empty reports whether the state has nothing left to remember (it need not be stored).
func (s ConnState) Empty() bool {
	return s.Terminal == TerminalNone && s.Until.IsZero() && s.Level == 0 && s.LastError == "" && s.Rejections == 0
}

// Status reports the operator-facing status at now.
func (s ConnState) Status(now time.Time) ConnStatus {
	switch s.Terminal {
	case TerminalBanned:
		return StatusBanned
	case TerminalExpired:
		return StatusExpired
	case TerminalCreditsExhausted:
		return StatusCreditsExhausted
	}
	if now.Before(s.Until) {
		return StatusCooling
	}
	return StatusActive
}

// Cooldowns holds every connection's state in memory; changes are handed to a persist hook.
type Cooldowns struct {
	stateTable[int64, ConnState]
}

// NewCooldowns builds the table; persist (may be nil) receives every changed state and must not
// block (hand it to a write-behind queue).
func NewCooldowns(clock clockwork.Clock, persist func(ConnState)) *Cooldowns {
	return &Cooldowns{newStateTable[int64](clock, persist)}
}

// Load installs states read at start.
func (c *Cooldowns) Load(states []ConnState) {
	c.load(states, func(s *ConnState) int64 { return s.ConnectionID })
}

// Apply installs a connection's state as another replica recorded it (an Empty state deletes
// it), without persisting it. A cooldown or terminal state applied here excludes the connection
// exactly as it does there: Check and Peek read the same fields.
func (c *Cooldowns) Apply(st ConnState) {
	if st.Empty() {
		c.apply(st.ConnectionID, nil)
		return
	}
	c.apply(st.ConnectionID, &st)
}

// Exclusion says why a connection may not be used now.
type Exclusion struct {
	Status    ConnStatus
	Reason    Reason
	Remaining time.Duration // for cooling: time left; for terminal: 0
}

// Peek is Check without side effects: it never takes a terminal connection's probe slot, so
// it can explain why connections are excluded.
func (c *Cooldowns) Peek(id int64) (ok bool, why Exclusion) {
	now := c.clock.Now()
	s := c.Get(id)
	switch st := s.Status(now); st {
	case StatusActive:
		return true, Exclusion{}
	case StatusCooling:
		return false, Exclusion{Status: st, Reason: s.LastErrorType, Remaining: s.Until.Sub(now)}
	default:
		return false, Exclusion{Status: st, Reason: s.LastErrorType}
	}
}

// Check reports whether the connection may take a request now. A cooldown whose time has passed
// is over (lazy recovery). A terminal connection whose probe is due is let through once: the
// probe time moves on at once, so concurrent requests don't all probe.
func (c *Cooldowns) Check(id int64) (ok bool, why Exclusion) {
	now := c.clock.Now()
	c.mu.RLock()
	s, found := c.m[id]
	if !found {
		c.mu.RUnlock()
		return true, Exclusion{}
	}
	terminal, until, nextProbe := s.Terminal, s.Until, s.NextProbe
	reason := s.LastErrorType
	c.mu.RUnlock()
	if terminal != TerminalNone {
		if nextProbe.IsZero() || now.Before(nextProbe) {
			return false, Exclusion{Status: s.Status(now), Reason: reason}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if s.NextProbe.IsZero() || now.Before(s.NextProbe) { // another request took the probe
			return false, Exclusion{Status: s.Status(now), Reason: reason}
		}
		s.NextProbe = now.Add(probeHold(s))
		c.persist(*s)
		return true, Exclusion{}
	}
	if now.Before(until) {
		return false, Exclusion{Status: StatusCooling, Reason: reason, Remaining: until.Sub(now)}
	}
	return true, Exclusion{}
}

// probeHold is how long a taken probe keeps others away; the probe's own failure reschedules.
func probeHold(s *ConnState) time.Duration {
	if s.Terminal == TerminalExpired {
		return ExpiredProbeBase << min(s.Probes, 10)
	}
	return CreditsProbeInterval
}

// state is the connection's state, created on first use; c.mu is held.
func (c *Cooldowns) state(id int64) *ConnState {
	s := c.m[id]
	if s == nil {
		s = &ConnState{ConnectionID: id}
		c.m[id] = s
	}
	return s
}

// RecordFailure applies a classified failure to the connection and returns the new state. Only
// connection-scope outcomes and terminal verdicts change it.
func (c *Cooldowns) RecordFailure(id int64, out Outcome, policy CooldownPolicy) ConnState {
	now := out.At
	if now.IsZero() {
		now = c.clock.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state(id)
	s.LastError, s.LastErrorType, s.ErrorCode, s.LastErrorAt = out.Message, out.Reason, out.Status, now

	terminal := out.Terminal
	if out.Reason == ReasonRequestRejected && out.Scope == ScopeConnection {
		s.Rejections++
		if s.Rejections >= RejectionsBeforeBan {
			terminal = TerminalBanned
		}
	} else {
		s.Rejections = 0
	}
	switch {
	case terminal == TerminalExpired:
		// Credentials can fail for a moment (clock skew, token rotation): probe again with backoff
		// a few times before the state sticks for good.
		if s.Terminal == TerminalExpired {
			s.Probes++
		}
		s.Terminal, s.Until, s.FromUpstream = TerminalExpired, time.Time{}, false
		if s.Probes < ExpiredProbes {
			s.NextProbe = now.Add(ExpiredProbeBase << s.Probes)
		} else {
			s.NextProbe = time.Time{}
		}
	case terminal == TerminalCreditsExhausted:
		s.Terminal, s.Until, s.FromUpstream = TerminalCreditsExhausted, time.Time{}, false
		s.NextProbe = now.Add(CreditsProbeInterval)
	case terminal == TerminalBanned:
		s.Terminal, s.Until, s.NextProbe, s.FromUpstream = TerminalBanned, time.Time{}, time.Time{}, false
	case s.Terminal != TerminalNone:
		// A terminal state is never overwritten by a cooldown; a failed probe waits for the next.
	case out.UntilReset && out.Scope == ScopeConnection && out.Cooldown > 0:
		// The account used up a usage window: it rests exactly until the window's announced
		// reset, whatever the auth type's use of hints, and the rest is no step of its backoff
		// (the level stays). A rest already running past that reset is kept.
		if until := now.Add(out.Cooldown); until.After(s.Until) {
			s.Until, s.FromUpstream = until, true
		}
	case out.Scope != ScopeConnection:
		// Model, provider and request-scope failures don't cool the connection.
	case now.Before(s.Until):
		// Herd guard: failures of requests that were in flight when the cooldown began neither
		// extend it nor raise the level again.
	default:
		d := policy.Base << min(s.Level, policy.MaxSteps, 30)
		if d > policy.Max || d <= 0 {
			d = policy.Max
		}
		fromUp := false
		if out.Cooldown > 0 && (out.FromUpstream && policy.UseHints || !out.FromUpstream) {
			d, fromUp = out.Cooldown, out.FromUpstream
			if !out.FromUpstream && d > policy.Max { // operator rule cooldowns respect the max
				d = policy.Max
			}
		}
		s.Until, s.FromUpstream = now.Add(d), fromUp
		if s.Level < policy.MaxSteps {
			s.Level++
		}
	}
	c.persist(*s)
	return *s
}

// RecordSuccess clears every error field of the connection, terminal state included (a success
// can only happen on a probe).
func (c *Cooldowns) RecordSuccess(id int64) {
	c.mu.RLock()
	_, found := c.m[id]
	c.mu.RUnlock()
	if !found {
		return // the common case: nothing to clear, no lock contention
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, found := c.m[id]; !found {
		return
	}
	delete(c.m, id)
	c.persist(ConnState{ConnectionID: id})
}

// Clear ends a running cooldown and resets the backoff level; with terminal it also clears a
// terminal state (the operator's "Reset state").
func (c *Cooldowns) Clear(id int64, terminal bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.m[id]
	if s == nil {
		return
	}
	if terminal || s.Terminal == TerminalNone {
		delete(c.m, id)
		c.persist(ConnState{ConnectionID: id})
		return
	}
	s.Until, s.Level, s.FromUpstream = time.Time{}, 0, false
	c.persist(*s)
}

// Forget drops the state of a deleted connection.
func (c *Cooldowns) Forget(id int64) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// Get returns the state of one connection (zero state when it has none).
func (c *Cooldowns) Get(id int64) ConnState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if s, ok := c.m[id]; ok {
		return *s
	}
	return ConnState{ConnectionID: id}
}

// All returns every remembered state, by connection id.
func (c *Cooldowns) All() []ConnState {
	c.mu.RLock()
	out := make([]ConnState, 0, len(c.m))
	for _, s := range c.m {
		out = append(out, *s)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ConnectionID < out[j].ConnectionID })
	return out
}

// Now is the cooldown table's clock.
func (c *Cooldowns) Now() time.Time { return c.clock.Now() }

// MarkExpired puts a connection into the expired state for good (no probes): its credential is
// known to be dead (an OAuth refresh token refused or failing three times in a row). New
// credentials or an operator's reset clear it.
func (c *Cooldowns) MarkExpired(id int64, message string) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state(id)
	s.Terminal, s.Until, s.NextProbe, s.FromUpstream, s.Probes = TerminalExpired, time.Time{}, time.Time{}, false, ExpiredProbes
	s.LastError, s.LastErrorType, s.ErrorCode, s.LastErrorAt = message, ReasonAuthError, 401, now
	c.persist(*s)
}
