//go:build linux

package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db/dbtest"
	"switchyard/services/catalog"
	"switchyard/services/globalcap"
	"switchyard/services/resilience"
	"switchyard/services/servicetest"
	"switchyard/services/settings"
)

// failOpens counts the requests that went upstream without a quota-share slot.
type failOpens struct {
	nopObserver
	n atomic.Int64
}

func (f *failOpens) FailOpen(string, string) { f.n.Add(1) }

// sharedReplica is one gateway replica whose quota-share slots are leases in a shared Redis.
type sharedReplica struct {
	e    *Engine
	lim  *globalcap.Limiter
	snap *settings.Snapshot
	obs  *failOpens
}

func newSharedReplica(t *testing.T, redisURL string, live int, patch string) sharedReplica {
	t.Helper()
	ctx := context.Background()
	lim, err := globalcap.Open(redisURL, globalcap.Options{LeaseTTL: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	st, err := settings.New(ctx, &memSettings{m: map[string]string{}}, func(string) (string, bool) { return "", false }, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot()
	if patch != "" {
		if snap, err = st.Patch(ctx, []byte(patch)); err != nil {
			t.Fatal(err)
		}
	}
	clock := clockwork.NewRealClock()
	obs := &failOpens{}
	sem := resilience.NewSemaphoresWith(clock, resilience.SemaphoreOptions{Shared: lim, Live: func() int { return live }})
	e := New(Options{Clock: clock, Log: slog.New(slog.DiscardHandler), Settings: st, Observer: obs,
		Queues: resilience.NewQueues(clock, nil), Semaphores: sem})
	return sharedReplica{e: e, lim: lim, snap: snap, obs: obs}
}

func (r sharedReplica) call() *call {
	return &call{snap: r.snap, t: target{provider: &catalog.ProviderEntry{Name: "p"}}, out: &clientOut{}, trace: &Trace{}}
}

func TestMaxConcurrentHoldsAcrossReplicas(t *testing.T) {
	url := dbtest.Redis(t)
	var cur, peak atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond) // the answer takes a while
		cur.Add(-1)
	}))
	defer upstream.Close()
	reps := []sharedReplica{newSharedReplica(t, url, 3, ""), newSharedReplica(t, url, 3, ""), newSharedReplica(t, url, 3, "")}
	conn := &catalog.ConnEntry{ID: 1, Label: "acct", MaxConcurrent: 2}

	var served atomic.Int64
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			r := reps[i%len(reps)]
			a, perr, _, _ := r.e.admit(t.Context(), httptest.NewRecorder(), r.call(), conn, false)
			if perr != nil {
				t.Errorf("request %d: %v", i, perr)
				return
			}
			defer a.done()
			resp, err := http.Get(upstream.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			served.Add(1)
		})
	}
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Fatalf("the upstream saw %d requests at once, max_concurrent 2", p)
	}
	if n := served.Load(); n != 30 {
		t.Fatalf("%d of 30 requests served", n)
	}
	for _, r := range reps {
		if n := r.obs.n.Load(); n != 0 {
			t.Fatalf("%d requests went without a slot", n)
		}
	}
}

func TestQueueDepthHoldsAcrossReplicas(t *testing.T) {
	url := dbtest.Redis(t)
	const depth = `{"request_queue":{"max_queue_depth":1}}`
	a, b, c := newSharedReplica(t, url, 3, depth), newSharedReplica(t, url, 3, depth), newSharedReplica(t, url, 3, depth)
	conn := &catalog.ConnEntry{ID: 1, Label: "acct", MaxConcurrent: 1}

	holder, perr, _, _ := a.e.admit(t.Context(), httptest.NewRecorder(), a.call(), conn, false)
	if perr != nil {
		t.Fatal(perr)
	}
	waited := make(chan admission, 1)
	go func() {
		adm, perr, _, _ := b.e.admit(t.Context(), httptest.NewRecorder(), b.call(), conn, false)
		if perr != nil {
			t.Error(perr)
		}
		waited <- adm
	}()
	servicetest.WaitUntil(t, "b's request waits", func() bool {
		_, w, err := a.lim.Counts(t.Context(), 1)
		return err == nil && w == 1
	})

	_, perr, full, _ := c.e.admit(t.Context(), httptest.NewRecorder(), c.call(), conn, false)
	if perr == nil || !full || perr.ReasonCode() != resilience.CodeQueueFull {
		t.Fatalf("with one request waiting on another replica: err = %v, full = %v; want the queue full", perr, full)
	}
	holder.done()
	adm := <-waited
	adm.done()
	if n := b.obs.n.Load(); n != 0 {
		t.Fatalf("the waiter went without a slot")
	}
}
