package resilience

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"switchyard/services/servicetest"
)

// semResult is what a Semaphores.Acquire in a goroutine returned.
type semResult struct {
	release  func()
	acquired bool
}

func semAsync(ctx context.Context, s *Semaphores, id int64, max int, wait time.Duration, line int) <-chan semResult {
	ch := make(chan semResult, 1)
	go func() {
		rel, ok := s.Acquire(ctx, id, max, wait, line)
		ch <- semResult{rel, ok}
	}()
	return ch
}

// semHold takes a slot that must be free.
func semHold(t *testing.T, s *Semaphores, id int64, max int) func() {
	t.Helper()
	rel, ok := s.Acquire(t.Context(), id, max, time.Minute, 0)
	if !ok {
		t.Fatal("a free slot was not acquired")
	}
	return rel
}

func semWaitFor(t *testing.T, s *Semaphores, id int64, waiting int) {
	t.Helper()
	servicetest.WaitUntil(t, "the line has its waiters", func() bool { return s.Stats(id).Waiting == waiting })
}

func TestSemaphoreUnlimitedIsFree(t *testing.T) {
	s := NewSemaphores(clockwork.NewFakeClock())
	for _, max := range []int{0, -1} {
		rel, ok := s.Acquire(t.Context(), 1, max, time.Second, 1)
		if !ok || rel == nil {
			t.Fatalf("max %d: acquired = %v", max, ok)
		}
		rel()
	}
	if got := s.AllStats(); len(got) != 0 {
		t.Fatalf("an unlimited connection left state: %+v", got)
	}
	allocs := testing.AllocsPerRun(100, func() {
		rel, _ := s.Acquire(context.Background(), 1, 0, time.Second, 0)
		rel()
	})
	if allocs != 0 {
		t.Fatalf("unlimited Acquire allocates %v times", allocs)
	}
}

func TestSemaphoreFIFO(t *testing.T) {
	s := NewSemaphores(clockwork.NewFakeClock())
	holder := semHold(t, s, 1, 1)
	checkArrivalOrder(t, "grant", func(i int) (func(), bool) {
		rel, ok := s.Acquire(t.Context(), 1, 1, time.Hour, 0)
		if !ok {
			t.Errorf("waiter %d failed open", i)
		}
		return rel, ok
	}, func(i int) { semWaitFor(t, s, 1, i+1) }, holder)
}

func TestSemaphoreNewcomerDoesNotOvertake(t *testing.T) {
	s := NewSemaphores(clockwork.NewFakeClock())
	holder := semHold(t, s, 1, 1)
	waiter := semAsync(t.Context(), s, 1, 1, time.Hour, 0)
	semWaitFor(t, s, 1, 1)
	holder() // the slot goes straight to the waiter
	newcomer := semAsync(t.Context(), s, 1, 1, time.Hour, 0)
	first := qRecv(t, waiter)
	if !first.acquired {
		t.Fatal("the waiter failed open")
	}
	semWaitFor(t, s, 1, 1) // the newcomer waits behind the waiter's slot
	first.release()
	if r := qRecv(t, newcomer); !r.acquired {
		t.Fatal("the newcomer failed open")
	} else {
		r.release()
	}
}

func TestSemaphoreMaxOneNeverExceeded(t *testing.T) {
	s := NewSemaphores(clockwork.NewFakeClock())
	var cur, peak atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, ok := s.Acquire(t.Context(), 1, 1, time.Hour, 0)
			if !ok {
				t.Error("failed open without a timeout or full line")
				return
			}
			defer rel()
			n := cur.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			cur.Add(-1)
		}()
	}
	wg.Wait()
	if p := peak.Load(); p != 1 {
		t.Fatalf("peak holders = %d, want 1", p)
	}
	if st := s.Stats(1); st.Holding != 0 || st.Waiting != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestSemaphoreFailOpen(t *testing.T) {
	t.Run("line full", func(t *testing.T) {
		s := NewSemaphores(clockwork.NewFakeClock())
		holder := semHold(t, s, 1, 1)
		waiter := semAsync(t.Context(), s, 1, 1, time.Hour, 1)
		semWaitFor(t, s, 1, 1)
		rel, ok := s.Acquire(t.Context(), 1, 1, time.Hour, 1) // no clock advance: returns at once
		if ok {
			t.Fatal("acquired with the line full")
		}
		rel() // the no-op release is safe to call
		if st := s.Stats(1); st.FailOpenFull != 1 || st.Holding != 1 || st.Waiting != 1 {
			t.Fatalf("stats = %+v", st)
		}
		holder()
		qRecv(t, waiter).release()
	})
	t.Run("timeout", func(t *testing.T) {
		clock := clockwork.NewFakeClock()
		s := NewSemaphores(clock)
		holder := semHold(t, s, 1, 1)
		defer holder()
		ch := semAsync(t.Context(), s, 1, 1, 2*time.Second, 0)
		semWaitFor(t, s, 1, 1)
		clock.Advance(2*time.Second - time.Millisecond)
		if st := s.Stats(1); st.Waiting != 1 {
			t.Fatalf("gave up early: %+v", st)
		}
		clock.Advance(time.Millisecond)
		r := qRecv(t, ch)
		if r.acquired {
			t.Fatal("acquired while the holder still holds")
		}
		r.release()
		if st := s.Stats(1); st.FailOpenTimeout != 1 || st.Holding != 1 || st.Waiting != 0 {
			t.Fatalf("stats = %+v", st)
		}
	})
}

func TestSemaphoreCancelLeavesLine(t *testing.T) {
	s := NewSemaphores(clockwork.NewFakeClock())
	holder := semHold(t, s, 1, 1)
	ctx, cancel := context.WithCancel(t.Context())
	first := semAsync(ctx, s, 1, 1, time.Hour, 0)
	semWaitFor(t, s, 1, 1)
	second := semAsync(t.Context(), s, 1, 1, time.Hour, 0)
	semWaitFor(t, s, 1, 2)

	cancel()
	if r := qRecv(t, first); r.acquired || ctx.Err() == nil {
		t.Fatal("a cancelled waiter acquired")
	}
	if st := s.Stats(1); st.Waiting != 1 || st.Cancelled != 1 {
		t.Fatalf("stats = %+v", st)
	}
	holder()
	r := qRecv(t, second)
	if !r.acquired {
		t.Fatal("the next waiter did not get the released slot")
	}
	r.release()
	if st := s.Stats(1); st.Holding != 0 || st.Waiting != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestSemaphoreReleaseIdempotent(t *testing.T) {
	s := NewSemaphores(clockwork.NewFakeClock())
	rel := semHold(t, s, 1, 2)
	other := semHold(t, s, 1, 2)
	defer other()
	waiter := semAsync(t.Context(), s, 1, 2, time.Hour, 0)
	semWaitFor(t, s, 1, 1)
	rel()
	rel()
	qRecv(t, waiter).release()
	rel()
	if st := s.Stats(1); st.Holding != 1 {
		t.Fatalf("holding = %d, want 1 (the other holder)", st.Holding)
	}
}

func TestSemaphoreMaxChange(t *testing.T) {
	t.Run("raise lets waiters in", func(t *testing.T) {
		s := NewSemaphores(clockwork.NewFakeClock())
		holder := semHold(t, s, 1, 1)
		defer holder()
		a := semAsync(t.Context(), s, 1, 1, time.Hour, 0)
		semWaitFor(t, s, 1, 1)
		b := semHold(t, s, 1, 3) // the operator raised max_concurrent to 3
		defer b()
		defer qRecv(t, a).release()
		if st := s.Stats(1); st.Holding != 3 || st.Max != 3 {
			t.Fatalf("stats = %+v", st)
		}
	})
	t.Run("lower keeps holders", func(t *testing.T) {
		s := NewSemaphores(clockwork.NewFakeClock())
		rels := []func(){semHold(t, s, 1, 3), semHold(t, s, 1, 3), semHold(t, s, 1, 3)}
		ch := semAsync(t.Context(), s, 1, 1, time.Hour, 0) // now max_concurrent is 1
		semWaitFor(t, s, 1, 1)
		rels[0]()
		rels[1]()
		if st := s.Stats(1); st.Holding != 1 || st.Waiting != 1 {
			t.Fatalf("with one holder left the newcomer must still wait: %+v", st)
		}
		rels[2]()
		qRecv(t, ch).release()
	})
	t.Run("removing the limit lets the line go", func(t *testing.T) {
		s := NewSemaphores(clockwork.NewFakeClock())
		holder := semHold(t, s, 1, 1)
		ch := semAsync(t.Context(), s, 1, 1, time.Hour, 0)
		semWaitFor(t, s, 1, 1)
		if _, ok := s.Acquire(t.Context(), 1, 0, time.Hour, 0); !ok {
			t.Fatal("unlimited acquire failed")
		}
		r := qRecv(t, ch)
		if !r.acquired {
			t.Fatal("the waiter failed open instead of being let go")
		}
		r.release()
		holder()
		if st := s.Stats(1); st.Holding != 0 {
			t.Fatalf("stats = %+v", st)
		}
	})
}

func TestSemaphoreAcquireCancelCyclesLeaveNothingBehind(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := NewSemaphores(clockwork.NewFakeClock())
	holder := semHold(t, s, 1, 1)
	for range 1000 {
		ctx, cancel := context.WithCancel(t.Context())
		ch := semAsync(ctx, s, 1, 1, time.Minute, 5)
		semWaitFor(t, s, 1, 1)
		cancel()
		if r := qRecv(t, ch); r.acquired {
			t.Fatal("a cancelled waiter acquired")
		}
	}
	holder()
	if st := s.Stats(1); st.Holding != 0 || st.Waiting != 0 || st.Cancelled != 1000 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestSemaphoreStats(t *testing.T) {
	s := NewSemaphores(clockwork.NewFakeClock())
	a := semHold(t, s, 1, 2)
	b := semHold(t, s, 2, 5)
	all := s.AllStats()
	if len(all) != 2 || all[1] != (SemaphoreStats{Max: 2, Holding: 1}) || all[2] != (SemaphoreStats{Max: 5, Holding: 1}) {
		t.Fatalf("AllStats = %+v", all)
	}
	s.Forget(2)
	b()
	a()
	if all := s.AllStats(); len(all) != 1 || all[1].Holding != 0 {
		t.Fatalf("AllStats = %+v", all)
	}
	if st := s.Stats(42); st != (SemaphoreStats{}) {
		t.Fatalf("unknown connection stats = %+v", st)
	}
}

// fakeShared is a SharedSlots store with a fixed answer.
type fakeShared struct {
	mu       sync.Mutex
	healthy  bool
	err      error // what Acquire and TryAcquire return
	held     int   // leases granted and not released
	calls    int
	waitTill chan struct{} // when set, Acquire waits for it (or ctx) first
}

func (f *fakeShared) Acquire(ctx context.Context, _ int64, _ int, _ time.Duration, _ int) (func(), error) {
	f.mu.Lock()
	f.calls++
	wait := f.waitTill
	f.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return noRelease, ctx.Err()
		}
	}
	return f.TryAcquire(ctx, 0, 0)
}

func (f *fakeShared) TryAcquire(context.Context, int64, int) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return noRelease, f.err
	}
	f.held++
	var once sync.Once
	return func() { once.Do(func() { f.mu.Lock(); f.held--; f.mu.Unlock() }) }, nil
}

func (f *fakeShared) Healthy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthy
}

func (f *fakeShared) state() (held, calls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held, f.calls
}

func TestSemaphoreLocalShare(t *testing.T) {
	tests := []struct {
		name             string
		live, max, share int
	}{
		{"three replicas share two slots", 3, 2, 1},
		{"two replicas share five", 2, 5, 3},
		{"one replica", 1, 4, 4},
		{"no live count yet", 0, 4, 4},
		{"more replicas than slots", 10, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSemaphoresWith(clockwork.NewFakeClock(), SemaphoreOptions{Live: func() int { return tt.live }})
			var rels []func()
			for range tt.share {
				rel, ok := s.TryAcquire(1, tt.max)
				if !ok {
					t.Fatalf("only %d of %d local slots", len(rels), tt.share)
				}
				rels = append(rels, rel)
			}
			if _, ok := s.TryAcquire(1, tt.max); ok {
				t.Fatalf("more than %d local slots", tt.share)
			}
			st := s.Stats(1)
			wantShare := tt.share
			if tt.share == tt.max {
				wantShare = 0
			}
			if st.Max != tt.max || st.Share != wantShare || st.Holding != tt.share {
				t.Fatalf("stats = %+v", st)
			}
			for _, rel := range rels {
				rel()
			}
		})
	}
}

func TestSemaphoreLiveCountChangesTheShare(t *testing.T) {
	live := 2
	s := NewSemaphoresWith(clockwork.NewFakeClock(), SemaphoreOptions{Live: func() int { return live }})
	a := semHold(t, s, 1, 2) // one of ceil(2 ÷ 2)
	waiter := semAsync(t.Context(), s, 1, 2, time.Hour, 0)
	semWaitFor(t, s, 1, 1)
	live = 1 // the other replica died: this one may use both slots
	if _, ok := s.TryAcquire(1, 2); ok {
		t.Fatal("the newcomer went ahead of the waiter")
	}
	r := qRecv(t, waiter)
	if !r.acquired {
		t.Fatal("the waiter was not let in when the share grew")
	}
	if st := s.Stats(1); st.Holding != 2 || st.Share != 0 {
		t.Fatalf("stats = %+v", st)
	}
	a()
	r.release()
}

func TestSemaphoreShared(t *testing.T) {
	t.Run("a healthy store grants", func(t *testing.T) {
		f := &fakeShared{healthy: true}
		s := NewSemaphoresWith(clockwork.NewFakeClock(), SemaphoreOptions{Shared: f, Live: func() int { return 2 }})
		var rels []func()
		for range 3 { // beyond the local share: the store gates, not this replica
			rel, err := s.AcquireSlot(t.Context(), 1, 2, time.Hour, 0)
			if err != nil {
				t.Fatal(err)
			}
			rels = append(rels, rel)
		}
		if held, _ := f.state(); held != 3 {
			t.Fatalf("leases = %d", held)
		}
		if st := s.Stats(1); st.Holding != 3 || st.Max != 2 || st.Share != 0 {
			t.Fatalf("stats = %+v", st)
		}
		for _, rel := range rels {
			rel()
			rel()
		}
		if held, _ := f.state(); held != 0 {
			t.Fatalf("leases = %d after release", held)
		}
		if st := s.Stats(1); st.Holding != 0 {
			t.Fatalf("stats = %+v", st)
		}
	})
	t.Run("fail-open outcomes of the store", func(t *testing.T) {
		for _, want := range []error{ErrSlotLineFull, ErrSlotTimeout} {
			f := &fakeShared{healthy: true, err: want}
			s := NewSemaphoresWith(clockwork.NewFakeClock(), SemaphoreOptions{Shared: f})
			rel, err := s.AcquireSlot(t.Context(), 1, 1, time.Hour, 1)
			if !errors.Is(err, want) {
				t.Fatalf("err = %v, want %v", err, want)
			}
			rel()
			st := s.Stats(1)
			if st.Holding != 0 || st.Waiting != 0 || st.FailOpenFull+st.FailOpenTimeout != 1 {
				t.Fatalf("stats = %+v", st)
			}
		}
	})
	t.Run("a store that fails falls back to the local share", func(t *testing.T) {
		f := &fakeShared{healthy: true, err: errors.New("connection refused")}
		clock := clockwork.NewFakeClock()
		s := NewSemaphoresWith(clock, SemaphoreOptions{Shared: f, Live: func() int { return 2 }})
		rel, err := s.AcquireSlot(t.Context(), 1, 2, time.Hour, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.healthy = false
		f.mu.Unlock()
		ch := semAsync(t.Context(), s, 1, 2, time.Second, 0)
		semWaitFor(t, s, 1, 1)
		clock.Advance(time.Second)
		if r := qRecv(t, ch); r.acquired {
			t.Fatal("acquired beyond the local share")
		}
		if _, calls := f.state(); calls != 1 {
			t.Fatalf("the unhealthy store was asked: %d calls", calls)
		}
		if st := s.Stats(1); st.Holding != 1 || st.Share != 1 {
			t.Fatalf("stats = %+v", st)
		}
		rel()
	})
	t.Run("a client gone while the store waits", func(t *testing.T) {
		f := &fakeShared{healthy: true, waitTill: make(chan struct{})}
		s := NewSemaphoresWith(clockwork.NewFakeClock(), SemaphoreOptions{Shared: f})
		ctx, cancel := context.WithCancel(t.Context())
		ch := semAsync(ctx, s, 1, 1, time.Hour, 0)
		semWaitFor(t, s, 1, 1)
		if st := s.Stats(1); st.Holding != 0 {
			t.Fatalf("a request waiting for the store counts as holding: %+v", st)
		}
		cancel()
		if r := qRecv(t, ch); r.acquired {
			t.Fatal("acquired after the client left")
		}
		if st := s.Stats(1); st.Holding != 0 || st.Waiting != 0 || st.Cancelled != 1 {
			t.Fatalf("stats = %+v", st)
		}
	})
	t.Run("TryAcquire", func(t *testing.T) {
		f := &fakeShared{healthy: true}
		s := NewSemaphoresWith(clockwork.NewFakeClock(), SemaphoreOptions{Shared: f})
		rel, ok := s.TryAcquire(1, 1)
		if !ok {
			t.Fatal("not granted")
		}
		rel()
		f.err = ErrSlotsTaken
		if _, ok := s.TryAcquire(1, 1); ok {
			t.Fatal("granted with every shared slot taken")
		}
		if st := s.Stats(1); st.Holding != 0 {
			t.Fatalf("stats = %+v", st)
		}
		f.err = errors.New("connection refused")
		rel, ok = s.TryAcquire(1, 1)
		if !ok {
			t.Fatal("a failing store was not replaced by the local slot")
		}
		if _, ok := s.TryAcquire(1, 1); ok {
			t.Fatal("the local slot was not enforced while the store fails")
		}
		rel()
	})
}

func TestSemaphoreLimitedAllocations(t *testing.T) {
	s := NewSemaphores(clockwork.NewFakeClock())
	allocs := testing.AllocsPerRun(100, func() {
		rel, _ := s.Acquire(context.Background(), 1, 4, time.Second, 0)
		rel()
	})
	// The release closure and its once-flag; nothing more for a free slot.
	if allocs > 2 {
		t.Fatalf("a free slot costs %v allocations", allocs)
	}
}

func BenchmarkSemaphore(b *testing.B) {
	ctx := context.Background()
	b.Run("unlimited", func(b *testing.B) {
		s := NewSemaphores(clockwork.NewRealClock())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				rel, _ := s.Acquire(ctx, 1, 0, time.Second, 0)
				rel()
			}
		})
	})
	b.Run("acquire free slot", func(b *testing.B) {
		s := NewSemaphores(clockwork.NewRealClock())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				rel, ok := s.Acquire(ctx, 1, 1<<20, time.Second, 0)
				if !ok {
					b.Fatal("no slot")
				}
				rel()
			}
		})
	})
	b.Run("try acquire free slot", func(b *testing.B) {
		s := NewSemaphores(clockwork.NewRealClock())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				rel, ok := s.TryAcquire(1, 1<<20)
				if !ok {
					b.Fatal("no slot")
				}
				rel()
			}
		})
	})
}
