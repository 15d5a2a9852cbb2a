package proxy

import (
	"switchyard/services/catalog"
	"switchyard/services/metrics"
	"switchyard/services/resilience"
)

// registerClaudeGauges exports each Claude account's usage windows and whether its low-priority
// lane is active, read from the usage and lane tables when Prometheus scrapes.
func (e *Engine) registerClaudeGauges(m GaugeRegistrar) {
	if e.opt.Usage == nil {
		return
	}
	windowLabels := []string{"provider", "connection", "window"}
	m.RegisterStateGauge("switchyard_claude_usage_utilization",
		"Share used of a Claude account's usage window, in percent (window five_hour or seven_day).",
		windowLabels, func() []metrics.GaugeSample {
			return e.usageWindowSamples(func(w *resilience.UsageWindow) (float64, bool) { return w.Utilization, true })
		})
	m.RegisterStateGauge("switchyard_claude_usage_resets_at_seconds",
		"When a Claude account's usage window resets, as a Unix time (window five_hour or seven_day).",
		windowLabels, func() []metrics.GaugeSample {
			return e.usageWindowSamples(func(w *resilience.UsageWindow) (float64, bool) {
				return float64(w.ResetsAt.Unix()), !w.ResetsAt.IsZero()
			})
		})
	if e.opt.Lanes == nil {
		return
	}
	m.RegisterStateGauge("switchyard_claude_lane_active", "1 while a Claude account's low-priority lane is active.",
		[]string{"provider", "connection"}, func() []metrics.GaugeSample {
			var out []metrics.GaugeSample
			e.eachAccount(func(provider string, c *catalog.ConnEntry) {
				v := 0.0
				if e.opt.Lanes.Active(c.ID) {
					v = 1
				}
				out = append(out, metrics.GaugeSample{Labels: []string{provider, c.Label}, Value: v})
			})
			return out
		})
}

// usageWindowSamples is one sample per known usage window of every signed-in account, valued by
// value (a window it reports no value for is left out).
func (e *Engine) usageWindowSamples(value func(*resilience.UsageWindow) (float64, bool)) []metrics.GaugeSample {
	var out []metrics.GaugeSample
	e.eachAccount(func(provider string, c *catalog.ConnEntry) {
		u, ok := e.opt.Usage.Get(c.ID)
		if !ok {
			return
		}
		for _, w := range [...]struct {
			name string
			w    *resilience.UsageWindow
		}{{"five_hour", u.FiveHour}, {"seven_day", u.SevenDay}} {
			if w.w == nil {
				continue
			}
			if v, ok := value(w.w); ok {
				out = append(out, metrics.GaugeSample{Labels: []string{provider, c.Label, w.name}, Value: v})
			}
		}
	})
	return out
}

// eachAccount calls fn for every connection signed in with an account (OAuth), by provider name.
func (e *Engine) eachAccount(fn func(provider string, c *catalog.ConnEntry)) {
	reg := e.opt.Catalog.Registry()
	for _, p := range reg.Providers() {
		for _, c := range reg.ConnectionsOf(p.ID) {
			if c.OAuth != nil {
				fn(p.Name, c)
			}
		}
	}
}
