package proxy

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// limitsHarness is an attempt's limits on a fake clock, counting the cancels. The fake clock
// runs a timer's function on a goroutine of its own: fired waits for the cancel it makes. Where
// a limit must not go off, its timer does not expire, so no function runs at all.
func limitsHarness(backstop time.Duration) (*clockwork.FakeClock, *attemptLimits, *atomic.Int32) {
	clk := clockwork.NewFakeClock()
	var cancels atomic.Int32
	return clk, newAttemptLimits(clk, func() { cancels.Add(1) }, clk.Now(), backstop), &cancels
}

// fired waits until the limits have cancelled n times in all (a bound for a test that fails).
func fired(t *testing.T, cancels *atomic.Int32, n int32) {
	t.Helper()
	for bound := time.Now().Add(5 * time.Second); cancels.Load() < n; {
		if time.Now().After(bound) {
			t.Fatalf("cancelled %d times, want %d", cancels.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAttemptLimitsBackstop(t *testing.T) {
	clk, l, cancels := limitsHarness(10 * time.Second)
	clk.Advance(9 * time.Second)
	if cancels.Load() != 0 || l.timedOut() {
		t.Fatal("the backstop went off before its time")
	}
	clk.Advance(time.Second)
	fired(t, cancels, 1)
	if cancels.Load() != 1 || !l.timedOut() || l.firstByteLate() {
		t.Fatalf("backstop: cancels %d, timed out %v, first byte %v", cancels.Load(), l.timedOut(), l.firstByteLate())
	}
}

func TestAttemptLimitsFirstByte(t *testing.T) {
	clk, l, cancels := limitsHarness(10 * time.Second)
	l.awaitHeaders(2 * time.Second)
	clk.Advance(1999 * time.Millisecond)
	if cancels.Load() != 0 {
		t.Fatal("the first-byte limit went off before its time")
	}
	clk.Advance(time.Millisecond)
	fired(t, cancels, 1)
	if cancels.Load() != 1 || !l.firstByteLate() || l.timedOut() {
		t.Fatalf("first byte: cancels %d, first byte %v, timed out %v", cancels.Load(), l.firstByteLate(), l.timedOut())
	}
}

// Headers that come in time end the first-byte limit; the backstop still holds, once.
func TestAttemptLimitsHeadersInTimeLeaveTheBackstop(t *testing.T) {
	clk, l, cancels := limitsHarness(10 * time.Second)
	l.awaitHeaders(2 * time.Second)
	clk.Advance(time.Second)
	l.gotHeaders()
	clk.Advance(5 * time.Second) // past the first-byte limit
	if cancels.Load() != 0 || l.firstByteLate() {
		t.Fatal("the first-byte limit went off after the headers came")
	}
	// A second call of the same attempt (an account's retry) waits for headers again.
	l.awaitHeaders(2 * time.Second)
	l.gotHeaders()
	clk.Advance(4 * time.Second)
	fired(t, cancels, 1)
	if cancels.Load() != 1 || !l.timedOut() {
		t.Fatalf("backstop after the headers: cancels %d, timed out %v", cancels.Load(), l.timedOut())
	}
	if err := clk.BlockUntilContext(t.Context(), 0); err != nil { // the timer is not armed again
		t.Fatal(err)
	}
}

// A backstop nearer than the first-byte limit is the one that ends the wait.
func TestAttemptLimitsBackstopBeforeFirstByte(t *testing.T) {
	clk, l, cancels := limitsHarness(2 * time.Second)
	l.awaitHeaders(5 * time.Second)
	clk.Advance(2 * time.Second)
	fired(t, cancels, 1)
	if cancels.Load() != 1 || !l.timedOut() || l.firstByteLate() {
		t.Fatalf("cancels %d, timed out %v, first byte %v", cancels.Load(), l.timedOut(), l.firstByteLate())
	}
}

// Stopped limits never go off; without a backstop only the first-byte limit is kept.
func TestAttemptLimitsStopAndNoBackstop(t *testing.T) {
	clk, l, cancels := limitsHarness(3 * time.Second)
	l.stop()
	clk.Advance(time.Hour)
	if cancels.Load() != 0 {
		t.Fatal("stopped limits went off")
	}
	clk, l, cancels = limitsHarness(0)
	clk.Advance(time.Hour)
	if cancels.Load() != 0 {
		t.Fatal("no backstop, yet one went off")
	}
	l.awaitHeaders(time.Second)
	l.gotHeaders()
	clk.Advance(time.Hour)
	if cancels.Load() != 0 {
		t.Fatal("the first-byte limit went off after the headers came")
	}
	l.awaitHeaders(time.Second)
	clk.Advance(time.Second)
	fired(t, cancels, 1)
	if cancels.Load() != 1 || !l.firstByteLate() {
		t.Fatalf("first byte without a backstop: cancels %d", cancels.Load())
	}
}

// The transport the engine calls upstreams through sets no response header timeout of its own:
// first_byte_timeout_ms (up to an hour) is the bound, kept by the attempt's limits. Calls made
// through the client (sign-ins, usage polls, model lists) have the client's bound.
func TestTransportLeavesTheHeaderWaitToTheAttempt(t *testing.T) {
	if d := NewTransport().ResponseHeaderTimeout; d != 0 {
		t.Fatalf("the transport cuts a header wait at %v", d)
	}
	if c := NewClient(); c.Timeout != clientTimeout || c.Timeout <= 0 {
		t.Fatalf("the client's calls are bounded by %v", c.Timeout)
	}
}
