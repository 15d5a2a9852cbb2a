package handlers

import (
	"time"

	"switchyard/services/ops"
	"switchyard/views"
)

// claudeView is a Claude account's usage, token and lane for its row at now (the resilience
// clock); nil for API keys.
func claudeView(v ops.ConnectionState, now time.Time) *views.ClaudeState {
	if v.AuthType != "oauth" || v.Usage == nil && v.Token == nil && v.Lane == nil {
		return nil
	}
	left := func(t *time.Time) (time.Time, int64) {
		if t == nil {
			return time.Time{}, 0
		}
		return *t, max(t.Sub(now).Milliseconds(), 0)
	}
	s := &views.ClaudeState{}
	if u := v.Usage; u != nil {
		bar := func(w *ops.Window) *views.UsageBar {
			if w == nil {
				return nil
			}
			b := &views.UsageBar{Percent: w.Utilization}
			b.ResetsAt, b.ResetsInMS = left(w.ResetsAt)
			return b
		}
		s.FiveHour, s.SevenDay, s.PollError = bar(u.FiveHour), bar(u.SevenDay), u.PollError
		s.SkippedUntil, s.SkippedInMS = left(u.SkippedUntil)
		s.Deferred = u.DeferredUntil != nil
	}
	if t := v.Token; t != nil {
		s.SetupToken, s.Strikes, s.RefreshError = t.SetupToken, t.Strikes, t.LastError
		s.TokenExpiresAt, s.TokenExpiresInMS = left(t.ExpiresAt)
		if t.LastRefresh != nil {
			s.LastRefresh = *t.LastRefresh
		}
	}
	if l := v.Lane; l != nil {
		s.Lane = views.LaneBadge{State: l.State, LimitReset: l.LimitReset, Waiting: l.Waiting, EndReason: l.EndReason, Reset: l.ResetResult}
		switch {
		case l.AcceptedUntil != nil:
			s.Lane.Until, s.Lane.UntilInMS = left(l.AcceptedUntil)
		case l.BudgetExhaustedUntil != nil:
			s.Lane.Until, s.Lane.UntilInMS = left(l.BudgetExhaustedUntil)
		case l.CoolOffUntil != nil:
			s.Lane.Until, s.Lane.UntilInMS = left(l.CoolOffUntil)
		}
		if l.EndedAt != nil {
			s.Lane.EndedAt = *l.EndedAt
		}
	}
	return s
}
