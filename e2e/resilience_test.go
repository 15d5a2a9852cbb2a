package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// twoKeysBAnswers is twoKeys whose connection a is answered by a and b with a completion.
func twoKeysBAnswers(t *testing.T, a http.HandlerFunc) (*testenv.Env, *testenv.FakeUpstream, string, int64, int64) {
	t.Helper()
	return testenv.TwoKeys(t, testenv.ByKey(map[string]http.HandlerFunc{"sk-a": a, "sk-b": testenv.JSONAnswer(testenv.CompletionJSON)}))
}

func TestRetryAfterCoolsExactlyThatConnection(t *testing.T) {
	e, up, key, a, b := twoKeysBAnswers(t, testenv.Status(429, map[string]string{"Retry-After": "7"}, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
	resp := e.Chat(context.Background(), key, testenv.ChatBody)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 || body != testenv.CompletionJSON {
		t.Fatalf("the sibling must serve the request: %d %s", resp.StatusCode, body)
	}
	sa := e.State(a)
	if sa.Status != "cooling" || sa.RemainingMS != 7000 || sa.Reason != "rate_limit" || sa.ErrorCode != 429 || sa.BackoffLevel != 1 {
		t.Fatalf("connection a: %+v", sa)
	}
	if sb := e.State(b); sb.Status != "active" {
		t.Fatalf("connection b: %+v", sb)
	}
	// While a cools, all traffic goes to b without touching a.
	before := len(up.ChatRequests())
	for i := 0; i < 3; i++ {
		if r := e.Chat(context.Background(), key, testenv.ChatBody); r.StatusCode != 200 {
			t.Fatalf("status %d", r.StatusCode)
		}
	}
	for _, r := range up.ChatRequests()[before:] {
		if r.Header.Get("Authorization") != "Bearer sk-b" {
			t.Fatal("a cooling connection was used")
		}
	}
	// The countdown ends by itself.
	e.Clock.Advance(6999 * time.Millisecond)
	if s := e.State(a); s.Status != "cooling" || s.RemainingMS != 1 {
		t.Fatalf("before expiry: %+v", s)
	}
	e.Clock.Advance(time.Millisecond)
	if s := e.State(a); s.Status != "active" {
		t.Fatalf("after expiry: %+v", s)
	}
	// The state survives a restart (written behind the request path).
	e.Clock.Advance(-time.Second)
	e.Restart()
	if s := e.State(a); s.Status != "cooling" || s.BackoffLevel != 1 {
		t.Fatalf("after restart: %+v", s)
	}
}

func TestConcurrent429sRaiseTheLevelOnce(t *testing.T) {
	const n = 8
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	go func() { arrived.Wait(); close(release) }()
	e, _, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // every request is in flight before the first answer
		testenv.Status(429, nil, `{"error":{"message":"slow down","type":"rate_limit"}}`)(w, r)
	})
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	if limited := chatBurst(t, e, key, n)[429]; limited != n {
		t.Fatalf("%d of %d got 429", limited, n)
	}
	conns := e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any)
	id := int64(conns[0].(map[string]any)["id"].(float64))
	if s := e.State(id); s.BackoffLevel != 1 || s.RemainingMS != 3000 {
		t.Fatalf("herd guard failed: %+v", s)
	}
}

func TestUnauthorizedMakesConnectionExpiredAcrossRestart(t *testing.T) {
	e, up, key := testenv.SetupOne(t, testenv.Status(401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 401 || !strings.Contains(body, "expired") || !strings.Contains(body, "dashboard") {
		t.Fatalf("want our 401 naming the state: %d %s", r.StatusCode, body)
	}
	conns := e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any)
	id := int64(conns[0].(map[string]any)["id"].(float64))
	e.Restart()
	if s := e.State(id); s.Status != "expired" {
		t.Fatalf("after restart: %+v", s)
	}
	// All connections terminal: 401 at once, the upstream is not called.
	before := len(up.ChatRequests())
	r = e.Chat(context.Background(), key, testenv.ChatBody)
	body = testenv.ReadAll(t, r)
	if r.StatusCode != 401 || !strings.Contains(body, "connections_unusable") || len(up.ChatRequests()) != before {
		t.Fatalf("all-terminal: %d %s", r.StatusCode, body)
	}
	// Reset without terminal keeps it; with terminal clears it.
	e.MustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", id), map[string]any{}, 200)
	if s := e.State(id); s.Status != "expired" {
		t.Fatalf("clear cooldown must not clear a terminal state: %+v", s)
	}
	out := e.MustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", id), map[string]any{"terminal": true}, 200)
	if out["status"] != "active" {
		t.Fatalf("reset: %v", out)
	}
}

func TestAllCoolingAnswers429WithRetryAfter(t *testing.T) {
	e, up, key, _, _ := testenv.TwoKeys(t, testenv.Status(429, map[string]string{"Retry-After": "20"}, `{"error":{"message":"Too many requests"}}`))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	testenv.ReadAll(t, r)
	if r.StatusCode != 429 || len(up.ChatRequests()) != 2 {
		t.Fatalf("first request: %d after %d upstream calls", r.StatusCode, len(up.ChatRequests()))
	}
	e.Clock.Advance(5 * time.Second)
	r = e.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "15" || !strings.Contains(body, "all_connections_cooling") ||
		!strings.Contains(body, "rate_limit") {
		t.Fatalf("all cooling: %d Retry-After=%q %s", r.StatusCode, r.Header.Get("Retry-After"), body)
	}
	if len(up.ChatRequests()) != 2 {
		t.Fatal("a cooling connection was called")
	}
}

func TestRetriesWaitForCooldownAndForwardIdempotencyKey(t *testing.T) {
	var calls atomic.Int32
	e, up, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			testenv.Status(503, nil, `{"error":{"message":"upstream overloaded, try later"}}`)(w, r)
			return
		}
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	})
	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest("POST", e.Base+"/v1/chat/completions", strings.NewReader(testenv.ChatBody))
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
	e.Eventually("two retries", func() bool {
		e.Clock.Advance(time.Second)
		return len(up.ChatRequests()) >= 3
	})
	resp := <-done
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("want success after retries, got %v", resp)
	}
	reqs := up.ChatRequests()
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
	e, up, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	testenv.Call(t, http.DefaultClient, "POST", e.Base+"/v1/chat/completions", testenv.ChatBody,
		map[string]string{"Authorization": "Bearer " + key, "Idempotency-Key": "has space"})
	if got := up.ChatRequests()[0].Header.Get("Idempotency-Key"); got != "" {
		t.Fatalf("invalid key forwarded: %q", got)
	}
}

func TestNoRetryAfterFirstStreamedByte(t *testing.T) {
	e, up, key, _, _ := testenv.TwoKeys(t, testenv.SSEAnswer(testenv.SSEChunks, 2))
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
	body := testenv.ReadAll(t, r)
	if !strings.Contains(body, "stream_incomplete") {
		t.Fatalf("body %q", body)
	}
	if n := len(up.ChatRequests()); n != 1 {
		t.Fatalf("a stream that started was retried: %d upstream calls", n)
	}
}

func TestHiddenErrorIn200FailsOver(t *testing.T) {
	e, _, key, a, _ := twoKeysBAnswers(t, testenv.Status(200, nil, `{"error":{"message":"The server had an error while processing your request","type":"server_error","code":503}}`))
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || body != testenv.CompletionJSON {
		t.Fatalf("%d %s", r.StatusCode, body)
	}
	if s := e.State(a); s.Status != "cooling" || s.ErrorCode != 503 {
		t.Fatalf("hidden error not treated as a failure: %+v", s)
	}
}

func TestHiddenErrorInStreamFailsOver(t *testing.T) {
	e, _, key, _, _ := testenv.TwoKeys(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-a": testenv.SSEAnswer([]string{`data: {"error":{"message":"overloaded","type":"server_error"}}`}, -1),
		"sk-b": testenv.SSEAnswer(testenv.SSEChunks, -1),
	}))
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
	body := testenv.ReadAll(t, r)
	if !strings.Contains(body, "[DONE]") || strings.Contains(body, "overloaded") {
		t.Fatalf("%s", body)
	}
}

func TestPlainBadRequestDoesNotFailOver(t *testing.T) {
	e, up, key, a, _ := testenv.TwoKeys(t, testenv.Status(400, nil, `{"error":{"message":"messages: field required","type":"invalid_request_error"}}`))
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 400 || !strings.Contains(body, "field required") || len(up.ChatRequests()) != 1 {
		t.Fatalf("%d %s after %d calls", r.StatusCode, body, len(up.ChatRequests()))
	}
	if s := e.State(a); s.Status != "active" {
		t.Fatalf("a 400 must not cool the connection: %+v", s)
	}
}

func TestContextOverflowFailsOverWithoutCooldown(t *testing.T) {
	e, up, key, a, _ := twoKeysBAnswers(t, testenv.Status(400, nil, `{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}`))
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	testenv.ReadAll(t, r)
	if r.StatusCode != 200 || len(up.ChatRequests()) != 2 {
		t.Fatalf("%d after %d calls", r.StatusCode, len(up.ChatRequests()))
	}
	if s := e.State(a); s.Status != "active" {
		t.Fatalf("context overflow must not cool: %+v", s)
	}
}

func TestStatusRestatementRule(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.Status(403, nil, `{"error":{"message":"quota exceeded for this billing period"}}`))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{
		"retry": map[string]any{"max_retries": 0},
		"status_restatements": []any{map[string]any{"name": "gw-quota", "from_status": 403,
			"body_markers": []string{"quota exceeded"}, "exclude_markers": []string{"no access"}, "to_status": 429, "retry_after_ms": 60000}},
	}, 200)
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	testenv.ReadAll(t, r)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "60" {
		t.Fatalf("restated answer: %d Retry-After=%q", r.StatusCode, r.Header.Get("Retry-After"))
	}
}
