package resilience

import (
	"container/list"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"
)

// Request queue error codes. These errors are the gateway's own (trusted provenance), never the
// provider's: the engine answers the client with them and must not count them as provider or
// connection failures (no cooldown, breaker, lockout or provider-cooldown accounting).
const (
	CodeQueueFull        = "RATE_LIMIT_QUEUE_FULL"        // 429: max_queue_depth requests already wait
	CodeQueueTimeout     = "RATE_LIMIT_QUEUE_TIMEOUT"     // 429: no slot within max_wait_ms
	CodeExecutionTimeout = "RATE_LIMIT_EXECUTION_TIMEOUT" // 504: execution_max_wait_ms passed
	CodeClientClosed     = "client_closed"                // 499: the client went away while waiting
)

// StatusClientClosed is the (nginx) status logged for a client that went away; nothing is sent.
const StatusClientClosed = 499

// Wait outcomes passed to the OnWait observer.
const (
	WaitStarted      = "started"
	WaitQueueFull    = "queue_full"
	WaitTimeout      = "timeout"
	WaitClientClosed = "client_closed"
)

// Queue defaults, used where a QueueConfig or AcquireHooks field is zero.
const (
	DefaultQueueMaxWait     = 30 * time.Second
	DefaultExecutionMaxWait = 10 * time.Minute
	DefaultHeartbeatEvery   = 15 * time.Second
)

// Both queue times are clamped to this range (as request_queue validates them).
const (
	minQueueTime = time.Millisecond
	maxQueueTime = 24 * time.Hour
)

// Decision is the outcome of queue admission.
type Decision struct {
	Admit bool
	Code  string // CodeQueueFull when rejected, "" when admitted
}

// Admit decides whether a request may join a queue in which waiting requests already wait;
// maxDepth 0 (or less) means unbounded.
func Admit(waiting, maxDepth int) Decision {
	if maxDepth > 0 && waiting >= maxDepth {
		return Decision{Code: CodeQueueFull}
	}
	return Decision{Admit: true}
}

// QueueConfig is the effective request_queue policy of one connection (global settings merged
// with the connection's overrides).
type QueueConfig struct {
	// MaxWait bounds the wait for a slot; the timer stops when execution starts. 0 = 30 s;
	// clamped to 1 ms–24 h.
	MaxWait time.Duration
	// ExecutionMaxWait is the execution backstop (see Slot.ExecutionDeadline). 0 = 10 min;
	// clamped to 1 ms–24 h.
	ExecutionMaxWait time.Duration
	// MaxDepth is the most requests waiting at once; 0 = unbounded.
	MaxDepth int
	// RPM paces request starts with a token bucket holding one minute's budget; 0 = no limit.
	RPM int
	// MinGap is the least time between two request starts; 0 = none.
	MinGap time.Duration
	// MaxConcurrentExecutions caps executions in flight; 0 = no cap.
	MaxConcurrentExecutions int
}

// limited reports whether any limit can make a request wait.
func (c QueueConfig) limited() bool {
	return c.RPM > 0 || c.MinGap > 0 || c.MaxConcurrentExecutions > 0
}

// AcquireHooks are per-request callbacks of Acquire.
type AcquireHooks struct {
	// Heartbeat is called every HeartbeatEvery while the request waits, from the waiting
	// goroutine (the engine writes ": queued" SSE comments through it); nil = none.
	Heartbeat func()
	// HeartbeatEvery is the heartbeat interval. 0 = 15 s.
	HeartbeatEvery time.Duration
}

// QueueError is a local queue rejection. It is the engine's error, not the provider's: it must
// not count as an upstream or connection failure.
type QueueError struct {
	Code         string        // CodeQueueFull, CodeQueueTimeout, CodeExecutionTimeout or CodeClientClosed
	Status       int           // HTTP status: 429, 504, or StatusClientClosed
	ConnectionID int64         // the connection whose queue answered
	Elapsed      time.Duration // how long the request waited (queue) or ran (execution)
	RetryAfter   time.Duration // suggested Retry-After for 429s; 0 otherwise
	Err          error         // the context's error for CodeClientClosed
}

// Error implements error.
func (e *QueueError) Error() string {
	return fmt.Sprintf("request queue: %s on connection %d after %s", e.Code, e.ConnectionID, e.Elapsed)
}

// Unwrap returns the context error of a client_closed rejection.
func (e *QueueError) Unwrap() error { return e.Err }

// QueueStats are the live counters of one connection's queue.
type QueueStats struct {
	Executing int   `json:"executing"` // slots held right now
	Waiting   int   `json:"waiting"`   // requests in line right now
	Rejected  int64 `json:"rejected"`  // RATE_LIMIT_QUEUE_FULL since start
	TimedOut  int64 `json:"timed_out"` // RATE_LIMIT_QUEUE_TIMEOUT since start
	Cancelled int64 `json:"cancelled"` // clients gone while waiting since start
}

// Queues is the request queue of every connection: admission (max depth), pacing (RPM, min
// gap) and an execution cap, served in arrival order.
//
// Design: there is no dispatcher goroutine. Waiters form one FIFO line per connection and only
// the head of the line may start; it starts itself (under the queue lock) as soon as a slot is
// free and its pacing time has come, then wakes the next head. Releases and departures only
// wake the head. So a slot is never handed to a goroutine that has just given up, a newcomer
// never overtakes the line, and no watchdog is needed for lost wake-ups.
type Queues struct {
	clock  clockwork.Clock
	onWait func(connID int64, waited time.Duration, outcome string)
	table  connTable[connQueue]
	slots  sync.Pool // *slotState, reused so the unlimited path allocates nothing
}

// NewQueues builds the queues. onWait (may be nil) observes every acquisition that went through
// a limited queue, with the time it waited and one of the Wait… outcomes (feed a histogram from
// it); acquisitions on a connection without limits skip it to keep the hot path free. It is
// called without locks held and must not block.
func NewQueues(clock clockwork.Clock, onWait func(connID int64, waited time.Duration, outcome string)) *Queues {
	if onWait == nil {
		onWait = func(int64, time.Duration, string) {}
	}
	qs := &Queues{clock: clock, onWait: onWait}
	qs.slots.New = func() any { return new(slotState) }
	return qs
}

// connQueue is the queue of one connection.
type connQueue struct {
	id int64
	qs *Queues

	// Counters readable without the lock; executing and waiting also gate the hot path.
	executing atomic.Int64
	waiting   atomic.Int64 // == line.Len(), changed under mu
	rejected  atomic.Int64
	timedOut  atomic.Int64
	cancelled atomic.Int64

	mu        sync.Mutex
	limits    queueLimits
	lim       *rate.Limiter // nil when limits.rpm == 0
	lastStart time.Time     // of the last start through the line; zero = none yet
	line      list.List     // of *queueWaiter, in arrival order
}

// queueLimits are the pacing and concurrency limits a queue currently enforces.
type queueLimits struct {
	rpm     int
	minGap  time.Duration
	maxExec int
}

// queueWaiter is one request in line.
type queueWaiter struct {
	elem *list.Element
	wake chan struct{}     // capacity 1: "you are the head, look again"
	res  *rate.Reservation // the head's RPM token while it waits for its start time
}

// Acquire waits for an execution slot on the connection. With no limits configured it returns
// at once without locking, timers or goroutines. Otherwise: when cfg.MaxDepth requests already
// wait it fails at once with CodeQueueFull; else it waits in arrival order for a free execution
// slot and its pacing time, at most cfg.MaxWait (CodeQueueTimeout), and leaves the line at once
// when ctx ends (CodeClientClosed). The returned slot must be released exactly once (Release is
// idempotent); a *QueueError means no slot is held.
func (qs *Queues) Acquire(ctx context.Context, connID int64, cfg QueueConfig, hooks AcquireHooks) (Slot, *QueueError) {
	q := qs.table.get(connID, qs.newConnQueue)
	exec := clampQueueTime(cfg.ExecutionMaxWait, DefaultExecutionMaxWait)
	// A waiter still in line (left over from a limit the operator just removed) keeps the
	// newcomer on the slow path, which applies the new limits, wakes the line and keeps order.
	if !cfg.limited() && q.waiting.Load() == 0 {
		q.executing.Add(1)
		return qs.slot(q, exec), nil
	}
	return qs.acquireSlow(ctx, q, cfg, hooks, exec)
}

func (qs *Queues) newConnQueue(id int64) *connQueue { return &connQueue{id: id, qs: qs} }

func (qs *Queues) acquireSlow(ctx context.Context, q *connQueue, cfg QueueConfig, hooks AcquireHooks, exec time.Duration) (Slot, *QueueError) {
	maxWait := clampQueueTime(cfg.MaxWait, DefaultQueueMaxWait)
	if err := ctx.Err(); err != nil {
		q.cancelled.Add(1)
		qs.onWait(q.id, 0, WaitClientClosed)
		return Slot{}, &QueueError{Code: CodeClientClosed, Status: StatusClientClosed, ConnectionID: q.id, Err: err}
	}

	q.mu.Lock()
	begin := qs.clock.Now()
	q.applyLocked(limitsOf(cfg), begin)
	if d := Admit(q.line.Len(), cfg.MaxDepth); !d.Admit {
		q.mu.Unlock()
		q.rejected.Add(1)
		qs.onWait(q.id, 0, WaitQueueFull)
		return Slot{}, &QueueError{Code: d.Code, Status: http.StatusTooManyRequests, ConnectionID: q.id,
			RetryAfter: retryAfterFor(maxWait)}
	}
	w := &queueWaiter{wake: make(chan struct{}, 1)}
	w.elem = q.line.PushBack(w)
	q.waiting.Add(1)
	started, delay := q.tryStartLocked(w, begin)
	if started {
		q.mu.Unlock()
		qs.onWait(q.id, 0, WaitStarted)
		return qs.slot(q, exec), nil
	}
	// Timers are made under the lock, in the same step that put the request in line: whoever
	// sees it waiting (Stats) may rely on them.
	deadline := qs.clock.NewTimer(maxWait)
	defer deadline.Stop()
	var beatC <-chan time.Time
	if hooks.Heartbeat != nil {
		every := hooks.HeartbeatEvery
		if every <= 0 {
			every = DefaultHeartbeatEvery
		}
		beat := qs.clock.NewTicker(every)
		defer beat.Stop()
		beatC = beat.Chan()
	}
	var pace clockwork.Timer
	var paceC <-chan time.Time
	setPace := func(d time.Duration) {
		if d <= 0 {
			return
		}
		if pace == nil {
			pace = qs.clock.NewTimer(d)
			paceC = pace.Chan()
			return
		}
		pace.Reset(d)
	}
	setPace(delay)
	q.mu.Unlock()
	inLine := true
	defer func() {
		if pace != nil {
			pace.Stop()
		}
		if inLine { // Heartbeat panicked: don't leave a ghost heading the line
			q.leave(w)
		}
	}()

	for {
		select {
		case <-w.wake:
		case <-paceC:
		case <-beatC:
			hooks.Heartbeat()
			continue
		case <-deadline.Chan():
			inLine = false
			waited := q.leave(w).Sub(begin)
			q.timedOut.Add(1)
			qs.onWait(q.id, waited, WaitTimeout)
			return Slot{}, &QueueError{Code: CodeQueueTimeout, Status: http.StatusTooManyRequests, ConnectionID: q.id,
				Elapsed: waited, RetryAfter: retryAfterFor(maxWait)}
		case <-ctx.Done():
			inLine = false
			waited := q.leave(w).Sub(begin)
			q.cancelled.Add(1)
			qs.onWait(q.id, waited, WaitClientClosed)
			return Slot{}, &QueueError{Code: CodeClientClosed, Status: StatusClientClosed, ConnectionID: q.id,
				Elapsed: waited, Err: ctx.Err()}
		}
		// Woken (by a release, a departure, the previous head's start or the pacing timer):
		// spurious wake-ups are harmless, the head simply looks again.
		q.mu.Lock()
		now := qs.clock.Now()
		started, delay = q.tryStartLocked(w, now)
		if !started {
			setPace(delay)
		}
		q.mu.Unlock()
		if started {
			inLine = false
			qs.onWait(q.id, now.Sub(begin), WaitStarted)
			return qs.slot(q, exec), nil
		}
	}
}

// tryStartLocked starts w if it heads the line, an execution slot is free and its pacing time
// has come. Otherwise it returns how long the pacing still holds the head back (0 when w is not
// the head or waits for a slot: a wake-up will come).
func (q *connQueue) tryStartLocked(w *queueWaiter, now time.Time) (started bool, delay time.Duration) {
	if q.line.Front() != w.elem {
		return false, 0
	}
	if m := q.limits.maxExec; m > 0 && q.executing.Load() >= int64(m) {
		return false, 0
	}
	if g := q.limits.minGap; g > 0 && !q.lastStart.IsZero() {
		delay = q.lastStart.Add(g).Sub(now)
	}
	if q.lim != nil {
		// The head reserves its token once and keeps it while it waits (nobody else may start
		// before it anyway); leaving the line gives it back.
		if w.res == nil {
			w.res = q.lim.ReserveN(now, 1)
		}
		delay = max(delay, w.res.DelayFrom(now))
	}
	if delay > 0 {
		return false, delay
	}
	q.line.Remove(w.elem)
	q.waiting.Add(-1)
	w.res = nil
	q.executing.Add(1)
	q.lastStart = now
	q.wakeHeadLocked() // the next request may be able to start as well
	return true, 0
}

// leave takes w out of the line after a timeout or cancel and returns the time it left.
func (q *connQueue) leave(w *queueWaiter) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.qs.clock.Now()
	wasHead := q.line.Front() == w.elem
	q.line.Remove(w.elem)
	q.waiting.Add(-1)
	if w.res != nil {
		w.res.CancelAt(now)
		w.res = nil
	}
	if wasHead {
		q.wakeHeadLocked()
	}
	return now
}

// wakeHeadLocked tells the head of the line to look again.
func (q *connQueue) wakeHeadLocked() {
	if e := q.line.Front(); e != nil {
		select {
		case e.Value.(*queueWaiter).wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// applyLocked installs the limits of the latest request; an operator's edit takes effect for
// the whole line at once.
func (q *connQueue) applyLocked(l queueLimits, now time.Time) {
	if l == q.limits {
		return
	}
	if e := q.line.Front(); e != nil {
		if w := e.Value.(*queueWaiter); w.res != nil {
			w.res.CancelAt(now)
			w.res = nil
		}
	}
	switch {
	case l.rpm <= 0:
		q.lim = nil
	case q.lim == nil:
		q.lim = rate.NewLimiter(perMinute(l.rpm), l.rpm)
	default:
		q.lim.SetLimitAt(now, perMinute(l.rpm))
		q.lim.SetBurstAt(now, l.rpm)
	}
	q.limits = l
	q.wakeHeadLocked()
}

// release gives an execution slot back. The decrement comes before the check of the line and
// a waiter joins the line before it checks executing, so one of them always sees the other.
func (q *connQueue) release() {
	q.executing.Add(-1)
	if q.waiting.Load() > 0 {
		q.mu.Lock()
		q.wakeHeadLocked()
		q.mu.Unlock()
	}
}

// limitsOf extracts the enforced limits; negative values mean none.
func limitsOf(c QueueConfig) queueLimits {
	return queueLimits{rpm: max(c.RPM, 0), minGap: max(c.MinGap, 0), maxExec: max(c.MaxConcurrentExecutions, 0)}
}

// perMinute is the token rate of an RPM limit. The bucket holds one minute's budget (burst =
// RPM, like the reference's per-minute reservoir); MinGap is the knob for spacing the starts.
func perMinute(rpm int) rate.Limit { return rate.Limit(float64(rpm) / 60) }

// clampQueueTime applies the default to 0 and clamps to 1 ms–24 h.
func clampQueueTime(d, def time.Duration) time.Duration {
	if d == 0 {
		d = def
	}
	return min(max(d, minQueueTime), maxQueueTime)
}

// retryAfterFor suggests a Retry-After for a 429 from a queue: the queue stayed busy for the
// whole wait budget, so retrying sooner would likely queue again; capped at a minute, in whole
// seconds, at least 1 s.
func retryAfterFor(maxWait time.Duration) time.Duration {
	d := min(maxWait, time.Minute)
	return max(((d+time.Second-1)/time.Second)*time.Second, time.Second)
}

// Stats returns the counters of one connection (zero when it never had a request).
func (qs *Queues) Stats(connID int64) QueueStats {
	return statsOf(&qs.table, connID, (*connQueue).stats)
}

// AllStats returns the counters of every connection that had a request.
func (qs *Queues) AllStats() map[int64]QueueStats {
	return allStats(&qs.table, (*connQueue).stats)
}

// stats reads the line under the lock: a request seen waiting has its timers set up.
func (q *connQueue) stats() QueueStats {
	q.mu.Lock()
	waiting := q.line.Len()
	q.mu.Unlock()
	return QueueStats{Executing: int(q.executing.Load()), Waiting: waiting,
		Rejected: q.rejected.Load(), TimedOut: q.timedOut.Load(), Cancelled: q.cancelled.Load()}
}

// Forget drops the queue of a deleted connection; requests still holding or waiting on it
// finish on the old queue.
func (qs *Queues) Forget(connID int64) { qs.table.forget(connID) }

// slotState backs a Slot. It is pooled; the generation makes a stale copy of a Slot harmless
// after the state was reused.
type slotState struct {
	gen atomic.Uint64
	q   *connQueue
}

func (qs *Queues) slot(q *connQueue, exec time.Duration) Slot {
	st := qs.slots.Get().(*slotState)
	st.q = q
	return Slot{st: st, gen: st.gen.Load(), exec: exec}
}

// Slot is a granted execution slot. It is a small value: copies share it, and Release on any
// copy releases it once. The zero Slot holds nothing.
type Slot struct {
	st   *slotState
	gen  uint64
	exec time.Duration
}

// Release gives the slot back; only the first call on any copy counts, so it is safe from
// defer, panics and finalisers that may run twice.
func (s Slot) Release() {
	st := s.st
	if st == nil || !st.gen.CompareAndSwap(s.gen, s.gen+1) {
		return
	}
	q := st.q
	st.q = nil
	q.qs.slots.Put(st)
	q.release()
}

// ExecutionDeadline is the execution backstop: ExecutionMaxWait, raised to the executor's own
// callTimeout when that is longer, so a healthy long call is never cut. The engine applies it
// as a deadline and answers CodeExecutionTimeout (504) when it passes.
func (s Slot) ExecutionDeadline(callTimeout time.Duration) time.Duration {
	return max(s.exec, callTimeout)
}
