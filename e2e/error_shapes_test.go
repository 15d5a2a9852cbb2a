package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// surfaceCall is one way to ask for the same thing on each client surface.
type surfaceCall struct {
	name string
	path string
	body func(model string) string
}

var surfaces = []surfaceCall{
	{"chat", "/v1/chat/completions", func(m string) string { return `{"model":"` + m + `","messages":[{"role":"user","content":"hi"}]}` }},
	{"messages", "/v1/messages", func(m string) string {
		return `{"model":"` + m + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	}},
	{"responses", "/v1/responses", func(m string) string { return `{"model":"` + m + `","input":"hi"}` }},
}

// checkShape fails unless body is the surface's documented error shape: OpenAI (and Responses)
// {"error":{"message","type","code","param"}} with a string type and code; Anthropic
// {"type":"error","error":{"type","message"}}.
func checkShape(t *testing.T, surface, body string) {
	t.Helper()
	if surface == "messages" {
		if gjson.Get(body, "type").String() != "error" || gjson.Get(body, "error.type").Type != gjson.String ||
			gjson.Get(body, "error.type").String() == "" || gjson.Get(body, "error.message").String() == "" {
			t.Fatalf("not an Anthropic error: %s", body)
		}
		return
	}
	e := gjson.Get(body, "error")
	if e.Get("message").String() == "" || e.Get("type").Type != gjson.String || e.Get("type").String() == "" ||
		e.Get("code").Type != gjson.String || !e.Get("param").Exists() {
		t.Fatalf("not an OpenAI error: %s", body)
	}
}

// byModel answers per requested model; unlisted models get ok.
func byModel(m map[string]http.HandlerFunc, ok http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h, found := m[gjson.GetBytes(mustRead(r), "model").String()]; found {
			h(w, r)
			return
		}
		ok(w, r)
	}
}

// TestEveryErrorHasTheSurfacesShape walks every class of failure on the three surfaces: the
// gateway's own errors (bad requests, a body too large, an open breaker, a full queue, a model
// lockout, every connection cooling or unusable), the upstream's errors (from an
// OpenAI-compatible and from an Anthropic upstream, its timeout included) and errors hidden in a
// 200 all come in the surface's shape, keeping the upstream's words and status, with the
// classified reason as the code and Retry-After where the client should wait.
func TestEveryErrorHasTheSurfacesShape(t *testing.T) {
	type class struct {
		name  string
		model string // provider/model asked for
		key   string // "" = a valid client key
		raw   string // a body instead of the surface's
		// prime is a model asked for first (on chat completions): its failure brings the gateway
		// into the state the class is about.
		prime    string
		settings map[string]any // resilience settings on top of the baseline
		slow     bool           // the upstream holds the request: the fake clock runs to the first-byte timeout
		// queueFull: the only connection of provider q runs a request and has one waiting, its
		// queue's depth.
		queueFull  bool
		status     int
		code       string // OpenAI code (also checked on Responses)
		anthropic  string // Anthropic error.type
		words      string // part of the message
		retryAfter string // "" unchecked, "*" present, else its exact value
		noRetry    bool   // the answer says x-should-retry: false
	}
	tooLarge := `{"model":"up/ok","input":"` + strings.Repeat("x", 1<<20) + `"}`
	classes := []class{
		// The gateway's own answers to the request itself.
		{name: "malformed json", raw: `{"model":`, status: 400, code: "invalid_request", anthropic: "invalid_request_error", words: "not valid JSON"},
		{name: "request too large", raw: tooLarge, status: 413, code: "request_too_large", anthropic: "request_too_large", words: "exceeds the limit of 1 MiB"},
		{name: "unknown model", model: "up/nope", status: 404, code: "model_not_found", anthropic: "not_found_error", words: "up/nope"},
		{name: "bad client key", model: "up/ok", key: "sk-wrong", status: 401, code: "invalid_api_key", anthropic: "authentication_error", words: "invalid API key"},

		// An OpenAI-compatible upstream's failures.
		{name: "rate limited", model: "up/limited", status: 429, code: "rate_limit", anthropic: "rate_limit_error", words: "slow down please", retryAfter: "7"},
		{name: "server error", model: "up/broken", status: 500, code: "server_error", anthropic: "api_error", words: "kaboom"},
		{name: "overloaded", model: "up/busy", status: 503, code: "server_error", anthropic: "overloaded_error", words: "try again later", retryAfter: "*"},
		{name: "hidden in 200", model: "up/hidden", status: 502, code: "server_error", anthropic: "api_error", words: "hidden failure"},
		{name: "hidden in 200 with its status", model: "up/hidden500", status: 500, code: "server_error", anthropic: "api_error", words: "hidden failure"},
		{name: "bad request upstream", model: "up/picky", status: 400, code: "request_rejected", anthropic: "invalid_request_error", words: "temperature is odd"},
		{name: "unauthorized upstream", model: "up/locked", status: 401, code: "connections_unusable", anthropic: "authentication_error", words: "reconnect"},
		{name: "credits exhausted upstream", model: "up/broke", status: 429, code: "insufficient_quota", anthropic: "billing_error", words: "out of credits", retryAfter: "1800", noRetry: true},
		{name: "upstream timeout", model: "up/slow", slow: true, status: 504, code: "upstream_timeout", anthropic: "timeout_error", words: "first-byte timeout"},

		// An Anthropic upstream's failures, natively on messages and translated on the others.
		{name: "anthropic rate limited", model: "anthropic/claude-limited", status: 429, code: "rate_limit", anthropic: "rate_limit_error", words: "per-minute rate limit", retryAfter: "7"},
		{name: "anthropic server error", model: "anthropic/claude-broken", status: 500, code: "server_error", anthropic: "api_error", words: "Internal server error"},
		{name: "anthropic overloaded", model: "anthropic/claude-busy", status: 529, code: "model_capacity", anthropic: "overloaded_error", words: "Overloaded"},
		{name: "anthropic hidden in 200", model: "anthropic/claude-hidden", status: 502, code: "server_error", anthropic: "api_error", words: "hidden failure"},
		{name: "anthropic bad request", model: "anthropic/claude-picky", status: 400, code: "request_rejected", anthropic: "invalid_request_error", words: "temperature: range"},
		{name: "anthropic unauthorized", model: "anthropic/claude-locked", status: 401, code: "connections_unusable", anthropic: "authentication_error", words: "reconnect"},
		{name: "anthropic credits exhausted", model: "anthropic/claude-broke", status: 429, code: "insufficient_quota", anthropic: "billing_error", words: "out of credits", retryAfter: "1800", noRetry: true},
		{name: "anthropic timeout", model: "anthropic/claude-slow", slow: true, status: 504, code: "upstream_timeout", anthropic: "timeout_error", words: "first-byte timeout"},

		// The gateway's resilience states.
		{name: "open breaker", model: "up/ok", prime: "up/broken", settings: map[string]any{"circuit_breaker": map[string]any{"enabled": true, "failure_threshold": 1}},
			status: 503, code: "circuit_open", anthropic: "overloaded_error", words: "circuit breaker is open - provider up", retryAfter: "*"},
		{name: "open breaker of an anthropic provider", model: "anthropic/claude-ok", prime: "anthropic/claude-broken",
			settings: map[string]any{"circuit_breaker": map[string]any{"enabled": true, "failure_threshold": 1}},
			status:   503, code: "circuit_open", anthropic: "overloaded_error", words: "circuit breaker is open - provider anthropic", retryAfter: "*"},
		{name: "queue full", model: "q/ok", queueFull: true, status: 429, code: "RATE_LIMIT_QUEUE_FULL", anthropic: "rate_limit_error", words: "queue of provider q is full", retryAfter: "*"},
		{name: "model locked out", model: "up/gone", prime: "up/gone", settings: map[string]any{"model_lockout": map[string]any{"enabled": true}},
			status: 429, code: "model_locked_out", anthropic: "rate_limit_error", words: "up/gone is locked out", retryAfter: "120"},
		{name: "every connection cooling for rate limits", model: "up/ok", prime: "up/limited", status: 429, code: "all_connections_cooling",
			anthropic: "rate_limit_error", words: "cooling down (rate_limit)", retryAfter: "7"},
		{name: "every connection cooling for server errors", model: "up/ok", prime: "up/broken", status: 503, code: "all_connections_cooling",
			anthropic: "overloaded_error", words: "cooling down (server_error)", retryAfter: "*"},
		{name: "every connection out of credits", model: "up/ok", prime: "up/broke", status: 429, code: "insufficient_quota",
			anthropic: "billing_error", words: "credits_exhausted", retryAfter: "1800", noRetry: true},
		{name: "every connection needs new credentials", model: "up/ok", prime: "up/locked", status: 401, code: "connections_unusable",
			anthropic: "authentication_error", words: "reconnect", noRetry: true},
	}

	slowArrived := make(chan struct{}, 1)
	slow := func(w http.ResponseWriter, r *http.Request) {
		slowArrived <- struct{}{}
		<-r.Context().Done()
	}
	up := testenv.NewFakeUpstream(t, testenv.PerModel(map[string]http.HandlerFunc{
		"limited":   testenv.Status(429, map[string]string{"Retry-After": "7"}, `{"error":{"message":"slow down please","type":"sim_error","code":"sim_429"}}`),
		"broken":    testenv.Status(500, nil, `{"error":{"message":"kaboom","code":500}}`),
		"busy":      testenv.Status(503, nil, `{"error":{"message":"try again later"}}`),
		"hidden":    testenv.JSONAnswer(`{"error":{"message":"hidden failure","type":"server_error"}}`),
		"hidden500": testenv.JSONAnswer(`{"error":{"message":"hidden failure","code":500}}`),
		"picky":     testenv.Status(400, nil, `{"error":{"message":"temperature is odd","type":"invalid_request_error"}}`),
		"locked":    testenv.Status(401, nil, `{"error":{"message":"key revoked"}}`),
		"broke":     testenv.Status(402, nil, `{"error":{"message":"Insufficient credits: top up to continue","type":"insufficient_credits"}}`),
		"gone":      testenv.Status(404, nil, `{"error":{"message":"The model gone does not exist","type":"invalid_request_error","code":"model_not_found"}}`),
		"slow":      slow,
	}), "ok", "limited", "broken", "busy", "hidden", "hidden500", "picky", "locked", "broke", "gone", "slow")
	ant := testenv.NewFakeAnthropic(t, byModel(map[string]http.HandlerFunc{
		"claude-limited": testenv.AnthropicError(429, "rate_limit_error", "Number of requests has exceeded your per-minute rate limit", map[string]string{"retry-after": "7"}),
		"claude-broken":  testenv.AnthropicError(500, "api_error", "Internal server error", nil),
		"claude-busy":    testenv.AnthropicError(529, "overloaded_error", "Overloaded", nil),
		"claude-hidden":  testenv.JSONAnswer(`{"type":"error","error":{"type":"api_error","message":"hidden failure"}}`),
		"claude-picky":   testenv.AnthropicError(400, "invalid_request_error", "temperature: range: 0..1", nil),
		"claude-locked":  testenv.AnthropicError(401, "authentication_error", "invalid x-api-key", nil),
		"claude-broke": testenv.AnthropicError(400, "invalid_request_error",
			"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", nil),
		"claude-slow": slow,
	}, testenv.MessagesAnswer()), "claude-ok", "claude-limited", "claude-broken", "claude-busy", "claude-hidden", "claude-picky",
		"claude-locked", "claude-broke", "claude-slow")
	q := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "ok")

	e := testenv.New(t, "--max-body-mib", "1")
	upID := e.AddProvider("up", up.URL+"/v1")
	// up refuses the models it does not list (the "unknown model" class is the gateway's answer).
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", upID), map[string]any{"listed_models_only": true}, 200)
	conns := []int64{e.AddConnection("up", "main", "sk-up", 0)}
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	conns = append(conns, e.AddConnection("anthropic", "main", "sk-ant", 0))
	e.AddProvider("q", q.URL+"/v1")
	qConn := e.AddConnection("q", "main", "sk-q", 0)
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", qConn), map[string]any{"overrides": map[string]any{
		"request_queue": map[string]any{"max_concurrent_executions": 1, "max_queue_depth": 1}}}, 200)
	key := e.NewKey()
	for _, m := range []string{"up/ok", "anthropic/claude-ok", "q/ok"} {
		e.WaitModels(key, m)
	}
	baseline := func(extra map[string]any) map[string]any {
		s := map[string]any{"retry": map[string]any{"max_retries": 0}, "circuit_breaker": map[string]any{"enabled": false},
			"model_lockout": map[string]any{"enabled": false}, "streams": map[string]any{"first_byte_timeout_ms": 2000}}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	// fillQueue starts one request that runs on q's connection and one that waits behind it;
	// the returned func ends both.
	fillQueue := func(t *testing.T) func() {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		send := func() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, "POST", e.Base+"/v1/chat/completions", strings.NewReader(`{"model":"q/ok","messages":[]}`))
				req.Header.Set("Authorization", "Bearer "+key)
				if r, err := testenv.ChatClient.Do(req); err == nil {
					r.Body.Close()
				}
			}()
		}
		send()
		e.Eventually("one request runs", func() bool { return e.QueueStats(qConn)["executing"].(float64) == 1 })
		send()
		e.Eventually("one request waits", func() bool { return e.QueueStats(qConn)["waiting"].(float64) == 1 })
		return func() {
			cancel()
			wg.Wait()
			e.Eventually("the queue empties", func() bool {
				s := e.QueueStats(qConn)
				return s["executing"].(float64) == 0 && s["waiting"].(float64) == 0
			})
		}
	}

	for _, c := range classes {
		for _, s := range surfaces {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				e.MustAPI("PATCH", "/api/settings/resilience", baseline(c.settings), 200)
				e.MustAPI("POST", "/api/resilience/reset", nil, 200)
				for _, id := range conns {
					e.MustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", id), map[string]any{"terminal": true}, 200)
				}
				if c.prime != "" {
					testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"`+c.prime+`","messages":[{"role":"user","content":"hi"}]}`))
				}
				if c.queueFull {
					defer fillQueue(t)()
				}
				body := c.raw
				if body == "" {
					body = s.body(c.model)
				}
				k := key
				if c.key != "" {
					k = c.key
				}
				var r *http.Response
				if c.slow {
					res := make(chan *http.Response, 1)
					go func() {
						res <- e.Post(context.Background(), s.path, k, body, map[string]string{"anthropic-version": "2023-06-01"})
					}()
					<-slowArrived
					e.Clock.Advance(2 * time.Second)
					r = <-res
				} else {
					r = e.Post(context.Background(), s.path, k, body, map[string]string{"anthropic-version": "2023-06-01"})
				}
				got := testenv.ReadAll(t, r)
				if r.StatusCode != c.status {
					t.Fatalf("status %d, want %d: %s", r.StatusCode, c.status, got)
				}
				checkShape(t, s.name, got)
				msg := gjson.Get(got, "error.message").String()
				if !strings.Contains(msg, c.words) {
					t.Fatalf("the message lost the words %q: %s", c.words, got)
				}
				if s.name == "messages" {
					if typ := gjson.Get(got, "error.type").String(); typ != c.anthropic {
						t.Fatalf("type %s, want %s: %s", typ, c.anthropic, got)
					}
				} else if code := gjson.Get(got, "error.code").String(); code != c.code {
					t.Fatalf("code %s, want %s: %s", code, c.code, got)
				}
				if c.noRetry && r.Header.Get("X-Should-Retry") != "false" {
					t.Fatalf("x-should-retry %q, want false", r.Header.Get("X-Should-Retry"))
				}
				switch ra := r.Header.Get("Retry-After"); {
				case c.retryAfter == "*" && ra == "":
					t.Fatalf("no Retry-After on %d", r.StatusCode)
				case c.retryAfter != "*" && c.retryAfter != "" && ra != c.retryAfter:
					t.Fatalf("Retry-After %q, want %s", ra, c.retryAfter)
				}
			})
		}
	}
}

// checkStreamError fails unless the last event of a stream is an error event in the surface's
// shape with the code: OpenAI chat {"error":{"message","type","code","param"}} as a data line;
// Anthropic an "error" event {"type":"error","error":{"type","message"}} of anthropicType (a
// broken stream names stream_incomplete beside them);
// Responses an "error" event {"type":"error","code","message","param"} in sequence.
func checkStreamError(t *testing.T, surface string, names, data []string, code, anthropicType string) {
	t.Helper()
	if len(data) == 0 {
		t.Fatal("the stream ended without any event")
	}
	last, name := data[len(data)-1], names[len(names)-1]
	switch surface {
	case "messages":
		if name != "error" || gjson.Get(last, "type").String() != "error" || gjson.Get(last, "error.type").String() != anthropicType ||
			gjson.Get(last, "error.message").String() == "" || code == "stream_incomplete" && gjson.Get(last, "error.code").String() != code {
			t.Fatalf("not an Anthropic error event %s: %s %s", anthropicType, name, last)
		}
	case "responses":
		if name != "error" || gjson.Get(last, "type").String() != "error" || gjson.Get(last, "message").String() == "" ||
			gjson.Get(last, "code").String() != code || gjson.Get(last, "param").Type != gjson.Null ||
			gjson.Get(last, "sequence_number").Int() != int64(len(data)-1) {
			t.Fatalf("not a Responses error event with %s: %s %s", code, name, last)
		}
	default:
		e := gjson.Get(last, "error")
		if e.Get("message").String() == "" || e.Get("type").Type != gjson.String || e.Get("type").String() == "" ||
			e.Get("code").String() != code || !e.Get("param").Exists() || e.Get("param").Type != gjson.Null {
			t.Fatalf("not an OpenAI error event with %s: %s", code, last)
		}
	}
}

// A stream the gateway has to end with an error ends with an error event in the surface's shape:
// a stream the upstream cut (the same format or translated), and a request that waited in a
// connection's queue with heartbeats (so its stream had begun) and then timed out there.
func TestStreamErrorEventsHaveTheSurfacesShape(t *testing.T) {
	g := newGated()
	defer close(g.release)
	oaiError := `data: {"error":{"message":"The server had an error while processing your request","type":"server_error","code":"server_error"}}`
	oai := testenv.NewFakeUpstream(t, testenv.PerModel(map[string]http.HandlerFunc{
		"cut":   testenv.SSEAnswer(testenv.SSEChunks, 2),
		"gated": g.handler,
		// The upstream reports an error inside the stream after its first content.
		"erring": testenv.SSEAnswer(append(append([]string{}, testenv.SSEChunks[:2]...), oaiError), -1),
	}), "cut", "gated", "erring")
	overloaded := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"
	ant := testenv.NewFakeAnthropic(t, byModel(map[string]http.HandlerFunc{
		// The upstream reports an error inside the stream after its first block.
		"claude-erring": testenv.SSEAnswer(append(append([]string{}, testenv.MessageEvents[:6]...), overloaded), -1),
	}, testenv.SSEAnswer(testenv.MessageEvents, 4)), "claude-test", "claude-erring")
	e := testenv.New(t)
	// Every cut or erring stream counts against its provider's breaker: off here, where the
	// shapes are what is tested.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"enabled": false}}, 200)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	e.AddConnection("anthropic", "main", "sk-ant", 0)
	e.AddProvider("up", oai.URL+"/v1")
	id := e.AddConnection("up", "main", "sk-up", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/cut")
	e.WaitModels(key, "anthropic/claude-test")
	stream := func(s surfaceCall, model string) string {
		return strings.Replace(s.body(model), `{"model"`, `{"stream":true,"model"`, 1)
	}
	for _, s := range surfaces {
		for _, model := range []string{"up/cut", "anthropic/claude-test"} {
			t.Run("cut/"+s.name+"/"+model, func(t *testing.T) {
				r := e.Post(context.Background(), s.path, key, stream(s, model), nil)
				names, data := sseEvents(t, r)
				if r.StatusCode != 200 || len(data) < 2 {
					t.Fatalf("%d %v", r.StatusCode, data)
				}
				checkStreamError(t, s.name, names, data, "stream_incomplete", "api_error")
			})
		}
		// An error the upstream reports inside its stream reaches the client as the stream's
		// last event, in the client's format, and is not followed by an error of our own.
		for _, c := range []struct{ model, words, code, anthropicType string }{
			{"anthropic/claude-erring", "Overloaded", "overloaded_error", "overloaded_error"},
			{"up/erring", "while processing your request", "server_error", "api_error"},
		} {
			t.Run("upstream error event/"+s.name+"/"+c.model, func(t *testing.T) {
				r := e.Post(context.Background(), s.path, key, stream(s, c.model), nil)
				names, data := sseEvents(t, r)
				last := data[len(data)-1]
				errors := 0
				for _, n := range names {
					if n == "error" || n == "response.failed" {
						errors++
					}
				}
				for _, d := range data {
					if gjson.Get(d, "error").IsObject() && s.name == "chat" {
						errors++
					}
				}
				switch s.name {
				case "messages":
					if names[len(names)-1] != "error" || gjson.Get(last, "error.type").String() != c.anthropicType {
						t.Fatalf("events %v, last %s", names, last)
					}
				case "chat":
					checkStreamError(t, s.name, names, data, c.code, "")
				default:
					if names[len(names)-1] != "response.failed" || gjson.Get(last, "response.status").String() != "failed" ||
						gjson.Get(last, "sequence_number").Int() != int64(len(data)-1) {
						t.Fatalf("events %v, last %s", names, last)
					}
					last = gjson.Get(last, "response").Raw
				}
				if !strings.Contains(gjson.Get(last, "error.message").String(), c.words) || errors != 1 {
					t.Fatalf("want the upstream's error (%q) once, last: %v %v", c.words, names, data)
				}
				// The request log says how the stream ended: failed, not complete.
				want := map[string]string{"responses": "response_failed"}[s.name]
				if want == "" {
					want = "upstream_stream_error"
				}
				var out struct{ Items []map[string]any }
				e.Eventually("the request is logged", func() bool {
					e.API("GET", "/api/requests?limit=1&surface="+s.path, nil, &out)
					return len(out.Items) == 1 && out.Items[0]["model"] == strings.SplitN(c.model, "/", 2)[1]
				})
				if got := out.Items[0]; got["error_code"] != want || got["complete"] != false {
					t.Fatalf("logged %v, want %s", got, want)
				}
			})
		}
	}

	// One request at a time on the connection, a line that waits 20 s: a streamed request behind
	// a held one gets a heartbeat at 15 s, then the line's timeout as an event.
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", id), map[string]any{"overrides": map[string]any{
		"request_queue": map[string]any{"max_concurrent_executions": 1, "max_wait_ms": 20000}}}, 200)
	held := make(chan struct{})
	go func() {
		defer close(held)
		testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"up/gated","messages":[]}`))
	}()
	<-g.arrived
	for _, s := range surfaces {
		t.Run("queued/"+s.name, func(t *testing.T) {
			res := make(chan *http.Response, 1)
			go func() { res <- e.Post(context.Background(), s.path, key, stream(s, "up/cut"), nil) }()
			e.Eventually("waiting", func() bool { return e.QueueStats(id)["waiting"].(float64) == 1 })
			e.Clock.Advance(15 * time.Second)
			r := <-res // the heartbeat sent the stream's headers
			e.Clock.Advance(5 * time.Second)
			names, data := sseEvents(t, r)
			checkStreamError(t, s.name, names, data, "RATE_LIMIT_QUEUE_TIMEOUT", "rate_limit_error")
		})
	}
	g.release <- struct{}{}
	<-held
}
