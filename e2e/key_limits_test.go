package e2e

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// limitedSetup is a gateway with provider "up" on a fake upstream answering chat and a key
// "agent" with limits; it returns the key and its id. The caller waits for the models with
// whichever key it may spend a request on.
func limitedSetup(t *testing.T, chat http.HandlerFunc, limits map[string]any) (*testenv.Env, *testenv.FakeUpstream, string, int64) {
	t.Helper()
	up := testenv.NewFakeUpstream(t, chat)
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "c1", "sk-up", 0)
	key, id := testenv.LimitedKey(e, "agent", limits)
	return e, up, key, id
}

// A key with 2 requests per minute is refused its third on every surface, in that surface's
// format, with Retry-After at the window's reset; the upstream never sees the refused ones, and
// another key keeps working.
func TestKeyRequestsPerMinuteOnEverySurface(t *testing.T) {
	e, up, key, _ := limitedSetup(t, testenv.JSONAnswer(testenv.CompletionJSON), map[string]any{"rpm_limit": 2})
	other := e.NewKey()
	e.WaitModels(other, "up/gpt-test")
	surfaces := []struct {
		path, body, format string
	}{
		{"/v1/chat/completions", testenv.ChatBody, "openai"},
		{"/v1/messages", `{"model":"up/gpt-test","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "anthropic"},
		{"/v1/responses", `{"model":"up/gpt-test","input":"hi"}`, "openai"},
	}
	for _, s := range surfaces {
		t.Run(s.path, func(t *testing.T) {
			for i := range 2 {
				r := e.Post(context.Background(), s.path, key, s.body, nil)
				if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
					t.Fatalf("request %d: %d %s", i, r.StatusCode, b)
				}
				e.Clock.Advance(10 * time.Second)
			}
			before := len(up.ChatRequests())
			r := e.Post(context.Background(), s.path, key, s.body, nil)
			if got := r.Header.Get("Retry-After"); got != "40" {
				t.Errorf("Retry-After %q, want 40 (the first request leaves the minute in 40 s)", got)
			}
			if got := r.Header.Get("X-Should-Retry"); got != "" {
				t.Errorf("x-should-retry %q on a rate limit", got)
			}
			ref := testenv.ReadRefusal(t, r)
			switch s.format {
			case "openai":
				if ref.Error.Code != "key_rate_limited" || ref.Error.Type != "rate_limit_error" && ref.Error.Type != "requests" {
					t.Errorf("OpenAI error %+v", ref.Error)
				}
			case "anthropic":
				if ref.Type != "error" || ref.Error.Type != "rate_limit_error" {
					t.Errorf("Anthropic error %+v", ref)
				}
			}
			if ref.Diagnostics.Limit != "key_rate_limited" || ref.Diagnostics.Value != 2 ||
				ref.Diagnostics.ResetsAt.Sub(e.Clock.Now().Add(40*time.Second)).Abs() > time.Second {
				t.Errorf("diagnostics %+v", ref.Diagnostics)
			}
			if n := len(up.ChatRequests()); n != before {
				t.Errorf("the refused request reached the upstream (%d calls, want %d)", n, before)
			}
			// Another key is not held back.
			r = e.Post(context.Background(), s.path, other, s.body, nil)
			if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
				t.Fatalf("other key: %d %s", r.StatusCode, b)
			}
			// Once the minute has passed, the key works again.
			e.Clock.Advance(41 * time.Second)
		})
	}
	// The refusals are in the request log with their code.
	var rows []any
	e.Eventually("three refusals logged", func() bool {
		rows = e.MustAPI("GET", "/api/requests?status=429", nil, 200)["items"].([]any)
		return len(rows) >= 3
	})
	for _, r := range rows {
		if len(rows) != 3 || r.(map[string]any)["error_code"] != "key_rate_limited" {
			t.Fatalf("logged refusals %v", rows)
		}
	}
}

// Tokens per minute count the tokens of finished requests: the answer used 5, the limit is 5.
func TestKeyTokensPerMinute(t *testing.T) {
	e, _, key, id := limitedSetup(t, testenv.JSONAnswer(testenv.CompletionJSON), map[string]any{"tpm_limit": 5})
	e.WaitModels(key, "up/gpt-test")
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	// The tokens are counted when the request finishes, just after its answer reached the
	// client: the minute starts then, not after the clock moved on.
	e.Eventually("the first request's tokens counted", func() bool {
		var use struct {
			Tokens   int64 `json:"tokens_last_minute"`
			Parallel int64 `json:"parallel"`
		}
		return e.API("GET", "/api/keys/"+itoa(id)+"/usage", nil, &use) == 200 && use.Tokens > 0 && use.Parallel == 0
	})
	e.Clock.Advance(15 * time.Second)
	r = e.Chat(context.Background(), key, testenv.ChatBody)
	if got := r.Header.Get("Retry-After"); got != "45" {
		t.Errorf("Retry-After %q, want 45", got)
	}
	if ref := testenv.ReadRefusal(t, r); ref.Error.Code != "key_token_limited" {
		t.Fatalf("code %q", ref.Error.Code)
	}
	e.Clock.Advance(45 * time.Second)
	r = e.Chat(context.Background(), key, testenv.ChatBody)
	if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("after the minute: %d %s", r.StatusCode, b)
	}
}

// max_parallel 1: while one request runs, the next is refused; once it has finished, it goes.
func TestKeyParallelRequests(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	started := make(chan struct{}, 4)
	e, _, key, _ := limitedSetup(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	}, map[string]any{"max_parallel": 1})
	// Held requests are let go before the gateway and the upstream stop.
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	e.WaitModels(key, "up/gpt-test")
	first := make(chan int, 1)
	go func() {
		r := e.Chat(context.Background(), key, testenv.ChatBody)
		_ = testenv.ReadAll(t, r)
		first <- r.StatusCode
	}()
	<-started
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q", got)
	}
	if ref := testenv.ReadRefusal(t, r); ref.Error.Code != "key_parallel_limited" {
		t.Fatalf("code %q", ref.Error.Code)
	}
	once.Do(func() { close(release) })
	if code := <-first; code != 200 {
		t.Fatalf("first request %d", code)
	}
	r = e.Chat(context.Background(), key, testenv.ChatBody)
	if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("after the first finished: %d %s", r.StatusCode, b)
	}
}

// Limits are fields of the key: set on create, shown, changed and removed (0) by PATCH, and
// refused out of range with the field named.
func TestKeyLimitsAPI(t *testing.T) {
	e := testenv.New(t)
	_, id := testenv.LimitedKey(e, "agent", map[string]any{"rpm_limit": 60, "daily_budget_usd": 5, "budget_webhook_url": "https://hooks.example/budget"})
	path := "/api/keys/" + strconv.FormatInt(id, 10)
	got := e.MustAPI("GET", path, nil, 200)
	if got["rpm_limit"] != 60.0 || got["daily_budget_usd"] != 5.0 || got["budget_webhook_url"] != "https://hooks.example/budget" {
		t.Fatalf("key %v", got)
	}
	got = e.MustAPI("PATCH", path, map[string]any{"rpm_limit": 0, "monthly_budget_usd": 100.5, "max_parallel": 3}, 200)
	if _, has := got["rpm_limit"]; has || got["monthly_budget_usd"] != 100.5 || got["max_parallel"] != 3.0 || got["daily_budget_usd"] != 5.0 {
		t.Fatalf("after PATCH %v", got)
	}
	var bad struct {
		Error struct {
			Code   string            `json:"code"`
			Fields map[string]string `json:"fields"`
		} `json:"error"`
	}
	if code := e.API("PATCH", path, map[string]any{"tpm_limit": -1, "daily_budget_usd": 1e12, "budget_webhook_url": "ftp://x"}, &bad); code != 422 {
		t.Fatalf("bad limits: %d", code)
	}
	for _, f := range []string{"tpm_limit", "daily_budget_usd", "budget_webhook_url"} {
		if bad.Error.Fields[f] == "" {
			t.Errorf("no error for %s: %v", f, bad.Error.Fields)
		}
	}
	if got := e.MustAPI("GET", path, nil, 200); got["monthly_budget_usd"] != 100.5 {
		t.Fatalf("a refused PATCH changed the key: %v", got)
	}
}
