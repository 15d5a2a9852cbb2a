package spend

import (
	"context"
	"errors"
	"sync"
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

// fakeSlots is a shared slot store: n slots per key across every replica that uses it.
type fakeSlots struct {
	mu      sync.Mutex
	held    map[int64]int
	healthy bool
	fail    bool
}

func (f *fakeSlots) Healthy() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.healthy }

func (f *fakeSlots) TryTake(_ context.Context, id int64, n int) (func(), bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, false, errors.New("store away")
	}
	if f.held[id] >= n {
		return nil, false, nil
	}
	f.held[id]++
	var once sync.Once
	return func() { once.Do(func() { f.mu.Lock(); f.held[id]--; f.mu.Unlock() }) }, true, nil
}

func (f *fakeSlots) count(id int64) int { f.mu.Lock(); defer f.mu.Unlock(); return f.held[id] }

// With shared slots, max_parallel holds across replicas exactly, not as each one's share: one
// replica of two may run all of a key's 2 requests, and then the other runs none; a refused
// request counts nowhere; a finished request gives its slot back.
func TestSlotsHoldMaxParallelAcrossReplicas(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	store := &fakeSlots{held: map[int64]int{}, healthy: true}
	a, _, _ := newTestLimiter(t, start, nil)
	b, _, _ := newTestLimiter(t, start, nil)
	for _, l := range []*Limiter{a, b} {
		l.Share(func() int { return 2 })
		l.UseSlots(store)
	}
	lim := Limits{MaxParallel: 2, RPM: 100}
	mustAdmit(t, a, 1, lim, "first on a")
	mustAdmit(t, a, 1, lim, "second on a (its share would be 1)")
	if r := b.Admit(1, lim); r == nil || r.Code != CodeParallelLimited || r.RetryAfter != time.Second {
		t.Fatalf("on b with both slots held on a: %+v, want key_parallel_limited", r)
	}
	if u := b.Use(1, lim); u.Requests != 0 || u.Parallel != 0 {
		t.Fatalf("the refused request counts on b: %+v", u)
	}
	a.Finish(1, lim, Usage{}, 0)
	if store.count(1) != 1 {
		t.Fatalf("%d slots held after one of two finished, want 1", store.count(1))
	}
	mustAdmit(t, b, 1, lim, "on b once a slot is free")
	a.Finish(1, lim, Usage{}, 0)
	b.Finish(1, lim, Usage{}, 0)
	if store.count(1) != 0 {
		t.Fatalf("%d slots held after every request finished", store.count(1))
	}
}

// While the store is unhealthy or fails a call, each replica holds its share of max_parallel; a
// request admitted without a slot never gives back another's slot early.
func TestSlotsFallBackToTheShare(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	store := &fakeSlots{held: map[int64]int{}}
	l, _, _ := newTestLimiter(t, start, nil)
	l.Share(func() int { return 2 })
	l.UseSlots(store)
	lim := Limits{MaxParallel: 2}
	mustAdmit(t, l, 1, lim, "unhealthy store: the share of 1")
	if r := l.Admit(1, lim); r == nil || r.Code != CodeParallelLimited {
		t.Fatalf("second with an unhealthy store: %+v, want the share's refusal", r)
	}
	l.Finish(1, lim, Usage{}, 0)

	store.healthy = true
	mustAdmit(t, l, 1, lim, "a slot") // holds a slot
	store.fail = true
	if r := l.Admit(1, lim); r == nil || r.Code != CodeParallelLimited {
		t.Fatalf("a failing store with the share (1) taken: %+v, want key_parallel_limited", r)
	}
	l.Finish(1, lim, Usage{}, 0) // no slot-less request ran: the slot goes back
	if store.count(1) != 0 {
		t.Fatalf("%d slots held after the request finished", store.count(1))
	}
	mustAdmit(t, l, 1, lim, "a failing store, the share free") // admitted without a slot
	store.fail = false
	mustAdmit(t, l, 1, lim, "a slot again") // 2 running, 1 slot held
	l.Finish(1, lim, Usage{}, 0)
	if store.count(1) != 1 {
		t.Fatalf("%d slots held with one request still running, want 1 (kept, not given back early)", store.count(1))
	}
	l.Finish(1, lim, Usage{}, 0)
	if store.count(1) != 0 {
		t.Fatalf("%d slots held after every request finished", store.count(1))
	}
}
