package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/db/dbtest"
	"switchyard/e2e/testenv"
)

// eventually polls cond until it holds, failing after a deadline far above the 100 ms the
// replicas are given to agree (the test machine may be busy).
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("replicas never agreed: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// hitsOf counts the upstream calls made with each upstream key.
type hitsOf struct{ cool, ok atomic.Int64 }

// A provider, connection and key made on replica A serve on C; a settings change on B holds on
// A; a deleted key stops working everywhere.
// allAnswered sends n requests at once, request i with send(i), reads each answer whole and
// fails the test when one answered other than 200.
func allAnswered(t *testing.T, n int, send func(i int) *http.Response) {
	t.Helper()
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for i := range n {
		wg.Go(func() {
			r := send(i)
			testenv.ReadAll(t, r)
			statuses <- r.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != 200 {
			t.Fatalf("a request answered %d", st)
		}
	}
}

func TestReplicasShareConfiguration(t *testing.T) {
	rs := testenv.NewReplicas(t, 3, nil)
	a, b, c := rs[0], rs[1], rs[2]
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	a.AddProvider("up", up.URL+"/v1")
	a.AddConnection("up", "main", "sk-main", 0)
	key := a.NewKey()
	c.WaitModels(key, "up/gpt-test")
	r := c.Chat(context.Background(), key, testenv.ChatBody)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("replica C with what A made: %d %s", r.StatusCode, body)
	}
	// Each dashboard lists the three replicas, this one marked, and the cap mode.
	dash := c.Login()
	eventually(t, "the replicas panel", func() bool {
		resp, err := dash.Get(c.Base + "/overview/replicas")
		if err != nil {
			t.Fatal(err)
		}
		page := testenv.ReadAll(t, resp)
		return strings.Count(page, `class="replica"`) == 3 && strings.Count(page, "data-self") == 1 &&
			strings.Contains(page, "(3 live)")
	})
	if m := c.Metrics(); strings.Count(m, "switchyard_replica_info{") != 1 {
		t.Fatal("the metrics do not name the replica")
	}
	b.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 4}}, 200)
	eventually(t, "the retry setting made on B", func() bool {
		doc := a.MustAPI("GET", "/api/settings/resilience", nil, 200)
		return doc["values"].(map[string]any)["retry"].(map[string]any)["max_retries"] == 4.0
	})
	c.MustAPI("PATCH", "/api/settings/sessions", map[string]any{"idle_timeout_ms": 3_600_000}, 200)
	eventually(t, "the session setting made on C", func() bool {
		doc := a.MustAPI("GET", "/api/settings/sessions", nil, 200)
		return doc["values"].(map[string]any)["idle_timeout_ms"] == 3_600_000.0
	})
	var keys struct{ Items []struct{ ID int64 } }
	a.API("GET", "/api/keys", nil, &keys)
	b.MustAPI("DELETE", "/api/keys/"+itoa(keys.Items[0].ID), nil, 204)
	eventually(t, "the key revoked on B", func() bool {
		r := c.Chat(context.Background(), key, testenv.ChatBody)
		testenv.ReadAll(t, r)
		return r.StatusCode == 401
	})
}

// A 429 answered to replica A cools that upstream key on B and C too: the upstream sees it once,
// not once per replica.
func TestReplicasShareCooldowns(t *testing.T) {
	var hits hitsOf
	up := testenv.NewFakeUpstream(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-cool": func(w http.ResponseWriter, r *http.Request) {
			hits.cool.Add(1)
			testenv.Status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`)(w, r)
		},
		"sk-ok": func(w http.ResponseWriter, r *http.Request) {
			hits.ok.Add(1)
			testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
		},
	}))
	rs := testenv.NewReplicas(t, 3, nil)
	a := rs[0]
	a.AddProvider("up", up.URL+"/v1")
	cool := a.AddConnection("up", "cool", "sk-cool", 0)
	a.AddConnection("up", "ok", "sk-ok", 1)
	key := a.NewKey()
	a.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	for _, e := range rs {
		e.WaitModels(key, "up/gpt-test")
	}
	hits.cool.Store(0) // model discovery is not what counts
	r := a.Chat(context.Background(), key, testenv.ChatBody)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || hits.cool.Load() != 1 {
		t.Fatalf("on A: %d %s, cool hit %d times", r.StatusCode, body, hits.cool.Load())
	}
	for _, e := range rs[1:] {
		took := eventually(t, "the cooldown A learned", func() bool { return e.State(cool).Status == "cooling" })
		t.Logf("cooldown visible on a replica after %v", took)
		if st := e.State(cool); st.RemainingMS < 590_000 {
			t.Fatalf("cooldown on a replica: %+v", st)
		}
	}
	for _, e := range rs {
		for range 3 {
			r := e.Chat(context.Background(), key, testenv.ChatBody)
			if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, body)
			}
		}
	}
	if n := hits.cool.Load(); n != 1 {
		t.Fatalf("the cooled key was hit %d times across the replicas, want once", n)
	}
	// Clearing it on C makes it usable on A.
	rs[2].MustAPI("POST", "/api/connections/"+itoa(cool)+"/reset", nil, 200)
	eventually(t, "the cleared cooldown", func() bool { return a.State(cool).Status == "active" })
}

// A breaker opened by A fails fast on B; a lockout set on A and re-enabled on C is gone on A.
func TestReplicasShareBreakersAndLockouts(t *testing.T) {
	failing, handler := testenv.FailingUntilFixed()
	missing := testenv.Status(404, nil, `{"error":{"message":"The model gpt-a does not exist","code":"model_not_found"}}`)
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"gpt-a"`) {
			missing(w, r)
			return
		}
		handler(w, r)
	}, "gpt-a", "gpt-test")
	rs := testenv.NewReplicas(t, 3, nil)
	a, b, c := rs[0], rs[1], rs[2]
	a.AddProvider("up", up.URL+"/v1")
	a.AddConnection("up", "main", "sk-main", 0)
	key := a.NewKey()
	a.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"model_lockout": map[string]any{"enabled": true}}, 200)
	for _, e := range rs {
		e.WaitModels(key, "up/gpt-test")
	}
	// The lockout: gpt-a does not exist on A's call; re-enabled on C; gone on A.
	r := a.Chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`)
	if testenv.ReadAll(t, r); r.StatusCode != 404 {
		t.Fatalf("gpt-a on A: %d", r.StatusCode)
	}
	eventually(t, "the lockout on C", func() bool { return len(c.ModelCooldowns()) == 1 })
	c.MustAPI("DELETE", "/api/resilience/model-cooldowns", map[string]any{"provider": "up", "connection": "main", "model": "gpt-a"}, 200)
	eventually(t, "the re-enable on A", func() bool { return len(a.ModelCooldowns()) == 0 })

	// The breaker: five failures on A (cooldowns waited out on the shared clock) open it.
	for i := range 5 {
		r := a.Chat(context.Background(), key, testenv.ChatBody)
		testenv.ReadAll(t, r)
		if r.StatusCode != 500 {
			t.Fatalf("failure %d on A: %d", i, r.StatusCode)
		}
		if i < 4 {
			a.Clock.Advance(10 * time.Minute / 9)
		}
	}
	eventually(t, "the open breaker on B", func() bool { return b.ProviderStatus("up")["breaker"] == "open" })
	calls := len(up.ChatRequests())
	r = b.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 503 || !strings.Contains(body, "circuit breaker is open") || len(up.ChatRequests()) != calls {
		t.Fatalf("B with the breaker A opened: %d %s", r.StatusCode, body)
	}
	failing.Store(false)
}

// An account's tokens are refreshed by one replica at a time: when its access token is revoked
// under traffic on three replicas at once, the refresh token is spent once and every replica
// serves with the new pair.
func TestReplicasRefreshAnAccountOnce(t *testing.T) {
	f := testenv.NewFakeClaude(t, nil)
	rs := testenv.NewReplicas(t, 3, nil)
	a := rs[0]
	a.UseFakeClaude(f)
	a.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	a.AddClaudeAccount(f, "ada@example.com")
	key := a.NewKey()
	for _, e := range rs {
		e.WaitModels(key, "anthropic/claude-test")
	}
	f.RevokeAll()
	before := f.Refreshes.Load()
	allAnswered(t, 9, func(i int) *http.Response {
		return rs[i%3].Post(context.Background(), "/v1/messages", key, testenv.MessagesBody, nil)
	})
	if n := f.Refreshes.Load() - before; n != 1 || f.BurnedUses.Load() != 0 {
		t.Fatalf("%d refreshes (%d with a spent token) across three replicas, want one", n, f.BurnedUses.Load())
	}
}

// PostgreSQL stopped for ten seconds: both replicas keep serving from memory and say they are
// degraded (/ready, the dashboard); a change the operator makes meanwhile is refused, not
// acknowledged and lost; once the database is back, state learned meanwhile is written, and
// every acknowledged change is there and reaches the other replica.
func TestReplicasRideOutADatabaseOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps PostgreSQL stopped for ten seconds")
	}
	srv := dbtest.PostgresServer(t)
	var coolHits atomic.Int64
	up := testenv.NewFakeUpstream(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-ok": testenv.JSONAnswer(testenv.CompletionJSON),
		"sk-cool": func(w http.ResponseWriter, r *http.Request) {
			coolHits.Add(1)
			testenv.Status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`)(w, r)
		},
	}))
	rs := testenv.NewReplicasOn(t, srv.URL(), 2, nil)
	a, b := rs[0], rs[1]
	a.AddProvider("up", up.URL+"/v1")
	a.AddConnection("up", "ok", "sk-ok", 1)
	a.AddProvider("hot", up.URL+"/v1")
	cool := a.AddConnection("hot", "cool", "sk-cool", 0)
	key := a.NewKey()
	a.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	for _, e := range rs {
		e.WaitModels(key, "up/gpt-test")
		e.WaitModels(key, "hot/gpt-test")
	}
	b.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_backoff_ms": 7000}}, 200)
	dash := a.Login()

	srv.Stop()
	for _, e := range rs {
		eventually(t, "/ready to say degraded", func() bool {
			var out map[string]any
			return e.API("GET", "/ready", nil, &out) == 200 && out["status"] == "degraded"
		})
	}
	resp, err := dash.Get(a.Base + "/")
	if err != nil {
		t.Fatal(err)
	}
	// Pages that list what the store holds cannot be shown; they say why, under the banner.
	if page := testenv.ReadAll(t, resp); resp.StatusCode != 503 || !strings.Contains(page, `id="degraded-store"`) ||
		!strings.Contains(page, "nothing was saved") {
		t.Fatalf("the dashboard during the outage: %d, banner shown: %v", resp.StatusCode, strings.Contains(page, "degraded-store"))
	}
	// A change the operator makes now is refused (not acknowledged, so nothing to lose).
	if st := b.API("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_backoff_ms": 9000}}, nil); st != 503 {
		t.Fatalf("a settings change without the database answered %d", st)
	}
	// Traffic keeps flowing for the ten seconds, on both replicas; a cooldown is learned.
	r := a.Chat(context.Background(), key, `{"model":"hot/gpt-test","messages":[]}`)
	if testenv.ReadAll(t, r); r.StatusCode != 429 || coolHits.Load() != 1 {
		t.Fatalf("the cooling key during the outage: %d, %d hits", r.StatusCode, coolHits.Load())
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		for _, e := range rs {
			r := e.Chat(context.Background(), key, testenv.ChatBody)
			if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
				t.Fatalf("during the outage: %d %s", r.StatusCode, body)
			}
		}
	}
	srv.Start()
	for _, e := range rs {
		eventually(t, "/ready to be ready again", func() bool {
			var out map[string]any
			return e.API("GET", "/ready", nil, &out) == 200 && out["status"] == "ready"
		})
	}
	// What A learned during the outage reaches B (and the store) once the database is back.
	eventually(t, "the cooldown A learned during the outage", func() bool { return b.State(cool).Status == "cooling" })
	r = b.Chat(context.Background(), key, `{"model":"hot/gpt-test","messages":[]}`)
	testenv.ReadAll(t, r)
	if coolHits.Load() != 1 {
		t.Fatalf("B sent the cooling key upstream again (%d hits)", coolHits.Load())
	}
	// The change acknowledged before the outage is there on both; a new one reaches the other.
	for _, e := range rs {
		doc := e.MustAPI("GET", "/api/settings/resilience", nil, 200)
		if got := doc["values"].(map[string]any)["retry"].(map[string]any)["max_backoff_ms"]; got != 7000.0 {
			t.Fatalf("after the outage max_backoff_ms is %v, want the acknowledged 7000", got)
		}
	}
	a.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_backoff_ms": 8000}}, 200)
	eventually(t, "a change after the outage", func() bool {
		doc := b.MustAPI("GET", "/api/settings/resilience", nil, 200)
		return doc["values"].(map[string]any)["retry"].(map[string]any)["max_backoff_ms"] == 8000.0
	})
}

// With Redis, a connection's max_concurrent holds across the replicas: 30 requests spread over
// three replicas never put more than 2 on the upstream at once, and every one is served. The
// dashboard says the caps are global.
func TestReplicasHoldMaxConcurrentInRedis(t *testing.T) {
	var inFlight, peak atomic.Int32
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond) // a slow upstream (real time: the upstream is not the gateway)
		inFlight.Add(-1)
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	})
	rs := testenv.NewReplicas(t, 3, map[string]string{"SWITCHYARD_REDIS_URL": dbtest.Redis(t)})
	a := rs[0]
	a.AddProvider("up", up.URL+"/v1")
	id := a.AddConnection("up", "main", "sk-main", 0)
	a.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"max_concurrent": 2}, 200)
	a.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"request_queue": map[string]any{"max_wait_ms": 60_000}}, 200)
	key := a.NewKey()
	for _, e := range rs {
		e.WaitModels(key, "up/gpt-test")
	}
	allAnswered(t, 30, func(i int) *http.Response { return rs[i%3].Chat(context.Background(), key, testenv.ChatBody) })
	if p := peak.Load(); p > 2 || p == 0 {
		t.Fatalf("the upstream saw %d requests at once across three replicas, want at most 2", p)
	}
	resp, err := a.Login().Get(a.Base + "/overview/replicas")
	if err != nil {
		t.Fatal(err)
	}
	if page := testenv.ReadAll(t, resp); !strings.Contains(page, "Global caps in Redis") {
		t.Fatal("the Replicas panel does not say the caps are held in Redis")
	}
}

// With Redis, a key's max_parallel holds across the replicas exactly: a key with 2 may run both
// on one replica (without Redis each of two replicas would hold 1), and then none on the other
// until one ends.
func TestReplicasHoldKeyParallelInRedis(t *testing.T) {
	gate := make(chan struct{})
	var running atomic.Int32
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		running.Add(1)
		defer running.Add(-1)
		<-gate
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the upstream closes, which waits for its handlers
	rs := testenv.NewReplicas(t, 2, map[string]string{"SWITCHYARD_REDIS_URL": dbtest.Redis(t)})
	b, a := rs[0], rs[1] // a started last, so it has counted b already
	a.AddProvider("up", up.URL+"/v1")
	a.AddConnection("up", "main", "sk-main", 0)
	key, _ := testenv.LimitedKey(a, "agent", map[string]any{"max_parallel": 2})
	for _, e := range rs {
		e.WaitModels(key, "up/gpt-test")
	}
	dash := a.Login()
	eventually(t, "A counts two live replicas", func() bool {
		resp, err := dash.Get(a.Base + "/overview/replicas")
		return err == nil && strings.Contains(testenv.ReadAll(t, resp), ">2 live<")
	})
	statuses := make(chan int, 2)
	for range 2 {
		go func() {
			r := a.Chat(context.Background(), key, testenv.ChatBody)
			testenv.ReadAll(t, r)
			statuses <- r.StatusCode
		}()
	}
	eventually(t, "both requests run on A", func() bool { return running.Load() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // admitted, it would wait for the gate
	defer cancel()
	if ref := testenv.ReadRefusal(t, b.Chat(ctx, key, testenv.ChatBody)); ref.Error.Code != "key_parallel_limited" {
		t.Fatalf("a third request on B: %+v, want key_parallel_limited", ref)
	}
	release()
	for range 2 {
		if st := <-statuses; st != 200 {
			t.Fatalf("a request on A answered %d", st)
		}
	}
	// A's requests give their slots back as they end, a moment after their answers went out.
	eventually(t, "B admits the key once A's requests ended", func() bool {
		r := b.Chat(context.Background(), key, testenv.ChatBody)
		return testenv.ReadAll(t, r) != "" && r.StatusCode == 200
	})
}

// Two replica binaries share one PostgreSQL and one Redis; a connection takes two requests at a
// time. Replica A holds both slots with two streams the upstream keeps open; a request on B
// waits in line. A is killed with SIGKILL: no release, no goodbye. B's request must reach the
// upstream once A's leases run out (--cap-lease-ttl 1s), not later.
func TestKilledReplicaFreesItsSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	const ttl = time.Second
	arrived := make(chan time.Time, 8)
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- time.Now()
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"stream":true`) {
			testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, testenv.SSEChunks[0]+"\n\n"+testenv.SSEChunks[1]+"\n\n") // content: the stream is under way
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // held until the replica that opened it dies
	})
	url, redis := dbtest.Postgres(t), dbtest.Redis(t)
	bin := testenv.BuildBinary(t)
	replica := func() *process {
		p := &process{t: t, bin: bin, dir: t.TempDir(), store: url, args: []string{"--cap-lease-ttl", ttl.String()},
			env: []string{"SWITCHYARD_DATABASE_URL=" + url, "SWITCHYARD_SECRET_KEY=" + testenv.SecretKey, "SWITCHYARD_REDIS_URL=" + redis}}
		p.start()
		return p
	}
	a, b := replica(), replica()
	a.admin("POST", "/api/providers", map[string]any{"name": "up", "type": "openai-compatible", "base_url": up.URL + "/v1"}, 201)
	a.admin("POST", "/api/connections", map[string]any{"provider": "up", "name": "main", "auth_type": "api_key",
		"api_key": "sk-main", "max_concurrent": 2}, 201)
	a.admin("PATCH", "/api/settings/resilience", map[string]any{"request_queue": map[string]any{"max_wait_ms": 30_000}}, 200)
	key := a.admin("POST", "/api/keys", map[string]any{"name": "kill"}, 201)["key"].(string)
	a.waitModel(key, "up/gpt-test")
	b.waitModel(key, "up/gpt-test")

	for range 2 { // A's two streams: each holds a slot once its first event is through
		body := strings.Replace(testenv.ChatBody, `"model"`, `"stream":true,"model"`, 1)
		req, _ := http.NewRequest("POST", a.base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			t.Fatalf("stream on A: %d %s", resp.StatusCode, testenv.ReadAll(t, resp))
		}
		if _, err := resp.Body.Read(make([]byte, 64)); err != nil {
			t.Fatalf("stream on A sent nothing: %v", err)
		}
		<-arrived
	}

	answered := make(chan int, 1)
	go func() { answered <- b.chat(key) }()
	select { // A renews its leases: B waits across several lease times
	case at := <-arrived:
		t.Fatalf("B's request reached the upstream %v before A died, past max_concurrent 2", time.Since(at))
	case <-time.After(3 * ttl):
	}
	a.kill()
	killed := time.Now()
	select {
	case at := <-arrived:
		waited := at.Sub(killed)
		t.Logf("B's request reached the upstream %v after the kill (lease time %v)", waited, ttl)
		if waited > 3*ttl { // the lease time, a waiter's next look (a third of it) and a busy machine's slack
			t.Fatalf("A's slots came free %v after the kill, lease time %v", waited, ttl)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("A's slots never came free after the kill")
	}
	if st := <-answered; st != 200 {
		t.Fatalf("B's request answered %d", st)
	}
}

// A key's limits hold across the replicas, not per replica: three requests spread over three
// replicas use up a limit of three a minute everywhere, and a daily budget of $2 spent half on
// each of two replicas is spent on the third; each budget threshold is announced once, by one
// replica.
func TestReplicasShareKeyLimits(t *testing.T) {
	var mu sync.Mutex
	var hooks []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hooks = append(hooks, string(b))
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	rs := testenv.NewReplicas(t, 3, nil)
	a := rs[0]
	testenv.AwayFromMidnight(a.Clock, 10*time.Minute) // the clock moves a minute on: the day's spend must stay
	a.AddProvider("up", up.URL+"/v1")
	a.AddConnection("up", "main", "sk-main", 0)
	key, id := testenv.LimitedKey(a, "agent", map[string]any{"rpm_limit": 3, "daily_budget_usd": 2, "budget_webhook_url": hook.URL})
	for _, e := range rs {
		e.WaitModels(key, "up/gpt-test")
	}
	testenv.SetPrice(a, "up/gpt-test", 100000, 100000, 0, 0) // $0.50 a request
	eventually(t, "the price reaches every replica", func() bool {
		for _, e := range rs {
			m, _ := e.MustAPI("GET", "/api/settings/prices", nil, 200)["models"].(map[string]any)
			if m["up/gpt-test"] == nil {
				return false
			}
		}
		return true
	})
	seen := func(e *testenv.Env, requests, spend float64) bool {
		u := testenv.KeyUse(e, id)
		return u["requests_last_minute"] == requests && testenv.Near(u["day_spend_usd"].(float64), spend)
	}
	for i, e := range rs { // one request on each replica; each sees those before it
		r := e.Chat(context.Background(), key, testenv.ChatBody)
		if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("request %d on replica %d: %d %s", i+1, i, r.StatusCode, b)
		}
		took := eventually(t, "every replica counts the key's requests and spend", func() bool {
			for _, o := range rs {
				if !seen(o, float64(i+1), 0.5*float64(i+1)) {
					return false
				}
			}
			return true
		})
		t.Logf("request %d counted on every replica after %v", i+1, took)
	}
	r := a.Chat(context.Background(), key, testenv.ChatBody)
	if ref := testenv.ReadRefusal(t, r); ref.Diagnostics.Limit != "key_rate_limited" {
		t.Fatalf("the 4th request of the minute: %+v, want key_rate_limited", ref)
	}
	a.Clock.Advance(61 * time.Second) // the replicas share the clock: the minute is over
	r = rs[1].Chat(context.Background(), key, testenv.ChatBody)
	if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("after the minute: %d %s", r.StatusCode, b)
	}
	eventually(t, "the budget is spent on every replica", func() bool {
		for _, o := range rs {
			if !testenv.Near(testenv.KeyUse(o, id)["day_spend_usd"].(float64), 2) {
				return false
			}
		}
		return true
	})
	r = rs[2].Chat(context.Background(), key, testenv.ChatBody)
	if ref := testenv.ReadRefusal(t, r); ref.Diagnostics.Limit != "key_budget_exceeded" {
		t.Fatalf("after $2 of $2 spent over two replicas: %+v, want key_budget_exceeded", ref)
	}
	eventually(t, "the 80 % and 100 % thresholds are announced", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(hooks) >= 2
	})
	for _, e := range rs {
		e.Clock.Advance(time.Hour) // a retry of any delivery would be due
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(hooks) != 2 {
		t.Fatalf("%d budget deliveries, want 2 (80 %% and 100 %%, each by one replica): %q", len(hooks), hooks)
	}
}

// An exclusive session lease taken on replica A holds on B and C: the holder's requests on B
// reach its connection, everybody else's on C keep off it, and a release on C frees it on A.
func TestReplicasShareSessionLeases(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	rs := testenv.NewReplicas(t, 3, nil)
	a, b, c := rs[0], rs[1], rs[2]
	a.AddProvider("up", up.URL+"/v1")
	c1 := a.AddConnection("up", "c1", "sk-c1", 0)
	a.AddConnection("up", "c2", "sk-c2", 1)
	plain := a.NewKey()
	key, _ := testenv.LeaseKey(a, "agent", c1)
	for _, e := range rs {
		e.WaitModels(plain, "up/gpt-test")
	}
	st, got, _ := testenv.LeaseCall(t, a, "/v1/session-leases", key, map[string]any{"action": "acquire"})
	owner, _ := got["owner"].(string)
	if st != 200 || owner == "" {
		t.Fatalf("acquire on A: %d %v", st, got)
	}
	held := map[string]string{"X-Switchyard-Lease-Owner": owner, "X-Switchyard-Lease-Generation": "1"}
	chat := func(e *testenv.Env, k string, h map[string]string) int {
		r := e.Post(context.Background(), "/v1/chat/completions", k, testenv.ChatBody, h)
		testenv.ReadAll(t, r)
		return r.StatusCode
	}
	took := eventually(t, "B serves the lease holder", func() bool { return chat(b, key, held) == 200 })
	t.Logf("the lease reached B after %v", took)
	// That B serves the holder does not mean the lease has reached C: until it has, C may
	// still give c1 to another key.
	eventually(t, "C keeps other keys off the leased connection", func() bool {
		n := len(up.ChatRequests())
		if chat(c, plain, nil) != 200 {
			return false
		}
		used := testenv.UsedKeys(up, n)
		return len(used) == 1 && used[0] == "sk-c2"
	})
	from := len(up.ChatRequests())
	for range 2 {
		if st := chat(b, key, held); st != 200 {
			t.Fatalf("the holder on B: %d", st)
		}
		if st := chat(c, plain, nil); st != 200 {
			t.Fatalf("another key on C: %d", st)
		}
	}
	if got := strings.Join(testenv.UsedKeys(up, from), ","); got != "sk-c1,sk-c2,sk-c1,sk-c2" {
		t.Fatalf("upstream keys %s: the holder must get c1 on B, everybody else c2 on C", got)
	}
	if st, out, _ := testenv.LeaseCall(t, c, "/v1/session-leases", key, map[string]any{"action": "release", "owner": owner}); st != 200 || out["released"] != true {
		t.Fatalf("release on C: %d %v", st, out)
	}
	eventually(t, "A gives c1 to everybody again", func() bool {
		from := len(up.ChatRequests())
		return chat(a, plain, nil) == 200 && strings.Join(testenv.UsedKeys(up, from), ",") == "sk-c1"
	})
}

// A stored Responses answer learned on replica A is found on replica B: a request that names
// what it stored goes to the connection of the organisation that holds it at once.
func TestReplicasShareStoredResponses(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	answers := 0
	org := map[string]string{"sk-org-a": "a", "sk-org-b": "b"}
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-5")
	up.ServeResponses(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		o := org[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		mu.Lock()
		calls = append(calls, o)
		mu.Unlock()
		// An organisation holds the ids that name it: resp_b_…, msg_b_… are b's.
		var req struct {
			Prev  string `json:"previous_response_id"`
			Input []struct{ Type, ID string }
		}
		_ = json.Unmarshal(b, &req)
		if req.Prev != "" && !strings.HasPrefix(req.Prev, "resp_"+o+"_") {
			testenv.Status(400, nil, `{"error":{"message":"Previous response with id '`+req.Prev+`' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`)(w, r)
			return
		}
		for _, it := range req.Input {
			if it.Type == "item_reference" && !strings.HasPrefix(it.ID, "msg_"+o+"_") {
				testenv.Status(404, nil, `{"error":{"message":"Item with id '`+it.ID+`' not found.","type":"invalid_request_error","param":"input","code":null}}`)(w, r)
				return
			}
		}
		mu.Lock()
		answers++
		nth := answers
		mu.Unlock()
		var items []string // each answer's own ids: msg_<org>_<answer>_<item>
		for i := range 20 {
			items = append(items, fmt.Sprintf(`{"type":"message","id":"msg_%s_%d_%d","status":"completed","role":"assistant","content":[]}`, o, nth, i))
		}
		testenv.JSONAnswer(`{"id":"resp_`+o+`_`+fmt.Sprint(nth)+`","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[`+
			strings.Join(items, ",")+`],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`)(w, r)
	})
	called := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
	rs := testenv.NewReplicas(t, 2, nil)
	a, b := rs[0], rs[1]
	a.AddProviderOfType("multi", "openai", up.URL+"/v1")
	a.AddConnection("multi", "org-a", "sk-org-a", 0) // first
	a.AddConnection("multi", "org-b", "sk-org-b", 1)
	key := a.NewKey()
	for _, e := range rs {
		e.WaitModels(key, "multi/gpt-5")
	}
	// On A, a response of b's: a's not-found, then b's answer, whose twenty items A now knows.
	mu.Lock()
	first := answers + 1
	mu.Unlock()
	n := len(called())
	r := a.Post(context.Background(), "/v1/responses", key, `{"model":"multi/gpt-5","previous_response_id":"resp_b_0","input":"Go on."}`, nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 || strings.Join(called()[n:], " ") != "a b" {
		t.Fatalf("on A: %d %s, calls %q; want a's not-found, then b", r.StatusCode, got, called()[n:])
	}
	// On B, each try names another of those items, which B can only know from A (the replicas
	// agree within about 100 ms): once it has them, the request goes to b at once.
	for try := 0; ; try++ {
		n = len(called())
		r = b.Post(context.Background(), "/v1/responses", key,
			fmt.Sprintf(`{"model":"multi/gpt-5","input":[{"type":"item_reference","id":"msg_b_%d_%d"}]}`, first, try), nil)
		if got := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("on B: %d %s", r.StatusCode, got)
		}
		if strings.Join(called()[n:], " ") == "b" {
			t.Logf("B went to b at once on try %d", try+1)
			return
		}
		if try == 19 {
			t.Fatalf("B never learned where A's items are: calls %q", called()[n:])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Reasoning a connection refused on replica A is left out on replica B before the first call:
// a conversation that moves between replicas is not refused once on each.
func TestReplicasShareRefusedReasoning(t *testing.T) {
	var mu sync.Mutex
	refused := 0
	refusals := func() int {
		mu.Lock()
		defer mu.Unlock()
		return refused
	}
	refuse := testenv.Status(400, nil, `{"type":"error","error":{"type":"invalid_request_error",`+
		`"message":"messages.1.content.0: Invalid `+"`signature`"+` in `+"`thinking`"+` block"}}`)
	answer := testenv.MessagesAnswer()
	up := testenv.NewFakeAnthropic(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"signature":"another-model-`)) {
			mu.Lock()
			refused++
			mu.Unlock()
			refuse(w, r)
			return
		}
		answer(w, r)
	})
	rs := testenv.NewReplicas(t, 2, nil)
	a, b := rs[0], rs[1]
	a.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", a.ProviderID("anthropic")), map[string]any{"base_url": up.URL}, 200)
	a.AddConnection("anthropic", "main", "sk-ant-main", 0)
	key := a.NewKey()
	for _, e := range rs {
		e.WaitModels(key, "anthropic/claude-test")
	}
	// A conversation whose earlier turns carry thinking another model signed.
	conversation := func(sigs ...string) string {
		var msgs []string
		for _, s := range sigs {
			msgs = append(msgs, `{"role":"user","content":"Go on."}`,
				`{"role":"assistant","content":[{"type":"thinking","thinking":"Think.","signature":"`+s+`"},{"type":"text","text":"Done."}]}`)
		}
		msgs = append(msgs, `{"role":"user","content":"Once more."}`)
		return `{"model":"anthropic/claude-test","max_tokens":64,"thinking":{"type":"enabled","budget_tokens":32},"messages":[` +
			strings.Join(msgs, ",") + `]}`
	}
	var sigs []string
	for i := range 20 {
		sigs = append(sigs, fmt.Sprint("another-model-", i))
	}
	// On A: refused once, answered without them; A remembers all twenty.
	r := a.PostAnthropic("/v1/messages", key, conversation(sigs...), nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 || refusals() != 1 {
		t.Fatalf("on A: %d %s after %d refusals; want an answer after one", r.StatusCode, got, refusals())
	}
	// On B, each try carries another one of them, which B can only know from A: once it has
	// them, the request goes without it at once.
	for try := 0; ; try++ {
		n := refusals()
		r = b.PostAnthropic("/v1/messages", key, conversation(sigs[try]), nil)
		if got := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("on B: %d %s", r.StatusCode, got)
		}
		if refusals() == n {
			t.Logf("B left it out at once on try %d", try+1)
			return
		}
		if try == 19 {
			t.Fatal("B never learned what A's connection refused")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
