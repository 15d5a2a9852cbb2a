package spend

import (
	"context"
	"sync"
	"time"
)

// KeyDelta is what one key did on one replica since that replica last told the others: the
// requests it admitted, the tokens they used and the USD they cost, around the unix second At.
// Replicas sharing a store exchange them (Limiter.Share, TakeDeltas, Absorb), so that a key's
// requests per minute, tokens per minute and budgets hold across all of them, not per replica.
type KeyDelta struct {
	ID       int64   `json:"k"`
	At       int64   `json:"s"`
	Requests int64   `json:"r,omitempty"`
	Tokens   int64   `json:"t,omitempty"`
	Cost     float64 `json:"c,omitempty"`
}

// sharing collects the deltas of this replica's keys until they are taken.
type sharing struct {
	mu      sync.Mutex
	pending map[int64]*KeyDelta
	live    func() int
}

// Share makes the limiter collect what each key does here, for TakeDeltas, and hold a key's
// max_parallel to this replica's share of it: ceil(max_parallel ÷ live replicas), live counted
// by live (this replica included). Call it once, before the first request.
func (l *Limiter) Share(live func() int) {
	l.shared = &sharing{pending: map[int64]*KeyDelta{}, live: live}
}

// ParallelSlots hold a key's max_parallel exactly across replicas: one slot per running request
// of the key, in a store every replica reaches (Redis, services/globalcap).
type ParallelSlots interface {
	// Healthy says whether the store answers now; while it does not, each replica holds its
	// share of max_parallel instead.
	Healthy() bool
	// TryTake takes one of the key's n slots if one is free now. taken is false when all n are
	// held; an error is a failure of the store.
	TryTake(ctx context.Context, keyID int64, n int) (release func(), taken bool, err error)
}

// UseSlots makes max_parallel hold across the replicas through slots while they are healthy,
// instead of each replica's share of it. Call it once, before the first request.
func (l *Limiter) UseSlots(s ParallelSlots) { l.slots = s }

// takeSlot takes a slot in the shared store for a request admit has just counted (k.parallel
// includes it). When every slot is held, the request is taken back out of the counts and
// refused; when the store fails, this replica's share of max_parallel decides.
func (l *Limiter) takeSlot(now time.Time, id int64, lim Limits) *Refusal {
	release, taken, err := l.slots.TryTake(context.Background(), id, int(lim.MaxParallel))
	k := l.state(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case err == nil && taken:
		k.slots = append(k.slots, release)
		return nil
	case err != nil && k.parallel <= l.parallelShare(lim.MaxParallel):
		return nil
	}
	k.requests.add(now.Unix(), -1) // it never ran
	k.parallel--
	return &Refusal{Code: CodeParallelLimited, Limit: float64(lim.MaxParallel), RetryAfter: time.Second}
}

// parallelShare is how many requests of a key with max_parallel n may run here at once.
func (l *Limiter) parallelShare(n int64) int64 {
	if l.shared == nil || l.shared.live == nil {
		return n
	}
	live := int64(max(l.shared.live(), 1))
	return (n + live - 1) / live
}

// note adds to the key's pending delta.
func (s *sharing) note(id, at, requests, tokens int64, cost float64) {
	s.mu.Lock()
	d := s.pending[id]
	if d == nil {
		d = &KeyDelta{ID: id}
		s.pending[id] = d
	}
	d.At = at
	d.Requests += requests
	d.Tokens += tokens
	d.Cost += cost
	s.mu.Unlock()
}

// TakeDeltas returns what the keys did here since the last call (nil when nothing, or when the
// limiter does not share).
func (l *Limiter) TakeDeltas() []KeyDelta {
	s := l.shared
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil
	}
	out := make([]KeyDelta, 0, len(s.pending))
	for id, d := range s.pending {
		out = append(out, *d)
		delete(s.pending, id)
	}
	return out
}

// Absorb counts what keys did on another replica: their requests and tokens in the minute's
// windows (at the second they happened, or now when that is older than the window), their cost
// in the day and month it was spent in, if those are the current ones. Budget thresholds the
// spend crosses are announced as for a request finished here (limitsOf gives a key's limits;
// a key it does not know has none), so whichever replica's count crosses first tells: the
// announcer must tell each crossing once across the replicas.
func (l *Limiter) Absorb(ds []KeyDelta, limitsOf func(id int64) (Limits, bool)) {
	now := l.now()
	var crossed []Crossing
	for _, d := range ds {
		if d.ID == 0 {
			continue
		}
		lim, _ := limitsOf(d.ID)
		k := l.state(d.ID)
		k.mu.Lock()
		k.roll(now, l.loc.Load())
		sec := min(max(d.At, now.Unix()-59), now.Unix())
		if d.Requests > 0 {
			k.requests.add(sec, d.Requests)
		}
		if d.Tokens > 0 {
			k.tokens.add(sec, d.Tokens)
		}
		if d.Cost > 0 {
			at := time.Unix(d.At, 0)
			if !at.Before(k.day.start) && at.Before(k.day.end) {
				crossed = k.day.charge(d.Cost, lim.DailyUSD, "daily", d.ID, lim, crossed)
			}
			if !at.Before(k.month.start) && at.Before(k.month.end) {
				crossed = k.month.charge(d.Cost, lim.MonthlyUSD, "monthly", d.ID, lim, crossed)
			}
		}
		k.mu.Unlock()
	}
	if l.onCross != nil {
		for _, c := range crossed {
			l.onCross(c)
		}
	}
}

// Raise sets each named key's spend of the current day and month to at least the given one (the
// stored usage, after a replica may have missed what others told).
func (l *Limiter) Raise(daySpend, monthSpend map[int64]float64) {
	now := l.now()
	loc := l.loc.Load()
	raise := func(m map[int64]float64, month bool) {
		for id, v := range m {
			k := l.state(id)
			k.mu.Lock()
			k.roll(now, loc)
			p := &k.day
			if month {
				p = &k.month
			}
			p.spend = max(p.spend, v)
			k.mu.Unlock()
		}
	}
	raise(daySpend, false)
	raise(monthSpend, true)
}
