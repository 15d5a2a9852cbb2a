package proxy

import "switchyard/services/metrics"

// GaugeRegistrar adds gauges read at scrape time.
type GaugeRegistrar interface {
	RegisterStateGauge(name, help string, labels []string, fn func() []metrics.GaugeSample)
}

// RegisterGauges exports the engine's in-memory state (connection status, queue depth, breaker
// states, active lockouts) as gauges computed when Prometheus scrapes, not mirrored on every change.
func (e *Engine) RegisterGauges(m GaugeRegistrar) {
	perConnection := func(value func(c connectionRef) (labels []string, v float64)) func() []metrics.GaugeSample {
		return func() []metrics.GaugeSample {
			var out []metrics.GaugeSample
			reg := e.opt.Catalog.Registry()
			for _, p := range reg.Providers() {
				for _, c := range reg.ConnectionsOf(p.ID) {
					labels, v := value(connectionRef{provider: p.Name, name: c.Label, id: c.ID})
					out = append(out, metrics.GaugeSample{Labels: labels, Value: v})
				}
			}
			return out
		}
	}
	m.RegisterStateGauge("switchyard_connection_state", "1 for the current status of each connection.",
		[]string{"provider", "connection", "status"}, perConnection(func(c connectionRef) ([]string, float64) {
			st := e.opt.Cooldowns.Get(c.id).Status(e.opt.Cooldowns.Now())
			return []string{c.provider, c.name, string(st)}, 1
		}))
	e.registerClaudeGauges(m)
	m.RegisterStateGauge("switchyard_queue_depth", "Requests waiting for a connection (queue and quota-share line).",
		[]string{"provider", "connection"}, perConnection(func(c connectionRef) ([]string, float64) {
			return []string{c.provider, c.name}, float64(e.waiting(c.id))
		}))
	m.RegisterStateGauge("switchyard_circuit_breaker_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
		[]string{"provider", "model"}, func() []metrics.GaugeSample {
			var out []metrics.GaugeSample
			for _, b := range e.opt.Breakers.States() {
				out = append(out, metrics.GaugeSample{Labels: []string{b.Provider, b.Model}, Value: b.State.Gauge()})
			}
			return out
		})
	m.RegisterStateGauge("switchyard_model_lockouts_active", "Active model lockouts per provider.",
		[]string{"provider"}, func() []metrics.GaugeSample {
			count := map[string]float64{}
			for _, l := range e.opt.Lockouts.List(e.opt.Lockouts.Now()) {
				count[l.Provider]++
			}
			var out []metrics.GaugeSample
			for p, n := range count {
				out = append(out, metrics.GaugeSample{Labels: []string{p}, Value: n})
			}
			return out
		})
}

type connectionRef struct {
	provider, name string
	id             int64
}
