package resilience

import (
	"container/list"
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// SemaphoreStats are the live counters of one connection's quota-share semaphore.
type SemaphoreStats struct {
	Max             int   `json:"max"`               // the limit last asked for; 0 = unlimited
	Share           int   `json:"share,omitempty"`   // this replica's part of Max while it enforces it alone; 0 = all of it
	Holding         int   `json:"holding"`           // slots held right now
	Waiting         int   `json:"waiting"`           // requests in line right now
	FailOpenFull    int64 `json:"fail_open_full"`    // proceeded without a slot: line full
	FailOpenTimeout int64 `json:"fail_open_timeout"` // proceeded without a slot: waited too long
	Cancelled       int64 `json:"cancelled"`         // clients gone while waiting
}

// Semaphores enforce each connection's max_concurrent across every client key and combo that
// reaches the account (quota-share concurrency). They fail open: a request that finds the line
// full or waits too long proceeds without a slot rather than being rejected, so they shape load
// but never turn a routable request away.
//
// The engine skips Acquire entirely when settings quota_share_concurrency.enabled is off (the
// kill switch), and when ctx ends while waiting it stops the request.
//
// Hand-rolled rather than golang.org/x/sync/semaphore.Weighted: the limit must change in place
// when an operator edits max_concurrent (Weighted's size is fixed, and a fresh one would not
// count the holders of the old), the line must be bounded (fail-open when full) and observable
// (Waiting), and a timeout fails open instead of failing.
//
// Several replicas behind one load balancer would each allow max_concurrent: SemaphoreOptions
// make them hold it together.
type Semaphores struct {
	clock  clockwork.Clock
	table  connTable[connSem]
	shared SharedSlots
	live   func() int
}

// SharedSlots are quota-share slots that every replica of the gateway takes from one store
// (services/globalcap keeps them as leases in Redis), so max_concurrent and the line's depth
// hold across replicas.
type SharedSlots interface {
	// Acquire takes one of the connection's maxConcurrent slots, waiting at most maxWait, unless
	// maxLine requests (of every replica; <= 0 = unbounded) already wait. It returns the
	// idempotent release and nil, or ErrSlotLineFull, ErrSlotTimeout, ctx's error, or another
	// error when the store could not be reached.
	Acquire(ctx context.Context, connID int64, maxConcurrent int, maxWait time.Duration, maxLine int) (release func(), err error)
	// TryAcquire takes a slot only if one is free now and no request waits for one; otherwise
	// ErrSlotsTaken, or another error when the store could not be reached.
	TryAcquire(ctx context.Context, connID int64, maxConcurrent int) (release func(), err error)
	// Healthy reports whether the store answered lately. While it does not, the semaphores do
	// not ask it and each replica enforces its share alone.
	Healthy() bool
}

// SemaphoreOptions are what a replica of several needs to hold the caps together with the others.
type SemaphoreOptions struct {
	// Shared is the slot store of every replica; nil = none.
	Shared SharedSlots
	// Live returns how many replicas are alive, this one included. Without a healthy Shared
	// store each replica enforces ceil(max_concurrent ÷ live), at least 1. nil = a single replica.
	Live func() int
}

// sharedLocal is the local limit while a healthy shared store gates the slots: the local step
// only counts.
const sharedLocal = math.MaxInt

// NewSemaphores builds the semaphores of a single replica.
func NewSemaphores(clock clockwork.Clock) *Semaphores {
	return &Semaphores{clock: clock}
}

// NewSemaphoresWith builds the semaphores of one replica of several.
func NewSemaphoresWith(clock clockwork.Clock, opt SemaphoreOptions) *Semaphores {
	return &Semaphores{clock: clock, shared: opt.Shared, live: opt.Live}
}

// connSem is the semaphore of one connection.
type connSem struct {
	waiting         atomic.Int64 // == line.Len(), for the lock-free unlimited path
	failOpenFull    atomic.Int64
	failOpenTimeout atomic.Int64
	cancelled       atomic.Int64

	mu            sync.Mutex
	limit         int       // the operator's max_concurrent; 0 = unlimited
	max           int       // the limit enforced here: limit, a share of it, or sharedLocal; 0 = unlimited
	holding       int       // slots granted and not yet released
	sharedWaiting int       // of holding: requests that still wait for the shared store's lease
	line          list.List // of *semWaiter, in arrival order
}

// semWaiter is one request in line; granted and ready are set by whoever hands it a slot.
type semWaiter struct {
	ready   chan struct{}
	granted bool
}

func newConnSem(int64) *connSem { return &connSem{} }

// noRelease is the release of a request that holds no slot.
func noRelease() {}

// Why no slot was granted. AcquireSlot and a SharedSlots store's Acquire answer ErrSlotLineFull
// and ErrSlotTimeout, which are fail-open outcomes: the request may proceed without a slot. A
// store's TryAcquire answers ErrSlotsTaken.
var (
	ErrSlotLineFull = errors.New("quota-share: the line is full")
	ErrSlotTimeout  = errors.New("quota-share: no slot within the wait")
	ErrSlotsTaken   = errors.New("quota-share: every slot is taken")
)

// Acquire is AcquireSlot reporting only whether a slot was granted.
func (s *Semaphores) Acquire(ctx context.Context, connID int64, maxConcurrent int, maxWait time.Duration, maxLine int) (release func(), acquired bool) {
	release, err := s.AcquireSlot(ctx, connID, maxConcurrent, maxWait, maxLine)
	return release, err == nil
}

// AcquireSlot takes one of the connection's maxConcurrent slots. maxConcurrent <= 0 means
// unlimited: it returns at once with nil and nothing to release. Otherwise a request waits in
// line, in arrival order (a newcomer never overtakes a waiter), for at most maxWait (clamped to
// 1 ms–24 h). Fail-open: when maxLine requests already wait (maxLine <= 0 = unbounded) it
// returns ErrSlotLineFull, when the wait times out ErrSlotTimeout, each with a no-op release,
// and the request may proceed without a slot. When ctx ends while waiting it leaves the line at
// once and returns ctx's error. release must be called once when the request finishes (it is
// idempotent); a released slot goes to the longest waiter.
//
// With a shared store (SemaphoreOptions.Shared) that is healthy, the slot is a lease in the
// store and maxLine counts the waiters of every replica; the line is then first come, first
// served only roughly. While the store is unreachable, and without one, this replica enforces
// its share of maxConcurrent alone (see SemaphoreOptions.Live).
func (s *Semaphores) AcquireSlot(ctx context.Context, connID int64, maxConcurrent int, maxWait time.Duration, maxLine int) (release func(), err error) {
	if maxConcurrent <= 0 {
		// Waiters left over from a limit the operator just removed are let go at once.
		if c := s.table.lookup(connID); c != nil && c.waiting.Load() > 0 {
			c.mu.Lock()
			c.max, c.limit = 0, 0
			c.grantLocked()
			c.mu.Unlock()
		}
		return noRelease, nil
	}
	c := s.table.get(connID, newConnSem)
	if s.shared != nil {
		return s.acquireShared(ctx, c, connID, maxConcurrent, maxWait, maxLine)
	}
	return s.acquireLocal(ctx, c, maxConcurrent, s.localCap(maxConcurrent), maxWait, maxLine)
}

// acquireLocal waits in the connection's own line for one of local slots; limit is the
// operator's max_concurrent, which Stats reports.
func (s *Semaphores) acquireLocal(ctx context.Context, c *connSem, limit, local int, maxWait time.Duration, maxLine int) (release func(), err error) {
	c.mu.Lock()
	c.limit = limit
	if local != c.max {
		c.max = local // holders keep their slots; a raise lets waiters in now
		c.grantLocked()
	}
	if c.line.Len() == 0 && c.holding < c.max {
		c.holding++
		c.mu.Unlock()
		return c.releaser(), nil
	}
	if maxLine > 0 && c.line.Len() >= maxLine {
		c.mu.Unlock()
		c.failOpenFull.Add(1)
		return noRelease, ErrSlotLineFull
	}
	w := &semWaiter{ready: make(chan struct{})}
	e := c.line.PushBack(w)
	c.waiting.Add(1)
	timer := s.clock.NewTimer(clampQueueTime(maxWait, minQueueTime))
	c.mu.Unlock()
	defer timer.Stop()

	select {
	case <-w.ready:
		return c.releaser(), nil
	case <-timer.Chan():
		c.mu.Lock()
		if w.granted { // the slot came as the timer fired: take it
			c.mu.Unlock()
			return c.releaser(), nil
		}
		c.line.Remove(e)
		c.waiting.Add(-1)
		c.mu.Unlock()
		c.failOpenTimeout.Add(1)
		return noRelease, ErrSlotTimeout
	case <-ctx.Done():
		c.mu.Lock()
		if w.granted { // the slot came as the client left: pass it on
			c.holding--
			c.grantLocked()
		} else {
			c.line.Remove(e)
			c.waiting.Add(-1)
		}
		c.mu.Unlock()
		c.cancelled.Add(1)
		return noRelease, ctx.Err()
	}
}

// acquireShared takes a slot in two steps: a local one, then a lease in the shared store.
// While the store is healthy the local step never waits (the store's line is the line, so that
// its depth counts every replica's waiters) and only counts the request; while it is not, the
// local step enforces this replica's share and the lease is skipped. A store that fails during
// the wait sends the request back to the local line for the time that is left.
func (s *Semaphores) acquireShared(ctx context.Context, c *connSem, connID int64, limit int, maxWait time.Duration, maxLine int) (release func(), err error) {
	wait := clampQueueTime(maxWait, minQueueTime)
	deadline := s.clock.Now().Add(wait)
	for try := 0; ; try++ {
		shared := try == 0 && s.shared.Healthy()
		local := s.localCap(limit)
		if shared {
			local = sharedLocal
		}
		rel, err := s.acquireLocal(ctx, c, limit, local, wait, maxLine)
		if err != nil {
			return rel, err
		}
		if !shared && (try > 0 || !s.shared.Healthy()) {
			return rel, nil // enforced here alone while the store is unreachable
		}
		wait = max(deadline.Sub(s.clock.Now()), minQueueTime)
		c.addSharedWaiting(1)
		srel, err := s.shared.Acquire(ctx, connID, limit, wait, maxLine)
		c.addSharedWaiting(-1)
		switch {
		case err == nil:
			return bothReleases(srel, rel), nil
		case errors.Is(err, ErrSlotLineFull):
			rel()
			c.failOpenFull.Add(1)
			return noRelease, err
		case errors.Is(err, ErrSlotTimeout):
			rel()
			c.failOpenTimeout.Add(1)
			return noRelease, err
		case ctx.Err() != nil:
			rel()
			c.cancelled.Add(1)
			return noRelease, ctx.Err()
		case !shared:
			return rel, nil // the local share already holds it
		}
		rel()
		wait = max(deadline.Sub(s.clock.Now()), minQueueTime)
	}
}

// TryAcquire takes one of the connection's maxConcurrent slots only if one is free now (and no
// one waits for it); it never waits. The engine uses it to pass over a connection another
// request filled a moment ago while a sibling still has room. With a shared store it also
// takes a lease there, under the same rule; the store's answer is awaited for at most its own
// short call timeout.
func (s *Semaphores) TryAcquire(connID int64, maxConcurrent int) (release func(), acquired bool) {
	if maxConcurrent <= 0 {
		return noRelease, true
	}
	c := s.table.get(connID, newConnSem)
	if s.shared == nil {
		return c.tryLocal(maxConcurrent, s.localCap(maxConcurrent))
	}
	for try := 0; try < 2; try++ {
		shared := try == 0 && s.shared.Healthy()
		local := s.localCap(maxConcurrent)
		if shared {
			local = sharedLocal
		}
		rel, ok := c.tryLocal(maxConcurrent, local)
		if !ok || (!shared && (try > 0 || !s.shared.Healthy())) {
			return rel, ok
		}
		srel, err := s.shared.TryAcquire(context.Background(), connID, maxConcurrent)
		switch {
		case err == nil:
			return bothReleases(srel, rel), true
		case errors.Is(err, ErrSlotsTaken):
			rel()
			return noRelease, false
		case !shared:
			return rel, true
		}
		rel()
	}
	return noRelease, false
}

// tryLocal takes one of local slots if one is free and no one waits.
func (c *connSem) tryLocal(limit, local int) (release func(), acquired bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit = limit
	if local != c.max {
		c.max = local
		c.grantLocked()
	}
	if c.line.Len() == 0 && c.holding < c.max {
		c.holding++
		return c.releaser(), true
	}
	return noRelease, false
}

// localCap is the part of limit this replica enforces alone: ceil(limit ÷ live replicas), at
// least 1 (limit itself without a live count).
func (s *Semaphores) localCap(limit int) int {
	if s.live == nil {
		return limit
	}
	n := s.live()
	if n <= 1 {
		return limit
	}
	return (limit + n - 1) / n
}

// bothReleases releases the shared lease, then the local slot; each is idempotent already.
func bothReleases(shared, local func()) func() {
	return func() {
		shared()
		local()
	}
}

// addSharedWaiting counts a request that holds its local slot and waits for the store.
func (c *connSem) addSharedWaiting(n int) {
	c.mu.Lock()
	c.sharedWaiting += n
	c.mu.Unlock()
}

// releaser returns the idempotent release of one held slot.
func (c *connSem) releaser() func() {
	var done atomic.Bool
	return func() {
		if !done.CompareAndSwap(false, true) {
			return
		}
		c.mu.Lock()
		c.holding--
		c.grantLocked()
		c.mu.Unlock()
	}
}

// grantLocked hands free slots to the line, longest waiter first.
func (c *connSem) grantLocked() {
	for c.line.Len() > 0 && (c.max <= 0 || c.holding < c.max) {
		w := c.line.Remove(c.line.Front()).(*semWaiter)
		c.waiting.Add(-1)
		c.holding++
		w.granted = true
		close(w.ready)
	}
}

// Stats returns the counters of one connection (zero when it never had a limited request).
func (s *Semaphores) Stats(connID int64) SemaphoreStats {
	return statsOf(&s.table, connID, (*connSem).stats)
}

// AllStats returns the counters of every connection that had a limited request.
func (s *Semaphores) AllStats() map[int64]SemaphoreStats {
	return allStats(&s.table, (*connSem).stats)
}

func (c *connSem) stats() SemaphoreStats {
	c.mu.Lock()
	st := SemaphoreStats{Max: c.limit, Holding: c.holding - c.sharedWaiting, Waiting: c.line.Len() + c.sharedWaiting}
	if c.max != c.limit && c.max != sharedLocal {
		st.Share = c.max
	}
	c.mu.Unlock()
	st.FailOpenFull, st.FailOpenTimeout, st.Cancelled = c.failOpenFull.Load(), c.failOpenTimeout.Load(), c.cancelled.Load()
	return st
}

// Forget drops the semaphore of a deleted connection; holders release into the old one.
func (s *Semaphores) Forget(connID int64) { s.table.forget(connID) }
