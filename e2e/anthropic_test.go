package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// anthropicSetup points the built-in anthropic provider at a fake Anthropic API with two
// connections: a (priority 0, key sk-ant-a) and b (priority 1, key sk-ant-b). Retries are off,
// so each case sees exactly one round over the connections.
func anthropicSetup(t *testing.T, handler http.HandlerFunc) (*testenv.Env, *testenv.FakeAnthropic, string, int64, int64) {
	t.Helper()
	up := testenv.NewFakeAnthropic(t, handler)
	e := testenv.New(t)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": up.URL}, 200)
	a := e.AddConnection("anthropic", "a", "sk-ant-a", 0)
	b := e.AddConnection("anthropic", "b", "sk-ant-b", 1)
	key := e.NewKey()
	e.WaitModels(key, "anthropic/claude-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	return e, up, key, a, b
}

// sseEvents reads a streamed answer into its events (name and data).
func sseEvents(t *testing.T, r *http.Response) (names, data []string) {
	t.Helper()
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			names, data = append(names, name), append(data, strings.TrimPrefix(line, "data: "))
			name = ""
		}
	}
	return names, data
}

// The body reaches the upstream untouched apart from the model name; the version and beta
// headers go along; the credential is the connection's, never the client's.
func TestMessagesPassThroughToAnthropic(t *testing.T) {
	e, up, key, _, _ := anthropicSetup(t, testenv.MessagesAnswer())
	body := `{"model":"anthropic/claude-test","max_tokens":64,"container":{"id":"x"},"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],"context_management":{"edits":[]}}`
	r := e.PostAnthropic("/v1/messages", key, body, map[string]string{"anthropic-version": "2026-10-21",
		"anthropic-beta": "context-management-2025-06-27,prompt-caching-2024-07-31"})
	got := testenv.ReadAll(t, r)
	// The answer is the upstream's, byte for byte, but for the model it names: the one asked for.
	if r.StatusCode != 200 || got != testenv.MessageJSONNaming("anthropic/claude-test") ||
		r.Header.Get("Content-Length") != strconv.Itoa(len(got)) {
		t.Fatalf("answer: %d %s %v", r.StatusCode, got, r.Header)
	}
	checkDate(t, r.Header)
	sent := up.MessageRequests()[0]
	want := strings.Replace(body, `"anthropic/claude-test"`, `"claude-test"`, 1)
	if sent.Body != want {
		t.Fatalf("the body changed on the way\n got %s\nwant %s", sent.Body, want)
	}
	if sent.Header.Get("x-api-key") != "sk-ant-a" || sent.Header.Get("Authorization") != "" ||
		sent.Header.Get("anthropic-version") != "2026-10-21" ||
		sent.Header.Get("anthropic-beta") != "context-management-2025-06-27,prompt-caching-2024-07-31" {
		t.Fatalf("upstream headers: %v", sent.Header)
	}

	// Claude Code sends its key as a bearer token; streams pass event by event, in order.
	req, _ := http.NewRequest("POST", e.Base+"/v1/messages", strings.NewReader(strings.Replace(testenv.MessagesBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("anthropic-version", "2023-06-01")
	r, err := testenv.ChatClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	checkDate(t, r.Header)
	names, data := sseEvents(t, r)
	if strings.Join(names, ",") != "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop" {
		t.Fatalf("events %v", names)
	}
	// Each event as the upstream sent it; message_start names the model asked for.
	for i, ev := range testenv.MessageEvents {
		want := ev[strings.Index(ev, "data: ")+len("data: "):]
		if i == 0 {
			want = strings.Replace(want, `"model":"claude-test"`, `"model":"anthropic/claude-test"`, 1)
		}
		if data[i] != want {
			t.Fatalf("event %d\n got %s\nwant %s", i, data[i], want)
		}
	}
	if u := up.MessageRequests()[1]; u.Header.Get("x-api-key") != "sk-ant-a" || u.Header.Get("Authorization") != "" {
		t.Fatalf("bearer client: upstream headers %v", u.Header)
	}
}

// checkDate: an answer has one Date header, the time it was sent as HTTP writes it.
func checkDate(t *testing.T, h http.Header) {
	t.Helper()
	v := h.Values("Date")
	if len(v) != 1 {
		t.Fatalf("Date headers %q", v)
	}
	at, err := http.ParseTime(v[0])
	if err != nil || v[0] != at.UTC().Format(http.TimeFormat) {
		t.Fatalf("Date %q: %v", v[0], err)
	}
	if d := time.Since(at); d < -time.Second || d > 5*time.Second {
		t.Fatalf("Date %q is %v off", v[0], d)
	}
}

func TestCountTokensAndModelsInAnthropicShape(t *testing.T) {
	e, _, key, _, _ := anthropicSetup(t, testenv.MessagesAnswer())
	r := e.PostAnthropic("/v1/messages/count_tokens", key, `{"model":"anthropic/claude-test","messages":[{"role":"user","content":"hi"}]}`, nil)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || body != `{"input_tokens":42}` || r.Header.Get("X-Switchyard-Token-Count") != "" {
		t.Fatalf("count_tokens: %d %s %v", r.StatusCode, body, r.Header)
	}

	req, _ := http.NewRequest("GET", e.Base+"/v1/models", nil)
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page := testenv.ReadAll(t, resp)
	m := gjson.Parse(page)
	if m.Get("has_more").Bool() || m.Get("first_id").String() == "" || m.Get("last_id").String() == "" ||
		m.Get(`data.#(id=="anthropic/claude-test").type`).String() != "model" || m.Get("object").Exists() {
		t.Fatalf("Anthropic model list: %s", page)
	}
	// Without the version header the same list is in OpenAI's shape.
	if ids := e.ListModels(key); len(ids) == 0 {
		t.Fatal("OpenAI-shaped list is empty")
	}

	// An OpenAI-compatible provider has no count_tokens: the gateway answers its own estimate
	// in the same shape (TestCountTokensTowardAnOpenAIProviderIsEstimated has the details).
	oai := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e.AddProvider("up", oai.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
	e.WaitModels(key, "up/gpt-test")
	r = e.PostAnthropic("/v1/messages/count_tokens", key, `{"model":"up/gpt-test","messages":[]}`, nil)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 200 || gjson.Get(body, "input_tokens").Int() <= 0 || r.Header.Get("X-Switchyard-Token-Count") != "estimate" {
		t.Fatalf("count_tokens on openai-compatible: %d %s", r.StatusCode, body)
	}
}

// Errors on the Anthropic surface are in Anthropic's shape, with Retry-After where the client
// should wait.
func TestMessagesErrorsInAnthropicShape(t *testing.T) {
	e, _, key, _, _ := anthropicSetup(t, testenv.MessagesAnswer())
	check := func(name string, r *http.Response, status int, typ string) {
		t.Helper()
		body := testenv.ReadAll(t, r)
		if r.StatusCode != status || gjson.Get(body, "type").String() != "error" || gjson.Get(body, "error.type").String() != typ ||
			gjson.Get(body, "error.message").String() == "" {
			t.Fatalf("%s: %d %s", name, r.StatusCode, body)
		}
	}
	// A provider that refuses the models it does not list answers an unknown one itself.
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"listed_models_only": true}, 200)
	check("unknown model", e.PostAnthropic("/v1/messages", key, `{"model":"anthropic/nope","max_tokens":1,"messages":[]}`, nil), 404, "not_found_error")
	check("bad key", e.PostAnthropic("/v1/messages", "sk-wrong", testenv.MessagesBody, nil), 401, "authentication_error")
	check("bad json", e.PostAnthropic("/v1/messages", key, `{"model":`, nil), 400, "invalid_request_error")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 1}}, 200)
	e.API("POST", "/api/resilience/breakers/reset", map[string]any{"provider": "anthropic"}, nil)
}

// Each Anthropic failure lands where the same failure of an OpenAI upstream would: the failing
// connection cools (or turns terminal) and the request moves on to the next connection.
func TestAnthropicFailuresCoolTheConnectionAndFailOver(t *testing.T) {
	type tc struct {
		name       string
		a          func(e *testenv.Env) http.HandlerFunc
		status     string // a's state afterwards
		reason     string
		remainMin  int64 // ms, for cooling
		remainMax  int64
		wantStatus int // what the client gets (b answers 200)
	}
	cases := []tc{
		// Capacity is the model's, not the account's: the connection stays usable (a model lockout,
		// when enabled, takes the model off it: TestCapacityErrorsLockTheModelAlike), and the
		// request fails over.
		{name: "529 overloaded", a: func(*testenv.Env) http.HandlerFunc {
			return testenv.AnthropicError(529, "overloaded_error", "Overloaded", nil)
		}, status: "active", reason: "model_capacity", wantStatus: 200},
		{name: "429 with reset header", a: func(e *testenv.Env) http.HandlerFunc {
			reset := e.Clock.Now().Add(40 * time.Second).UTC().Format(time.RFC3339)
			return testenv.AnthropicError(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
				map[string]string{"anthropic-ratelimit-requests-reset": reset, "anthropic-ratelimit-requests-remaining": "0"})
		}, status: "cooling", reason: "rate_limit", remainMin: 38_000, remainMax: 40_000, wantStatus: 200},
		// Without Anthropic's reset headers the cooldown follows retry-after, to the second.
		{name: "429 with retry-after only", a: func(*testenv.Env) http.HandlerFunc {
			return testenv.AnthropicError(429, "rate_limit_error", "Number of requests has exceeded your per-minute rate limit",
				map[string]string{"retry-after": "25"})
		}, status: "cooling", reason: "rate_limit", remainMin: 25_000, remainMax: 25_000, wantStatus: 200},
		{name: "401", a: func(*testenv.Env) http.HandlerFunc {
			return testenv.AnthropicError(401, "authentication_error", "invalid x-api-key", nil)
		}, status: "expired", reason: "auth_error", wantStatus: 200},
		{name: "credit balance", a: func(*testenv.Env) http.HandlerFunc {
			return testenv.AnthropicError(400, "invalid_request_error",
				"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", nil)
		}, status: "credits_exhausted", reason: "quota_exhausted", wantStatus: 200},
		{name: "error inside 200", a: func(*testenv.Env) http.HandlerFunc {
			return testenv.JSONAnswer(`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`)
		}, status: "cooling", reason: "rate_limit", remainMin: 1, remainMax: 3000, wantStatus: 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var handler atomic.Pointer[http.HandlerFunc]
			e, up, key, a, b := anthropicSetup(t, func(w http.ResponseWriter, r *http.Request) { (*handler.Load())(w, r) })
			h := testenv.ByAPIKey(map[string]http.HandlerFunc{"sk-ant-a": c.a(e), "sk-ant-b": testenv.MessagesAnswer()})
			handler.Store(&h)
			r := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
			body := testenv.ReadAll(t, r)
			if r.StatusCode != c.wantStatus || body != testenv.MessageJSONNaming("anthropic/claude-test") {
				t.Fatalf("client: %d %s", r.StatusCode, body)
			}
			if n := len(up.MessageRequests()); n != 2 {
				t.Fatalf("%d upstream calls, want a then b", n)
			}
			s := e.State(a)
			if s.Status != c.status || s.Reason != c.reason {
				t.Fatalf("connection a: %+v", s)
			}
			if c.status == "cooling" && (s.RemainingMS < c.remainMin || s.RemainingMS > c.remainMax) {
				t.Fatalf("cooldown %d ms, want %d–%d", s.RemainingMS, c.remainMin, c.remainMax)
			}
			if s := e.State(b); s.Status != "active" {
				t.Fatalf("connection b: %+v", s)
			}
		})
	}
}

// capacityCase is a provider with two connections, a (priority 0) answering a capacity error and
// b (priority 1) answering; post asks for the model in the provider's own format.
type capacityCase struct {
	name  string
	setup func(t *testing.T) (e *testenv.Env, key string, a, b int64, calls func() int)
	post  func(e *testenv.Env, key string) *http.Response
}

var capacityCases = []capacityCase{
	{name: "openai 503 overloaded", setup: func(t *testing.T) (*testenv.Env, string, int64, int64, func() int) {
		e, up, key, a, b := twoKeysBAnswers(t, testenv.Status(503, nil, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error"}}`))
		return e, key, a, b, func() int { return len(up.ChatRequests()) }
	}, post: func(e *testenv.Env, key string) *http.Response {
		return e.Chat(context.Background(), key, testenv.ChatBody)
	}},
	{name: "anthropic 529 overloaded_error", setup: func(t *testing.T) (*testenv.Env, string, int64, int64, func() int) {
		e, up, key, a, b := anthropicSetup(t, testenv.ByAPIKey(map[string]http.HandlerFunc{
			"sk-ant-a": testenv.AnthropicError(529, "overloaded_error", "Overloaded", nil),
			"sk-ant-b": testenv.MessagesAnswer(),
		}))
		return e, key, a, b, func() int { return len(up.MessageRequests()) }
	}, post: func(e *testenv.Env, key string) *http.Response {
		return e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	}},
}

// A capacity error is the model's, on that connection: OpenAI's "overloaded" 503 and Anthropic's
// 529 leave the connection usable, lock the model there (exactly that provider, connection and
// model, for the lockout's base time) when model lockout is on, and the request fails over; the
// next request goes straight to the other connection until the lockout ends.
func TestCapacityErrorsLockTheModelAlike(t *testing.T) {
	for _, c := range capacityCases {
		t.Run(c.name, func(t *testing.T) {
			e, key, a, b, calls := c.setup(t)
			e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"model_lockout": map[string]any{"enabled": true},
				"retry": map[string]any{"max_retries": 0}}, 200)
			r := c.post(e, key)
			if body := testenv.ReadAll(t, r); r.StatusCode != 200 || calls() != 2 {
				t.Fatalf("failover: %d after %d calls: %s", r.StatusCode, calls(), body)
			}
			if s := e.State(a); s.Status != "active" || s.Reason != "model_capacity" || s.RemainingMS != 0 {
				t.Fatalf("connection a: %+v", s)
			}
			items := e.ModelCooldowns()
			if len(items) != 1 || items[0]["connection_id"] != float64(a) || items[0]["scope"] != "exact" ||
				items[0]["reason"] != "model_capacity" || items[0]["remaining_ms"] != 120000.0 {
				t.Fatalf("lockouts: %v", items)
			}
			r = c.post(e, key)
			if body := testenv.ReadAll(t, r); r.StatusCode != 200 || calls() != 3 {
				t.Fatalf("while locked: %d after %d calls: %s", r.StatusCode, calls(), body)
			}
			if s := e.State(b); s.Status != "active" {
				t.Fatalf("connection b: %+v", s)
			}
			e.Clock.Advance(2 * time.Minute)
			testenv.ReadAll(t, c.post(e, key))
			if calls() != 5 {
				t.Fatalf("after the lockout a is asked again: %d calls", calls())
			}
		})
	}
}

// Repeated server errors of one model open that model's breaker (scope model) on an Anthropic
// provider as on an OpenAI-compatible one: the open breaker answers at once, in the surface's
// shape with Retry-After and without calling the upstream, while the provider's other model is
// still served.
func TestServerErrorsOpenTheModelBreakerAlike(t *testing.T) {
	failing := func(model string, fail, ok http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if gjson.GetBytes(mustRead(r), "model").String() == model {
				fail(w, r)
				return
			}
			ok(w, r)
		}
	}
	type format struct {
		name, provider string
		setup          func(t *testing.T) (e *testenv.Env, key string, calls func() int)
		post           func(e *testenv.Env, key, model string) *http.Response
		openType       string // the open breaker's error type (Anthropic) or code (OpenAI)
		openField      string
	}
	formats := []format{
		{name: "openai-compatible", provider: "up", setup: func(t *testing.T) (*testenv.Env, string, func() int) {
			up := testenv.NewFakeUpstream(t, failing("bad", testenv.Status(500, nil, `{"error":{"message":"internal error","type":"server_error"}}`),
				testenv.JSONAnswer(testenv.CompletionJSON)), "bad", "good")
			e := testenv.New(t)
			e.AddProvider("up", up.URL+"/v1")
			e.AddConnection("up", "main", "sk-up", 0)
			key := e.NewKey()
			e.WaitModels(key, "up/good")
			return e, key, func() int { return len(up.ChatRequests()) }
		}, post: func(e *testenv.Env, key, model string) *http.Response {
			return e.Chat(context.Background(), key, `{"model":"up/`+model+`","messages":[{"role":"user","content":"hi"}]}`)
		}, openField: "error.code", openType: "circuit_open"},
		{name: "anthropic", provider: "anthropic", setup: func(t *testing.T) (*testenv.Env, string, func() int) {
			up := testenv.NewFakeAnthropic(t, failing("bad", testenv.AnthropicError(500, "api_error", "Internal server error", nil),
				testenv.MessagesAnswer()), "bad", "good")
			e := testenv.New(t)
			e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": up.URL}, 200)
			e.AddConnection("anthropic", "main", "sk-ant", 0)
			key := e.NewKey()
			e.WaitModels(key, "anthropic/good")
			return e, key, func() int { return len(up.MessageRequests()) }
		}, post: func(e *testenv.Env, key, model string) *http.Response {
			return e.PostAnthropic("/v1/messages", key, `{"model":"anthropic/`+model+`","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, nil)
		}, openField: "error.type", openType: "overloaded_error"},
	}
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			e, key, calls := f.setup(t)
			e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
				"circuit_breaker": map[string]any{"scope": "model", "failure_threshold": 2}}, 200)
			for i := 0; i < 2; i++ {
				r := f.post(e, key, "bad")
				if body := testenv.ReadAll(t, r); r.StatusCode != 500 {
					t.Fatalf("failure %d: %d %s", i, r.StatusCode, body)
				}
				e.Clock.Advance(20 * time.Second) // past the connection's cooldown, inside the breaker's timeout
			}
			var state struct{ Breakers []map[string]any }
			e.API("GET", "/api/resilience/state", nil, &state)
			open := 0
			for _, b := range state.Breakers {
				if b["state"] == "open" {
					open++
					if b["provider"] != f.provider || b["model"] != "bad" || b["consecutive_failures"] != 2.0 {
						t.Fatalf("breaker %v", b)
					}
				}
			}
			if open != 1 {
				t.Fatalf("breakers %v", state.Breakers)
			}
			before := calls()
			r := f.post(e, key, "bad")
			body := testenv.ReadAll(t, r)
			if r.StatusCode != 503 || gjson.Get(body, f.openField).String() != f.openType || r.Header.Get("Retry-After") == "" || calls() != before {
				t.Fatalf("open breaker: %d %v %s after %d calls", r.StatusCode, r.Header, body, calls()-before)
			}
			if r := f.post(e, key, "good"); r.StatusCode != 200 {
				t.Fatalf("the other model: %d %s", r.StatusCode, testenv.ReadAll(t, r))
			} else {
				testenv.ReadAll(t, r)
			}
		})
	}
}

// mustRead reads a request body and puts it back for the next reader.
func mustRead(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// A stream that breaks after its first block is closed with an Anthropic error event; a
// provider that keeps failing opens its breaker, and the open breaker answers in Anthropic's
// shape with Retry-After.
func TestAnthropicBrokenStreamAndBreaker(t *testing.T) {
	var failing atomic.Bool
	e, _, key, _, _ := anthropicSetup(t, func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			testenv.AnthropicError(500, "api_error", "Internal server error", nil)(w, r)
			return
		}
		testenv.SSEAnswer(testenv.MessageEvents, 4)(w, r) // message_start, block start, ping, "Hel": then the body ends
	})
	r := e.PostAnthropic("/v1/messages", key, strings.Replace(testenv.MessagesBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1), nil)
	names, data := sseEvents(t, r)
	if len(names) < 2 || names[0] != "message_start" || names[len(names)-1] != "error" ||
		gjson.Get(data[len(data)-1], "error.code").String() != "stream_incomplete" || gjson.Get(data[len(data)-1], "type").String() != "error" {
		t.Fatalf("broken stream: %v %v", names, data)
	}

	// The broken stream was the provider's first failure; one answer of 500 more opens the
	// breaker at a threshold of 2.
	failing.Store(true)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 2}}, 200)
	r = e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	if body := testenv.ReadAll(t, r); r.StatusCode != 500 || gjson.Get(body, "error.type").String() != "api_error" {
		t.Fatalf("failure: %d %s", r.StatusCode, body)
	}
	e.Clock.Advance(20 * time.Second) // past both connections' cooldowns, inside the breaker's timeout
	if s := e.ProviderStatus("anthropic"); s["breaker"] != "open" {
		t.Fatalf("breaker: %v", s)
	}
	r = e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 503 || gjson.Get(body, "error.type").String() != "overloaded_error" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("open breaker: %d %s %v", r.StatusCode, body, r.Header)
	}
}

// An Anthropic stream cut after its first content block reached the client (the body ends, or
// the connection drops mid-event) is closed with an error event naming stream_incomplete, on the
// messages surface and translated to chat completions, and leaves the verdict a cut OpenAI
// stream leaves (TestChaosCutStreamEndsWithStreamIncomplete).
func TestAnthropicStreamCutAfterTheFirstBlock(t *testing.T) {
	delivered := testenv.MessageEvents[:6] // message_start … the first block's content_block_stop
	cuts := map[string]http.HandlerFunc{
		"body ends": testenv.SSEAnswer(delivered, -1),
		"connection drops": func(w http.ResponseWriter, r *http.Request) {
			testenv.SSEAnswer(delivered, -1)(w, r)
			io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_re")
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		},
	}
	for cut, h := range cuts {
		t.Run(cut+"/messages", func(t *testing.T) {
			e, _, key, _, _ := anthropicSetup(t, h)
			e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 1}}, 200)
			r := e.PostAnthropic("/v1/messages", key, strings.Replace(testenv.MessagesBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1), nil)
			names, data := sseEvents(t, r)
			if strings.Join(names, ",") != "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_stop,error" {
				t.Fatalf("events %v", names)
			}
			last := data[len(data)-1]
			if gjson.Get(last, "type").String() != "error" || gjson.Get(last, "error.type").String() != "api_error" ||
				gjson.Get(last, "error.code").String() != "stream_incomplete" || gjson.Get(last, "error.message").String() == "" {
				t.Fatalf("error event %s", last)
			}
			checkCutStreamVerdict(t, e, "anthropic", "/v1/messages")
		})
		t.Run(cut+"/chat", func(t *testing.T) {
			e, _, key, _, _ := anthropicSetup(t, h)
			e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 1}}, 200)
			events := readEvents(t, e.Chat(context.Background(), key, `{"model":"anthropic/claude-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			var text strings.Builder
			for _, d := range events[:len(events)-1] {
				text.WriteString(gjson.Get(d, "choices.0.delta.content").String())
			}
			last := events[len(events)-1]
			if text.String() != "Hello" || gjson.Get(last, "error.code").String() != "stream_incomplete" ||
				gjson.Get(last, "error.type").String() == "" || gjson.Get(last, "error.param").Type != gjson.Null {
				t.Fatalf("translated stream %v", events)
			}
			checkCutStreamVerdict(t, e, "anthropic", "/v1/chat/completions")
		})
	}
}

// A streamed chat completions request reaches an Anthropic provider through translation and
// comes back as chat completion chunks ending with [DONE] (with usage when asked).
func TestChatCompletionsReachAnthropicProvider(t *testing.T) {
	e, up, key, _, _ := anthropicSetup(t, testenv.MessagesAnswer())
	r := e.Chat(context.Background(), key, `{"model":"anthropic/claude-test","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 200 || gjson.Get(body, "object").String() != "chat.completion" ||
		gjson.Get(body, "choices.0.message.content").String() != "Hello there" || gjson.Get(body, "usage.total_tokens").Int() != 5 {
		t.Fatalf("translated answer: %d %s", r.StatusCode, body)
	}
	sent := up.MessageRequests()[0]
	if gjson.Get(sent.Body, "system.0.text").String() != "Be brief." || gjson.Get(sent.Body, "max_tokens").Int() == 0 ||
		sent.Header.Get("anthropic-version") == "" || sent.Header.Get("x-api-key") != "sk-ant-a" {
		t.Fatalf("translated request: %s %v", sent.Body, sent.Header)
	}
	r = e.Chat(context.Background(), key, `{"model":"anthropic/claude-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	events := readEvents(t, r)
	var text strings.Builder
	for _, d := range events[:len(events)-1] {
		text.WriteString(gjson.Get(d, "choices.0.delta.content").String())
	}
	if text.String() != "Hello" || events[len(events)-1] != "[DONE]" || gjson.Get(events[len(events)-2], "usage.completion_tokens").Int() != 2 {
		t.Fatalf("translated stream: %v", events)
	}
}

// A provider of type anthropic-compatible (a third party speaking Anthropic's API) works end to
// end like the built-in one: its models are discovered with x-api-key, /v1/messages passes
// through natively, buffered and streamed, and chat completions and Responses reach it
// translated.
func TestAnthropicCompatibleProviderEndToEnd(t *testing.T) {
	up := testenv.NewFakeAnthropic(t, testenv.MessagesAnswer(), "kimi-k2")
	e := testenv.New(t)
	e.AddProviderOfType("kimi", "anthropic-compatible", up.URL)
	e.AddConnection("kimi", "main", "sk-kimi", 0)
	key := e.NewKey()
	e.WaitModels(key, "kimi/kimi-k2")
	if models := up.Requests(); models[0].Path != "/v1/models" || models[0].Header.Get("x-api-key") != "sk-kimi" {
		t.Fatalf("discovery: %+v", models[0])
	}

	body := `{"model":"kimi/kimi-k2","max_tokens":64,"metadata":{"user_id":"u1"},"messages":[{"role":"user","content":"hi"}]}`
	r := e.PostAnthropic("/v1/messages", key, body, map[string]string{"anthropic-beta": "interleaved-thinking-2025-05-14"})
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 || got != testenv.MessageJSONNaming("kimi/kimi-k2") || r.Header.Get("X-Switchyard-Provider") != "kimi" {
		t.Fatalf("native: %d %s", r.StatusCode, got)
	}
	sent := up.MessageRequests()[0]
	if sent.Body != strings.Replace(body, "kimi/kimi-k2", "kimi-k2", 1) || sent.Header.Get("x-api-key") != "sk-kimi" ||
		sent.Header.Get("Authorization") != "" || sent.Header.Get("anthropic-version") != "2023-06-01" ||
		sent.Header.Get("anthropic-beta") != "interleaved-thinking-2025-05-14" {
		t.Fatalf("native request: %s %v", sent.Body, sent.Header)
	}
	r = e.PostAnthropic("/v1/messages", key, strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1), nil)
	names, _ := sseEvents(t, r)
	if strings.Join(names, ",") != "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop" {
		t.Fatalf("native stream: %v", names)
	}

	r = e.Chat(context.Background(), key, `{"model":"kimi/kimi-k2","messages":[{"role":"user","content":"hi"}]}`)
	got := testenv.ReadAll(t, r)
	if r.StatusCode != 200 || gjson.Get(got, "object").String() != "chat.completion" || gjson.Get(got, "choices.0.message.content").String() != "Hello there" {
		t.Fatalf("translated chat: %d %s", r.StatusCode, got)
	}
	if tr := up.MessageRequests()[2]; gjson.Get(tr.Body, "model").String() != "kimi-k2" || gjson.Get(tr.Body, "max_tokens").Int() == 0 ||
		tr.Header.Get("x-api-key") != "sk-kimi" {
		t.Fatalf("translated request: %s %v", tr.Body, tr.Header)
	}
	events := readEvents(t, e.Chat(context.Background(), key, `{"model":"kimi/kimi-k2","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	var text strings.Builder
	for _, d := range events[:len(events)-1] {
		text.WriteString(gjson.Get(d, "choices.0.delta.content").String())
	}
	if text.String() != "Hello" || events[len(events)-1] != "[DONE]" {
		t.Fatalf("translated chat stream: %v", events)
	}

	r = e.Post(context.Background(), "/v1/responses", key, `{"model":"kimi/kimi-k2","input":"hi"}`, nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(got, "object").String() != "response" ||
		gjson.Get(got, "output.0.content.0.text").String() != "Hello there" {
		t.Fatalf("translated Responses: %d %s", r.StatusCode, got)
	}
}

// A messages client that named a combo gets answers that name the combo, whole and streamed:
// the model its next request asks for, so Claude Code keeps the thinking of the answers.
func TestMessagesAnswersNameTheComboAskedFor(t *testing.T) {
	e, _, key, _, _ := anthropicSetup(t, testenv.MessagesAnswer())
	e.MustAPI("POST", "/api/combos", map[string]any{"name": "smart", "targets": []map[string]any{
		{"provider": "anthropic", "model": "claude-test"}}}, 201)
	r := e.PostAnthropic("/v1/messages", key, `{"model":"smart","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 || got != testenv.MessageJSONNaming("smart") {
		t.Fatalf("answer: %d %s", r.StatusCode, got)
	}
	r = e.PostAnthropic("/v1/messages", key, `{"model":"smart","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, nil)
	names, data := sseEvents(t, r)
	if len(names) == 0 || names[0] != "message_start" || gjson.Get(data[0], "message.model").String() != "smart" {
		t.Fatalf("stream: %v %v", names, data)
	}
	if !strings.Contains(r.Header.Get("X-Switchyard-Route"), "anthropic/claude-test") {
		t.Fatalf("the route does not name what served: %q", r.Header.Get("X-Switchyard-Route"))
	}
}
