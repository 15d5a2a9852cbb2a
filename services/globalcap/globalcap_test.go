//go:build linux

package globalcap

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"switchyard/db/dbtest"
	"switchyard/services/resilience"
	"switchyard/services/servicetest"
)

// open builds a limiter on its own connection to url, as a replica would, and closes it when
// the test ends.
func open(t *testing.T, url, replica string, ttl time.Duration) *Limiter {
	t.Helper()
	l, err := Open(url, Options{Replica: replica, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// replicas builds n limiters on one Redis.
func replicas(t *testing.T, url string, n int, ttl time.Duration) []*Limiter {
	t.Helper()
	ls := make([]*Limiter, n)
	for i := range ls {
		ls[i] = open(t, url, "r"+string(rune('a'+i)), ttl)
	}
	return ls
}

// ignoreServers passes over the goroutine that waits for a test's Redis server, restarted
// after the check's snapshot.
var ignoreServers = goleak.IgnoreAnyFunction("switchyard/db/dbtest.startChild.func1")

// peak tracks how many hold at once.
type peak struct{ cur, max atomic.Int64 }

func (p *peak) enter() {
	n := p.cur.Add(1)
	for m := p.max.Load(); n > m && !p.max.CompareAndSwap(m, n); m = p.max.Load() {
	}
}

func (p *peak) leave() { p.cur.Add(-1) }

// crowd sends 30 requests at once, request i taking its slot with acquire(i) and holding it
// for a short upstream call, and checks that at most limit of them held a slot at once and that
// every one was served.
func crowd(t *testing.T, limit int64, acquire func(i int) (release func(), err error)) {
	t.Helper()
	var p peak
	var served atomic.Int64
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			rel, err := acquire(i)
			if err != nil {
				t.Errorf("request %d went without a slot: %v", i, err)
				return
			}
			p.enter()
			time.Sleep(2 * time.Millisecond) // the upstream call
			p.leave()
			rel()
			served.Add(1)
		})
	}
	wg.Wait()
	if got := p.max.Load(); got != limit {
		t.Fatalf("at most %d held at once, want %d (the cap, and no more)", got, limit)
	}
	if got := served.Load(); got != 30 {
		t.Fatalf("%d of 30 requests served", got)
	}
}

func counts(t *testing.T, l *Limiter, conn int64) (holding, waiting int) {
	t.Helper()
	h, w, err := l.Counts(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return h, w
}

func TestCapHoldsAcrossReplicas(t *testing.T) {
	url := dbtest.Redis(t) // its server's goroutine outlives the check
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ls := replicas(t, url, 3, 15*time.Second)
	crowd(t, 2, func(i int) (func(), error) { return ls[i%3].Acquire(t.Context(), 1, 2, 30*time.Second, 0) })
	if h, w := counts(t, ls[0], 1); h != 0 || w != 0 {
		t.Fatalf("after every release: %d leases, %d waiters", h, w)
	}
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLineDepthAcrossReplicas(t *testing.T) {
	url := dbtest.Redis(t)
	ls := replicas(t, url, 3, 15*time.Second)
	holder, err := ls[0].Acquire(t.Context(), 1, 1, time.Second, 2)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		rel func()
		err error
	}
	waiters := make(chan result, 2)
	for _, l := range ls[1:] {
		go func() {
			rel, err := l.Acquire(t.Context(), 1, 1, time.Minute, 2)
			waiters <- result{rel, err}
		}()
	}
	servicetest.WaitUntil(t, "two replicas wait", func() bool { _, w := counts(t, ls[0], 1); return w == 2 })

	if _, err := ls[0].Acquire(t.Context(), 1, 1, time.Minute, 2); !errors.Is(err, resilience.ErrSlotLineFull) {
		t.Fatalf("third waiter: err = %v, want the line full", err)
	}
	if _, err := ls[0].TryAcquire(t.Context(), 1, 1); !errors.Is(err, resilience.ErrSlotsTaken) {
		t.Fatalf("TryAcquire: err = %v, want every slot taken", err)
	}
	holder()
	for range 2 {
		r := <-waiters
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.rel()
	}
}

func TestWaitersComeFirst(t *testing.T) {
	url := dbtest.Redis(t)
	l := open(t, url, "a", 15*time.Second)
	// A waiter of another replica, in line until it runs out.
	waiters := l.keys(1)[1]
	inLine := func(d time.Duration) {
		t.Helper()
		if err := l.client.ZAdd(t.Context(), waiters, redis.Z{Score: float64(time.Now().Add(d).UnixMilli()), Member: "other/x/1"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	inLine(time.Hour)
	if _, err := l.TryAcquire(t.Context(), 1, 1); !errors.Is(err, resilience.ErrSlotsTaken) {
		t.Fatalf("a newcomer took the free slot a waiter is in line for: err = %v", err)
	}
	rel, err := l.TryAcquire(t.Context(), 1, 2) // a second slot is nobody's yet
	if err != nil {
		t.Fatal(err)
	}
	rel()
	// A waiter whose replica stopped renewing its place drops out of the line.
	inLine(300 * time.Millisecond)
	servicetest.WaitUntil(t, "the dead waiter's place runs out", func() bool {
		rel, err := l.TryAcquire(t.Context(), 1, 1)
		if err == nil {
			rel()
		}
		return err == nil
	})
}

func TestWaitEnds(t *testing.T) {
	url := dbtest.Redis(t)
	l := open(t, url, "a", 15*time.Second)
	holder, err := l.Acquire(t.Context(), 1, 1, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder()
	t.Run("timeout", func(t *testing.T) {
		if _, err := l.Acquire(t.Context(), 1, 1, 50*time.Millisecond, 0); !errors.Is(err, resilience.ErrSlotTimeout) {
			t.Fatalf("err = %v, want a timeout", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan error, 1)
		go func() {
			_, err := l.Acquire(ctx, 1, 1, time.Minute, 0)
			got <- err
		}()
		servicetest.WaitUntil(t, "it waits", func() bool { _, w := counts(t, l, 1); return w == 1 })
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want the context's", err)
		}
	})
	if h, w := counts(t, l, 1); h != 1 || w != 0 {
		t.Fatalf("a waiter that gave up stayed in line: %d leases, %d waiters", h, w)
	}
	t.Run("unlimited", func(t *testing.T) {
		rel, err := l.Acquire(t.Context(), 1, 0, time.Millisecond, 0)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	})
}

func TestReleaseWakesAnotherReplica(t *testing.T) {
	url := dbtest.Redis(t)
	// A poll far longer than the test: only the release's message can end the wait in time.
	a, err := Open(url, Options{Replica: "a", LeaseTTL: time.Hour, Poll: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(url, Options{Replica: "b", LeaseTTL: time.Hour, Poll: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	holder, err := a.Acquire(t.Context(), 1, 1, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		rel, err := b.Acquire(t.Context(), 1, 1, servicetest.Patience, 0)
		if err == nil {
			rel()
		}
		got <- err
	}()
	servicetest.WaitUntil(t, "b waits", func() bool { _, w := counts(t, a, 1); return w == 1 })
	holder()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestLongHoldKeepsItsLease(t *testing.T) {
	url := dbtest.Redis(t)
	const ttl = 300 * time.Millisecond
	ls := replicas(t, url, 2, ttl)
	rel, err := ls[0].Acquire(t.Context(), 1, 1, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	// For several lease times, the renewals keep the slot taken.
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); {
		if other, err := ls[1].TryAcquire(t.Context(), 1, 1); err == nil {
			other()
			t.Fatal("a held lease ran out while its replica renewed it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rel()
	if other, err := ls[1].TryAcquire(t.Context(), 1, 1); err != nil {
		t.Fatalf("after the release: %v", err)
	} else {
		other()
	}
}

func TestStoppedReplicaFreesItsSlots(t *testing.T) {
	url := dbtest.Redis(t)
	const ttl = 600 * time.Millisecond
	dead := open(t, url, "dead", ttl)
	live := open(t, url, "live", ttl)
	for range 2 {
		if _, err := dead.Acquire(t.Context(), 1, 2, time.Second, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := live.TryAcquire(t.Context(), 1, 2); !errors.Is(err, resilience.ErrSlotsTaken) {
		t.Fatalf("err = %v, want every slot taken", err)
	}
	dead.Close() // stops renewing; the leases are not given back
	stopped := time.Now()
	for range 2 {
		rel, err := live.Acquire(t.Context(), 1, 2, 2*ttl, 0)
		if err != nil {
			t.Fatalf("%v after the replica stopped: %v", time.Since(stopped), err)
		}
		defer rel()
	}
	if waited := time.Since(stopped); waited > ttl+ttl/2 {
		t.Fatalf("the slots came free after %v, lease time %v", waited, ttl)
	}
}

func TestRedisDownAndBack(t *testing.T) {
	srv := dbtest.StartRedis(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreServers)
	l, err := Open(srv.URL(), Options{Replica: "a", LeaseTTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rel, err := l.Acquire(t.Context(), 1, 1, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	rel() // does not wait for a Redis that is gone
	for range 2 {
		began := time.Now()
		_, err = l.Acquire(t.Context(), 1, 1, time.Minute, 0)
		took := time.Since(began)
		t.Logf("Acquire with Redis down: %v after %v", err, took)
		if took > 4*DefaultCallTimeout {
			t.Fatalf("Acquire took %v with Redis down", took)
		}
		if err == nil || errors.Is(err, resilience.ErrSlotTimeout) {
			t.Fatalf("err = %v, want Redis's failure", err)
		}
	}
	if l.Healthy() || l.Err() == nil {
		t.Fatalf("Healthy = %v, Err = %v with Redis down", l.Healthy(), l.Err())
	}
	srv.Restart()
	servicetest.WaitUntil(t, "healthy again", l.Healthy)
	if l.Err() != nil {
		t.Fatalf("Err = %v while healthy", l.Err())
	}
	rel, err = l.Acquire(t.Context(), 1, 1, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	rel()
}

func TestLostLeaseIsTakenAgain(t *testing.T) {
	srv := dbtest.StartRedis(t)
	const ttl = 600 * time.Millisecond
	l := open(t, srv.URL(), "a", ttl)
	rel, err := l.Acquire(t.Context(), 1, 1, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart() // empty: the lease is gone while its request runs
	servicetest.WaitUntil(t, "the renewal takes the lease again", func() bool {
		h, _, err := l.Counts(t.Context(), 1)
		return err == nil && h == 1
	})
	rel()
	servicetest.WaitUntil(t, "released", func() bool {
		h, _, err := l.Counts(t.Context(), 1)
		return err == nil && h == 0
	})
}

func TestOpenRejectsABadURL(t *testing.T) {
	_, err := Open("http://user:secret@example.com/", Options{})
	if err == nil {
		t.Fatal("no error")
	}
	_, err = Open("redis://user:secret@exa mple.com:x/", Options{})
	if err == nil {
		t.Fatal("no error")
	}
	if msg := err.Error(); strings.Contains(msg, "secret") {
		t.Fatalf("the error repeats the password: %s", msg)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	url := dbtest.Redis(b)
	l, err := Open(url, Options{Replica: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rel, err := l.Acquire(ctx, 1, 1<<20, time.Second, 0)
		if err != nil {
			b.Fatal(err)
		}
		rel()
	}
}

// A key's slots hold across replicas and are apart from the connection with the same id.
func TestKeySlots(t *testing.T) {
	url := dbtest.Redis(t)
	ls := replicas(t, url, 2, time.Second)
	a, b := KeySlots{Limiter: ls[0]}, KeySlots{Limiter: ls[1]}
	ctx := context.Background()
	rel, taken, err := a.TryTake(ctx, 5, 1)
	if err != nil || !taken {
		t.Fatalf("first slot on a: %v %v", taken, err)
	}
	if _, taken, err := b.TryTake(ctx, 5, 1); err != nil || taken {
		t.Fatalf("key 5's only slot is a's, yet b took one: %v %v", taken, err)
	}
	connRel, err := ls[1].TryAcquire(ctx, 5, 1)
	if err != nil {
		t.Fatalf("connection 5 must not share key 5's slots: %v", err)
	}
	connRel()
	if h, _ := counts(t, ls[0], -5); h != 1 {
		t.Fatalf("key 5 holds %d slots, want 1", h)
	}
	rel()
	rel2, taken, err := b.TryTake(ctx, 5, 1)
	if err != nil || !taken {
		t.Fatalf("b after a gave the slot back: %v %v", taken, err)
	}
	rel2()
}
