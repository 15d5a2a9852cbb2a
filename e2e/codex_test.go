package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// ChatGPT accounts (provider type codex) on the request path: every client surface reaches the
// Codex backend's Responses API through the conversation model, the account's usage windows come
// from the backend's headers, and its usage wall rests the account exactly until its reset while
// the request goes on to another account.

// chatgptModel is how clients address the Codex backend's model.
const chatgptModel = "codex/gpt-5-codex"

// chatgptGateway is a gateway signed in to a fake of OpenAI's auth server, with a provider
// "codex" whose backend is a FakeCodex, named by the provider's base_url (viaProvider) or by the
// codex.api_base_url setting; retries are off.
func chatgptGateway(t *testing.T, viaProvider bool) (*testenv.Env, *testenv.FakeOpenAIAuth, *testenv.FakeCodex, string) {
	t.Helper()
	auth := testenv.NewFakeOpenAIAuth(t)
	backend := testenv.NewFakeCodex(t, auth.AccountOf)
	e := testenv.New(t)
	e.UseFakeOpenAIAuth(auth)
	prov := map[string]any{"name": "codex", "type": "codex"}
	if viaProvider {
		prov["base_url"] = backend.BaseURL()
	} else {
		e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"codex": map[string]any{"api_base_url": backend.BaseURL()}}, 200)
	}
	e.MustAPI("POST", "/api/providers", prov, 201)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	return e, auth, backend, e.NewKey()
}

// chatgptNoTokens fails the test when text shows a token the auth fake issued, or any JWT.
func chatgptNoTokens(t *testing.T, auth *testenv.FakeOpenAIAuth, where, text string) {
	t.Helper()
	for _, tok := range auth.Tokens() {
		if strings.Contains(text, tok) {
			t.Fatalf("%s shows a token (%.12s…)", where, tok)
		}
	}
	if strings.Contains(text, "eyJhbGciOi") {
		t.Fatalf("%s shows a JWT", where)
	}
}

// chatgptConn reads one connection of GET /api/resilience/state.
func chatgptConn(e *testenv.Env, id int64) gjson.Result {
	e.T.Helper()
	req, _ := http.NewRequest("GET", e.Base+"/api/resilience/state", nil)
	req.Header.Set("Authorization", "Bearer "+testenv.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	body := testenv.ReadAll(e.T, resp)
	c := gjson.Get(body, fmt.Sprintf("connections.#(id==%d)", id))
	if !c.Exists() {
		e.T.Fatalf("connection %d not in state: %s", id, body)
	}
	return c
}

// chatgptTime reads a time of the admin API.
func chatgptTime(t *testing.T, r gjson.Result) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, r.String())
	if err != nil {
		t.Fatalf("time %q: %v", r.String(), err)
	}
	return at
}

// checkChatGPTCall checks what the backend got: the account's token and id, the Codex CLI's
// headers, a Responses body it takes, and nothing of the client's credentials.
func checkChatGPTCall(t *testing.T, auth *testenv.FakeOpenAIAuth, r testenv.Recorded, account, clientKey string) {
	t.Helper()
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if auth.AccountOf(token) != account || r.Header.Get("Chatgpt-Account-Id") != account {
		t.Fatalf("call not on account %s: %q", account, r.Header.Get("Chatgpt-Account-Id"))
	}
	for k, want := range map[string]string{"Openai-Beta": "responses=experimental", "Originator": "codex_cli_rs",
		"Accept": "text/event-stream"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if strings.Contains(fmt.Sprint(r.Header), clientKey) || r.Header.Get("X-Api-Key") != "" {
		t.Fatal("the client's key reached the backend")
	}
	if gjson.Get(r.Body, "stream").Raw != "true" || gjson.Get(r.Body, "store").Raw != "false" ||
		gjson.Get(r.Body, "instructions").Type != gjson.String || gjson.Get(r.Body, "model").String() != "gpt-5-codex" ||
		gjson.Get(r.Body, "max_output_tokens").Exists() || gjson.Get(r.Body, "temperature").Exists() {
		t.Fatalf("backend body: %s", r.Body)
	}
}

// A ChatGPT account serves chat completions and messages clients, streamed and not (the OpenAI
// and Anthropic SDKs), and a Responses client, all through the backend's stream; the account's
// usage windows are read from the answers and shown with its connection; no token shows
// anywhere.
func TestChatGPTAccountServesEverySurface(t *testing.T) {
	e, auth, backend, key := chatgptGateway(t, false)
	id := e.AddCodexAccount(auth, "codex", "acct-ada", "ada@example.com", "plus")
	now := e.Clock.Now()
	backend.SetUsage("acct-ada", testenv.CodexUsage{
		Primary:   &testenv.CodexWindow{UsedPercent: 25, WindowMinutes: 300, ResetAfter: 2 * time.Hour},
		Secondary: &testenv.CodexWindow{UsedPercent: 10.5, WindowMinutes: 10080, ResetAt: now.Add(96 * time.Hour)}})
	ctx := context.Background()

	oai := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	chat := openai.ChatCompletionNewParams{Model: chatgptModel, MaxCompletionTokens: openai.Int(256), Temperature: openai.Float(0.2),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Say hello.")}}
	got, err := oai.Chat.Completions.New(ctx, chat)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if got.Choices[0].Message.Content != testenv.CodexText || got.Choices[0].FinishReason != "stop" ||
		got.Usage.PromptTokens != testenv.CodexInputTokens || got.Usage.CompletionTokens != testenv.CodexOutputTokens ||
		got.Usage.PromptTokensDetails.CachedTokens != testenv.CodexCachedTokens ||
		got.Usage.CompletionTokensDetails.ReasoningTokens != testenv.CodexReasoningTokens {
		t.Fatalf("chat answer %+v usage %+v", got.Choices[0], got.Usage)
	}
	if r := backend.Requests()[0]; gjson.Get(r.Body, "instructions").String() != "Be brief." {
		t.Fatalf("the system prompt is not the instructions: %s", r.Body)
	}

	chat.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	acc := streamChat(t, oai, ctx, chat)
	if acc.Choices[0].Message.Content != testenv.CodexText || acc.Usage.PromptTokensDetails.CachedTokens != testenv.CodexCachedTokens {
		t.Fatalf("chat stream %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}

	ant := anthropic.NewClient(option.WithBaseURL(e.Base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	msgs := anthropic.MessageNewParams{Model: chatgptModel, MaxTokens: 256, System: []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}}
	textOf := func(m *anthropic.Message) string {
		for _, b := range m.Content {
			if b.Type == "text" {
				return b.Text
			}
		}
		return ""
	}
	msg, _ := sendClaude(t, ant, msgs, false)
	if textOf(&msg) != testenv.CodexText || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != testenv.CodexOutputTokens ||
		msg.Usage.CacheReadInputTokens != testenv.CodexCachedTokens {
		t.Fatalf("messages answer %+v", msg)
	}
	streamed, _ := sendClaude(t, ant, msgs, true)
	if textOf(&streamed) != testenv.CodexText || streamed.StopReason != "end_turn" || streamed.Usage.OutputTokens != testenv.CodexOutputTokens {
		t.Fatalf("messages stream %+v", streamed)
	}

	// A Responses client's output limit is what the backend refuses: it is left out and named.
	resp := e.Post(ctx, "/v1/responses", key, `{"model":"`+chatgptModel+`","input":"Say hello.","max_output_tokens":100}`, nil)
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != 200 || gjson.Get(body, "status").String() != "completed" ||
		gjson.Get(body, `output.#(type=="message").content.0.text`).String() != testenv.CodexText ||
		gjson.Get(body, "usage.input_tokens_details.cached_tokens").Int() != testenv.CodexCachedTokens {
		t.Fatalf("responses: %d %s", resp.StatusCode, body)
	}
	chatgptNoTokens(t, auth, "a Responses answer", body)

	reqs := backend.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d backend calls, want 5", len(reqs))
	}
	for _, r := range reqs {
		checkChatGPTCall(t, auth, r, "acct-ada", key)
	}
	if r := reqs[4]; gjson.Get(r.Body, "input.0.content.0.text").String() != "Say hello." || gjson.Get(r.Body, "instructions").String() != "" {
		t.Fatalf("the Responses client's body: %s", r.Body)
	}

	// The windows the answers reported, with the connection's state.
	c := chatgptConn(e, id)
	five, seven := c.Get("usage.five_hour"), c.Get("usage.seven_day")
	if five.Get("utilization").Float() != 25 || seven.Get("utilization").Float() != 10.5 {
		t.Fatalf("usage %s", c.Get("usage").Raw)
	}
	if at := chatgptTime(t, five.Get("resets_at")); at.Sub(now.Add(2*time.Hour)).Abs() > time.Second {
		t.Fatalf("5-hour reset %v, want %v", at, now.Add(2*time.Hour))
	}
	if at := chatgptTime(t, seven.Get("resets_at")); !at.Equal(now.Add(96 * time.Hour).Truncate(time.Second)) {
		t.Fatalf("weekly reset %v", at)
	}
	if c.Get("status").String() != "active" {
		t.Fatalf("state %s", c.Raw)
	}
	chatgptNoTokens(t, auth, "the connection's state", c.Raw)
	chatgptNoTokens(t, auth, "the gateway's log", e.Logs.String())
}

// The usage wall: the first account answers usage_limit_reached, the request is answered by the
// second at once; the first rests exactly until the announced reset (a quota, without a backoff
// step, and no word to the provider's breaker or health), its window shows as used up, the
// next requests go to the second without calling the first, and after the reset the first
// serves again.
func TestChatGPTUsageLimitFailsOverUntilTheReset(t *testing.T) {
	e, auth, backend, key := chatgptGateway(t, true)
	ada := e.AddCodexAccount(auth, "codex", "acct-ada", "ada@example.com", "plus")
	bob := e.AddCodexAccount(auth, "codex", "acct-bob", "bob@example.com", "pro")
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", bob), map[string]any{"priority": 2}, 200) // ada first
	reset := e.Clock.Now().Add(time.Hour)
	backend.SetLimit("acct-ada", &testenv.CodexLimit{Plan: "plus", ResetsAt: reset, ResetsIn: time.Hour})
	backend.SetUsage("acct-ada", testenv.CodexUsage{
		Primary:   &testenv.CodexWindow{UsedPercent: 100, WindowMinutes: 300, ResetAt: reset},
		Secondary: &testenv.CodexWindow{UsedPercent: 30, WindowMinutes: 10080, ResetAfter: 72 * time.Hour}})
	ctx := context.Background()
	ask := `{"model":"` + chatgptModel + `","messages":[{"role":"user","content":"Say hello."}]}`

	resp := e.Chat(ctx, key, ask)
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != 200 || gjson.Get(body, "choices.0.message.content").String() != testenv.CodexText {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	if got := backend.AccountsCalled(); !slices.Equal(got, []string{"acct-ada", "acct-bob"}) {
		t.Fatalf("backend calls %q", got)
	}

	c := chatgptConn(e, ada)
	if c.Get("status").String() != "cooling" || c.Get("reason").String() != "quota_exhausted" || c.Get("backoff_level").Int() != 0 {
		t.Fatalf("the first account: %s", c.Raw)
	}
	if until := chatgptTime(t, c.Get("until")); !until.Equal(reset) {
		t.Fatalf("rests until %v, want exactly %v", until, reset)
	}
	if five := c.Get("usage.five_hour"); five.Get("utilization").Float() != 100 ||
		!chatgptTime(t, five.Get("resets_at")).Equal(reset.Truncate(time.Second)) {
		t.Fatalf("the used-up window: %s", c.Get("usage").Raw)
	}
	if c := chatgptConn(e, bob); c.Get("status").String() != "active" {
		t.Fatalf("the second account: %s", c.Raw)
	}
	p := e.ProviderStatus("codex")
	if p["breaker"] != "closed" || p["last_failures"] != nil {
		t.Fatalf("the provider heard of the account's quota: %v", p)
	}

	// Meanwhile the second account serves at once, streamed too; the first is not called.
	resp = e.Chat(ctx, key, ask)
	testenv.ReadAll(t, resp)
	resp = e.Chat(ctx, key, `{"model":"`+chatgptModel+`","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`)
	streamed := testenv.ReadAll(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(streamed, "data: [DONE]") {
		t.Fatalf("stream: %d %s", resp.StatusCode, streamed)
	}
	if got := backend.AccountsCalled(); !slices.Equal(got, []string{"acct-ada", "acct-bob", "acct-bob", "acct-bob"}) {
		t.Fatalf("backend calls %q", got)
	}

	// Past the reset the first account serves again.
	backend.SetLimit("acct-ada", nil)
	backend.SetUsage("acct-ada", testenv.CodexUsage{Primary: &testenv.CodexWindow{UsedPercent: 1, WindowMinutes: 300, ResetAfter: 5 * time.Hour}})
	e.Clock.Advance(reset.Sub(e.Clock.Now()) + time.Second)
	resp = e.Chat(ctx, key, ask)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("after the reset: %d %s", resp.StatusCode, body)
	}
	if got := backend.AccountsCalled(); got[len(got)-1] != "acct-ada" {
		t.Fatalf("backend calls %q", got)
	}
	if c := chatgptConn(e, ada); c.Get("status").String() != "active" || c.Get("usage.five_hour.utilization").Float() != 1 {
		t.Fatalf("the first account after the reset: %s", c.Raw)
	}
	chatgptNoTokens(t, auth, "the gateway's log", e.Logs.String())
}

// Both accounts at their wall: the client gets 429 with the earliest reset, and nothing counts
// against the provider.
func TestChatGPTAllAccountsAtTheirWall(t *testing.T) {
	e, auth, backend, key := chatgptGateway(t, true)
	e.AddCodexAccount(auth, "codex", "acct-ada", "ada@example.com", "plus")
	e.AddCodexAccount(auth, "codex", "acct-bob", "bob@example.com", "plus")
	backend.SetLimit("acct-ada", &testenv.CodexLimit{ResetsIn: 2 * time.Hour})
	backend.SetLimit("acct-bob", &testenv.CodexLimit{ResetsIn: 40 * time.Minute})
	resp := e.Chat(context.Background(), key, `{"model":"`+chatgptModel+`","messages":[{"role":"user","content":"hi"}]}`)
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2400" {
		t.Fatalf("%d Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	chatgptNoTokens(t, auth, "the error answer", body)
	for i := 0; i < 6; i++ { // more than the breaker's threshold of failures
		testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"`+chatgptModel+`","messages":[{"role":"user","content":"hi"}]}`))
	}
	if n := len(backend.Requests()); n != 2 {
		t.Fatalf("%d backend calls: accounts at their wall were called again", n)
	}
	if p := e.ProviderStatus("codex"); p["breaker"] != "closed" || p["last_failures"] != nil {
		t.Fatalf("the provider heard of the accounts' quota: %v", p)
	}
}

// A combo over two ChatGPT accounts (targets pinned to each) fails over the same way: the first
// target's account rests until its reset, the second serves, and after the reset the first does
// again.
func TestChatGPTUsageLimitInACombo(t *testing.T) {
	e, auth, backend, key := chatgptGateway(t, true)
	ada := e.AddCodexAccount(auth, "codex", "acct-ada", "ada@example.com", "plus")
	bob := e.AddCodexAccount(auth, "codex", "acct-bob", "bob@example.com", "plus")
	nameOf := func(id int64) string {
		return e.MustAPI("GET", fmt.Sprintf("/api/connections/%d", id), nil, 200)["name"].(string)
	}
	e.MustAPI("POST", "/api/combos", map[string]any{"name": "codex-pair", "targets": []any{
		map[string]any{"provider": "codex", "model": "gpt-5-codex", "connection": nameOf(ada)},
		map[string]any{"provider": "codex", "model": "gpt-5-codex", "connection": nameOf(bob)},
	}}, 201)
	reset := e.Clock.Now().Add(time.Hour)
	backend.SetLimit("acct-ada", &testenv.CodexLimit{ResetsAt: reset, ResetsIn: time.Hour})
	ctx := context.Background()
	ask := `{"model":"codex-pair","messages":[{"role":"user","content":"Say hello."}]}`

	for i := 0; i < 2; i++ {
		resp := e.Chat(ctx, key, ask)
		if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 || gjson.Get(body, "choices.0.message.content").String() != testenv.CodexText {
			t.Fatalf("combo request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if got := backend.AccountsCalled(); !slices.Equal(got, []string{"acct-ada", "acct-bob", "acct-bob"}) {
		t.Fatalf("backend calls %q", got)
	}
	c := chatgptConn(e, ada)
	if until := chatgptTime(t, c.Get("until")); c.Get("reason").String() != "quota_exhausted" || !until.Equal(reset) {
		t.Fatalf("the first account: %s", c.Raw)
	}

	backend.SetLimit("acct-ada", nil)
	e.Clock.Advance(reset.Sub(e.Clock.Now()) + time.Second)
	resp := e.Chat(ctx, key, ask)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("after the reset: %d %s", resp.StatusCode, body)
	}
	if got := backend.AccountsCalled(); got[len(got)-1] != "acct-ada" {
		t.Fatalf("backend calls %q", got)
	}
	chatgptNoTokens(t, auth, "the gateway's log", e.Logs.String())
}
