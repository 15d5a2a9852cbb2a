package ops

import (
	"time"

	"switchyard/services/catalog"
	"switchyard/services/health"
	"switchyard/services/proxy"
	"switchyard/services/resilience"
)

// The provider statuses ops adds to health's: they come from the provider's connections.
const (
	// StatusNotConfigured: the provider has no connection (yet); nothing is wrong with it.
	StatusNotConfigured health.Status = "not_configured"
	// StatusUnavailable: the provider has connections, but none can take a request now (all
	// cooling, in a terminal state, disabled or broken).
	StatusUnavailable health.Status = "unavailable"
)

// ConnSummary counts a provider's connections by what they can do now.
type ConnSummary struct {
	Total    int `json:"total"`
	Usable   int `json:"usable"`   // enabled, credential fine, not cooling, not terminal
	Cooling  int `json:"cooling"`  // enabled and cooling down
	Terminal int `json:"terminal"` // enabled and banned, expired or out of credits
	Disabled int `json:"disabled"` // switched off by the operator, or the credential is broken
}

// ProviderStatus is what the dashboard and the API show of one provider.
type ProviderStatus struct {
	Provider string        `json:"provider"`
	Type     string        `json:"type"`
	Status   health.Status `json:"status"`
	// Served reports whether some client surface reaches providers of this type today.
	Served         bool                      `json:"served"`
	Connections    ConnSummary               `json:"connections"`
	Breaker        string                    `json:"breaker"` // closed, half_open, open
	NextProbeAt    *time.Time                `json:"next_probe_at,omitempty"`
	Models         int                       `json:"models"`
	DiscoveryError string                    `json:"discovery_error,omitempty"`
	DegradedModels []health.Counts           `json:"degraded_models,omitempty"`
	LastFailures   []health.Failure          `json:"last_failures,omitempty"`
	ModelBreakers  []resilience.BreakerState `json:"model_breakers,omitempty"`
	// DiscoveryCause is DiscoveryError in parts, for the dashboard to frame.
	DiscoveryCause *proxy.FetchError `json:"-"`
}

// ProviderStatuses derives every provider's status from discovery, its breaker(s) and the
// rolling outcome window.
func (s *Service) ProviderStatuses() []ProviderStatus {
	reg := s.Catalog.Registry()
	byProvider := map[string][]resilience.BreakerState{}
	for _, b := range s.Breakers.States() {
		byProvider[b.Provider] = append(byProvider[b.Provider], b)
	}
	var out []ProviderStatus
	now := s.Cooldowns.Now()
	for _, p := range reg.Providers() {
		st := ProviderStatus{Provider: p.Name, Type: p.Type, Breaker: string(resilience.CircuitClosed),
			Served: len(proxy.ServedSurfaces(p.Type)) > 0, Connections: s.connSummary(reg, now, p.ID)}
		worst := resilience.CircuitClosed
		for _, b := range byProvider[p.Name] {
			if b.Model != "" {
				st.ModelBreakers = append(st.ModelBreakers, b)
			}
			if rank(b.State) > rank(worst) {
				worst = b.State
				if !b.NextProbeAt.IsZero() {
					at := b.NextProbeAt.UTC()
					st.NextProbeAt = &at
				}
			}
		}
		st.Breaker = string(worst)
		disc, known := s.Discovery.ProviderStatus(p.Name)
		st.Models, st.DiscoveryError, st.DiscoveryCause = disc.Models, Redact(reg, disc.Error), disc.Cause
		st.DegradedModels = s.Health.Degraded(p.Name)
		st.LastFailures = s.Health.RecentFailures(p.Name)
		for i := range st.LastFailures {
			st.LastFailures[i].Message = Redact(reg, st.LastFailures[i].Message)
		}
		st.Status = withConnections(health.Derive(health.Inputs{Breaker: st.Breaker, EverDiscovered: known && disc.EverOK,
			DiscoveryFailing: known && !disc.OK, DegradedModels: len(st.DegradedModels)}), st.Connections)
		out = append(out, st)
	}
	return out
}

func rank(s resilience.CircuitState) int {
	switch s {
	case resilience.CircuitOpen:
		return 2
	case resilience.CircuitHalfOpen:
		return 1
	}
	return 0
}

// withConnections refines a provider's health status by its connections: without any it is
// not configured; an open or probing breaker says the most; with none usable it is unavailable;
// a healthy provider some of whose connections cool down or are terminal is degraded.
func withConnections(st health.Status, c ConnSummary) health.Status {
	switch {
	case c.Total == 0:
		return StatusNotConfigured
	case st == health.StatusCircuitOpen || st == health.StatusRecovering:
		return st
	case c.Usable == 0:
		return StatusUnavailable
	case st == health.StatusHealthy && c.Cooling+c.Terminal > 0:
		return health.StatusDegraded
	}
	return st
}

// connSummary counts a provider's connections by what they can do now.
func (s *Service) connSummary(reg *catalog.Registry, now time.Time, providerID int64) ConnSummary {
	var c ConnSummary
	for _, e := range reg.ConnectionsOf(providerID) {
		c.Total++
		if !e.Enabled || e.Broken != "" {
			c.Disabled++
			continue
		}
		switch st := s.Cooldowns.Get(e.ID).Status(now); {
		case st == resilience.StatusActive:
			c.Usable++
		case st == resilience.StatusCooling:
			c.Cooling++
		default:
			c.Terminal++
		}
	}
	return c
}
