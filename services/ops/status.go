package ops

import (
	"time"

	"switchyard/services/health"
	"switchyard/services/resilience"
)

// ProviderStatus is what the dashboard and the API show of one provider.
type ProviderStatus struct {
	Provider       string                    `json:"provider"`
	Status         health.Status             `json:"status"`
	Breaker        string                    `json:"breaker"` // closed, half_open, open
	NextProbeAt    *time.Time                `json:"next_probe_at,omitempty"`
	Models         int                       `json:"models"`
	DiscoveryError string                    `json:"discovery_error,omitempty"`
	DegradedModels []health.Counts           `json:"degraded_models,omitempty"`
	LastFailures   []health.Failure          `json:"last_failures,omitempty"`
	ModelBreakers  []resilience.BreakerState `json:"model_breakers,omitempty"`
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
	for _, p := range reg.Providers() {
		st := ProviderStatus{Provider: p.Name, Breaker: string(resilience.CircuitClosed)}
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
		st.Models, st.DiscoveryError = disc.Models, Redact(reg, disc.Error)
		st.DegradedModels = s.Health.Degraded(p.Name)
		st.LastFailures = s.Health.RecentFailures(p.Name)
		for i := range st.LastFailures {
			st.LastFailures[i].Message = Redact(reg, st.LastFailures[i].Message)
		}
		st.Status = health.Derive(health.Inputs{Breaker: st.Breaker, EverDiscovered: known && disc.EverOK,
			DiscoveryFailing: known && !disc.OK, DegradedModels: len(st.DegradedModels)})
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
