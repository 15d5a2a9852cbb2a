package e2e

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// whileWaiting runs f in the background and moves the fake clock on until it returns: the
// gateway's retries wait on that clock.
func whileWaiting(e *testenv.Env, f func()) {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	for {
		select {
		case <-done:
			return
		case <-time.After(2 * time.Millisecond):
			e.Clock.Advance(500 * time.Millisecond)
		}
	}
}

// One client request makes at most the attempt budget of upstream calls, across retries and
// failover, and then says when to come back and that the client should not retry on its own;
// an SDK with its default retries adds no upstream call.
func TestRetryBudgetBoundsUpstreamCalls(t *testing.T) {
	limited := testenv.Status(429, map[string]string{"Retry-After": "1"}, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)
	e, up, key, _, _ := testenv.TwoKeys(t, limited)
	var r *http.Response
	var body string
	whileWaiting(e, func() {
		r = e.Chat(context.Background(), key, testenv.ChatBody)
		body = testenv.ReadAll(t, r)
	})
	calls := len(up.ChatRequests())
	if calls != 6 {
		t.Fatalf("the upstream saw %d calls, want the budget of 6", calls)
	}
	ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if r.StatusCode != 429 || r.Header.Get("X-Should-Retry") != "false" || ra < 1 || ra > 2 ||
		gjson.Get(body, "diagnostics.attempts").Int() != 6 || gjson.Get(body, "error.code").String() != "rate_limit" {
		t.Fatalf("answer: %d Retry-After=%q X-Should-Retry=%q %s", r.StatusCode, r.Header.Get("Retry-After"),
			r.Header.Get("X-Should-Retry"), body)
	}

	// The official SDK with its default two retries honours x-should-retry and adds nothing.
	e.Clock.Advance(time.Minute)
	before := len(up.ChatRequests())
	client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key))
	var err error
	whileWaiting(e, func() {
		_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "up/gpt-test",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("SDK: %v", err)
	}
	if n := len(up.ChatRequests()) - before; n != 6 {
		t.Fatalf("with the SDK's retries the upstream saw %d calls, want 6", n)
	}
}

// When every key answers server errors, the provider is out: the client gets 503 with
// Retry-After, also for requests that find every connection cooling; rate limits stay 429.
func TestOutageIs503AndRateLimitsAre429(t *testing.T) {
	var outage atomic.Bool
	outage.Store(true)
	e, _, key, _, _ := testenv.TwoKeys(t, func(w http.ResponseWriter, r *http.Request) {
		if outage.Load() {
			testenv.Status(503, nil, `{"error":{"message":"service unavailable"}}`)(w, r)
			return
		}
		testenv.Status(429, nil, `{"error":{"message":"rate limited"}}`)(w, r)
	})
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	for i, want := range []string{"server_error", "all_connections_cooling"} {
		r := e.Chat(context.Background(), key, testenv.ChatBody)
		body := testenv.ReadAll(t, r)
		if r.StatusCode != 503 || r.Header.Get("Retry-After") == "" || gjson.Get(body, "error.code").String() != want {
			t.Fatalf("outage request %d: %d %v %s", i, r.StatusCode, r.Header, body)
		}
	}
	e.Clock.Advance(time.Minute)
	outage.Store(false)
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody)) // both keys now rate limited
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 429 || gjson.Get(body, "error.code").String() != "all_connections_cooling" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("rate limited: %d %s", r.StatusCode, body)
	}
}
