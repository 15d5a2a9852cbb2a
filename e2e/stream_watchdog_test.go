package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// sseStep is one thing a scripted upstream stream does: wait (on the gateway's fake clock),
// then send an event ("" sends nothing).
type sseStep struct {
	wait time.Duration
	ev   string
}

// scripted streams the steps, flushing each event, and then, with hang set, stays silent until
// the gateway goes away.
func scripted(clk clockwork.Clock, hang bool, steps ...sseStep) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		rc.Flush()
		for _, s := range steps {
			if s.wait > 0 {
				select {
				case <-clk.After(s.wait):
				case <-r.Context().Done():
					return
				}
			}
			if s.ev != "" {
				io.WriteString(w, s.ev+"\n\n")
				rc.Flush()
			}
		}
		if hang {
			<-r.Context().Done()
		}
	}
}

// every repeats an event n times, each after wait.
func every(wait time.Duration, n int, ev func(i int) string) []sseStep {
	out := make([]sseStep, n)
	for i := range out {
		out[i] = sseStep{wait: wait, ev: ev(i)}
	}
	return out
}

const (
	roleChunk = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	keepAlive = `: keep-alive`
)

func textChunk(s string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}`
}

// watchdogEnv is a gateway with provider up (model m) whose connections answer per key: the
// first (priority 0) with first, the second (priority 1, when second is set) with second.
func watchdogEnv(t *testing.T, first, second func(clockwork.Clock) http.HandlerFunc) (*testenv.Env, string, int64) {
	t.Helper()
	e := testenv.New(t)
	handlers := map[string]http.HandlerFunc{"sk-first-0000001": first(e.Clock)}
	if second != nil {
		handlers["sk-second-000001"] = second(e.Clock)
	}
	up := testenv.NewFakeUpstream(t, testenv.ByKey(handlers), "m")
	e.AddProvider("up", up.URL+"/v1")
	id := e.AddConnection("up", "first", "sk-first-0000001", 0)
	if second != nil {
		e.AddConnection("up", "second", "sk-second-000001", 1)
	}
	key := e.NewKey()
	e.WaitModels(key, "up/m")
	return e, key, id
}

const streamBody = `{"model":"up/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// streamCall streams a chat request while the gateway's clock runs on in steps, and returns the
// data lines, the body as a whole and how much of the gateway's time it took.
func streamCall(t *testing.T, e *testenv.Env, key string, step, limit time.Duration) ([]string, string, time.Duration) {
	t.Helper()
	var events []string
	var raw string
	took := passTime(t, e, step, limit, func() {
		r := e.Chat(context.Background(), key, streamBody)
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		raw = string(b)
		for _, line := range strings.Split(raw, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				events = append(events, d)
			}
		}
	})
	return events, raw, took
}

// metric reads one counter of the gateway's metrics (0 when absent).
func metric(e *testenv.Env, series string) string {
	for _, line := range strings.Split(e.Metrics(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return "0"
}

// A stream whose upstream sends only keep-alives and its role chunk, and no content, is given
// up at the readiness timeout (80 s) before anything reached the client; the second connection
// answers, the client sees one clean stream, and the stalled connection is not cooled (the
// watchdog's decision is local).
func TestStreamReadinessFailsOverBeforeTheFirstByte(t *testing.T) {
	stall := func(clk clockwork.Clock) http.HandlerFunc {
		return scripted(clk, true, append([]sseStep{{ev: roleChunk}}, every(10*time.Second, 20, func(int) string { return keepAlive })...)...)
	}
	good := func(clockwork.Clock) http.HandlerFunc { return testenv.SSEAnswer(testenv.SSEChunks, -1) }
	e, key, stalled := watchdogEnv(t, stall, good)
	events, raw, took := streamCall(t, e, key, time.Second, 5*time.Minute)
	if took < 80*time.Second || took > 90*time.Second {
		t.Fatalf("the readiness timeout fired after %v of the gateway's time, want 80 s", took)
	}
	if strings.Count(raw, `"role":"assistant"`) != 1 || !strings.Contains(raw, "[DONE]") || strings.Contains(raw, `"error"`) {
		t.Fatalf("the client saw more than one clean stream:\n%s", raw)
	}
	var text strings.Builder
	for _, d := range events {
		text.WriteString(gjson.Get(d, "choices.0.delta.content").String())
	}
	if text.String() != "Hello" {
		t.Fatalf("text %q", text.String())
	}
	d := lastLogged(t, e)
	chain, _ := d["attempts"].([]any)
	if len(chain) != 2 || chain[0].(map[string]any)["reason"] != "stream_readiness_timeout" || d["complete"] != true {
		t.Fatalf("logged: %v", d)
	}
	if s := e.State(stalled); s.Status != "active" || s.RemainingMS != 0 {
		t.Fatalf("the stalled connection after a readiness timeout: %+v", s)
	}
	if v := metric(e, `switchyard_stream_ends_total{end="stream_readiness_timeout",phase="before_client",provider="up"}`); v != "1" {
		t.Fatalf("readiness counter %s", v)
	}
}

// After the first content reached the client, a stream that stalls (keep-alives do not count)
// ends at the idle timeout with an error event naming it, nothing replayed; the connection is
// not cooled and the breaker does not count it.
func TestStreamIdleTimeoutAfterTheFirstByte(t *testing.T) {
	stall := func(clk clockwork.Clock) http.HandlerFunc {
		return scripted(clk, true, append([]sseStep{{ev: roleChunk}, {ev: textChunk("Hel")}},
			every(30*time.Second, 40, func(int) string { return keepAlive })...)...)
	}
	good := func(clockwork.Clock) http.HandlerFunc { return testenv.SSEAnswer(testenv.SSEChunks, -1) }
	e, key, stalled := watchdogEnv(t, stall, good)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 1}}, 200)
	events, raw, took := streamCall(t, e, key, 5*time.Second, 20*time.Minute)
	if took < 600*time.Second || took > 620*time.Second {
		t.Fatalf("the idle timeout fired after %v, want 600 s", took)
	}
	last := events[len(events)-1]
	if strings.Count(raw, "Hel") != 1 || strings.Contains(raw, "[DONE]") || gjson.Get(last, "error.code").String() != "stream_idle_timeout" ||
		!strings.Contains(gjson.Get(last, "error.message").String(), "10m0s") {
		t.Fatalf("the stream's end:\n%s", raw)
	}
	d := lastLogged(t, e)
	if d["error_code"] != "stream_idle_timeout" || d["complete"] != false || d["attempt_count"] != 1.0 {
		t.Fatalf("logged: %v", d)
	}
	if s := e.State(stalled); s.Status != "active" || s.RemainingMS != 0 {
		t.Fatalf("connection: %+v", s)
	}
	if s := e.ProviderStatus("up"); s["breaker"] != "closed" {
		t.Fatalf("a watchdog's abort counted for the breaker: %v", s)
	}
	if v := metric(e, `switchyard_stream_ends_total{end="stream_idle_timeout",phase="after_first_byte",provider="up"}`); v != "1" {
		t.Fatalf("idle counter %s", v)
	}
	// The Streams card counts it too.
	_, page := testenv.Fetch(t, e.Login(), "GET", e.Base+"/settings", nil, nil)
	row := testenv.Between(page, `<tr data-code="stream_idle_timeout">`, "</tr>")
	if !strings.Contains(row, "stream stalled") || !strings.Contains(row, `<td class="num">0</td><td class="num">1</td>`) {
		t.Fatalf("the Streams card's row: %q", row)
	}
}

// The throughput watchdog (on): a stream that trickles one character a second ends after the
// warm-up and one full window (60 s) with its error event; a stream that only sends keep-alives
// before any content fails over at the same point, before the client saw anything.
func TestStreamThroughputWatchdog(t *testing.T) {
	trickle := func(clk clockwork.Clock) http.HandlerFunc {
		return scripted(clk, true, append([]sseStep{{ev: roleChunk}},
			every(time.Second, 600, func(int) string { return textChunk("x") })...)...)
	}
	on := map[string]any{"streams": map[string]any{"throughput_watchdog": map[string]any{"enabled": true}}}

	t.Run("after the first byte", func(t *testing.T) {
		e, key, _ := watchdogEnv(t, trickle, nil)
		e.MustAPI("PATCH", "/api/settings/resilience", on, 200)
		events, raw, took := streamCall(t, e, key, time.Second, 5*time.Minute)
		if took < 60*time.Second || took > 70*time.Second {
			t.Fatalf("the watchdog fired after %v, want about 60 s", took)
		}
		last := events[len(events)-1]
		if gjson.Get(last, "error.code").String() != "stream_throughput_too_low" || strings.Count(raw, `"content":"x"`) < 50 {
			t.Fatalf("the stream's end: %s (%d chunks)", last, strings.Count(raw, `"content":"x"`))
		}
		if d := lastLogged(t, e); d["error_code"] != "stream_throughput_too_low" {
			t.Fatalf("logged: %v", d)
		}
	})

	t.Run("before the first byte", func(t *testing.T) {
		idle := func(clk clockwork.Clock) http.HandlerFunc {
			return scripted(clk, true, every(2*time.Second, 200, func(int) string { return keepAlive })...)
		}
		good := func(clockwork.Clock) http.HandlerFunc { return testenv.SSEAnswer(testenv.SSEChunks, -1) }
		e, key, _ := watchdogEnv(t, idle, good)
		e.MustAPI("PATCH", "/api/settings/resilience", on, 200)
		_, raw, took := streamCall(t, e, key, time.Second, 5*time.Minute)
		if took < 60*time.Second || took > 70*time.Second || !strings.Contains(raw, "[DONE]") || strings.Contains(raw, `"error"`) {
			t.Fatalf("after %v the client got:\n%s", took, raw)
		}
		if v := metric(e, `switchyard_stream_ends_total{end="stream_throughput_too_low",phase="before_client",provider="up"}`); v != "1" {
			t.Fatalf("counter %s", v)
		}
	})
}

// Slow tool-call and reasoning deltas pause the throughput judgement: a stream that spends
// minutes on them, with no text at all, is not aborted and ends complete.
func TestStreamWatchdogSparesToolCallsAndReasoning(t *testing.T) {
	tool := func(i int) string {
		return fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,%s"function":{"arguments":"%d"}}]},"finish_reason":null}]}`,
			map[bool]string{true: `"id":"call_1","type":"function",`, false: ""}[i == 0], i)
	}
	think := func(i int) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"h"},"finish_reason":null}]}`
	}
	slow := func(clk clockwork.Clock) http.HandlerFunc {
		steps := append([]sseStep{{ev: roleChunk}}, every(10*time.Second, 12, think)...)
		steps = append(steps, every(10*time.Second, 12, tool)...)
		steps = append(steps, sseStep{ev: `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`},
			sseStep{ev: "data: [DONE]"})
		return scripted(clk, false, steps...)
	}
	e, key, _ := watchdogEnv(t, slow, nil)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"streams": map[string]any{"throughput_watchdog": map[string]any{"enabled": true}}}, 200)
	_, raw, took := streamCall(t, e, key, time.Second, 10*time.Minute)
	if took < 240*time.Second || !strings.HasSuffix(strings.TrimSpace(raw), "[DONE]") || strings.Contains(raw, `"error"`) {
		t.Fatalf("after %v:\n%s", took, raw)
	}
	if d := lastLogged(t, e); d["complete"] != true {
		t.Fatalf("logged: %v", d)
	}
}

// Anthropic's 529 overloaded_error is retried by default.
func TestOverloadedIsRetried(t *testing.T) {
	var calls int
	ant := testenv.NewFakeAnthropic(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			testenv.AnthropicError(529, "overloaded_error", "Overloaded", nil)(w, r)
			return
		}
		testenv.MessagesAnswer()(w, r)
	}, "claude-test")
	e := testenv.New(t)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	e.AddConnection("anthropic", "main", "sk-ant-main", 0)
	key := e.NewKey()
	e.WaitModels(key, "anthropic/claude-test")
	var status int
	var body string
	passTime(t, e, time.Second, 2*time.Minute, func() {
		r := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
		status, body = r.StatusCode, testenv.ReadAll(t, r)
	})
	if status != 200 || calls != 2 {
		t.Fatalf("%d after %d calls: %s", status, calls, body)
	}
}

// The idle watchdog's error event has each surface's shape: chat completions and messages
// clients of an Anthropic upstream (the same format, and translated), and a Responses client.
func TestStreamWatchdogEndsEverySurfaceInItsShape(t *testing.T) {
	stall := func(clk clockwork.Clock) http.HandlerFunc {
		return scripted(clk, true, append(append([]sseStep{}, func() []sseStep {
			var out []sseStep
			for _, ev := range testenv.MessageEvents[:4] { // message_start, block start, ping, "Hel"
				out = append(out, sseStep{ev: ev})
			}
			return out
		}()...), every(60*time.Second, 20, func(int) string { return "event: ping\ndata: {\"type\":\"ping\"}" })...)...)
	}
	e := testenv.New(t)
	ant := testenv.NewFakeAnthropic(t, stall(e.Clock), "claude-test")
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	e.AddConnection("anthropic", "main", "sk-ant-main", 0)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"streams": map[string]any{"idle_timeout_ms": 120_000}}, 200)
	key := e.NewKey()
	e.WaitModels(key, "anthropic/claude-test")
	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) {
			var names, data []string
			took := passTime(t, e, 2*time.Second, 10*time.Minute, func() {
				r := e.Post(context.Background(), s.path, key, strings.Replace(s.body("anthropic/claude-test"), `{"model"`, `{"stream":true,"model"`, 1), nil)
				names, data = sseEvents(t, r)
			})
			if took < 120*time.Second || took > 130*time.Second {
				t.Fatalf("ended after %v, want 120 s", took)
			}
			checkStreamError(t, s.name, names, data, "stream_idle_timeout", "api_error")
			if s.name == "messages" && gjson.Get(data[len(data)-1], "error.code").String() != "stream_idle_timeout" {
				t.Fatalf("code: %s", data[len(data)-1])
			}
			if !strings.Contains(strings.Join(data, "\n"), "Hel") {
				t.Fatalf("the content before the stall is missing: %v", data)
			}
		})
	}
}

// With the recovery hold-back on, a stream that breaks within its first moments is retried on
// the next connection without the client noticing; with it off, the client gets the break.
func TestStreamRecoveryHoldsBackTheStart(t *testing.T) {
	breaks := func(clockwork.Clock) http.HandlerFunc {
		return testenv.SSEAnswer(testenv.SSEChunks, 2) // the role and "Hel", then the body ends
	}
	good := func(clockwork.Clock) http.HandlerFunc { return testenv.SSEAnswer(testenv.SSEChunks, -1) }
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("recovery ", on), func(t *testing.T) {
			e, key, _ := watchdogEnv(t, breaks, good)
			e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"streams": map[string]any{"recovery": map[string]any{"enabled": on}}}, 200)
			_, raw, _ := streamCall(t, e, key, 10*time.Millisecond, time.Minute)
			clean := strings.Count(raw, "Hel") == 1 && strings.Contains(raw, `"content":"lo"`) && strings.Contains(raw, "[DONE]") && !strings.Contains(raw, `"error"`)
			if clean != on {
				t.Fatalf("recovery %v, the client got:\n%s", on, raw)
			}
			if !on && !strings.Contains(raw, "stream_incomplete") {
				t.Fatalf("without recovery the break must reach the client:\n%s", raw)
			}
		})
	}
}

// Every request is finished exactly once, whatever path it takes: one request-log row, one
// count in the requests metric (counted as the request ends, before the log row is written),
// and its queue slots given back on every connection it tried. The paths: a stream, a JSON answer, an upstream error, a readiness
// abort that fails over, an idle abort after the first byte, an upstream cut, and a client that
// leaves mid-stream.
func TestEveryPathFinishesOnce(t *testing.T) {
	type path struct {
		name   string
		first  func(clockwork.Clock) http.HandlerFunc
		body   string
		leave  bool // the client reads the first event and goes
		status int
	}
	ok := func(clockwork.Clock) http.HandlerFunc { return testenv.SSEAnswer(testenv.SSEChunks, -1) }
	paths := []path{
		{name: "stream", first: ok, body: streamBody, status: 200},
		{name: "json", first: func(clockwork.Clock) http.HandlerFunc { return testenv.JSONAnswer(testenv.CompletionJSON) },
			body: `{"model":"up/m","messages":[{"role":"user","content":"hi"}]}`, status: 200},
		{name: "upstream error", first: func(clockwork.Clock) http.HandlerFunc {
			return testenv.Status(400, nil, `{"error":{"message":"bad","type":"invalid_request_error"}}`)
		}, body: streamBody, status: 400},
		{name: "readiness abort", first: func(clk clockwork.Clock) http.HandlerFunc { return scripted(clk, true, sseStep{ev: roleChunk}) },
			body: streamBody, status: 200},
		{name: "idle abort", first: func(clk clockwork.Clock) http.HandlerFunc {
			return scripted(clk, true, sseStep{ev: roleChunk}, sseStep{ev: textChunk("Hel")})
		}, body: streamBody, status: 200},
		{name: "cut", first: func(clockwork.Clock) http.HandlerFunc { return testenv.SSEAnswer(testenv.SSEChunks, 2) }, body: streamBody, status: 200},
		{name: "client leaves", first: func(clk clockwork.Clock) http.HandlerFunc {
			return scripted(clk, true, sseStep{ev: roleChunk}, sseStep{ev: textChunk("Hel")})
		}, body: streamBody, leave: true, status: 200},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			e, key, first := watchdogEnv(t, p.first, ok)
			second := e.ConnectionID("second")
			e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
			before := metric(e, `switchyard_requests_total{model="m",provider="up",route="/v1/chat/completions",status="`+fmt.Sprint(p.status)+`"}`)
			passTime(t, e, 10*time.Second, time.Hour, func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				r := e.Post(ctx, "/v1/chat/completions", key, p.body, nil)
				if r.StatusCode != p.status {
					t.Errorf("status %d, want %d", r.StatusCode, p.status)
				}
				if p.leave {
					buf := make([]byte, 1)
					r.Body.Read(buf)
					cancel()
				}
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			})
			var out struct{ Items []map[string]any }
			e.Eventually("the request is logged", func() bool {
				e.API("GET", "/api/requests?surface=/v1/chat/completions", nil, &out)
				return len(out.Items) > 0
			})
			e.API("GET", "/api/requests?surface=/v1/chat/completions", nil, &out)
			if n := len(out.Items); n != 1 {
				t.Fatalf("%d request-log rows: %v", n, out.Items)
			}
			after := metric(e, `switchyard_requests_total{model="m",provider="up",route="/v1/chat/completions",status="`+fmt.Sprint(p.status)+`"}`)
			if fmt.Sprint(atoi(before)+1) != after {
				t.Fatalf("requests metric %s → %s", before, after)
			}
			for _, id := range []int64{first, second} {
				e.Eventually("slots given back", func() bool {
					q := e.QueueStats(id)
					return q["executing"] == 0.0 && q["waiting"] == 0.0
				})
			}
		})
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// The total stream time bounds a stream that keeps delivering: it ends with its error event.
func TestStreamTotalTimeout(t *testing.T) {
	long := func(clk clockwork.Clock) http.HandlerFunc {
		return scripted(clk, true, append([]sseStep{{ev: roleChunk}}, every(10*time.Second, 100, func(int) string { return textChunk("word ") })...)...)
	}
	e, key, _ := watchdogEnv(t, long, nil)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"streams": map[string]any{"total_timeout_ms": 120_000}}, 200)
	events, raw, took := streamCall(t, e, key, 2*time.Second, 10*time.Minute)
	if took < 120*time.Second || took > 130*time.Second || gjson.Get(events[len(events)-1], "error.code").String() != "stream_total_timeout" ||
		strings.Count(raw, "word ") < 5 {
		t.Fatalf("after %v:\n%s", took, raw)
	}
}
