package resilience

import (
	"context"
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
