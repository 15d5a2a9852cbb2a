package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// answerFrom is a chat completion whose text names who answered.
func answerFrom(who string) string {
	return strings.Replace(testenv.CompletionJSON, "Hello there", "from "+who, 1)
}

// comboBody is a chat request for a model (a combo's name).
func comboBody(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
}

// twoProviders is a gateway with providers pa and pb (one connection each, model m), fake
// upstreams answering with a and b, no retries on the same target (failover is what is
// tested), and a client key.
func twoProviders(t *testing.T, a, b http.HandlerFunc) (*testenv.Env, *testenv.FakeUpstream, *testenv.FakeUpstream, string) {
	t.Helper()
	upA := testenv.NewFakeUpstream(t, a, "m")
	upB := testenv.NewFakeUpstream(t, b, "m")
	e := testenv.New(t)
	e.AddProvider("pa", upA.URL+"/v1")
	e.AddConnection("pa", "main", "sk-pa-main-0001", 0)
	e.AddProvider("pb", upB.URL+"/v1")
	e.AddConnection("pb", "main", "sk-pb-main-0001", 0)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	key := e.NewKey()
	return e, upA, upB, key
}

func addCombo(t *testing.T, e *testenv.Env, body map[string]any) {
	t.Helper()
	e.MustAPI("POST", "/api/combos", body, 201)
}

func target(provider, model string) map[string]any {
	return map[string]any{"provider": provider, "model": model}
}

// call posts a chat body and returns status, route header and body.
func chatCall(t *testing.T, e *testenv.Env, key, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	h := map[string]string{"X-Request-Id": sentRequests.next(e)}
	for k, v := range header {
		h[k] = v
	}
	r := e.Post(context.Background(), "/v1/chat/completions", key, body, h)
	return r.StatusCode, r.Header, testenv.ReadAll(t, r)
}

// sentRequests names each request chatCall sends (the gateway keeps a client's X-Request-Id), so
// that lastLogged finds the row of the latest one: the log's row is written just after the answer
// reached the client, and the newest row may still be the request before.
var sentRequests = &requestNames{last: map[*testenv.Env]string{}}

type requestNames struct {
	mu   sync.Mutex
	n    int
	last map[*testenv.Env]string
}

func (r *requestNames) next(e *testenv.Env) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	id := fmt.Sprintf("combo-test-%d", r.n)
	r.last[e] = id
	return id
}

func (r *requestNames) latest(e *testenv.Env) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[e]
}

// lastLogged is the newest request-log entry with its route.
func lastLogged(t *testing.T, e *testenv.Env) map[string]any {
	t.Helper()
	var list struct {
		Items []struct {
			ID        int64  `json:"id"`
			RequestID string `json:"request_id"`
		} `json:"items"`
	}
	want := sentRequests.latest(e) // "" when chatCall sent none: the newest row
	var id int64
	e.Eventually("the request is logged", func() bool {
		if e.API("GET", "/api/requests?limit=20", nil, &list) != 200 {
			return false
		}
		for _, it := range list.Items {
			if want == "" || it.RequestID == want {
				id = it.ID
				return true
			}
		}
		return false
	})
	var d map[string]any
	if code := e.API("GET", fmt.Sprintf("/api/requests/%d", id), nil, &d); code != 200 {
		t.Fatalf("request detail: %d", code)
	}
	return d
}

// routeOf reads the route of a logged request as "target outcome reason" lines.
func routeOf(d map[string]any) []string {
	var out []string
	steps, _ := d["route"].([]any)
	for _, s := range steps {
		m := s.(map[string]any)
		line := fmt.Sprint(m["target"], " ", m["outcome"])
		if r, ok := m["reason"].(string); ok {
			line += " " + r
		}
		out = append(out, line)
	}
	return out
}

// A combo over two providers: the first answers while it is up; killed, the second answers with
// a route header that says so; with both out, the 503 names each target, why, and for how long.
func TestComboFailsOverBetweenProviders(t *testing.T) {
	e, upA, upB, key := twoProviders(t, testenv.JSONAnswer(answerFrom("a")), testenv.JSONAnswer(answerFrom("b")))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"combo_cooldown_wait": map[string]any{"enabled": false}}, 200)
	addCombo(t, e, map[string]any{"name": "resilient-chat", "strategy": "priority",
		"targets": []any{target("pa", "m"), target("pb", "m")}})

	st, h, body := chatCall(t, e, key, comboBody("resilient-chat"), nil)
	if st != 200 || !strings.Contains(body, "from a") {
		t.Fatalf("first: %d %s", st, body)
	}
	if got := h.Get("X-Switchyard-Route"); got != "combo=resilient-chat; target=pa/m; attempts=1" {
		t.Fatalf("route header %q", got)
	}
	if sent := upA.ChatRequests(); len(sent) != 1 || gjson.Get(sent[0].Body, "model").String() != "m" {
		t.Fatalf("pa saw %+v", sent)
	}

	upA.Close() // the first provider goes away
	st, h, body = chatCall(t, e, key, comboBody("resilient-chat"), nil)
	if st != 200 || !strings.Contains(body, "from b") {
		t.Fatalf("after pa died: %d %s", st, body)
	}
	if got := h.Get("X-Switchyard-Route"); got != "combo=resilient-chat; target=pb/m; attempts=2" {
		t.Fatalf("route header after failover %q", got)
	}
	d := lastLogged(t, e)
	if d["combo"] != "resilient-chat" || d["provider"] != "pb" || d["failovers"].(float64) != 1 {
		t.Fatalf("logged %v", d)
	}
	if r := routeOf(d); len(r) != 2 || r[0] != "pa/m failed server_error" || r[1] != "pb/m answered" {
		t.Fatalf("route %v", r)
	}
	attempts := d["attempts"].([]any)
	if len(attempts) != 2 || attempts[0].(map[string]any)["target"] != "pa/m" || attempts[1].(map[string]any)["kind"] != "failover" {
		t.Fatalf("attempts %v", attempts)
	}

	// pa now cools: the next request passes it over without calling it.
	st, _, body = chatCall(t, e, key, comboBody("resilient-chat"), nil)
	if st != 200 || !strings.Contains(body, "from b") {
		t.Fatalf("with pa cooling: %d %s", st, body)
	}
	if r := routeOf(lastLogged(t, e)); len(r) != 2 || r[0] != "pa/m skipped connection_cooldown" {
		t.Fatalf("route with pa cooling %v", r)
	}

	// pa's cooldown runs on while pb is still up: when pb fails too, pa is the first back, with
	// part of a second left over (Retry-After and seconds_left round up).
	e.Clock.Advance(1500 * time.Millisecond)
	upB.Close()
	chatCall(t, e, key, comboBody("resilient-chat"), nil) // pb fails and cools too
	st, h, body = chatCall(t, e, key, comboBody("resilient-chat"), nil)
	if st != 503 || gjson.Get(body, "error.code").String() != "all_targets_cooling_down" {
		t.Fatalf("both out: %d %s", st, body)
	}
	now := e.Clock.Now()
	ex := gjson.Get(body, "diagnostics.excluded").Array()
	if len(ex) != 2 {
		t.Fatalf("diagnostics %s", gjson.Get(body, "diagnostics").Raw)
	}
	soonest := int64(-1)
	for i, want := range []string{"pa/m", "pb/m"} {
		x := ex[i]
		if x.Get("target").String() != want || x.Get("reason").String() != "connection_cooldown" || x.Get("seconds_left").Int() < 1 {
			t.Fatalf("excluded[%d] %s", i, x.Raw)
		}
		if left := x.Get("seconds_left").Int(); soonest < 0 || left < soonest {
			soonest = left
		}
	}
	if a, b := ex[0].Get("seconds_left").Int(), ex[1].Get("seconds_left").Int(); a >= b {
		t.Fatalf("pa cooled first and must be back first: seconds_left %d and %d", a, b)
	}
	if ra := h.Get("Retry-After"); ra != fmt.Sprint(soonest) {
		t.Fatalf("Retry-After %q, want the soonest seconds_left %d", ra, soonest)
	}
	// The 503 carries the decision the request log keeps: each target passed over, why, by what
	// and until when.
	route := gjson.Get(body, "diagnostics.route").Array()
	if len(route) != 2 {
		t.Fatalf("diagnostics.route %s", gjson.Get(body, "diagnostics").Raw)
	}
	for i, want := range []string{"pa/m", "pb/m"} {
		step := route[i]
		until := step.Get("until").Time()
		if step.Get("target").String() != want || step.Get("outcome").String() != "skipped" ||
			step.Get("reason").String() != "connection_cooldown" || step.Get("source").String() != "connection main" ||
			step.Get("round").Int() != 1 {
			t.Fatalf("route[%d] %s", i, step.Raw)
		}
		if left := until.Sub(now); left <= 0 || int64((left+time.Second-1)/time.Second) != ex[i].Get("seconds_left").Int() {
			t.Fatalf("route[%d] until %v is %v away, excluded says %d s", i, until, left, ex[i].Get("seconds_left").Int())
		}
	}
	logged := lastLogged(t, e)
	if got, want := routeOf(logged), []string{"pa/m skipped connection_cooldown", "pb/m skipped connection_cooldown"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("logged route %v", got)
	}
	for i, step := range logged["route"].([]any) {
		if src := step.(map[string]any)["source"]; src != route[i].Get("source").String() {
			t.Fatalf("logged route[%d] source %v, diagnostics %s", i, src, route[i].Raw)
		}
	}
	if strings.Contains(body, "sk-pa-main-0001") || strings.Contains(body, "sk-pb-main-0001") {
		t.Fatalf("a credential in the answer: %s", body)
	}
	if !strings.Contains(gjson.Get(body, "error.message").String(), "resilient-chat") {
		t.Fatalf("message %s", body)
	}
	// The Anthropic and Responses surfaces carry the same diagnostics beside their own error.
	for _, c := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"resilient-chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"resilient-chat","input":"hi"}`},
	} {
		r := e.Post(context.Background(), c.path, key, c.body, map[string]string{"anthropic-version": "2023-06-01"})
		got := testenv.ReadAll(t, r)
		steps := gjson.Get(got, "diagnostics.route").Array()
		if r.StatusCode != 503 || r.Header.Get("Retry-After") != fmt.Sprint(soonest) || len(steps) != 2 ||
			steps[0].Get("reason").String() != "connection_cooldown" || steps[1].Get("target").String() != "pb/m" {
			t.Fatalf("%s: %d %s", c.path, r.StatusCode, got)
		}
	}
}

// A plain invalid request stops the combo: the second target would refuse it alike.
func TestComboStopsOnAnInvalidRequest(t *testing.T) {
	e, _, upB, key := twoProviders(t,
		testenv.Status(400, nil, `{"error":{"message":"messages: field required","type":"invalid_request_error"}}`),
		testenv.JSONAnswer(answerFrom("b")))
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	st, _, body := chatCall(t, e, key, comboBody("c"), nil)
	if st != 400 || !strings.Contains(body, "field required") {
		t.Fatalf("%d %s", st, body)
	}
	if n := len(upB.ChatRequests()); n != 0 {
		t.Fatalf("the second target was called %d times", n)
	}
	if r := routeOf(lastLogged(t, e)); len(r) != 1 || r[0] != "pa/m stopped request_rejected" {
		t.Fatalf("route %v", r)
	}
	// The operator decides: request_rejected → skip moves on.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"combo_routing": map[string]any{
		"on_failure": map[string]any{"request_rejected": "skip"}}}, 200)
	if st, _, body = chatCall(t, e, key, comboBody("c"), nil); st != 200 || !strings.Contains(body, "from b") {
		t.Fatalf("with skip: %d %s", st, body)
	}
}

// A 402 on the first leg never spends the budget of the second, whatever the retry settings:
// each target has its own.
func TestComboPaymentRequiredReachesTheHealthyLeg(t *testing.T) {
	e, _, upB, key := twoProviders(t,
		testenv.Status(402, nil, `{"error":{"message":"Insufficient credits","type":"insufficient_quota"}}`),
		testenv.JSONAnswer(answerFrom("b")))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 3, "max_attempts": 1}}, 200)
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	st, h, body := chatCall(t, e, key, comboBody("c"), nil)
	if st != 200 || !strings.Contains(body, "from b") || len(upB.ChatRequests()) != 1 {
		t.Fatalf("%d %s", st, body)
	}
	if got := h.Get("X-Switchyard-Route"); got != "combo=c; target=pb/m; attempts=2" {
		t.Fatalf("route %q", got)
	}
}

// A combo nested three deep with every target failing makes at most 30 upstream calls.
func TestComboAttemptCapAcrossNesting(t *testing.T) {
	var calls atomic.Int64
	failing := func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		testenv.Status(500, nil, `{"error":{"message":"boom"}}`)(w, r)
	}
	up := testenv.NewFakeUpstream(t, failing, "m")
	e := testenv.New(t)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"enabled": false}, "combo_cooldown_wait": map[string]any{"enabled": false}}, 200)
	var leaves []any
	for i := range 12 {
		p := fmt.Sprintf("p%d", i)
		e.AddProvider(p, up.URL+"/v1")
		for j := range 3 {
			e.AddConnection(p, fmt.Sprintf("k%d", j), fmt.Sprintf("sk-%d-%d-secret", i, j), 0)
		}
		leaves = append(leaves, target(p, "m"))
	}
	addCombo(t, e, map[string]any{"name": "inner", "targets": leaves[:6]})
	addCombo(t, e, map[string]any{"name": "middle", "targets": append([]any{map[string]any{"combo": "inner"}}, leaves[6:9]...)})
	addCombo(t, e, map[string]any{"name": "outer", "targets": append([]any{map[string]any{"combo": "middle"}}, leaves[9:]...)})
	key := e.NewKey()
	st, h, body := chatCall(t, e, key, comboBody("outer"), nil)
	if st < 500 || calls.Load() != 30 {
		t.Fatalf("%d calls, answer %d %s", calls.Load(), st, body)
	}
	if h.Get("X-Should-Retry") != "false" || !strings.HasSuffix(h.Get("X-Switchyard-Route"), "attempts=30") {
		t.Fatalf("headers %v", h)
	}
	d := lastLogged(t, e)
	if d["attempt_count"].(float64) != 30 {
		t.Fatalf("logged %v attempts", d["attempt_count"])
	}
	// The combo's own cap may only lower it.
	e.MustAPI("PATCH", "/api/combos/"+comboIDByName(t, e, "outer"), map[string]any{"max_attempts": 4}, 200)
	calls.Store(0)
	chatCall(t, e, key, comboBody("outer"), nil)
	if calls.Load() != 4 {
		t.Fatalf("max_attempts 4 made %d calls", calls.Load())
	}
}

func comboIDByName(t *testing.T, e *testenv.Env, name string) string {
	t.Helper()
	var list struct {
		Items []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"items"`
	}
	e.API("GET", "/api/combos", nil, &list)
	for _, c := range list.Items {
		if c.Name == name {
			return itoa(c.ID)
		}
	}
	t.Fatalf("no combo %s", name)
	return ""
}

// No target can serve and no timer will change that: 404 no_executable_targets, not retried.
func TestComboWithNothingExecutable(t *testing.T) {
	e := testenv.New(t)
	e.AddProvider("empty1", "http://127.0.0.1:9/v1")
	e.AddProvider("empty2", "http://127.0.0.1:9/v1")
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("empty1", "m"), target("empty2", "m")}})
	key := e.NewKey()
	st, h, body := chatCall(t, e, key, comboBody("c"), nil)
	if st != 404 || gjson.Get(body, "error.code").String() != "no_executable_targets" || h.Get("X-Should-Retry") != "false" {
		t.Fatalf("%d %v %s", st, h, body)
	}
	if ex := gjson.Get(body, "diagnostics.excluded.#.reason").String(); ex != `["no_connections","no_connections"]` {
		t.Fatalf("excluded %s", ex)
	}
	// The Anthropic surface says the same in its shape.
	r := e.Post(context.Background(), "/v1/messages", key, `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"anthropic-version": "2023-06-01"})
	if body := testenv.ReadAll(t, r); r.StatusCode != 404 || gjson.Get(body, "error.type").String() != "not_found_error" {
		t.Fatalf("messages: %d %s", r.StatusCode, body)
	}
}

// Round-robin rotates visibly: successive requests start at successive targets.
func TestComboRoundRobinRotates(t *testing.T) {
	e, _, _, key := twoProviders(t, testenv.JSONAnswer(answerFrom("a")), testenv.JSONAnswer(answerFrom("b")))
	addCombo(t, e, map[string]any{"name": "rr", "strategy": "round-robin", "targets": []any{target("pa", "m"), target("pb", "m")}})
	var got []string
	for range 4 {
		_, _, body := chatCall(t, e, key, comboBody("rr"), nil)
		got = append(got, gjson.Get(body, "choices.0.message.content").String())
	}
	if strings.Join(got, ",") != "from a,from b,from a,from b" {
		t.Fatalf("round robin served %v", got)
	}
}

// A saturated target (its one connection busy, a request waiting in its line) is passed over for
// the next that can start now.
func TestComboPassesOverASaturatedTarget(t *testing.T) {
	release := make(chan struct{})
	slow := func(w http.ResponseWriter, r *http.Request) {
		<-release
		testenv.JSONAnswer(answerFrom("a"))(w, r)
	}
	e, upA, _, key := twoProviders(t, slow, testenv.JSONAnswer(answerFrom("b")))
	id := e.ConnectionID("main") // pa's (added first)
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", id), map[string]any{"max_concurrent": 1}, 200)
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	// One request holds pa's slot, a second waits in its line.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", e.Base+"/v1/chat/completions", strings.NewReader(`{"model":"pa/m","messages":[]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			if r, err := http.DefaultClient.Do(req); err == nil {
				r.Body.Close()
			}
		}()
	}
	e.Eventually("pa is saturated", func() bool {
		q := e.QueueStats(id)
		return len(upA.ChatRequests()) == 1 && q["waiting"] != nil && q["waiting"].(float64) >= 1
	})
	st, _, body := chatCall(t, e, key, comboBody("c"), nil)
	if st != 200 || !strings.Contains(body, "from b") {
		t.Fatalf("%d %s", st, body)
	}
	if r := routeOf(lastLogged(t, e)); len(r) != 2 || r[0] != "pa/m deferred saturated" || r[1] != "pb/m answered" {
		t.Fatalf("route %v", r)
	}
}

// cool: a model a provider does not have is rested on that connection, so the next requests pass
// it over without calling it; a success on it ends the rest.
func TestComboRestsAMissingModel(t *testing.T) {
	e, upA, _, key := twoProviders(t,
		testenv.Status(404, nil, `{"error":{"message":"The model m does not exist","type":"invalid_request_error","code":"model_not_found"}}`),
		testenv.JSONAnswer(answerFrom("b")))
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	for range 3 {
		if st, _, body := chatCall(t, e, key, comboBody("c"), nil); st != 200 || !strings.Contains(body, "from b") {
			t.Fatalf("%d %s", st, body)
		}
	}
	if n := len(upA.ChatRequests()); n != 1 {
		t.Fatalf("the missing model was called %d times", n)
	}
	if r := routeOf(lastLogged(t, e)); r[0] != "pa/m skipped target_cooldown" {
		t.Fatalf("route %v", r)
	}
	// The Combos page says so beside the target, as the engine sees it.
	if st, page := testenv.Fetch(t, e.Login(), "GET", e.Base+"/combos", nil, nil); st != 200 || !strings.Contains(page, "Passed over: rested by a combo") {
		t.Fatalf("combos page %d lacks the rest", st)
	}
	// A plain request names the provider itself and is served as asked (the rest is the combo's).
	if st, _, _ := chatCall(t, e, key, `{"model":"pa/m","messages":[]}`, nil); st != 404 || len(upA.ChatRequests()) != 2 {
		t.Fatalf("plain request: %d, pa saw %d", st, len(upA.ChatRequests()))
	}
	// The rest ends when its time passes.
	e.Clock.Advance(3 * time.Minute)
	chatCall(t, e, key, comboBody("c"), nil)
	if n := len(upA.ChatRequests()); n != 3 {
		t.Fatalf("after the rest: pa saw %d", n)
	}
}

// A target that does not answer within the combo's target timeout is left for the next.
func TestComboTargetTimeout(t *testing.T) {
	var e *testenv.Env
	slow := func(w http.ResponseWriter, r *http.Request) {
		e.Clock.Advance(20 * time.Second) // the answer takes 20 s of the gateway's time
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
			testenv.JSONAnswer(answerFrom("a"))(w, r)
		}
	}
	e, _, _, key := twoProviders(t, slow, testenv.JSONAnswer(answerFrom("b")))
	addCombo(t, e, map[string]any{"name": "c", "target_timeout_ms": 10_000, "targets": []any{target("pa", "m"), target("pb", "m")}})
	st, _, body := chatCall(t, e, key, comboBody("c"), nil)
	if st != 200 || !strings.Contains(body, "from b") {
		t.Fatalf("%d %s", st, body)
	}
	if r := routeOf(lastLogged(t, e)); len(r) != 2 || !strings.HasPrefix(r[0], "pa/m failed") {
		t.Fatalf("route %v", r)
	}
}

// The key's allow-list names the combo; its targets need not be listed.
func TestComboAllowedByName(t *testing.T) {
	e, _, _, _ := twoProviders(t, testenv.JSONAnswer(answerFrom("a")), testenv.JSONAnswer(answerFrom("b")))
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	var k struct {
		Key string `json:"key"`
	}
	if code := e.API("POST", "/api/keys", map[string]any{"name": "narrow", "allowed_models": []string{"c"}}, &k); code != 201 {
		t.Fatalf("key: %d", code)
	}
	if st, _, body := chatCall(t, e, k.Key, comboBody("c"), nil); st != 200 {
		t.Fatalf("combo: %d %s", st, body)
	}
	if st, _, _ := chatCall(t, e, k.Key, `{"model":"pa/m","messages":[]}`, nil); st != 403 {
		t.Fatalf("a target by name: %d", st)
	}
}

// Streams through a combo: a failing first target is passed over before any byte went out, and
// the stream comes from the second.
func TestComboStreamFailsOverBeforeTheFirstByte(t *testing.T) {
	e, _, _, key := twoProviders(t,
		testenv.Status(503, nil, `{"error":{"message":"overloaded"}}`),
		testenv.SSEAnswer(testenv.SSEChunks, -1))
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	st, h, body := chatCall(t, e, key, `{"model":"c","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if st != 200 || !strings.Contains(body, "[DONE]") || h.Get("X-Switchyard-Route") != "combo=c; target=pb/m; attempts=2" {
		t.Fatalf("%d %v %s", st, h, body)
	}
}

// The decision trace is on the request page too.
func TestComboRouteOnTheRequestPage(t *testing.T) {
	e, upA, _, key := twoProviders(t, testenv.JSONAnswer(answerFrom("a")), testenv.JSONAnswer(answerFrom("b")))
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	upA.Close()
	chatCall(t, e, key, comboBody("c"), nil)
	d := lastLogged(t, e)
	c := e.Login()
	st, page := testenv.Fetch(t, c, "GET", e.Base+fmt.Sprintf("/requests/%d", int64(d["id"].(float64))), nil, nil)
	if st != 200 || !strings.Contains(page, `id="route"`) || !strings.Contains(page, "pa/m") || !strings.Contains(page, "pb/m") {
		t.Fatalf("request page: %d", st)
	}
	raw, _ := json.Marshal(d["route"])
	if !strings.Contains(string(raw), `"action":"skip"`) {
		t.Fatalf("route %s", raw)
	}
}

// flaky answers with fail for the first n calls, then with ok.
func flaky(n int64, fail, ok http.HandlerFunc) http.HandlerFunc {
	var calls atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			fail(w, r)
			return
		}
		ok(w, r)
	}
}

// passTime runs fn while the gateway's clock moves on in steps, as time would; it fails the test
// when fn does not return within limit of the gateway's time.
func passTime(t *testing.T, e *testenv.Env, step, limit time.Duration, fn func()) time.Duration {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	start := e.Clock.Now()
	for {
		select {
		case <-done:
			return e.Clock.Since(start)
		case <-time.After(5 * time.Millisecond):
			if e.Clock.Since(start) > limit {
				t.Fatalf("still waiting after %v of the gateway's time", limit)
			}
			e.Clock.Advance(step)
		}
	}
}

var rateLimited = testenv.Status(429, map[string]string{"Retry-After": "20"},
	`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)

var outOfQuota = testenv.Status(429, map[string]string{"Retry-After": "120"},
	`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`)

// When every target is rate limited for a short while, the combo waits for the first to come
// back and dispatches again, with heartbeats to a streaming client meanwhile.
func TestComboWaitsOutAShortCooldown(t *testing.T) {
	e, _, _, key := twoProviders(t, flaky(1, rateLimited, testenv.SSEAnswer(testenv.SSEChunks, -1)),
		flaky(1, rateLimited, testenv.SSEAnswer(testenv.SSEChunks, -1)))
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	var st int
	var body string
	waited := passTime(t, e, 250*time.Millisecond, time.Minute, func() {
		st, _, body = chatCall(t, e, key, `{"model":"c","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	})
	if st != 200 || !strings.Contains(body, "[DONE]") || !strings.Contains(body, ": waiting for a target") {
		t.Fatalf("%d %q", st, body)
	}
	if waited < 20*time.Second {
		t.Fatalf("answered after %v: the cooldown was not waited out", waited)
	}
	r := routeOf(lastLogged(t, e))
	if len(r) != 3 || r[0] != "pa/m failed rate_limit" || r[1] != "pb/m failed rate_limit" || r[2] != "pa/m answered" {
		t.Fatalf("route %v", r)
	}
}

// Quota is never waited for (unless the combo holds requests until the reset): the answer comes
// at once, 429 with the reset as Retry-After.
func TestComboNeverWaitsForQuota(t *testing.T) {
	e, _, _, key := twoProviders(t, outOfQuota, outOfQuota)
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	start := e.Clock.Now()
	st, h, body := chatCall(t, e, key, comboBody("c"), nil)
	if st != 429 || e.Clock.Since(start) != 0 || h.Get("Retry-After") != "120" {
		t.Fatalf("%d after %v, Retry-After %q: %s", st, e.Clock.Since(start), h.Get("Retry-After"), body)
	}
	// Both targets now rest for their quota: the next answer is the combo's own 429.
	st, h, body = chatCall(t, e, key, comboBody("c"), nil)
	if st != 429 || gjson.Get(body, "error.code").String() != "all_targets_cooling_down" || h.Get("Retry-After") != "120" {
		t.Fatalf("%d %v %s", st, h, body)
	}
}

// A wait longer than combo_cooldown_wait allows is not waited: the combo answers at once.
func TestComboCooldownWaitRespectsItsBounds(t *testing.T) {
	e, _, _, key := twoProviders(t, rateLimited, rateLimited)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"combo_cooldown_wait": map[string]any{"max_wait_ms": 10_000, "budget_ms": 10_000}}, 200)
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	start := e.Clock.Now()
	if st, _, _ := chatCall(t, e, key, comboBody("c"), nil); st != 429 || e.Clock.Since(start) != 0 {
		t.Fatalf("%d after %v", st, e.Clock.Since(start))
	}
}

// dispatchRounds reads the logged route of a combo whose one target stays rate limited: the
// round of each step, each of which must be a failed dispatch of that target.
func dispatchRounds(t *testing.T, d map[string]any) []int {
	t.Helper()
	var out []int
	steps, _ := d["route"].([]any)
	for _, s := range steps {
		m := s.(map[string]any)
		if m["target"] != "pa/m" || m["outcome"] != "failed" || m["reason"] != "rate_limit" {
			t.Fatalf("step %v of %v", m, steps)
		}
		out = append(out, int(m["round"].(float64)))
	}
	return out
}

// The wait tests below use a combo of one target: with two, which of them is back when a wait
// ends would depend on whether one of the test clock's steps fell between their failures.

// budget_ms bounds the waits of a request together: two 20 s waits fit in a 50 s budget, a third
// does not, though each is well under max_wait_ms and max_attempts allows more.
func TestComboCooldownWaitBudgetBoundsAllWaits(t *testing.T) {
	e, upA, _, key := twoProviders(t, rateLimited, rateLimited)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"enabled": false},
		"combo_cooldown_wait": map[string]any{"max_wait_ms": 30_000, "budget_ms": 50_000, "max_attempts": 5}}, 200)
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m")}})
	var st int
	var h http.Header
	waited := passTime(t, e, 250*time.Millisecond, 5*time.Minute, func() { st, h, _ = chatCall(t, e, key, comboBody("c"), nil) })
	if st != 429 || len(upA.ChatRequests()) != 3 {
		t.Fatalf("%d after %v; pa called %d times", st, waited, len(upA.ChatRequests()))
	}
	if waited < 40*time.Second || waited >= 45*time.Second {
		t.Fatalf("answered after %v: want two waits of about 20 s", waited)
	}
	if got := fmt.Sprint(dispatchRounds(t, lastLogged(t, e))); got != "[1 2 3]" {
		t.Fatalf("rounds %s", got)
	}
	if ra := h.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After %q", ra)
	}
}

// max_attempts caps the number of waits: with the defaults (5 waits, 90 s each, 300 s in all)
// a combo whose target stays rate limited (20 s each time) dispatches six rounds, then answers
// the last 429. (The breaker is off: only the rate limits' own 20 s cooldowns are waited for.)
func TestComboCooldownWaitCapsItsAttempts(t *testing.T) {
	e, upA, _, key := twoProviders(t, rateLimited, rateLimited)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"enabled": false}}, 200)
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m")}})
	var st int
	waited := passTime(t, e, 250*time.Millisecond, 10*time.Minute, func() { st, _, _ = chatCall(t, e, key, comboBody("c"), nil) })
	if st != 429 || len(upA.ChatRequests()) != 6 {
		t.Fatalf("%d after %v; pa called %d times", st, waited, len(upA.ChatRequests()))
	}
	if waited < 100*time.Second || waited >= 105*time.Second {
		t.Fatalf("answered after %v: want five waits of about 20 s", waited)
	}
	if got := fmt.Sprint(dispatchRounds(t, lastLogged(t, e))); got != "[1 2 3 4 5 6]" {
		t.Fatalf("rounds %s", got)
	}
	// A lower setting waits fewer times.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"combo_cooldown_wait": map[string]any{"max_attempts": 1}}, 200)
	e.Clock.Advance(time.Minute) // the target is back
	passTime(t, e, 250*time.Millisecond, 5*time.Minute, func() { st, _, _ = chatCall(t, e, key, comboBody("c"), nil) })
	if st != 429 || len(upA.ChatRequests()) != 8 {
		t.Fatalf("max_attempts 1: %d; pa called %d times", st, len(upA.ChatRequests()))
	}
	if got := fmt.Sprint(dispatchRounds(t, lastLogged(t, e))); got != "[1 2]" {
		t.Fatalf("max_attempts 1: rounds %s", got)
	}
}

// answersAtOnce runs fn, a request that must be answered without the gateway's clock moving; a
// request that waits on the gateway's clock would never return, so it fails the test after a
// while of real time instead.
func answersAtOnce(t *testing.T, e *testenv.Env, what string, fn func()) {
	t.Helper()
	start := e.Clock.Now()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer, the combo waits", what)
	}
	if d := e.Clock.Since(start); d != 0 {
		t.Fatalf("%s: answered after %v of the gateway's time", what, d)
	}
}

// A combo never waits for targets out for their credentials or for a missing model, though each
// is out for a timer the wait's bounds would allow: the answer comes at once.
func TestComboNeverWaitsForAuthOrAMissingModel(t *testing.T) {
	cases := []struct {
		name   string
		fail   http.HandlerFunc
		patch  map[string]any
		status int
		reason string
	}{
		{"expired credential", testenv.Status(401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`),
			map[string]any{"combo_routing": map[string]any{"on_failure": map[string]any{"auth_error": "cool"}}}, 401, "auth_error"},
		{"missing model", testenv.Status(404, nil, `{"error":{"message":"The model m does not exist","type":"invalid_request_error","code":"model_not_found"}}`),
			nil, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, upA, upB, key := twoProviders(t, tc.fail, tc.fail)
			patch := map[string]any{"combo_cooldown_wait": map[string]any{"max_wait_ms": 300_000, "budget_ms": 300_000}}
			for k, v := range tc.patch {
				patch[k] = v
			}
			e.MustAPI("PATCH", "/api/settings/resilience", patch, 200)
			addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
			var st int
			answersAtOnce(t, e, "both targets fail", func() { st, _, _ = chatCall(t, e, key, comboBody("c"), nil) })
			if st != tc.status || len(upA.ChatRequests()) != 1 || len(upB.ChatRequests()) != 1 {
				t.Fatalf("%d; pa called %d times, pb %d", st, len(upA.ChatRequests()), len(upB.ChatRequests()))
			}
			want := []string{"pa/m failed " + tc.reason, "pb/m failed " + tc.reason}
			if got := routeOf(lastLogged(t, e)); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("route %v", got)
			}
			// Both targets are now rested for a time a wait could cover, and still no wait.
			var body string
			answersAtOnce(t, e, "both targets rest", func() { st, _, body = chatCall(t, e, key, comboBody("c"), nil) })
			if st != 503 || gjson.Get(body, "error.code").String() != "all_targets_cooling_down" || len(upA.ChatRequests()) != 1 {
				t.Fatalf("%d %s", st, body)
			}
			for i, x := range gjson.Get(body, "diagnostics.excluded").Array() {
				if left := x.Get("seconds_left").Int(); x.Get("detail").String() != tc.reason || left < 1 || left > 300 {
					t.Fatalf("excluded[%d] %s", i, x.Raw)
				}
			}
		})
	}
}

// A client that leaves ends the wait.
func TestComboWaitEndsWhenTheClientLeaves(t *testing.T) {
	e, _, _, key := twoProviders(t, rateLimited, rateLimited)
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", e.Base+"/v1/chat/completions", strings.NewReader(comboBody("c")))
		req.Header.Set("Authorization", "Bearer "+key)
		if r, err := http.DefaultClient.Do(req); err == nil {
			r.Body.Close()
		}
	}()
	e.Eventually("both targets were tried and the combo waits", func() bool {
		return strings.Contains(e.Metrics(), `switchyard_upstream_attempts_total{outcome="rate_limit",provider="pb"} 1`)
	})
	cancel()
	<-done
	e.Eventually("the request ended as the client's", func() bool {
		return lastLogged(t, e)["error_code"] == "client_closed"
	})
}

// wait_until_reset holds a request while every target is out of quota with a known reset, and
// dispatches it at the reset.
func TestComboWaitsUntilTheQuotaResets(t *testing.T) {
	e, _, upB, key := twoProviders(t, flaky(1, outOfQuota, testenv.JSONAnswer(answerFrom("a"))), outOfQuota)
	addCombo(t, e, map[string]any{"name": "c", "wait_until_reset": true, "wait_until_reset_max_ms": 300_000,
		"targets": []any{target("pa", "m"), target("pb", "m")}})
	var st int
	var body string
	waited := passTime(t, e, time.Second, 10*time.Minute, func() { st, _, body = chatCall(t, e, key, comboBody("c"), nil) })
	if st != 200 || !strings.Contains(body, "from a") || waited < 120*time.Second {
		t.Fatalf("%d after %v: %s", st, waited, body)
	}
	// A reset further away than the cap is not waited for: 429 at once, Retry-After the reset;
	// both when the target's call finds the quota spent and when it is known spent already. (pb's
	// reset from the wait above is first let pass: when it fell a few of the steps above after
	// pa's, it could still be within the cap.)
	addCombo(t, e, map[string]any{"name": "d", "wait_until_reset": true, "wait_until_reset_max_ms": 60_000,
		"targets": []any{target("pb", "m")}})
	e.Clock.Advance(5 * time.Minute)
	for i, when := range []string{"found spent", "known spent"} {
		calls := len(upB.ChatRequests())
		var h http.Header
		answersAtOnce(t, e, when, func() { st, h, body = chatCall(t, e, key, comboBody("d"), nil) })
		if ra, _ := strconv.Atoi(h.Get("Retry-After")); st != 429 || ra <= 60 || ra > 120 {
			t.Fatalf("%s: %d, Retry-After %q: %s", when, st, h.Get("Retry-After"), body)
		}
		if made := len(upB.ChatRequests()) - calls; made != 1-i {
			t.Fatalf("%s: %d calls to pb", when, made)
		}
	}
}

// With session affinity on, a session keeps to its target of a round-robin combo while requests
// without a session rotate.
func TestComboSessionPin(t *testing.T) {
	e, upA, upB, key := twoProviders(t, testenv.JSONAnswer(answerFrom("a")), testenv.JSONAnswer(answerFrom("b")))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"session_affinity_ttl_ms": 600_000}, 200)
	addCombo(t, e, map[string]any{"name": "rr", "strategy": "round-robin", "targets": []any{target("pa", "m"), target("pb", "m")}})
	var first string
	for i := range 6 {
		_, _, body := chatCall(t, e, key, comboBody("rr"), map[string]string{"X-Session-Id": "session-1"})
		got := gjson.Get(body, "choices.0.message.content").String()
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("request %d of the session went to %q, first to %q", i, got, first)
		}
	}
	var plain []string
	for range 2 {
		_, _, body := chatCall(t, e, key, comboBody("rr"), nil)
		plain = append(plain, gjson.Get(body, "choices.0.message.content").String())
	}
	if plain[0] == plain[1] {
		t.Fatalf("requests without a session did not rotate: %v", plain)
	}
	// The pin survives a restart: the rotation starts anew, turned so the next request would
	// start at the other target, and the session still goes to its own.
	e.Restart()
	if first == "from a" {
		chatCall(t, e, key, comboBody("rr"), nil)
	}
	if _, _, body := chatCall(t, e, key, comboBody("rr"), map[string]string{"X-Session-Id": "session-1"}); gjson.Get(body, "choices.0.message.content").String() != first {
		t.Fatalf("after a restart the session went elsewhere: %s", body)
	}
	// Its target fails: the session moves to the other and stays there.
	pinned, other := upA, "from b"
	if first == "from b" {
		pinned, other = upB, "from a"
	}
	pinned.Close()
	for i := range 3 {
		_, _, body := chatCall(t, e, key, comboBody("rr"), map[string]string{"X-Session-Id": "session-1"})
		if got := gjson.Get(body, "choices.0.message.content").String(); got != other {
			t.Fatalf("request %d after the failover went to %q", i, got)
		}
	}
	// The session header never reached an upstream.
	for _, up := range []*testenv.FakeUpstream{upA, upB} {
		for _, r := range up.ChatRequests() {
			if r.Header.Get("X-Session-Id") != "" {
				t.Fatal("the session header was forwarded")
			}
		}
	}
}

// count_tokens through a combo counts for its first target that can serve: locally toward an
// OpenAI-style provider.
func TestComboCountTokens(t *testing.T) {
	e, upA, _, key := twoProviders(t, testenv.JSONAnswer(answerFrom("a")), testenv.JSONAnswer(answerFrom("b")))
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	r := e.Post(context.Background(), "/v1/messages/count_tokens", key, `{"model":"c","messages":[{"role":"user","content":"Hello, world"}]}`,
		map[string]string{"anthropic-version": "2023-06-01"})
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 200 || gjson.Get(body, "input_tokens").Int() < 4 || r.Header.Get("X-Switchyard-Token-Count") != "estimate" {
		t.Fatalf("%d %v %s", r.StatusCode, r.Header, body)
	}
	if n := len(upA.ChatRequests()); n != 0 {
		t.Fatalf("counting called the upstream %d times", n)
	}
}

// Every failure that fails over moves the request to the next target while nothing reached the
// client yet.
func TestComboFailsOverOnEachFailoverError(t *testing.T) {
	cases := []struct {
		name string
		fail http.HandlerFunc
	}{
		{"429", rateLimited},
		{"402", testenv.Status(402, nil, `{"error":{"message":"Insufficient credits"}}`)},
		{"500", testenv.Status(500, nil, `{"error":{"message":"boom"}}`)},
		{"502", testenv.Status(502, nil, `bad gateway`)},
		{"503", testenv.Status(503, nil, `{"error":{"message":"unavailable"}}`)},
		{"529 overloaded", testenv.Status(529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
		{"401", testenv.Status(401, nil, `{"error":{"message":"Incorrect API key provided"}}`)},
		{"404 model", testenv.Status(404, nil, `{"error":{"message":"The model does not exist","code":"model_not_found"}}`)},
		{"context overflow 400", testenv.Status(400, nil, `{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}`)},
		{"error hidden in 200", testenv.JSONAnswer(`{"error":{"message":"upstream overloaded","code":503}}`)},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:9/elsewhere", http.StatusTemporaryRedirect)
		}},
		{"reset", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }},
		{"broken stream start", testenv.SSEAnswer(nil, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _, upB, key := twoProviders(t, tc.fail, testenv.JSONAnswer(answerFrom("b")))
			addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
			st, h, body := chatCall(t, e, key, comboBody("c"), nil)
			if st != 200 || !strings.Contains(body, "from b") || len(upB.ChatRequests()) != 1 {
				t.Fatalf("%d %s", st, body)
			}
			if got := h.Get("X-Switchyard-Route"); !strings.Contains(got, "target=pb/m") {
				t.Fatalf("route %q", got)
			}
		})
	}
}

// Once a stream's first event went to the client, a target that dies is never replaced: the
// client gets the stream's end as an error event, and the next target is not called.
func TestComboNeverReplaysAStreamUnderWay(t *testing.T) {
	e, _, upB, key := twoProviders(t, testenv.SSEAnswer(testenv.SSEChunks, 2), testenv.SSEAnswer(testenv.SSEChunks, -1))
	addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
	st, _, body := chatCall(t, e, key, `{"model":"c","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if st != 200 || !strings.Contains(body, "stream_incomplete") || strings.Contains(body, "[DONE]") {
		t.Fatalf("%d %s", st, body)
	}
	if n := len(upB.ChatRequests()); n != 0 {
		t.Fatalf("the second target was called %d times after the stream began", n)
	}
}
