package handlers

import (
	"time"

	"switchyard/services/catalog"
	"switchyard/services/ops"
	"switchyard/views"
)

// accountView is a subscription account's live parts for its row at now (the resilience clock),
// as far as its kind has them: token, usage windows, lane. nil for API keys.
func accountView(v ops.ConnectionState, now time.Time) *views.AccountState {
	if v.AuthType != catalog.AuthOAuth {
		return nil
	}
	left := func(t *time.Time) (time.Time, int64) {
		if t == nil {
			return time.Time{}, 0
		}
		return *t, max(t.Sub(now).Milliseconds(), 0)
	}
	s := &views.AccountState{Kind: v.AccountKind, Provider: v.Provider}
	if u := v.Usage; u != nil {
		bar := func(w *ops.Window) *views.UsageBar {
			if w == nil {
				return nil
			}
			b := &views.UsageBar{Percent: w.Utilization}
			b.ResetsAt, b.ResetsInMS = left(w.ResetsAt)
			return b
		}
		au := &views.AccountUsage{FiveHour: bar(u.FiveHour), SevenDay: bar(u.SevenDay), PollError: u.PollError,
			Deferred: u.DeferredUntil != nil}
		au.SkippedUntil, au.SkippedInMS = left(u.SkippedUntil)
		s.Usage = au
	}
	if t := v.Token; t != nil {
		at := &views.AccountToken{LongLived: t.SetupToken, Strikes: t.Strikes, RefreshError: t.LastError}
		at.ExpiresAt, at.ExpiresInMS = left(t.ExpiresAt)
		if t.LastRefresh != nil {
			at.LastRefresh = *t.LastRefresh
		}
		s.Token = at
	}
	if l := v.Lane; l != nil {
		lb := &views.LaneBadge{State: l.State, LimitReset: l.LimitReset, Waiting: l.Waiting, EndReason: l.EndReason, Reset: l.ResetResult}
		switch {
		case l.AcceptedUntil != nil:
			lb.Until, lb.UntilInMS = left(l.AcceptedUntil)
		case l.BudgetExhaustedUntil != nil:
			lb.Until, lb.UntilInMS = left(l.BudgetExhaustedUntil)
		case l.CoolOffUntil != nil:
			lb.Until, lb.UntilInMS = left(l.CoolOffUntil)
		}
		if l.EndedAt != nil {
			lb.EndedAt = *l.EndedAt
		}
		s.Lane = lb
	}
	return s
}

// countdownShape is an account's live parts with every countdown cut to whether it is still
// ahead (0 or 1 ms): what the providers page's poll fingerprints, so the version changes when
// something happens, not every second.
func countdownShape(a *views.AccountState) *views.AccountState {
	if a == nil {
		return nil
	}
	out := *a
	if a.Usage != nil {
		u := *a.Usage
		u.SkippedInMS = min(u.SkippedInMS, 1)
		for _, b := range []**views.UsageBar{&u.FiveHour, &u.SevenDay} {
			if *b != nil {
				bb := **b
				bb.ResetsInMS = min(bb.ResetsInMS, 1)
				*b = &bb
			}
		}
		out.Usage = &u
	}
	if a.Token != nil {
		t := *a.Token
		t.ExpiresInMS = min(t.ExpiresInMS, 1)
		out.Token = &t
	}
	if a.Lane != nil {
		l := *a.Lane
		l.UntilInMS = min(l.UntilInMS, 1)
		out.Lane = &l
	}
	return &out
}
