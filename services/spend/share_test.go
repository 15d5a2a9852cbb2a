package spend

import (
	"testing"
	"time"
)

// Two replicas' limiters share what a key does: requests and tokens per minute and the budgets
// hold across both, and a budget crossed by what the other replica spent is announced.
func TestSharedLimitsHoldAcrossReplicas(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	a, clkA, _ := newTestLimiter(t, start, nil)
	b, clkB, crossedB := newTestLimiter(t, start, nil)
	a.Share(nil)
	b.Share(nil)
	lim := Limits{RPM: 4, TPM: 1000, DailyUSD: 1}
	limitsOf := func(id int64) (Limits, bool) { return lim, id == 1 }

	for range 3 {
		mustAdmit(t, a, 1, lim, "A")
		a.Finish(1, lim, Usage{Input: 100, Output: 100}, 0.3)
	}
	ds := a.TakeDeltas()
	if len(ds) != 1 || ds[0].Requests != 3 || ds[0].Tokens != 600 || ds[0].Cost < 0.89 || ds[0].At != start.Unix() {
		t.Fatalf("A's deltas = %+v, want one for key 1: 3 requests, 600 tokens, $0.90", ds)
	}
	if again := a.TakeDeltas(); again != nil {
		t.Fatalf("deltas taken twice: %+v", again)
	}
	b.Absorb(ds, limitsOf)
	if u := b.Use(1, lim); u.Requests != 3 || u.Tokens != 600 || u.DaySpend < 0.89 {
		t.Fatalf("B's count of key 1 = %+v, want A's", u)
	}
	if len(*crossedB) != 1 || (*crossedB)[0].Threshold != 80 {
		t.Fatalf("B announced %+v, want the 80%% crossing A's spend made", *crossedB)
	}
	mustAdmit(t, b, 1, lim, "B's first")
	if r := b.Admit(1, lim); r == nil || r.Code != CodeRateLimited {
		t.Fatalf("B's 5th request of the minute over both replicas: %+v, want key_rate_limited", r)
	}
	b.Finish(1, lim, Usage{Input: 50}, 0.2)
	a.Absorb(b.TakeDeltas(), limitsOf)
	if r := a.Admit(1, lim); r == nil || r.Code != CodeBudgetExceeded {
		t.Fatalf("A after B spent the rest of the day's budget: %+v, want key_budget_exceeded", r)
	}

	// What another replica spent yesterday, heard only today, is not today's spend; its requests
	// count as of the window's start at most.
	clkA.Advance(24 * time.Hour)
	clkB.Advance(24 * time.Hour)
	b.Absorb([]KeyDelta{{ID: 1, At: start.Unix(), Requests: 1, Cost: 5}}, limitsOf)
	if u := b.Use(1, lim); u.DaySpend != 0 || u.MonthSpend < 6 || u.Requests != 1 {
		t.Fatalf("a late delta of yesterday: %+v, want no day spend, the month's, one request", u)
	}
}

// A limiter that does not share collects nothing.
func TestUnsharedLimiterHasNoDeltas(t *testing.T) {
	l, _, _ := newTestLimiter(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), nil)
	mustAdmit(t, l, 1, Limits{}, "admit")
	l.Finish(1, Limits{}, Usage{Input: 1}, 1)
	if ds := l.TakeDeltas(); ds != nil {
		t.Fatalf("deltas %+v", ds)
	}
}

// With three replicas alive, a key's max_parallel of 4 lets two requests run on each (ceil 4÷3).
func TestSharedParallelIsThisReplicasShare(t *testing.T) {
	l, _, _ := newTestLimiter(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), nil)
	live := 3
	l.Share(func() int { return live })
	lim := Limits{MaxParallel: 4}
	mustAdmit(t, l, 1, lim, "first")
	mustAdmit(t, l, 1, lim, "second")
	if r := l.Admit(1, lim); r == nil || r.Code != CodeParallelLimited {
		t.Fatalf("third at once on one of three replicas: %+v, want key_parallel_limited", r)
	}
	live = 1
	mustAdmit(t, l, 1, lim, "third, alone")
}
