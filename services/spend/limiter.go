package spend

import (
	"sync"
	"sync/atomic"
	"time"
)

// The reason codes of a refusal, as clients read them.
const (
	CodeRateLimited     = "key_rate_limited"
	CodeTokenLimited    = "key_token_limited"
	CodeBudgetExceeded  = "key_budget_exceeded"
	CodeParallelLimited = "key_parallel_limited"
)

// Refusal is why a key may not make a request now.
type Refusal struct {
	// Code is one of the Code… constants; Budget names the budget ("daily" or "monthly").
	Code   string
	Budget string
	// Limit is the limit reached (requests, tokens, USD or requests at once).
	Limit float64
	// RetryAfter is when the limit lets the next request through: the window's or the
	// budget period's reset; ResetsAt is that instant.
	RetryAfter time.Duration
	ResetsAt   time.Time
}

// Final reports whether retrying soon is pointless (a budget is spent until its period ends).
func (r *Refusal) Final() bool { return r.Code == CodeBudgetExceeded }

// Crossing is a key's spend passing a share of one of its budgets.
type Crossing struct {
	KeyID       int64
	Budget      string // daily or monthly
	Threshold   int    // percent: 80 or 100
	SpendUSD    float64
	BudgetUSD   float64
	PeriodStart time.Time
	ResetsAt    time.Time
	// Limits are the key's limits when it crossed (its webhook URL among them).
	Limits Limits
}

// thresholds are the shares of a budget whose crossing is announced.
var thresholds = [...]int{80, 100}

// Limiter keeps each client key within its limits. It holds, per key: the requests and tokens
// of the last minute (a sliding window of one-second slots), the spend of the current day and
// month in the configured time zone, and the requests running. Everything is in memory: the
// request path never waits for the database. The spend is seeded at start (and when the time
// zone changes) from the stored usage, so it survives a restart.
//
// Budgets are checked against the spend of finished requests: requests running when the budget
// is reached may each overshoot it by their own cost.
type Limiter struct {
	now     func() time.Time
	loc     atomic.Pointer[time.Location]
	onCross func(Crossing)

	mu   sync.RWMutex
	keys map[int64]*keyState

	// shared collects what keys do here for the other replicas (Share); nil on one replica.
	shared *sharing
	// slots hold max_parallel across the replicas (UseSlots); nil: each replica counts its own.
	slots ParallelSlots
}

// keyState is one key's counters; its own mutex guards it.
type keyState struct {
	mu       sync.Mutex
	requests window
	tokens   window
	parallel int64
	// slots are the releases of the shared slots this replica's running requests hold.
	slots []func()
	day   period
	month period
}

// period is the spend of one calendar day or month.
type period struct {
	start, end time.Time
	spend      float64
}

// window counts what happened in the last 60 seconds, in one slot per second.
type window struct {
	slot  [60]int64
	stamp [60]int64 // the unix second each slot counts
}

func (w *window) add(now int64, n int64) {
	i := now % 60
	if w.stamp[i] != now {
		w.stamp[i], w.slot[i] = now, 0
	}
	w.slot[i] += n
}

// sum is the count of the 60 seconds ending with now.
func (w *window) sum(now int64) int64 {
	var n int64
	for i := range w.slot {
		if now-w.stamp[i] < 60 && w.stamp[i] <= now {
			n += w.slot[i]
		}
	}
	return n
}

// waitBelow is how long until the count drops below limit, as the oldest seconds leave.
func (w *window) waitBelow(now int64, limit int64) time.Duration {
	total := w.sum(now)
	for age := int64(59); age >= 0; age-- {
		sec := now - age
		i := sec % 60
		if w.stamp[i] != sec {
			continue
		}
		total -= w.slot[i]
		if total < limit {
			return time.Duration(sec+60-now) * time.Second
		}
	}
	return 60 * time.Second
}

// NewLimiter makes a limiter; onCross (may be nil) is told of every budget threshold a key's
// spend crosses, once per threshold and period, outside any lock.
func NewLimiter(now func() time.Time, loc *time.Location, onCross func(Crossing)) *Limiter {
	if loc == nil {
		loc = time.UTC
	}
	l := &Limiter{now: now, onCross: onCross, keys: map[int64]*keyState{}}
	l.loc.Store(loc)
	return l
}

// Location is the time zone budget days and months run in.
func (l *Limiter) Location() *time.Location { return l.loc.Load() }

// SetLocation changes the time zone and seeds every key's day and month spend again (from
// the stored usage: daySpend and monthSpend by key, from the new day's and month's start).
func (l *Limiter) SetLocation(loc *time.Location, daySpend, monthSpend map[int64]float64) {
	l.loc.Store(loc)
	l.Seed(daySpend, monthSpend)
}

// PeriodStarts are the starts of the current day and month in a time zone (nil: the
// limiter's).
func (l *Limiter) PeriodStarts(loc *time.Location) (day, month time.Time) {
	if loc == nil {
		loc = l.loc.Load()
	}
	d, m := periodsAt(l.now(), loc)
	return d.start, m.start
}

// Seed sets each key's spend of the current day and month (from the stored usage, at start).
// Keys not named start at 0.
func (l *Limiter) Seed(daySpend, monthSpend map[int64]float64) {
	now := l.now()
	day, month := periodsAt(now, l.loc.Load())
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, k := range l.keys {
		k.mu.Lock()
		k.day, k.month = day, month
		k.day.spend, k.month.spend = daySpend[id], monthSpend[id]
		k.mu.Unlock()
	}
	seed := func(m map[int64]float64) {
		for id := range m {
			if l.keys[id] == nil {
				k := &keyState{day: day, month: month}
				k.day.spend, k.month.spend = daySpend[id], monthSpend[id]
				l.keys[id] = k
			}
		}
	}
	seed(daySpend)
	seed(monthSpend)
}

// SeedWindows adds what keys did in the last minute before a restart (requests and tokens by
// key), counted as if it happened now: conservative, it may hold a key back up to a minute
// longer than the minute it used, never less.
func (l *Limiter) SeedWindows(requests, tokens map[int64]int64) {
	now := l.now().Unix()
	for id, n := range requests {
		k := l.state(id)
		k.mu.Lock()
		k.requests.add(now, n)
		k.tokens.add(now, tokens[id])
		k.mu.Unlock()
	}
}

// periodsAt are the day and month that hold now in loc.
func periodsAt(now time.Time, loc *time.Location) (day, month period) {
	t := now.In(loc)
	y, mo, d := t.Date()
	day.start = time.Date(y, mo, d, 0, 0, 0, 0, loc)
	day.end = time.Date(y, mo, d+1, 0, 0, 0, 0, loc)
	month.start = time.Date(y, mo, 1, 0, 0, 0, 0, loc)
	month.end = time.Date(y, mo+1, 1, 0, 0, 0, 0, loc)
	return day, month
}

// state is the key's counters, made on first use.
func (l *Limiter) state(id int64) *keyState {
	l.mu.RLock()
	k := l.keys[id]
	l.mu.RUnlock()
	if k != nil {
		return k
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if k = l.keys[id]; k == nil {
		day, month := periodsAt(l.now(), l.loc.Load())
		k = &keyState{day: day, month: month}
		l.keys[id] = k
	}
	return k
}

// roll starts a new day or month when now has left the current one; k.mu is held.
func (k *keyState) roll(now time.Time, loc *time.Location) {
	if now.Before(k.day.end) && !now.Before(k.day.start) && now.Before(k.month.end) {
		return
	}
	day, month := periodsAt(now, loc)
	if !day.start.Equal(k.day.start) {
		k.day = day
	}
	if !month.start.Equal(k.month.start) {
		k.month = month
	}
}

// Admit counts a request of a key against its limits: nil when it may go (the caller must then
// call Finish exactly once), else why not. Keys without limits are admitted and counted too,
// so that a limit set later sees the day's spend so far. The checks are in the order a client can act on:
// a spent budget first (nothing helps but waiting for the period's end), then the minute's
// requests and tokens, then the requests running.
func (l *Limiter) Admit(id int64, lim Limits) *Refusal {
	now := l.now()
	exact := lim.MaxParallel > 0 && l.slots != nil && l.slots.Healthy()
	r := l.admit(now, id, lim, exact)
	if r == nil && exact {
		r = l.takeSlot(now, id, lim)
	}
	if r != nil {
		r.ResetsAt = now.Add(r.RetryAfter)
	} else if l.shared != nil {
		l.shared.note(id, now.Unix(), 1, 0, 0)
	}
	return r
}

// admit checks and counts the request; with exact, max_parallel is left to the shared slots.
func (l *Limiter) admit(now time.Time, id int64, lim Limits, exact bool) *Refusal {
	k := l.state(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.roll(now, l.loc.Load())
	if lim.DailyUSD > 0 && k.day.spend >= lim.DailyUSD {
		return &Refusal{Code: CodeBudgetExceeded, Budget: "daily", Limit: lim.DailyUSD, RetryAfter: ceilSecond(k.day.end.Sub(now))}
	}
	if lim.MonthlyUSD > 0 && k.month.spend >= lim.MonthlyUSD {
		return &Refusal{Code: CodeBudgetExceeded, Budget: "monthly", Limit: lim.MonthlyUSD, RetryAfter: ceilSecond(k.month.end.Sub(now))}
	}
	sec := now.Unix()
	if lim.RPM > 0 && k.requests.sum(sec) >= lim.RPM {
		return &Refusal{Code: CodeRateLimited, Limit: float64(lim.RPM), RetryAfter: k.requests.waitBelow(sec, lim.RPM)}
	}
	if lim.TPM > 0 && k.tokens.sum(sec) >= lim.TPM {
		return &Refusal{Code: CodeTokenLimited, Limit: float64(lim.TPM), RetryAfter: k.tokens.waitBelow(sec, lim.TPM)}
	}
	if lim.MaxParallel > 0 && !exact && k.parallel >= l.parallelShare(lim.MaxParallel) {
		return &Refusal{Code: CodeParallelLimited, Limit: float64(lim.MaxParallel), RetryAfter: time.Second}
	}
	k.requests.add(sec, 1)
	k.parallel++
	return nil
}

// ceilSecond rounds up to a whole second (Retry-After is in seconds; never 0).
func ceilSecond(d time.Duration) time.Duration {
	s := (d + time.Second - 1) / time.Second
	if s < 1 {
		s = 1
	}
	return s * time.Second
}

// Finish counts what an admitted request used and cost (cost 0 when unpriced) and lets the
// next request of the key run. Thresholds of the key's budgets its spend crossed are announced.
func (l *Limiter) Finish(id int64, lim Limits, u Usage, cost float64) {
	now := l.now()
	k := l.state(id)
	k.mu.Lock()
	k.roll(now, l.loc.Load())
	if k.parallel > 0 {
		k.parallel--
	}
	// A request admitted while the store failed holds no slot, and which request ends is not
	// known here: a slot is given back only while more are held than requests run, so slots
	// are never given back early, at worst late.
	var release func()
	if n := len(k.slots); int64(n) > k.parallel {
		release, k.slots = k.slots[n-1], k.slots[:n-1]
	}
	k.tokens.add(now.Unix(), u.Total())
	var crossed []Crossing
	if cost > 0 {
		crossed = k.day.charge(cost, lim.DailyUSD, "daily", id, lim, crossed)
		crossed = k.month.charge(cost, lim.MonthlyUSD, "monthly", id, lim, crossed)
	}
	k.mu.Unlock()
	if release != nil {
		release()
	}
	if l.shared != nil && (u.Total() > 0 || cost > 0) {
		l.shared.note(id, now.Unix(), 0, u.Total(), cost)
	}
	if l.onCross != nil {
		for _, c := range crossed {
			l.onCross(c)
		}
	}
}

// charge adds cost to the period and appends the thresholds of budget it crossed.
func (p *period) charge(cost, budget float64, name string, id int64, lim Limits, out []Crossing) []Crossing {
	before := p.spend
	p.spend += cost
	if budget <= 0 {
		return out
	}
	for _, t := range thresholds {
		at := budget * float64(t) / 100
		if before < at && p.spend >= at {
			out = append(out, Crossing{KeyID: id, Budget: name, Threshold: t, SpendUSD: p.spend, BudgetUSD: budget,
				PeriodStart: p.start, ResetsAt: p.end, Limits: lim})
		}
	}
	return out
}

// Use is a key's use against its limits now.
func (l *Limiter) Use(id int64, lim Limits) KeyUse {
	now := l.now()
	l.mu.RLock()
	k := l.keys[id]
	l.mu.RUnlock()
	u := KeyUse{Limits: lim}
	if k == nil {
		return u
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.roll(now, l.loc.Load())
	sec := now.Unix()
	u.Requests, u.Tokens = k.requests.sum(sec), k.tokens.sum(sec)
	u.DaySpend, u.MonthSpend, u.Parallel = k.day.spend, k.month.spend, k.parallel
	return u
}

// Forget drops a key's counters (it was revoked).
func (l *Limiter) Forget(id int64) {
	l.mu.Lock()
	delete(l.keys, id)
	l.mu.Unlock()
}
