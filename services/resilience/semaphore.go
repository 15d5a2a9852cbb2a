package resilience

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// SemaphoreStats are the live counters of one connection's quota-share semaphore.
type SemaphoreStats struct {
	Max             int   `json:"max"`               // the limit last asked for; 0 = unlimited
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
type Semaphores struct {
	clock clockwork.Clock
	table connTable[connSem]
}

// NewSemaphores builds the semaphores.
func NewSemaphores(clock clockwork.Clock) *Semaphores {
	return &Semaphores{clock: clock}
}

// connSem is the semaphore of one connection.
type connSem struct {
	waiting         atomic.Int64 // == line.Len(), for the lock-free unlimited path
	failOpenFull    atomic.Int64
	failOpenTimeout atomic.Int64
	cancelled       atomic.Int64

	mu      sync.Mutex
	max     int       // 0 = unlimited
	holding int       // slots granted and not yet released
	line    list.List // of *semWaiter, in arrival order
}

// semWaiter is one request in line; granted and ready are set by whoever hands it a slot.
type semWaiter struct {
	ready   chan struct{}
	granted bool
}

func newConnSem(int64) *connSem { return &connSem{} }

// noRelease is the release of a request that holds no slot.
func noRelease() {}

// Acquire takes one of the connection's maxConcurrent slots. maxConcurrent <= 0 means unlimited: it returns at once
// with acquired true and nothing to release. Otherwise a request waits in line, in arrival order
// (a newcomer never overtakes a waiter), for at most maxWait (clamped to 1 ms–24 h). Fail-open:
// when maxLine requests already wait (maxLine <= 0 = unbounded) or the wait times out, it returns
// acquired false and a no-op release, and the request proceeds without a slot. When ctx ends
// while waiting it leaves the line at once and returns acquired false; the engine tells this
// apart by ctx.Err() != nil and stops. release must be called once when the request finishes
// (it is idempotent); a released slot goes to the longest waiter.
func (s *Semaphores) Acquire(ctx context.Context, connID int64, maxConcurrent int, maxWait time.Duration, maxLine int) (release func(), acquired bool) {
	if maxConcurrent <= 0 {
		// Waiters left over from a limit the operator just removed are let go at once.
		if c := s.table.lookup(connID); c != nil && c.waiting.Load() > 0 {
			c.mu.Lock()
			c.max = 0
			c.grantLocked()
			c.mu.Unlock()
		}
		return noRelease, true
	}
	c := s.table.get(connID, newConnSem)
	c.mu.Lock()
	if maxConcurrent != c.max {
		c.max = maxConcurrent // holders keep their slots; a raise lets waiters in now
		c.grantLocked()
	}
	if c.line.Len() == 0 && c.holding < c.max {
		c.holding++
		c.mu.Unlock()
		return c.releaser(), true
	}
	if maxLine > 0 && c.line.Len() >= maxLine {
		c.mu.Unlock()
		c.failOpenFull.Add(1)
		return noRelease, false
	}
	w := &semWaiter{ready: make(chan struct{})}
	e := c.line.PushBack(w)
	c.waiting.Add(1)
	timer := s.clock.NewTimer(clampQueueTime(maxWait, minQueueTime))
	c.mu.Unlock()
	defer timer.Stop()

	select {
	case <-w.ready:
		return c.releaser(), true
	case <-timer.Chan():
		c.mu.Lock()
		if w.granted { // the slot came as the timer fired: take it
			c.mu.Unlock()
			return c.releaser(), true
		}
		c.line.Remove(e)
		c.waiting.Add(-1)
		c.mu.Unlock()
		c.failOpenTimeout.Add(1)
		return noRelease, false
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
		return noRelease, false
	}
}

// TryAcquire takes one of the connection's maxConcurrent slots only if one is free now (and no
// one waits for it); it never waits. The engine uses it to pass over a connection another
// request filled a moment ago while a sibling still has room.
func (s *Semaphores) TryAcquire(connID int64, maxConcurrent int) (release func(), acquired bool) {
	if maxConcurrent <= 0 {
		return noRelease, true
	}
	c := s.table.get(connID, newConnSem)
	c.mu.Lock()
	defer c.mu.Unlock()
	if maxConcurrent != c.max {
		c.max = maxConcurrent
		c.grantLocked()
	}
	if c.line.Len() == 0 && c.holding < c.max {
		c.holding++
		return c.releaser(), true
	}
	return noRelease, false
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
	st := SemaphoreStats{Max: c.max, Holding: c.holding, Waiting: c.line.Len()}
	c.mu.Unlock()
	st.FailOpenFull, st.FailOpenTimeout, st.Cancelled = c.failOpenFull.Load(), c.failOpenTimeout.Load(), c.cancelled.Load()
	return st
}

// Forget drops the semaphore of a deleted connection; holders release into the old one.
func (s *Semaphores) Forget(connID int64) { s.table.forget(connID) }
