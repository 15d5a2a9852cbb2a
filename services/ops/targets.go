package ops

import (
	"time"

	"switchyard/services/resilience"
)

// TargetState is what keeps a combo's provider target (a provider's model, on one pinned
// connection or on any of the provider's) from taking a request now, and until when. It is
// derived from memory only, so the dashboard can poll it.
type TargetState struct {
	Provider   string
	Model      string
	Connection string // the pinned connection; "" = any of the provider's
	// Missing: the provider (or the pinned connection) does not exist.
	Missing bool
	// Breaker is the worst of the provider's breaker and the model's: closed, half_open, open;
	// ProbeAt is when an open one lets a probe through.
	Breaker string
	ProbeAt time.Time
	// Connections counts the connections the target may use by what they can do now.
	Connections ConnSummary
	// Lockouts are the connections on which the model is locked out now.
	Lockouts []TargetLockout
	// Usable: the breaker lets requests through and some connection can take the model now.
	Usable bool
	// UsableAt is, when not Usable, the earliest time it is again; zero when only an operator
	// or new credentials can make it usable (disabled or banned connections, none at all).
	UsableAt time.Time
	// PassedOver is why a combo would pass the target over now ("" = it would try it): the
	// engine's own verdict, which also sees provider cooldowns, combo rests, leases and usage
	// windows. Saturated: every connection is at its cap with requests waiting, so a combo tries
	// another target first.
	PassedOver string
	Saturated  bool
}

// TargetLockout is a model lockout on one of a target's connections.
type TargetLockout struct {
	ConnectionID int64
	Connection   string
	Target       string // what is locked: the model, "family:<name>" or "exact:<model>"
	Reason       string
	Until        time.Time
}

// TargetState derives a provider target's live state.
func (s *Service) TargetState(provider, model, connection string) TargetState {
	now := s.Cooldowns.Now()
	reg := s.Catalog.Registry()
	st := TargetState{Provider: provider, Model: model, Connection: connection, Breaker: string(resilience.CircuitClosed)}
	p, ok := reg.Provider(provider)
	if !ok {
		st.Missing = true
		return st
	}
	worst := resilience.CircuitClosed
	for _, b := range s.Breakers.States() {
		if b.Provider != provider || (b.Model != "" && b.Model != model) || rank(b.State) <= rank(worst) {
			continue
		}
		worst = b.State
		st.ProbeAt = b.NextProbeAt
	}
	st.Breaker = string(worst)
	if worst != resilience.CircuitOpen {
		st.ProbeAt = time.Time{}
	}
	// ready is when the first connection can take the model (zero: now); found says one can at
	// some known time.
	var ready time.Time
	found, pinned := false, false
	for _, c := range reg.ConnectionsOf(p.ID) {
		if connection != "" && c.Name != connection {
			continue
		}
		pinned = true
		st.Connections.Total++
		if !c.Enabled || c.Broken != "" {
			st.Connections.Disabled++
			continue
		}
		cs := s.Cooldowns.Get(c.ID)
		var at time.Time // when this connection can take the model; zero = now
		switch cs.Status(now) {
		case resilience.StatusActive:
			st.Connections.Usable++
		case resilience.StatusCooling:
			st.Connections.Cooling++
			at = cs.Until
		default:
			st.Connections.Terminal++
			if cs.NextProbe.IsZero() {
				continue // only an operator or new credentials end it
			}
			at = cs.NextProbe
		}
		if locked, until, e := s.Lockouts.Check(provider, c.ID, model); locked {
			st.Lockouts = append(st.Lockouts, TargetLockout{ConnectionID: c.ID, Connection: c.Name, Target: e.Target,
				Reason: e.Reason, Until: until.UTC()})
			at = later(at, until)
		}
		if !at.After(now) {
			at = time.Time{}
		}
		if !found || at.Before(ready) {
			ready, found = at, true
		}
	}
	if connection != "" && !pinned {
		st.Missing = true
		return st
	}
	switch {
	case !found:
	case worst == resilience.CircuitOpen:
		// Nothing passes an open breaker before its probe; then the first ready connection.
		st.UsableAt = later(ready, st.ProbeAt)
		if !st.UsableAt.After(now) {
			st.UsableAt = time.Time{}
			st.Usable = true // the probe is due: the next request goes through
		}
	case ready.IsZero():
		st.Usable = true
	default:
		st.UsableAt = ready
	}
	if s.Routing != nil {
		v := s.Routing.TargetVerdict(provider, model, connection)
		st.Saturated = v.Saturated
		if v.Skip {
			st.PassedOver, st.Usable = v.Reason, false
			if st.UsableAt.IsZero() || v.Until.After(st.UsableAt) {
				st.UsableAt = v.Until
			}
		}
	}
	if !st.UsableAt.IsZero() {
		st.UsableAt = st.UsableAt.UTC()
	}
	if !st.ProbeAt.IsZero() {
		st.ProbeAt = st.ProbeAt.UTC()
	}
	return st
}

// later is the later of two times (zero counts as earliest).
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
