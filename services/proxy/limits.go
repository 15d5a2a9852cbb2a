package proxy

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// attemptLimits holds an attempt's two time limits on one timer: the backstop (the attempt's
// execution timeout, until its answer starts to go to the client) and, while an upstream call
// waits for its response headers, the first-byte timeout. Either ends the attempt's context;
// which one did is read afterwards. One timer where there were two, each with its closure and
// flag: an attempt is made on every request.
type attemptLimits struct {
	clock  clockwork.Clock
	cancel context.CancelFunc
	timer  clockwork.Timer
	// end is the backstop (zero: none). Set before the timer is armed, only read after.
	end time.Time
	// headersBy is when the awaited response headers are due (UnixNano); 0 while none are.
	headersBy atomic.Int64
	// fired is the limit that ended the attempt: 0 while none did.
	fired atomic.Int32
}

const (
	limitFirstByte int32 = 1 + iota
	limitBackstop
)

// newAttemptLimits arms the backstop, deadline after began (none when deadline is 0).
func newAttemptLimits(clock clockwork.Clock, cancel context.CancelFunc, began time.Time, deadline time.Duration) *attemptLimits {
	l := &attemptLimits{clock: clock, cancel: cancel}
	if deadline > 0 {
		l.end = began.Add(deadline)
		l.timer = clock.AfterFunc(deadline, l.fire)
	}
	return l
}

// fire runs when the timer goes off: the limit due by now ends the attempt. A timer armed for
// headers that have come since is armed anew for what is left.
func (l *attemptLimits) fire() {
	now := l.clock.Now()
	switch by := l.headersBy.Load(); {
	case !l.end.IsZero() && !now.Before(l.end):
		l.fired.CompareAndSwap(0, limitBackstop)
	case by != 0 && now.UnixNano() >= by:
		l.fired.CompareAndSwap(0, limitFirstByte)
	default:
		l.arm(now)
		return
	}
	l.cancel()
}

// arm sets the timer for the nearest limit left after now; it stops it when none is.
func (l *attemptLimits) arm(now time.Time) {
	next := l.end
	if by := l.headersBy.Load(); by != 0 {
		if t := time.Unix(0, by); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	switch {
	case next.IsZero():
		if l.timer != nil {
			l.timer.Stop()
		}
	case l.timer == nil:
		l.timer = l.clock.AfterFunc(next.Sub(now), l.fire)
	default:
		l.timer.Reset(next.Sub(now))
	}
}

// awaitHeaders starts the first-byte limit: response headers are due within d.
func (l *attemptLimits) awaitHeaders(d time.Duration) {
	now := l.clock.Now()
	l.headersBy.Store(now.Add(d).UnixNano())
	l.arm(now)
}

// gotHeaders ends the first-byte limit (the call answered, or failed); the backstop stays.
func (l *attemptLimits) gotHeaders() {
	l.headersBy.Store(0)
	if l.end.IsZero() {
		if l.timer != nil {
			l.timer.Stop()
		}
		return
	}
	l.arm(l.clock.Now())
}

// stop ends both limits: the attempt is over, or its answer goes to the client.
func (l *attemptLimits) stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

// firstByteLate and timedOut tell which limit ended the attempt.
func (l *attemptLimits) firstByteLate() bool { return l.fired.Load() == limitFirstByte }
func (l *attemptLimits) timedOut() bool      { return l.fired.Load() == limitBackstop }
