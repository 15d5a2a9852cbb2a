package proxy

import "switchyard/services/metrics"

// registerClaudeGauges exports each Claude account's usage windows and whether its low-priority
// lane is active, read from the usage and lane tables when Prometheus scrapes.
func (e *Engine) registerClaudeGauges(m GaugeRegistrar) {
	if e.opt.Usage == nil {
		return
	}
	m.RegisterStateGauge("switchyard_claude_usage_utilization",
		"Share used of a Claude account's usage window, in percent (window five_hour or seven_day).",
		[]string{"provider", "connection", "window"}, func() []metrics.GaugeSample {
			var out []metrics.GaugeSample
			reg := e.opt.Catalog.Registry()
			for _, p := range reg.Providers() {
				for _, c := range reg.ConnectionsOf(p.ID) {
					u, ok := e.opt.Usage.Get(c.ID)
					if !ok || c.OAuth == nil {
						continue
					}
					if u.FiveHour != nil {
						out = append(out, metrics.GaugeSample{Labels: []string{p.Name, c.Label, "five_hour"}, Value: u.FiveHour.Utilization})
					}
					if u.SevenDay != nil {
						out = append(out, metrics.GaugeSample{Labels: []string{p.Name, c.Label, "seven_day"}, Value: u.SevenDay.Utilization})
					}
				}
			}
			return out
		})
	m.RegisterStateGauge("switchyard_claude_usage_resets_at_seconds",
		"When a Claude account's usage window resets, as a Unix time (window five_hour or seven_day).",
		[]string{"provider", "connection", "window"}, func() []metrics.GaugeSample {
			var out []metrics.GaugeSample
			reg := e.opt.Catalog.Registry()
			for _, p := range reg.Providers() {
				for _, c := range reg.ConnectionsOf(p.ID) {
					u, ok := e.opt.Usage.Get(c.ID)
					if !ok || c.OAuth == nil {
						continue
					}
					if u.FiveHour != nil && !u.FiveHour.ResetsAt.IsZero() {
						out = append(out, metrics.GaugeSample{Labels: []string{p.Name, c.Label, "five_hour"}, Value: float64(u.FiveHour.ResetsAt.Unix())})
					}
					if u.SevenDay != nil && !u.SevenDay.ResetsAt.IsZero() {
						out = append(out, metrics.GaugeSample{Labels: []string{p.Name, c.Label, "seven_day"}, Value: float64(u.SevenDay.ResetsAt.Unix())})
					}
				}
			}
			return out
		})
	if e.opt.Lanes == nil {
		return
	}
	m.RegisterStateGauge("switchyard_claude_lane_active", "1 while a Claude account's low-priority lane is active.",
		[]string{"provider", "connection"}, func() []metrics.GaugeSample {
			var out []metrics.GaugeSample
			reg := e.opt.Catalog.Registry()
			for _, p := range reg.Providers() {
				for _, c := range reg.ConnectionsOf(p.ID) {
					if c.OAuth == nil {
						continue
					}
					v := 0.0
					if e.opt.Lanes.Active(c.ID) {
						v = 1
					}
					out = append(out, metrics.GaugeSample{Labels: []string{p.Name, c.Label}, Value: v})
				}
			}
			return out
		})
}
