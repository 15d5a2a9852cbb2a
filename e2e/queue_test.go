package e2e

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// gatedUpstream holds every chat request until released, and records its peak concurrency.
type gatedUpstream struct {
	inFlight, peak atomic.Int32
	release        chan struct{}
	arrived        chan struct{}
}

func newGated() *gatedUpstream {
	return &gatedUpstream{release: make(chan struct{}), arrived: make(chan struct{}, 1000)}
}

// gatedSetup is setupOne on a gated upstream, its connection "main" patched with patch.
func gatedSetup(t *testing.T, patch map[string]any) (*gatedUpstream, *testenv.Env, *testenv.FakeUpstream, string, int64) {
	t.Helper()
	g := newGated()
	e, up, key := testenv.SetupOne(t, g.handler)
	id := e.ConnectionID("main")
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", id), patch, 200)
	return g, e, up, key, id
}

func (g *gatedUpstream) handler(w http.ResponseWriter, r *http.Request) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	g.arrived <- struct{}{}
	select {
	case <-g.release:
	case <-r.Context().Done():
		return
	}
	testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
}

// chatBurst sends n chat completions at once and counts the answers by status.
func chatBurst(t *testing.T, e *testenv.Env, key string, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	byStatus := map[int]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.Chat(context.Background(), key, testenv.ChatBody)
			testenv.ReadAll(t, r)
			mu.Lock()
			byStatus[r.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return byStatus
}

func TestMaxConcurrentOneServesABurstOneAtATime(t *testing.T) {
	var inFlight, peak atomic.Int32
	e, up, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond) // a slow upstream (real time: the upstream is not the gateway)
		inFlight.Add(-1)
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	})
	id := e.ConnectionID("main")
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", id), map[string]any{"max_concurrent": 1}, 200)
	if ok := chatBurst(t, e, key, 20)[200]; ok != 20 || len(up.ChatRequests()) != 20 {
		t.Fatalf("%d succeeded, upstream saw %d", ok, len(up.ChatRequests()))
	}
	if peak.Load() != 1 {
		t.Fatalf("the upstream saw %d requests at once", peak.Load())
	}
}

func TestQueueDepthRejectsWithoutCallingUpstream(t *testing.T) {
	g, e, up, key, id := gatedSetup(t, map[string]any{"max_concurrent": 1,
		"overrides": map[string]any{"request_queue": map[string]any{"max_queue_depth": 2}}})
	results := make(chan int, 3)
	for i := 0; i < 3; i++ {
		go func() {
			r := e.Chat(context.Background(), key, testenv.ChatBody)
			testenv.ReadAll(t, r)
			results <- r.StatusCode
		}()
	}
	<-g.arrived // one executes
	e.Eventually("two waiting", func() bool { return e.QueueStats(id)["waiting"].(float64) == 2 })
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 429 || !strings.Contains(body, "RATE_LIMIT_QUEUE_FULL") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("third waiter: %d %s", r.StatusCode, body)
	}
	if n := len(up.ChatRequests()); n != 1 {
		t.Fatalf("the upstream saw %d requests", n)
	}
	if m := e.Metrics(); !strings.Contains(m, `switchyard_queue_rejections_total{code="RATE_LIMIT_QUEUE_FULL",connection="main",provider="up"} 1`) {
		t.Error("rejection not counted")
	}
	close(g.release)
	for i := 0; i < 3; i++ {
		if st := <-results; st != 200 {
			t.Fatalf("queued request: %d", st)
		}
	}
	if g.peak.Load() != 1 {
		t.Fatalf("peak %d", g.peak.Load())
	}
}

func TestQueueWaitExpiresWithoutReachingUpstream(t *testing.T) {
	g, e, up, key, id := gatedSetup(t, map[string]any{"overrides": map[string]any{
		"request_queue": map[string]any{"max_concurrent_executions": 1, "max_wait_ms": 2000}}})
	first := make(chan int, 1)
	go func() {
		r := e.Chat(context.Background(), key, testenv.ChatBody)
		testenv.ReadAll(t, r)
		first <- r.StatusCode
	}()
	<-g.arrived
	second := make(chan *http.Response, 1)
	go func() { second <- e.Chat(context.Background(), key, testenv.ChatBody) }()
	e.Eventually("one waiting", func() bool { return e.QueueStats(id)["waiting"].(float64) == 1 })
	e.Clock.Advance(2 * time.Second)
	r := <-second
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 429 || !strings.Contains(body, "RATE_LIMIT_QUEUE_TIMEOUT") {
		t.Fatalf("queue timeout: %d %s", r.StatusCode, body)
	}
	if len(up.ChatRequests()) != 1 {
		t.Fatal("a request that timed out in the queue reached the upstream")
	}
	if st := e.State(id); st.Status != "active" {
		t.Fatalf("a local queue error must not cool the connection: %+v", st)
	}
	close(g.release)
	<-first
}

func TestExecutionTimeoutIs504(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	// The upstream answers at once with headers, then never finishes the body.
	e, _, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.Write([]byte(`{"id":`))
		http.NewResponseController(w).Flush()
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{
		"request_queue": map[string]any{"execution_max_wait_ms": 1000},
		"streams":       map[string]any{"first_byte_timeout_ms": 1000}}, 200)
	res := make(chan *http.Response, 1)
	go func() { res <- e.Chat(context.Background(), key, testenv.ChatBody) }()
	<-arrived
	e.Clock.Advance(time.Second)
	r := <-res
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 504 || !strings.Contains(body, "RATE_LIMIT_EXECUTION_TIMEOUT") {
		t.Fatalf("execution timeout: %d %s", r.StatusCode, body)
	}
	id := e.ConnectionID("main")
	if st := e.State(id); st.Status != "active" {
		t.Fatalf("an execution timeout must not cool the connection: %+v", st)
	}
}

func TestFirstByteTimeoutIsAnUpstreamTimeout(t *testing.T) {
	g := newGated()
	defer close(g.release)
	e, _, key := testenv.SetupOne(t, g.handler)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"streams": map[string]any{"first_byte_timeout_ms": 2000}}, 200)
	res := make(chan *http.Response, 1)
	go func() { res <- e.Chat(context.Background(), key, testenv.ChatBody) }()
	<-g.arrived
	e.Clock.Advance(2 * time.Second)
	r := <-res
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 504 || !strings.Contains(body, "upstream_timeout") {
		t.Fatalf("first-byte timeout: %d %s", r.StatusCode, body)
	}
	if st := e.State(e.ConnectionID("main")); st.Status != "cooling" {
		t.Fatalf("an upstream that sends nothing cools the connection: %+v", st)
	}
}

func TestQueuedStreamGetsHeartbeats(t *testing.T) {
	g, e, _, key, id := gatedSetup(t, map[string]any{"max_concurrent": 1})
	go func() { testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody)) }()
	<-g.arrived
	resp := make(chan *http.Response, 1)
	go func() {
		resp <- e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
	}()
	e.Eventually("waiting", func() bool { return e.QueueStats(id)["waiting"].(float64) == 1 })
	e.Clock.Advance(15 * time.Second)
	r := <-resp
	buf := make([]byte, 64)
	n, _ := r.Body.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), ": queued") {
		t.Fatalf("first bytes %q", buf[:n])
	}
	r.Body.Close() // the client gives up while waiting: it leaves the line at once
	e.Eventually("left the line", func() bool { return e.QueueStats(id)["waiting"].(float64) == 0 })
	close(g.release)
}

func TestFailOpenWhenTheLineTimesOut(t *testing.T) {
	g, e, _, key, id := gatedSetup(t, map[string]any{"max_concurrent": 1,
		"overrides": map[string]any{"request_queue": map[string]any{"max_wait_ms": 1000}}})
	for i := 0; i < 2; i++ {
		go func() { testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody)) }()
	}
	<-g.arrived
	e.Eventually("one waiting", func() bool { return e.QueueStats(id)["waiting"].(float64) == 1 })
	e.Clock.Advance(time.Second)
	<-g.arrived // the waiter proceeded without a slot rather than being rejected
	if g.peak.Load() != 2 {
		t.Fatalf("peak %d", g.peak.Load())
	}
	close(g.release)
	if m := e.Metrics(); !strings.Contains(m, `switchyard_concurrency_fail_open_total{connection="main",provider="up"} 1`) {
		t.Error("fail-open not counted")
	}
}

func TestCancelledRequestsReleaseTheirSlots(t *testing.T) {
	g, e, _, key, id := gatedSetup(t, map[string]any{"max_concurrent": 1})
	base := runtime.NumGoroutine()
	for i := 0; i < 1000; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(ctx, "POST", e.Base+"/v1/chat/completions", strings.NewReader(testenv.ChatBody))
			req.Header.Set("Authorization", "Bearer "+key)
			if r, err := http.DefaultClient.Do(req); err == nil {
				r.Body.Close()
			}
		}()
		<-g.arrived // it holds the slot at the upstream
		cancel()
		<-done
	}
	e.Eventually("slots released", func() bool {
		q := e.QueueStats(id)
		return q["executing"].(float64) == 0 && q["holding"].(float64) == 0 && q["waiting"].(float64) == 0
	})
	close(g.release)
	http.DefaultClient.CloseIdleConnections()
	e.Eventually("goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= base+5 })
	// The connection still serves: no slot leaked (the upstream answers at once now).
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	testenv.ReadAll(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("after 1,000 cancels: %d", r.StatusCode)
	}
}
