package resilience

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"switchyard/services/servicetest"
)

// qResult is what an Acquire in a goroutine returned.
type qResult struct {
	slot Slot
	err  *QueueError
}

// qAsync runs Acquire in a goroutine and hands its qResult over.
func qAsync(ctx context.Context, qs *Queues, id int64, cfg QueueConfig, hooks AcquireHooks) <-chan qResult {
	ch := make(chan qResult, 1)
	go func() {
		s, err := qs.Acquire(ctx, id, cfg, hooks)
		ch <- qResult{s, err}
	}()
	return ch
}

// qRecv takes a qResult, failing instead of hanging when none comes.
func qRecv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no result")
		panic("unreachable")
	}
}

// qAcq takes a slot that must be granted without waiting for a clock advance.
func qAcq(t *testing.T, qs *Queues, id int64, cfg QueueConfig) Slot {
	t.Helper()
	return qAcqHooks(t, qs, id, cfg, AcquireHooks{})
}

func qAcqHooks(t *testing.T, qs *Queues, id int64, cfg QueueConfig, hooks AcquireHooks) Slot {
	t.Helper()
	s, err := qs.Acquire(t.Context(), id, cfg, hooks)
	return qMust(t, s, err)
}

// qTake receives a qResult that must be a slot.
func qTake(t *testing.T, ch <-chan qResult) Slot {
	t.Helper()
	r := qRecv(t, ch)
	return qMust(t, r.slot, r.err)
}

func qMust(t *testing.T, s Slot, err *QueueError) Slot {
	t.Helper()
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return s
}

var qOneAtATime = QueueConfig{MaxWait: time.Minute, MaxConcurrentExecutions: 1}

func TestAdmit(t *testing.T) {
	cases := []struct {
		name              string
		waiting, maxDepth int
		want              Decision
	}{
		{"unbounded empty", 0, 0, Decision{Admit: true}},
		{"unbounded busy", 100_000, 0, Decision{Admit: true}},
		{"negative depth is unbounded", 5, -1, Decision{Admit: true}},
		{"below cap", 1, 2, Decision{Admit: true}},
		{"at cap", 2, 2, Decision{Code: CodeQueueFull}},
		{"over cap", 3, 2, Decision{Code: CodeQueueFull}},
		{"cap one, empty", 0, 1, Decision{Admit: true}},
		{"cap one, one waiting", 1, 1, Decision{Code: CodeQueueFull}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Admit(c.waiting, c.maxDepth); got != c.want {
				t.Fatalf("Admit(%d, %d) = %+v, want %+v", c.waiting, c.maxDepth, got, c.want)
			}
		})
	}
}

func TestQueueUnlimitedCountsExecutions(t *testing.T) {
	qs := NewQueues(clockwork.NewFakeClock(), nil)
	var slots []Slot
	for range 5 {
		slots = append(slots, qAcq(t, qs, 7, QueueConfig{MaxDepth: 1}))
	}
	if got := qs.Stats(7); got.Executing != 5 || got.Waiting != 0 {
		t.Fatalf("stats = %+v, want 5 executing", got)
	}
	for _, s := range slots {
		s.Release()
	}
	if got := qs.Stats(7); got.Executing != 0 {
		t.Fatalf("executing = %d after release, want 0", got.Executing)
	}
}

func TestQueueFIFO(t *testing.T) {
	qs := NewQueues(clockwork.NewFakeClock(), nil)
	holder := qAcq(t, qs, 1, qOneAtATime)
	checkArrivalOrder(t, "start", func(i int) (func(), bool) {
		s, err := qs.Acquire(t.Context(), 1, qOneAtATime, AcquireHooks{})
		if err != nil {
			t.Errorf("waiter %d: %v", i, err)
			return nil, false
		}
		return s.Release, true
	}, func(i int) {
		servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == i+1 })
	}, holder.Release)
	if st := qs.Stats(1); st.Executing != 0 || st.Waiting != 0 {
		t.Fatalf("stats = %+v, want all zero", st)
	}
}

// checkArrivalOrder starts ten waiters one after another behind a holder (acquire takes a
// place, reporting its own failure; inLine(i) returns once the i-th waiter is in line), frees
// the holder and checks that they got their places in the order they arrived.
func checkArrivalOrder(t *testing.T, what string, acquire func(i int) (release func(), ok bool), inLine func(i int), free func()) {
	t.Helper()
	const n = 10
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, ok := acquire(i)
			if !ok {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			release()
		}()
		inLine(i)
	}
	free()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("%s order = %v, want arrival order", what, order)
		}
	}
}

func TestQueueNeverExceedsMaxExecutions(t *testing.T) {
	for _, limit := range []int{1, 3} {
		qs := NewQueues(clockwork.NewFakeClock(), nil)
		cfg := QueueConfig{MaxWait: time.Hour, MaxConcurrentExecutions: limit}
		var cur, peak atomic.Int64
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := qs.Acquire(t.Context(), 1, cfg, AcquireHooks{})
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				defer s.Release()
				n := cur.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				runtime.Gosched()
				cur.Add(-1)
			}()
		}
		wg.Wait()
		if p := peak.Load(); p > int64(limit) || p < 1 {
			t.Fatalf("limit %d: peak concurrency %d", limit, p)
		}
	}
}

func TestQueueDepthRejectsAtOnce(t *testing.T) {
	var outcomes []string
	var mu sync.Mutex
	qs := NewQueues(clockwork.NewFakeClock(), func(_ int64, _ time.Duration, outcome string) {
		mu.Lock()
		outcomes = append(outcomes, outcome)
		mu.Unlock()
	})
	cfg := qOneAtATime
	cfg.MaxDepth = 2
	holder := qAcq(t, qs, 1, cfg)
	a := qAsync(t.Context(), qs, 1, cfg, AcquireHooks{})
	servicetest.WaitUntil(t, "one waits", func() bool { return qs.Stats(1).Waiting == 1 })
	b := qAsync(t.Context(), qs, 1, cfg, AcquireHooks{})
	servicetest.WaitUntil(t, "two wait", func() bool { return qs.Stats(1).Waiting == 2 })

	s, err := qs.Acquire(t.Context(), 1, cfg, AcquireHooks{}) // returns without any clock advance
	if err == nil || err.Code != CodeQueueFull || err.Status != 429 || err.RetryAfter != time.Minute {
		t.Fatalf("third waiter: err = %+v, want %s / 429 / 1m", err, CodeQueueFull)
	}
	if s != (Slot{}) {
		t.Fatal("a rejected request holds a slot")
	}
	if st := qs.Stats(1); st.Rejected != 1 || st.Waiting != 2 || st.Executing != 1 {
		t.Fatalf("stats = %+v", st)
	}

	holder.Release()
	qTake(t, a).Release()
	qTake(t, b).Release()
	mu.Lock()
	defer mu.Unlock()
	want := []string{WaitStarted, WaitQueueFull, WaitStarted, WaitStarted}
	if len(outcomes) != len(want) {
		t.Fatalf("outcomes = %v, want %v", outcomes, want)
	}
	for i := range want {
		if outcomes[i] != want[i] {
			t.Fatalf("outcomes = %v, want %v", outcomes, want)
		}
	}
}

func TestQueueMaxWaitTimesOut(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var waited time.Duration
	qs := NewQueues(clock, func(_ int64, d time.Duration, outcome string) {
		if outcome == WaitTimeout {
			waited = d
		}
	})
	cfg := QueueConfig{MaxWait: 5 * time.Second, MaxConcurrentExecutions: 1}
	holder := qAcq(t, qs, 1, cfg)
	defer holder.Release()
	ch := qAsync(t.Context(), qs, 1, cfg, AcquireHooks{})
	servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == 1 })

	clock.Advance(5 * time.Second)
	r := qRecv(t, ch)
	if r.err == nil || r.err.Code != CodeQueueTimeout || r.err.Status != 429 {
		t.Fatalf("err = %+v, want %s", r.err, CodeQueueTimeout)
	}
	if r.err.RetryAfter != 5*time.Second || r.err.Elapsed != 5*time.Second || waited != 5*time.Second {
		t.Fatalf("retry after %s, elapsed %s, observed %s; want 5s each", r.err.RetryAfter, r.err.Elapsed, waited)
	}
	if r.slot != (Slot{}) {
		t.Fatal("a timed-out waiter holds a slot")
	}
	r.slot.Release() // harmless on the zero slot
	if st := qs.Stats(1); st.Executing != 1 || st.Waiting != 0 || st.TimedOut != 1 {
		t.Fatalf("stats = %+v, want only the holder executing", st)
	}
}

func TestQueueCancelLeavesLine(t *testing.T) {
	qs := NewQueues(clockwork.NewFakeClock(), nil)
	holder := qAcq(t, qs, 1, qOneAtATime)
	ctx, cancel := context.WithCancel(t.Context())
	first := qAsync(ctx, qs, 1, qOneAtATime, AcquireHooks{})
	servicetest.WaitUntil(t, "first in line", func() bool { return qs.Stats(1).Waiting == 1 })
	second := qAsync(t.Context(), qs, 1, qOneAtATime, AcquireHooks{})
	servicetest.WaitUntil(t, "second in line", func() bool { return qs.Stats(1).Waiting == 2 })

	cancel()
	r := qRecv(t, first)
	if r.err == nil || r.err.Code != CodeClientClosed || r.err.Status != StatusClientClosed || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %+v, want client_closed wrapping context.Canceled", r.err)
	}
	if st := qs.Stats(1); st.Waiting != 1 || st.Cancelled != 1 {
		t.Fatalf("stats = %+v, want one left waiting", st)
	}
	holder.Release()
	s := qTake(t, second)
	if st := qs.Stats(1); st.Waiting != 0 || st.Executing != 1 {
		t.Fatalf("stats = %+v, want the second executing", st)
	}
	s.Release()
}

func TestQueueCancelledBeforeAcquire(t *testing.T) {
	qs := NewQueues(clockwork.NewFakeClock(), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := qs.Acquire(ctx, 1, qOneAtATime, AcquireHooks{})
	if err == nil || err.Code != CodeClientClosed {
		t.Fatalf("err = %v, want client_closed", err)
	}
}

func TestQueueAcquireCancelCyclesLeaveNothingBehind(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clock := clockwork.NewFakeClock()
	qs := NewQueues(clock, nil)
	cfg := QueueConfig{MaxWait: time.Minute, MaxConcurrentExecutions: 1, MinGap: time.Millisecond}
	holder := qAcq(t, qs, 1, cfg)
	for i := range 1000 {
		ctx, cancel := context.WithCancel(t.Context())
		ch := qAsync(ctx, qs, 1, cfg, AcquireHooks{Heartbeat: func() {}})
		servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == 1 })
		cancel()
		if r := qRecv(t, ch); r.err == nil || r.err.Code != CodeClientClosed {
			t.Fatalf("cycle %d: err = %v", i, r.err)
		}
	}
	holder.Release()
	st := qs.Stats(1)
	if st.Executing != 0 || st.Waiting != 0 || st.Cancelled != 1000 {
		t.Fatalf("stats = %+v, want nothing executing or waiting and 1000 cancelled", st)
	}
}

func TestSlotReleaseIdempotent(t *testing.T) {
	for _, cfg := range []QueueConfig{{}, qOneAtATime} {
		qs := NewQueues(clockwork.NewFakeClock(), nil)
		s := qAcq(t, qs, 1, cfg)
		dup := s
		s.Release()
		s.Release()
		dup.Release()
		if st := qs.Stats(1); st.Executing != 0 {
			t.Fatalf("limited=%v: executing = %d after repeated release, want 0", cfg.limited(), st.Executing)
		}
		// A stale copy must not release a later slot, even one that reuses its state.
		next := qAcq(t, qs, 1, cfg)
		dup.Release()
		if st := qs.Stats(1); st.Executing != 1 {
			t.Fatalf("limited=%v: a stale copy released someone else's slot", cfg.limited())
		}
		func() {
			defer next.Release()
			defer func() { _ = recover() }()
			defer next.Release()
			panic("handler failed")
		}()
		if st := qs.Stats(1); st.Executing != 0 {
			t.Fatalf("limited=%v: executing = %d after release in panic, want 0", cfg.limited(), st.Executing)
		}
	}
	var zero Slot
	zero.Release()
}

func TestQueueHeartbeatWhileWaiting(t *testing.T) {
	for _, every := range []time.Duration{0, 5 * time.Second} {
		clock := clockwork.NewFakeClock()
		qs := NewQueues(clock, nil)
		beats := make(chan struct{}, 100)
		hooks := AcquireHooks{Heartbeat: func() { beats <- struct{}{} }, HeartbeatEvery: every}
		interval := every
		if interval == 0 {
			interval = DefaultHeartbeatEvery
		}
		cfg := QueueConfig{MaxWait: time.Hour, MaxConcurrentExecutions: 1}
		holder := qAcqHooks(t, qs, 1, cfg, hooks)
		if len(beats) != 0 {
			t.Fatal("heartbeat without waiting")
		}
		ch := qAsync(t.Context(), qs, 1, cfg, hooks)
		servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == 1 })
		for i := range 3 {
			clock.Advance(interval - time.Millisecond)
			if len(beats) != 0 {
				t.Fatalf("every %s: heartbeat %d came early", interval, i)
			}
			clock.Advance(time.Millisecond)
			qRecv(t, beats)
		}
		holder.Release()
		s := qTake(t, ch)
		clock.Advance(3 * interval) // the ticker stopped when the wait ended
		if len(beats) != 0 {
			t.Fatalf("every %s: heartbeat after the wait ended", interval)
		}
		s.Release()
	}
}

func TestQueuePacing(t *testing.T) {
	cases := []struct {
		name      string
		cfg       QueueConfig
		immediate int           // starts that need no wait
		gap       time.Duration // wait of the next start after those
	}{
		{"rpm bucket holds a minute's budget", QueueConfig{RPM: 2}, 2, 30 * time.Second},
		{"min gap", QueueConfig{MinGap: 350 * time.Millisecond}, 1, 350 * time.Millisecond},
		{"min gap spaces the rpm burst", QueueConfig{RPM: 60, MinGap: 2 * time.Second}, 1, 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			qs := NewQueues(clock, nil)
			c.cfg.MaxWait = time.Hour
			for range c.immediate {
				qAcq(t, qs, 1, c.cfg).Release()
			}
			ch := qAsync(t.Context(), qs, 1, c.cfg, AcquireHooks{})
			servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == 1 })
			clock.Advance(c.gap - time.Millisecond)
			if st := qs.Stats(1); st.Executing != 0 || st.Waiting != 1 {
				t.Fatalf("started before its pacing time: %+v", st)
			}
			clock.Advance(time.Millisecond + time.Microsecond) // float rounding in the token bucket
			qTake(t, ch).Release()
		})
	}
}

func TestQueueRPMSustainedRate(t *testing.T) {
	clock := clockwork.NewFakeClock()
	qs := NewQueues(clock, nil)
	cfg := QueueConfig{MaxWait: time.Hour, RPM: 6}
	for range 6 { // the first minute's budget at once
		qAcq(t, qs, 1, cfg).Release()
	}
	for i := range 3 { // then one every 10 s, in order
		ch := qAsync(t.Context(), qs, 1, cfg, AcquireHooks{})
		servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == 1 })
		clock.Advance(10*time.Second + time.Microsecond)
		if r := qRecv(t, ch); r.err != nil {
			t.Fatalf("start %d: %v", i, r.err)
		} else {
			r.slot.Release()
		}
	}
}

func TestQueuePacingTimeoutReturnsToken(t *testing.T) {
	clock := clockwork.NewFakeClock()
	qs := NewQueues(clock, nil)
	cfg := QueueConfig{MaxWait: 10 * time.Second, RPM: 1}
	qAcq(t, qs, 1, cfg).Release()
	ch := qAsync(t.Context(), qs, 1, cfg, AcquireHooks{})
	servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == 1 })
	clock.Advance(10 * time.Second)
	if r := qRecv(t, ch); r.err == nil || r.err.Code != CodeQueueTimeout {
		t.Fatalf("err = %v, want timeout", r.err)
	}
	// The timed-out waiter's reserved token went back: the next token is due 60 s after the
	// first start, not 120 s.
	clock.Advance(50*time.Second + time.Microsecond)
	s, err := qs.Acquire(t.Context(), 1, cfg, AcquireHooks{})
	if err != nil || qs.Stats(1).Executing != 1 {
		t.Fatalf("after a minute: err = %v, stats %+v, want an immediate start", err, qs.Stats(1))
	}
	s.Release()
}

func TestQueueRemovingLimitsReleasesLine(t *testing.T) {
	qs := NewQueues(clockwork.NewFakeClock(), nil)
	holder := qAcq(t, qs, 1, qOneAtATime)
	defer holder.Release()
	waiter := qAsync(t.Context(), qs, 1, qOneAtATime, AcquireHooks{})
	servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == 1 })

	// The operator removes the cap: the next request applies it, the waiter goes first.
	s := qAcq(t, qs, 1, QueueConfig{})
	defer s.Release()
	qTake(t, waiter).Release()
	if st := qs.Stats(1); st.Waiting != 0 || st.Executing != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestQueueRaisingCapLetsWaitersIn(t *testing.T) {
	qs := NewQueues(clockwork.NewFakeClock(), nil)
	holder := qAcq(t, qs, 1, qOneAtATime)
	defer holder.Release()
	a := qAsync(t.Context(), qs, 1, qOneAtATime, AcquireHooks{})
	servicetest.WaitUntil(t, "in line", func() bool { return qs.Stats(1).Waiting == 1 })
	three := QueueConfig{MaxWait: time.Minute, MaxConcurrentExecutions: 3}
	b := qAcq(t, qs, 1, three)
	defer b.Release()
	defer qTake(t, a).Release()
	if st := qs.Stats(1); st.Executing != 3 || st.Waiting != 0 {
		t.Fatalf("stats = %+v, want 3 executing", st)
	}
}

func TestExecutionDeadline(t *testing.T) {
	cases := []struct {
		name        string
		exec        time.Duration
		callTimeout time.Duration
		want        time.Duration
	}{
		{"default", 0, 0, DefaultExecutionMaxWait},
		{"backstop longer than the call", 10 * time.Minute, 2 * time.Minute, 10 * time.Minute},
		{"raised to a longer call timeout", 5 * time.Minute, 15 * time.Minute, 15 * time.Minute},
		{"clamped up to 1 ms", -time.Second, 0, time.Millisecond},
		{"clamped down to 24 h", 48 * time.Hour, 0, 24 * time.Hour},
		{"a call timeout beyond 24 h still wins", 48 * time.Hour, 30 * time.Hour, 30 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, cfg := range []QueueConfig{{ExecutionMaxWait: c.exec}, {ExecutionMaxWait: c.exec, MaxConcurrentExecutions: 1}} {
				qs := NewQueues(clockwork.NewFakeClock(), nil)
				s := qAcq(t, qs, 1, cfg)
				if got := s.ExecutionDeadline(c.callTimeout); got != c.want {
					t.Fatalf("ExecutionDeadline(%s) = %s, want %s", c.callTimeout, got, c.want)
				}
				s.Release()
			}
		})
	}
}

func TestClampQueueTime(t *testing.T) {
	cases := []struct {
		name    string
		in, def time.Duration
		want    time.Duration
	}{
		{"zero takes the default", 0, 30 * time.Second, 30 * time.Second},
		{"below 1 ms", time.Microsecond, time.Second, time.Millisecond},
		{"negative", -time.Hour, time.Second, time.Millisecond},
		{"in range", 5 * time.Second, time.Second, 5 * time.Second},
		{"above 24 h", 25 * time.Hour, time.Second, 24 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := clampQueueTime(c.in, c.def); got != c.want {
				t.Fatalf("clampQueueTime(%s) = %s, want %s", c.in, got, c.want)
			}
		})
	}
}

func TestQueueAllStatsAndForget(t *testing.T) {
	qs := NewQueues(clockwork.NewFakeClock(), nil)
	a := qAcq(t, qs, 1, QueueConfig{})
	b := qAcq(t, qs, 2, qOneAtATime)
	all := qs.AllStats()
	if len(all) != 2 || all[1].Executing != 1 || all[2].Executing != 1 {
		t.Fatalf("AllStats = %+v", all)
	}
	qs.Forget(2)
	b.Release() // releases into the forgotten queue without trouble
	a.Release()
	if all := qs.AllStats(); len(all) != 1 || all[1].Executing != 0 {
		t.Fatalf("AllStats after Forget = %+v", all)
	}
	if st := qs.Stats(99); st != (QueueStats{}) {
		t.Fatalf("unknown connection stats = %+v", st)
	}
}

func TestQueueErrorText(t *testing.T) {
	err := &QueueError{Code: CodeExecutionTimeout, Status: 504, ConnectionID: 4, Elapsed: 10 * time.Minute}
	if err.Code != CodeExecutionTimeout || err.Status != 504 {
		t.Fatalf("err = %+v", err)
	}
	if got, want := err.Error(), "request queue: RATE_LIMIT_EXECUTION_TIMEOUT on connection 4 after 10m0s"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func BenchmarkAcquireUnlimited(b *testing.B) {
	qs := NewQueues(clockwork.NewRealClock(), nil)
	cfg := QueueConfig{MaxWait: 30 * time.Second, ExecutionMaxWait: 10 * time.Minute}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, err := qs.Acquire(ctx, 1, cfg, AcquireHooks{})
			if err != nil {
				b.Fatal(err)
			}
			s.Release()
		}
	})
}

func TestQueueHeartbeatPanicLeavesLine(t *testing.T) {
	clock := clockwork.NewFakeClock()
	qs := NewQueues(clock, nil)
	holder := qAcq(t, qs, 1, qOneAtATime)
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		qs.Acquire(t.Context(), 1, qOneAtATime, AcquireHooks{Heartbeat: func() { panic("write failed") }})
	}()
	servicetest.WaitUntil(t, "the waiter is in line", func() bool { return qs.Stats(1).Waiting == 1 })
	next := qAsync(t.Context(), qs, 1, qOneAtATime, AcquireHooks{})
	servicetest.WaitUntil(t, "two in line", func() bool { return qs.Stats(1).Waiting == 2 })
	clock.Advance(DefaultHeartbeatEvery)
	if p := qRecv(t, panicked); p == nil {
		t.Fatal("the heartbeat's panic was swallowed")
	}
	if st := qs.Stats(1); st.Waiting != 1 {
		t.Fatalf("stats = %+v, want the panicked waiter gone", st)
	}
	holder.Release()
	qTake(t, next).Release()
}
