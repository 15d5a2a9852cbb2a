package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// twoKeys starts a gateway with provider "up" and two connections a (priority 0) and b
// (priority 1), so a is always tried first.
func twoKeys(t *testing.T, chat http.HandlerFunc) (*testEnv, *fakeUpstream, string, int64, int64) {
	t.Helper()
	up := newFakeUpstream(t, chat)
	e := newTestEnv(t)
	e.addProvider("up", up.URL+"/v1")
	a := e.addConnection("up", "a", "sk-a", 0)
	b := e.addConnection("up", "b", "sk-b", 1)
	key := e.newKey()
	e.waitModels(key, "up/gpt-test")
	return e, up, key, a, b
}

// byKey answers per connection: the handler for the request's credential.
func byKey(m map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h, ok := m[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			http.Error(w, "no handler", 500)
			return
		}
		h(w, r)
	}
}

func status(code int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

type connState struct {
	ID           int64  `json:"id"`
	Status       string `json:"status"`
	RemainingMS  int64  `json:"remaining_ms"`
	Reason       string `json:"reason"`
	BackoffLevel int    `json:"backoff_level"`
	LastError    string `json:"last_error"`
	ErrorCode    int    `json:"error_code"`
}

func (e *testEnv) state(id int64) connState {
	e.t.Helper()
	var out struct{ Connections []connState }
	if st := e.api("GET", "/api/resilience/state", nil, &out); st != 200 {
		e.t.Fatalf("state: %d", st)
	}
	for _, c := range out.Connections {
		if c.ID == id {
			return c
		}
	}
	e.t.Fatalf("connection %d not in state", id)
	return connState{}
}

const chatBody = `{"model":"up/gpt-test","messages":[{"role":"user","content":"hi"}]}`

func TestRetryAfterCoolsExactlyThatConnection(t *testing.T) {
	e, up, key, a, b := twoKeys(t, byKey(map[string]http.HandlerFunc{
		"sk-a": status(429, map[string]string{"Retry-After": "7"}, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`),
		"sk-b": jsonAnswer(completionJSON),
	}))
	resp := e.chat(context.Background(), key, chatBody)
	if body := readAll(t, resp); resp.StatusCode != 200 || body != completionJSON {
		t.Fatalf("the sibling must serve the request: %d %s", resp.StatusCode, body)
	}
	sa := e.state(a)
	if sa.Status != "cooling" || sa.RemainingMS != 7000 || sa.Reason != "rate_limit" || sa.ErrorCode != 429 || sa.BackoffLevel != 1 {
		t.Fatalf("connection a: %+v", sa)
	}
	if sb := e.state(b); sb.Status != "active" {
		t.Fatalf("connection b: %+v", sb)
	}
	// While a cools, all traffic goes to b without touching a.
	before := len(up.chatRequests())
	for i := 0; i < 3; i++ {
		if r := e.chat(context.Background(), key, chatBody); r.StatusCode != 200 {
			t.Fatalf("status %d", r.StatusCode)
		}
	}
	for _, r := range up.chatRequests()[before:] {
		if r.Header.Get("Authorization") != "Bearer sk-b" {
			t.Fatal("a cooling connection was used")
		}
	}
	// The countdown ends by itself.
	e.clock.Advance(6999 * time.Millisecond)
	if s := e.state(a); s.Status != "cooling" || s.RemainingMS != 1 {
		t.Fatalf("before expiry: %+v", s)
	}
	e.clock.Advance(time.Millisecond)
	if s := e.state(a); s.Status != "active" {
		t.Fatalf("after expiry: %+v", s)
	}
	// The state survives a restart (written behind the request path).
	e.clock.Advance(-time.Second)
	e.restart()
	if s := e.state(a); s.Status != "cooling" || s.BackoffLevel != 1 {
		t.Fatalf("after restart: %+v", s)
	}
}

func TestConcurrent429sRaiseTheLevelOnce(t *testing.T) {
	const n = 8
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	go func() { arrived.Wait(); close(release) }()
	e, _, key := setupOne(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // every request is in flight before the first answer
		status(429, nil, `{"error":{"message":"slow down","type":"rate_limit"}}`)(w, r)
	})
	e.mustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	var wg sync.WaitGroup
	var limited atomic.Int32
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.chat(context.Background(), key, chatBody)
			readAll(t, r)
			if r.StatusCode == 429 {
				limited.Add(1)
			}
		}()
	}
	wg.Wait()
	if limited.Load() != n {
		t.Fatalf("%d of %d got 429", limited.Load(), n)
	}
	conns := e.mustAPI("GET", "/api/connections", nil, 200)["items"].([]any)
	id := int64(conns[0].(map[string]any)["id"].(float64))
	if s := e.state(id); s.BackoffLevel != 1 || s.RemainingMS != 3000 {
		t.Fatalf("herd guard failed: %+v", s)
	}
}

func TestUnauthorizedMakesConnectionExpiredAcrossRestart(t *testing.T) {
	e, up, key := setupOne(t, status(401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
	r := e.chat(context.Background(), key, chatBody)
	body := readAll(t, r)
	if r.StatusCode != 401 || !strings.Contains(body, "expired") || !strings.Contains(body, "dashboard") {
		t.Fatalf("want our 401 naming the state: %d %s", r.StatusCode, body)
	}
	conns := e.mustAPI("GET", "/api/connections", nil, 200)["items"].([]any)
	id := int64(conns[0].(map[string]any)["id"].(float64))
	e.restart()
	if s := e.state(id); s.Status != "expired" {
		t.Fatalf("after restart: %+v", s)
	}
	// All connections terminal: 401 at once, the upstream is not called.
	before := len(up.chatRequests())
	r = e.chat(context.Background(), key, chatBody)
	body = readAll(t, r)
	if r.StatusCode != 401 || !strings.Contains(body, "connections_unusable") || len(up.chatRequests()) != before {
		t.Fatalf("all-terminal: %d %s", r.StatusCode, body)
	}
	// Reset without terminal keeps it; with terminal clears it.
	e.mustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", id), map[string]any{}, 200)
	if s := e.state(id); s.Status != "expired" {
		t.Fatalf("clear cooldown must not clear a terminal state: %+v", s)
	}
	out := e.mustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", id), map[string]any{"terminal": true}, 200)
	if out["status"] != "active" {
		t.Fatalf("reset: %v", out)
	}
}

func TestAllCoolingAnswers429WithRetryAfter(t *testing.T) {
	e, up, key, _, _ := twoKeys(t, status(429, map[string]string{"Retry-After": "20"}, `{"error":{"message":"Too many requests"}}`))
	e.mustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	r := e.chat(context.Background(), key, chatBody)
	readAll(t, r)
	if r.StatusCode != 429 || len(up.chatRequests()) != 2 {
		t.Fatalf("first request: %d after %d upstream calls", r.StatusCode, len(up.chatRequests()))
	}
	e.clock.Advance(5 * time.Second)
	r = e.chat(context.Background(), key, chatBody)
	body := readAll(t, r)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "15" || !strings.Contains(body, "all_connections_cooling") ||
		!strings.Contains(body, "rate_limit") {
		t.Fatalf("all cooling: %d Retry-After=%q %s", r.StatusCode, r.Header.Get("Retry-After"), body)
	}
	if len(up.chatRequests()) != 2 {
		t.Fatal("a cooling connection was called")
	}
}

func TestRetriesWaitForCooldownAndForwardIdempotencyKey(t *testing.T) {
	var calls atomic.Int32
	e, up, key := setupOne(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			status(503, nil, `{"error":{"message":"upstream overloaded, try later"}}`)(w, r)
			return
		}
		jsonAnswer(completionJSON)(w, r)
	})
	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest("POST", e.base+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Idempotency-Key", "req-42")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	// The engine waits out backoff and the connection's cooldown on the fake clock: move time on
	// a second at a time until the third call arrives.
	e.eventually("two retries", func() bool {
		e.clock.Advance(time.Second)
		return len(up.chatRequests()) >= 3
	})
	resp := <-done
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("want success after retries, got %v", resp)
	}
	reqs := up.chatRequests()
	if len(reqs) != 3 {
		t.Fatalf("upstream saw %d calls", len(reqs))
	}
	for i, r := range reqs {
		if r.Header.Get("Idempotency-Key") != "req-42" {
			t.Fatalf("call %d lacks the Idempotency-Key", i)
		}
	}
}

func TestInvalidIdempotencyKeyIsDropped(t *testing.T) {
	e, up, key := setupOne(t, jsonAnswer(completionJSON))
	req, _ := http.NewRequest("POST", e.base+"/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", "has space")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if got := up.chatRequests()[0].Header.Get("Idempotency-Key"); got != "" {
		t.Fatalf("invalid key forwarded: %q", got)
	}
}

func TestNoRetryAfterFirstStreamedByte(t *testing.T) {
	e, up, key, _, _ := twoKeys(t, sseAnswer(sseChunks, 2))
	r := e.chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
	body := readAll(t, r)
	if !strings.Contains(body, "stream_incomplete") {
		t.Fatalf("body %q", body)
	}
	if n := len(up.chatRequests()); n != 1 {
		t.Fatalf("a stream that started was retried: %d upstream calls", n)
	}
}

func TestHiddenErrorIn200FailsOver(t *testing.T) {
	e, _, key, a, _ := twoKeys(t, byKey(map[string]http.HandlerFunc{
		"sk-a": status(200, nil, `{"error":{"message":"The server had an error while processing your request","type":"server_error","code":503}}`),
		"sk-b": jsonAnswer(completionJSON),
	}))
	r := e.chat(context.Background(), key, chatBody)
	if body := readAll(t, r); r.StatusCode != 200 || body != completionJSON {
		t.Fatalf("%d %s", r.StatusCode, body)
	}
	if s := e.state(a); s.Status != "cooling" || s.ErrorCode != 503 {
		t.Fatalf("hidden error not treated as a failure: %+v", s)
	}
}

func TestHiddenErrorInStreamFailsOver(t *testing.T) {
	e, _, key, _, _ := twoKeys(t, byKey(map[string]http.HandlerFunc{
		"sk-a": sseAnswer([]string{`data: {"error":{"message":"overloaded","type":"server_error"}}`}, -1),
		"sk-b": sseAnswer(sseChunks, -1),
	}))
	r := e.chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
	body := readAll(t, r)
	if !strings.Contains(body, "[DONE]") || strings.Contains(body, "overloaded") {
		t.Fatalf("%s", body)
	}
}

func TestPlainBadRequestDoesNotFailOver(t *testing.T) {
	e, up, key, a, _ := twoKeys(t, status(400, nil, `{"error":{"message":"messages: field required","type":"invalid_request_error"}}`))
	r := e.chat(context.Background(), key, chatBody)
	body := readAll(t, r)
	if r.StatusCode != 400 || !strings.Contains(body, "field required") || len(up.chatRequests()) != 1 {
		t.Fatalf("%d %s after %d calls", r.StatusCode, body, len(up.chatRequests()))
	}
	if s := e.state(a); s.Status != "active" {
		t.Fatalf("a 400 must not cool the connection: %+v", s)
	}
}

func TestContextOverflowFailsOverWithoutCooldown(t *testing.T) {
	e, up, key, a, _ := twoKeys(t, byKey(map[string]http.HandlerFunc{
		"sk-a": status(400, nil, `{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}`),
		"sk-b": jsonAnswer(completionJSON),
	}))
	r := e.chat(context.Background(), key, chatBody)
	readAll(t, r)
	if r.StatusCode != 200 || len(up.chatRequests()) != 2 {
		t.Fatalf("%d after %d calls", r.StatusCode, len(up.chatRequests()))
	}
	if s := e.state(a); s.Status != "active" {
		t.Fatalf("context overflow must not cool: %+v", s)
	}
}

func TestStatusRestatementRule(t *testing.T) {
	e, _, key := setupOne(t, status(403, nil, `{"error":{"message":"quota exceeded for this billing period"}}`))
	e.mustAPI("PATCH", "/api/settings/resilience", map[string]any{
		"retry": map[string]any{"max_retries": 0},
		"status_restatements": []any{map[string]any{"name": "gw-quota", "from_status": 403,
			"body_markers": []string{"quota exceeded"}, "exclude_markers": []string{"no access"}, "to_status": 429, "retry_after_ms": 60000}},
	}, 200)
	r := e.chat(context.Background(), key, chatBody)
	readAll(t, r)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "60" {
		t.Fatalf("restated answer: %d Retry-After=%q", r.StatusCode, r.Header.Get("Retry-After"))
	}
}
