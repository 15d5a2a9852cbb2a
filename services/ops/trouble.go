package ops

import (
	"sort"
	"time"

	"switchyard/services/proxy"
	"switchyard/services/resilience"
)

// Trouble is one thing that needs an operator's attention now.
type Trouble struct {
	// Kind is breaker_open, breaker_half_open, provider_unavailable, connection_terminal,
	// connection_cooling, model_lockout, discovery_failed or type_unserved; the list is ordered
	// by it, the worst first.
	Kind         string
	Provider     string
	Model        string // a model breaker's or a lockout's model
	Target       string // what a lockout locks: the model, "family:<name>" or "exact:<model>"
	ConnectionID int64
	Connection   string
	// Status is the connection's status (banned, expired, credits_exhausted, cooling) or the
	// breaker's state.
	Status string
	// Reason is the classified reason of the connection's last error or the lockout's.
	Reason string
	// Until is when it ends by itself (a cooldown, a lockout, an open breaker's next probe).
	Until       *time.Time
	RemainingMS int64
	// Cause says why model discovery failed, in parts.
	Cause *proxy.FetchError
}

// troubleOrder ranks the kinds, the worst first.
var troubleOrder = map[string]int{"breaker_open": 0, "provider_unavailable": 1, "connection_terminal": 2,
	"breaker_half_open": 3, "connection_cooling": 4, "model_lockout": 5, "discovery_failed": 6, "type_unserved": 7}

// Troubles lists what needs attention now: open or probing breakers, providers with connections
// but none usable, connections cooling down or in a terminal state, active model lockouts,
// failed model discovery, and providers with connections whose type no client surface reaches.
// Providers without connections are not trouble (they are not configured).
func (s *Service) Troubles() []Trouble {
	now := s.Cooldowns.Now()
	var out []Trouble
	statuses := s.ProviderStatuses()
	for _, p := range statuses {
		if p.Connections.Total == 0 {
			continue
		}
		if p.Status == StatusUnavailable {
			out = append(out, Trouble{Kind: "provider_unavailable", Provider: p.Provider})
		}
		if p.DiscoveryError != "" {
			out = append(out, Trouble{Kind: "discovery_failed", Provider: p.Provider, Cause: p.DiscoveryCause})
		}
		if !p.Served {
			out = append(out, Trouble{Kind: "type_unserved", Provider: p.Provider, Status: p.Type})
		}
	}
	for _, b := range s.Breakers.States() {
		if b.State != resilience.CircuitOpen && b.State != resilience.CircuitHalfOpen {
			continue
		}
		t := Trouble{Kind: "breaker_" + string(b.State), Provider: b.Provider, Model: b.Model, Status: string(b.State)}
		if b.State == resilience.CircuitOpen && !b.NextProbeAt.IsZero() {
			at := b.NextProbeAt.UTC()
			t.Until, t.RemainingMS = &at, max(at.Sub(now).Milliseconds(), 0)
		}
		out = append(out, t)
	}
	for _, c := range s.ConnectionStates() {
		if !c.Enabled {
			continue
		}
		switch c.Status {
		case string(resilience.StatusActive):
		case string(resilience.StatusCooling):
			out = append(out, Trouble{Kind: "connection_cooling", Provider: c.Provider, ConnectionID: c.ID, Connection: c.Name,
				Status: c.Status, Reason: c.Reason, Until: c.Until, RemainingMS: c.RemainingMS})
		default:
			out = append(out, Trouble{Kind: "connection_terminal", Provider: c.Provider, ConnectionID: c.ID, Connection: c.Name,
				Status: c.Status, Reason: c.Reason})
		}
	}
	for _, l := range s.ModelCooldowns() {
		if l.RemainingMS <= 0 {
			continue
		}
		at := l.ExpiresAt
		out = append(out, Trouble{Kind: "model_lockout", Provider: l.Provider, Model: l.Model, Target: l.Target, ConnectionID: l.ConnectionID,
			Connection: l.Connection, Reason: l.Reason, Until: &at, RemainingMS: l.RemainingMS})
	}
	sort.SliceStable(out, func(i, j int) bool { return troubleOrder[out[i].Kind] < troubleOrder[out[j].Kind] })
	return out
}
