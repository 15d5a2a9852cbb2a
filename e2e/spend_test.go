package e2e

import (
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

	"switchyard/e2e/testenv"
	"switchyard/services/webhooks"
)

// chatWithCache is a chat completion whose usage has cached prompt tokens and reasoning tokens.
const chatWithCache = `{"id":"chatcmpl-9","object":"chat.completion","created":1700000000,"model":"gpt-test",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":400},` +
	`"completion_tokens_details":{"reasoning_tokens":300}}}`

// chatStreamWithCache is the same answer streamed, its usage on the last chunk (as OpenAI sends
// it when asked with stream_options.include_usage).
var chatStreamWithCache = []string{
	`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}],"usage":null}`,
	`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}],"usage":null}`,
	`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":400},"completion_tokens_details":{"reasoning_tokens":300}}}`,
	`data: [DONE]`,
}

// loggedRow is the request-log row of an answered request, found by the X-Request-Id the answer
// carried (the row is written just after the answer reached the client).
func loggedRow(e *testenv.Env, r *http.Response) map[string]any {
	e.T.Helper()
	id := r.Header.Get("X-Request-Id")
	var row map[string]any
	e.Eventually("the request is logged", func() bool {
		for _, it := range e.MustAPI("GET", "/api/requests?limit=20", nil, 200)["items"].([]any) {
			if m := it.(map[string]any); m["request_id"] == id {
				row = m
				return true
			}
		}
		return false
	})
	return row
}

// Every surface's request is priced by what the upstream reported, cache reads and reasoning
// included: the chat answer has 600 uncached and 400 cached prompt tokens and 500 output tokens
// (300 of them reasoning). At 10 / 20 / 1 USD per million (input / output / cache read) that is
// 0.006 + 0.0004 + 0.01 = 0.0164 USD, whichever format the client spoke and whether it streamed.
func TestCostOfEverySurface(t *testing.T) {
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			if !strings.Contains(string(b), `"include_usage":true`) {
				http.Error(w, "the gateway must ask for the stream's usage", 400)
				return
			}
			testenv.SSEAnswer(chatStreamWithCache, -1)(w, r)
			return
		}
		testenv.JSONAnswer(chatWithCache)(w, r)
	})
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "c1", "sk-up", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	testenv.SetPrice(e, "up/gpt-test", 10, 20, 12.5, 1)
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", testenv.ChatBody},
		{"chat stream (no usage asked)", "/v1/chat/completions", `{"model":"up/gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages (translated)", "/v1/messages", `{"model":"up/gpt-test","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages stream (translated)", "/v1/messages", `{"model":"up/gpt-test","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses (translated)", "/v1/responses", `{"model":"up/gpt-test","input":"hi"}`},
		{"responses stream (translated)", "/v1/responses", `{"model":"up/gpt-test","input":"hi","stream":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.Post(context.Background(), tc.path, key, tc.body, nil)
			body := testenv.ReadAll(t, r)
			if r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, body)
			}
			if tc.name == "chat stream (no usage asked)" && strings.Contains(body, `"usage":{`) {
				t.Errorf("the usage chunk the client did not ask for was relayed: %s", body)
			}
			row := loggedRow(e, r)
			cost, _ := row["cost_usd"].(float64)
			if !testenv.Near(cost, 0.0164) || row["input_tokens"] != 1000.0 || row["output_tokens"] != 500.0 ||
				row["cache_read_tokens"] != 400.0 || row["reasoning_tokens"] != 300.0 {
				t.Fatalf("logged %v", row)
			}
		})
	}
}

// A native Anthropic answer reports cache writes and reads apart from the input: 50 uncached,
// 2,000 written, 3,000 read, 70 out. At 3 / 15 / 3.75 / 0.3 USD per million: 0.00015 + 0.0075 +
// 0.0009 + 0.00105 = 0.0096 USD.
func TestCostOfAnAnthropicAnswerWithCache(t *testing.T) {
	answer := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Hi"}],` +
		`"stop_reason":"end_turn","usage":{"input_tokens":50,"cache_creation_input_tokens":2000,"cache_read_input_tokens":3000,"output_tokens":70}}`
	e, _, key, _, _ := anthropicSetup(t, testenv.JSONAnswer(answer))
	testenv.SetPrice(e, "anthropic/claude-test", 3, 15, 3.75, 0.3)
	for _, path := range []string{"/v1/messages", "/v1/chat/completions"} {
		body := testenv.MessagesBody
		if path == "/v1/chat/completions" {
			body = `{"model":"anthropic/claude-test","messages":[{"role":"user","content":"hi"}]}`
		}
		r := e.PostAnthropic(path, key, body, nil)
		if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, r.StatusCode, b)
		}
		row := loggedRow(e, r)
		if cost, _ := row["cost_usd"].(float64); !testenv.Near(cost, 0.0096) || row["input_tokens"] != 5050.0 ||
			row["cache_write_tokens"] != 2000.0 || row["cache_read_tokens"] != 3000.0 {
			t.Fatalf("%s: logged %v", path, row)
		}
	}
}

// The built-in table prices a model it knows by the upstream's id; an operator price for
// provider/model beats it; a model nobody priced is logged without a cost, not at 0.
func TestPriceOverrideBeatsTheBuiltInTable(t *testing.T) {
	answer := strings.ReplaceAll(testenv.CompletionJSON, `"prompt_tokens":3,"completion_tokens":2,"total_tokens":5`,
		`"prompt_tokens":1000000,"completion_tokens":1000000,"total_tokens":2000000`)
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(answer), "gpt-4o", "homebrew-7b")
	e := testenv.New(t)
	e.AddProviderOfType("oa", "openai", up.URL+"/v1")
	e.AddConnection("oa", "c1", "sk-up", 0)
	key := e.NewKey()
	e.WaitModels(key, "oa/gpt-4o")
	chat := func(model string) map[string]any {
		r := e.Chat(context.Background(), key, `{"model":"oa/`+model+`","messages":[{"role":"user","content":"hi"}]}`)
		if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, b)
		}
		return loggedRow(e, r)
	}
	builtIn := chat("gpt-4o")["cost_usd"]
	if c, ok := builtIn.(float64); !ok || c <= 0 {
		t.Fatalf("gpt-4o from the built-in table: %v", builtIn)
	}
	testenv.SetPrice(e, "oa/gpt-4o", 1, 2, 0, 0)
	if c := chat("gpt-4o")["cost_usd"]; c != 3.0 {
		t.Fatalf("with the override: %v, want 3 (1 + 2 USD for a million each)", c)
	}
	if c, has := chat("homebrew-7b")["cost_usd"]; !has || c != nil {
		t.Fatalf("an unpriced model's cost is %v, want null", c)
	}
}

// budgetSetup is a gateway whose only model costs 0.5 USD a request (3 + 2 tokens at 100,000
// USD per million), and a key with budget limits.
func budgetSetup(t *testing.T, handler http.HandlerFunc, limits map[string]any) (*testenv.Env, string, int64) {
	t.Helper()
	if handler == nil {
		handler = testenv.JSONAnswer(testenv.CompletionJSON)
	}
	up := testenv.NewFakeUpstream(t, handler)
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "c1", "sk-up", 0)
	key, id := testenv.LimitedKey(e, "agent", limits)
	e.WaitModels(key, "up/gpt-test")
	testenv.SetPrice(e, "up/gpt-test", 100000, 100000, 0, 0)
	return e, key, id
}

// The daily budget in Berlin's day: spent at 23:30 Berlin time, refused until midnight there
// (Retry-After 30 min, x-should-retry false, on each surface in its format), the refusal and the
// spend survive a restart, and the next day in Berlin the key works again.
func TestDailyBudgetInItsTimeZone(t *testing.T) {
	e, key, id := budgetSetup(t, nil, map[string]any{"daily_budget_usd": 1})
	e.MustAPI("PATCH", "/api/settings/prices", map[string]any{"time_zone": "Europe/Berlin"}, 200)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	now := e.Clock.Now().In(berlin)
	y, m, d := now.Date()
	target := time.Date(y, m, d, 23, 30, 0, 0, berlin)
	if target.Before(now) {
		target = target.AddDate(0, 0, 1)
	}
	e.Clock.Advance(target.Sub(now))
	for i := range 2 {
		r := e.Chat(context.Background(), key, testenv.ChatBody)
		if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, r.StatusCode, b)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, s := range []struct{ path, body string }{
			{"/v1/chat/completions", testenv.ChatBody},
			{"/v1/messages", `{"model":"up/gpt-test","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		} {
			r := e.Post(context.Background(), s.path, key, s.body, nil)
			if got := r.Header.Get("Retry-After"); got != "1800" {
				t.Errorf("%s %s: Retry-After %q, want 1800 (midnight in Berlin)", when, s.path, got)
			}
			if got := r.Header.Get("X-Should-Retry"); got != "false" {
				t.Errorf("%s %s: x-should-retry %q", when, s.path, got)
			}
			ref := testenv.ReadRefusal(t, r)
			if ref.Diagnostics.Limit != "key_budget_exceeded" || ref.Diagnostics.Budget != "daily" {
				t.Errorf("%s %s: %+v", when, s.path, ref)
			}
			if s.path == "/v1/chat/completions" && ref.Error.Code != "key_budget_exceeded" {
				t.Errorf("%s: code %q", when, ref.Error.Code)
			}
		}
	}
	check("after spending")
	e.Restart()
	check("after a restart")
	if testenv.KeyUse(e, id)["day_spend_usd"] != 1.0 {
		t.Errorf("day spend after the restart: %v", testenv.KeyUse(e, id))
	}
	e.Clock.Advance(30 * time.Minute)
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("the next day in Berlin: %d %s", r.StatusCode, b)
	}
}

// 20 requests at once against a budget with room left: all are admitted (nothing finished yet),
// so the overshoot is exactly their own cost and no more, and the next request is refused.
func TestConcurrentRequestsOvershootByTheRunningOnly(t *testing.T) {
	var hold atomic.Bool
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	arrived := make(chan struct{}, 32)
	e, key, id := budgetSetup(t, func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			arrived <- struct{}{}
			<-gate
		}
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	}, map[string]any{"daily_budget_usd": 1.2})
	for range 2 { // 1 of 1.2 spent
		r := e.Chat(context.Background(), key, testenv.ChatBody)
		if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, b)
		}
	}
	hold.Store(true)
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for range 20 {
		wg.Go(func() {
			r := e.Chat(context.Background(), key, testenv.ChatBody)
			testenv.ReadAll(t, r)
			codes <- r.StatusCode
		})
	}
	for range 20 {
		<-arrived // every one is running upstream
	}
	open()
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("status %d of a request admitted under the budget", c)
		}
	}
	// A request's cost is counted once its answer is sent: the last ones may still be on the way.
	var spent float64
	e.Eventually("the 20 requests' cost is counted", func() bool {
		spent = testenv.KeyUse(e, id)["day_spend_usd"].(float64)
		return spent > 1+0.5*20-1e-6
	})
	if !testenv.Near(spent, 1+0.5*20) {
		t.Fatalf("spend %.2f, want 11: 1 before and the 20 running requests' own cost, nothing more", spent)
	}
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	if ref := testenv.ReadRefusal(t, r); ref.Diagnostics.Limit != "key_budget_exceeded" {
		t.Fatalf("after the budget: %+v", ref)
	}
}

// The key's webhook and the gateway-wide one each get one signed POST when the key crosses 80 %
// and one at 100 % of its daily budget, never more, and never on the request's time.
func TestBudgetWebhookOncePerThreshold(t *testing.T) {
	type got struct {
		hook string
		body []byte
		sig  string
	}
	var mu sync.Mutex
	var calls []got
	hook := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			calls = append(calls, got{name, b, r.Header.Get(webhooks.SignatureHeader)})
			mu.Unlock()
		}))
		t.Cleanup(s.Close)
		return s
	}
	keyHook, globalHook := hook("key"), hook("global")
	e, key, _ := budgetSetup(t, nil, map[string]any{"daily_budget_usd": 2, "budget_webhook_url": keyHook.URL + "/budget?token=x"})
	e.MustAPI("PATCH", "/api/settings/prices", map[string]any{"budget_webhook_url": globalHook.URL}, 200)
	secret := e.MustAPI("POST", "/api/settings/prices/webhook-secret", nil, 200)["secret"].(string)
	for i := range 5 { // spend 0.5, 1.0, 1.5, then 2.0 (crosses 80 % and 100 %), then refused
		r := e.Chat(context.Background(), key, testenv.ChatBody)
		testenv.ReadAll(t, r)
		if want := map[bool]int{true: 200, false: 429}[i < 4]; r.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, r.StatusCode, want)
		}
	}
	e.Eventually("four deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 4
	})
	e.Clock.Advance(time.Hour) // any retry would be due by now
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 4 {
		t.Fatalf("%d deliveries, want 4 (80 %% and 100 %% to each hook)", len(calls))
	}
	seen := map[string]bool{}
	for _, c := range calls {
		if err := webhooks.Verify(secret, c.sig, c.body, e.Clock.Now(), 2*time.Hour); err != nil {
			t.Errorf("%s hook: signature: %v", c.hook, err)
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				KeyName   string  `json:"key_name"`
				Budget    string  `json:"budget"`
				Threshold int     `json:"threshold_percent"`
				Spend     float64 `json:"spend_usd"`
				BudgetUSD float64 `json:"budget_usd"`
			} `json:"data"`
		}
		if err := json.Unmarshal(c.body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "key.budget_threshold" || ev.Data.KeyName != "agent" || ev.Data.Budget != "daily" || ev.Data.BudgetUSD != 2 {
			t.Errorf("event %s", c.body)
		}
		seen[fmt.Sprintf("%s %d", c.hook, ev.Data.Threshold)] = true
	}
	for _, want := range []string{"key 80", "key 100", "global 80", "global 100"} {
		if !seen[want] {
			t.Errorf("no %s delivery: %v", want, seen)
		}
	}
}

// A subscription account's requests cost 0 but their tokens count: even with a price for the
// model, a Claude account's answer is logged at 0 USD with its tokens, and spends no budget.
func TestSubscriptionRequestsCostNothing(t *testing.T) {
	answer := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Hi"}],` +
		`"stop_reason":"end_turn","usage":{"input_tokens":1000,"output_tokens":1000}}`
	e, f, _ := claudeSetup(t, testenv.JSONAnswer(answer))
	e.AddClaudeAccount(f, "ada@example.com")
	key, id := testenv.LimitedKey(e, "agent", map[string]any{"daily_budget_usd": 0.01})
	e.WaitModels(key, "anthropic/claude-test")
	testenv.SetPrice(e, "anthropic/claude-test", 100, 100, 0, 0)
	var r *http.Response
	for range 3 {
		r = e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
		if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, b)
		}
	}
	row := loggedRow(e, r)
	if c, ok := row["cost_usd"].(float64); !ok || c != 0 || row["input_tokens"] != 1000.0 || row["output_tokens"] != 1000.0 {
		t.Fatalf("logged %v", row)
	}
	if spent := testenv.KeyUse(e, id)["day_spend_usd"]; spent != 0.0 {
		t.Fatalf("day spend %v", spent)
	}
}
