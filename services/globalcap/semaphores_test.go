//go:build linux

package globalcap

import (
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db/dbtest"
	"switchyard/services/resilience"
	"switchyard/services/servicetest"
)

// gateway is the quota-share semaphores of one replica, sharing their slots through Redis.
type gateway struct {
	lim *Limiter
	sem *resilience.Semaphores
}

func gateways(t *testing.T, url string, n int, ttl time.Duration) []gateway {
	t.Helper()
	gs := make([]gateway, n)
	for i, l := range replicas(t, url, n, ttl) {
		gs[i] = gateway{lim: l, sem: resilience.NewSemaphoresWith(clockwork.NewRealClock(),
			resilience.SemaphoreOptions{Shared: l, Live: func() int { return n }})}
	}
	return gs
}

func TestSemaphoresShareTheCap(t *testing.T) {
	gs := gateways(t, dbtest.Redis(t), 3, 15*time.Second)
	crowd(t, 2, func(i int) (func(), error) { return gs[i%3].sem.AcquireSlot(t.Context(), 1, 2, 30*time.Second, 0) })
	for _, g := range gs {
		if st := g.sem.Stats(1); st.Holding != 0 || st.Waiting != 0 || st.Max != 2 || st.Share != 0 {
			t.Fatalf("stats = %+v", st)
		}
	}
}

func TestSemaphoresTryAcquireShared(t *testing.T) {
	gs := gateways(t, dbtest.Redis(t), 2, 15*time.Second)
	rel, ok := gs[0].sem.TryAcquire(1, 1)
	if !ok {
		t.Fatal("a free slot was not taken")
	}
	if _, ok := gs[1].sem.TryAcquire(1, 1); ok {
		t.Fatal("the other replica took the slot that is held")
	}
	if st := gs[1].sem.Stats(1); st.Holding != 0 {
		t.Fatalf("a refused TryAcquire kept its local slot: %+v", st)
	}
	rel()
	rel, ok = gs[1].sem.TryAcquire(1, 1)
	if !ok {
		t.Fatal("the released slot was not taken")
	}
	rel()
}

func TestSemaphoresWaitingCountsTheSharedLine(t *testing.T) {
	gs := gateways(t, dbtest.Redis(t), 2, 15*time.Second)
	holder, err := gs[0].sem.AcquireSlot(t.Context(), 1, 1, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		rel, err := gs[1].sem.AcquireSlot(t.Context(), 1, 1, time.Minute, 1)
		if err == nil {
			rel()
		}
		got <- err
	}()
	servicetest.WaitUntil(t, "the other replica waits in the shared line", func() bool {
		_, w := counts(t, gs[0].lim, 1)
		return w == 1
	})
	if st := gs[1].sem.Stats(1); st.Holding != 0 {
		t.Fatalf("a request waiting for the store counts as holding: %+v", st)
	}
	if _, err := gs[0].sem.AcquireSlot(t.Context(), 1, 1, time.Minute, 1); !errors.Is(err, resilience.ErrSlotLineFull) {
		t.Fatalf("err = %v, want the line (of both replicas) full", err)
	}
	if st := gs[0].sem.Stats(1); st.FailOpenFull != 1 || st.Holding != 1 || st.Waiting != 0 {
		t.Fatalf("stats = %+v", st)
	}
	holder()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestSemaphoresFallBackWhenRedisDies(t *testing.T) {
	srv := dbtest.StartRedis(t)
	gs := gateways(t, srv.URL(), 2, 600*time.Millisecond)
	a, b := gs[0], gs[1]
	holder, err := a.sem.AcquireSlot(t.Context(), 1, 1, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder()
	type result struct {
		rel func()
		err error
	}
	waiter := make(chan result, 1)
	go func() {
		rel, err := b.sem.AcquireSlot(t.Context(), 1, 1, time.Minute, 0)
		waiter <- result{rel, err}
	}()
	servicetest.WaitUntil(t, "b waits for a's slot", func() bool { _, w := counts(t, a.lim, 1); return w == 1 })

	srv.Kill()
	// Each replica now enforces ceil(1 ÷ 2) = 1 on its own: b's waiter gets b's share.
	r := <-waiter
	if r.err != nil {
		t.Fatalf("the waiter did not fall back to the local line: %v", r.err)
	}
	defer r.rel()
	servicetest.WaitUntil(t, "both see Redis down", func() bool { return !a.lim.Healthy() && !b.lim.Healthy() })
	began := time.Now()
	_, err = b.sem.AcquireSlot(t.Context(), 1, 1, 200*time.Millisecond, 0)
	if !errors.Is(err, resilience.ErrSlotTimeout) {
		t.Fatalf("err = %v, want b's one local slot taken", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Fatalf("the local wait took %v", took)
	}
	if st := b.sem.Stats(1); st.Max != 1 || st.Holding != 1 {
		t.Fatalf("stats = %+v", st)
	}

	srv.Restart()
	servicetest.WaitUntil(t, "both healthy again", func() bool { return a.lim.Healthy() && b.lim.Healthy() })
}

func TestSemaphoresShareWithoutRedis(t *testing.T) {
	srv := dbtest.StartRedis(t)
	l := open(t, srv.URL(), "a", 600*time.Millisecond)
	sem := resilience.NewSemaphoresWith(clockwork.NewRealClock(), resilience.SemaphoreOptions{Shared: l, Live: func() int { return 3 }})
	srv.Kill()
	servicetest.WaitUntil(t, "Redis seen down", func() bool {
		if rel, ok := sem.TryAcquire(1, 5); ok {
			rel()
		}
		return !l.Healthy()
	})
	// ceil(5 ÷ 3) = 2 slots here.
	r1, ok1 := sem.TryAcquire(1, 5)
	r2, ok2 := sem.TryAcquire(1, 5)
	_, ok3 := sem.TryAcquire(1, 5)
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("took %v %v %v, want two of ceil(5 ÷ 3)", ok1, ok2, ok3)
	}
	if st := sem.Stats(1); st.Max != 5 || st.Share != 2 || st.Holding != 2 {
		t.Fatalf("stats = %+v", st)
	}
	r1()
	r2()
}
