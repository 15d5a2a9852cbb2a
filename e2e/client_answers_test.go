package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// Answers real clients can act on: connections that need new credentials, count_tokens toward
// every kind of provider, and a provider without a connection as the official SDKs and the
// coding agents meet it.

// Upstream answers that put a connection in a terminal state.
var (
	bannedAnswer = testenv.Status(403, nil,
		`{"error":{"message":"Your account has been deactivated. Contact support if you think this is a mistake.","type":"invalid_request_error","code":"account_deactivated"}}`)
	expiredAnswer = testenv.Status(401, nil, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
	creditsAnswer = testenv.Status(402, nil, `{"error":{"message":"Insufficient credits: top up to continue","type":"insufficient_credits"}}`)
)

// A connection the upstream deactivated is banned: alone, or beside an expired one, every
// surface answers 401 connections_unusable (Anthropic's authentication_error) with
// x-should-retry: false and no Retry-After, naming the states and saying to reconnect. Beside one
// out of credits, a later request can succeed after the credits' re-probe, so the answer is 429
// insufficient_quota (Anthropic's billing_error) with Retry-After at that re-probe, counting down
// with the clock. A banned connection is never called again.
func TestBannedConnectionNeedsNewCredentials(t *testing.T) {
	cases := []struct {
		name       string
		other      http.HandlerFunc // the second connection's upstream; nil = no second connection
		otherState string
		status     int
		code       string // OpenAI's error type and code
		anthropic  string // Anthropic's error type
		retryAfter string // at the first answer; "" = none at any time
		states     string
		words      string
	}{
		{"banned alone", nil, "", 401, "connections_unusable", "authentication_error", "", "(banned)", "reconnect"},
		{"banned and expired", expiredAnswer, "expired", 401, "connections_unusable", "authentication_error", "", "(banned, expired)", "reconnect"},
		{"banned and out of credits", creditsAnswer, "credits_exhausted", 429, "insufficient_quota", "billing_error", "1800",
			"(banned, credits_exhausted)", "the next check of the credits is in"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conns := []testenv.UpConn{{Name: "ban", Key: "sk-ban"}}
			answers := map[string]http.HandlerFunc{"sk-ban": bannedAnswer}
			if c.other != nil {
				conns = append(conns, testenv.UpConn{Name: "other", Key: "sk-other", Priority: 1})
				answers["sk-other"] = c.other
			}
			e, up, key, ids := testenv.SetupConns(t, testenv.ByKey(answers), conns...)
			e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
			typ := "authentication_error"
			if c.status == 429 {
				typ = "insufficient_quota"
			}
			check := func(name, surface string, r *http.Response, retryAfter string) string {
				t.Helper()
				got := testenv.ReadAll(t, r)
				if r.StatusCode != c.status || r.Header.Get("X-Should-Retry") != "false" || r.Header.Get("Retry-After") != retryAfter {
					t.Fatalf("%s: %d x-should-retry %q retry-after %q: %s", name, r.StatusCode, r.Header.Get("X-Should-Retry"),
						r.Header.Get("Retry-After"), got)
				}
				checkShape(t, surface, got)
				if surface == "messages" {
					if gjson.Get(got, "error.type").String() != c.anthropic {
						t.Fatalf("%s: %s", name, got)
					}
				} else if gjson.Get(got, "error.type").String() != typ || gjson.Get(got, "error.code").String() != c.code {
					t.Fatalf("%s: %s", name, got)
				}
				msg := gjson.Get(got, "error.message").String()
				if !strings.Contains(msg, "provider up") || !strings.Contains(msg, c.states) || !strings.Contains(msg, c.words) ||
					(retryAfter != "" && !strings.Contains(msg, retryAfter+" s")) {
					t.Fatalf("%s: message %q", name, msg)
				}
				return got
			}
			banCalls := func() int {
				n := 0
				for _, r := range up.ChatRequests() {
					if r.Header.Get("Authorization") == "Bearer sk-ban" {
						n++
					}
				}
				return n
			}

			// The first request meets the ban (and the other connection's state) upstream.
			check("first", "chat", e.Chat(context.Background(), key, testenv.ChatBody), c.retryAfter)
			if s := e.State(ids[0]); s.Status != "banned" || s.ErrorCode != 403 {
				t.Fatalf("the deactivated connection: %+v", s)
			}
			if c.other != nil {
				if s := e.State(ids[1]); s.Status != c.otherState {
					t.Fatalf("the other connection: %+v", s)
				}
			}

			// Later requests on every surface get the same answer at once.
			e.Clock.Advance(10 * time.Minute)
			later := ""
			if c.retryAfter != "" {
				later = "1200"
			}
			check("later, messages", "messages", e.PostAnthropic("/v1/messages", key, `{"model":"up/gpt-test","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, nil), later)
			check("later, responses", "responses", e.Post(context.Background(), "/v1/responses", key, `{"model":"up/gpt-test","input":"hi"}`, nil), later)
			got := check("later, chat", "chat", e.Chat(context.Background(), key, testenv.ChatBody), later)
			if d := gjson.Get(got, `diagnostics.excluded.#(connection=="ban")`); d.Get("reason").String() != "terminal" || d.Get("detail").String() != "banned" {
				t.Fatalf("diagnostics: %s", got)
			}
			if n := banCalls(); n != 1 {
				t.Fatalf("the banned connection was called %d times, want only the first", n)
			}
			if s := e.State(ids[0]); s.Status != "banned" {
				t.Fatalf("the ban did not hold: %+v", s)
			}
		})
	}
}

// countTokensBody is a count_tokens body for model with one user message.
func countTokensBody(model, text string) string {
	b, _ := json.Marshal(map[string]any{"model": model, "system": "Be brief.",
		"messages": []map[string]any{{"role": "user", "content": text}}})
	return string(b)
}

// checkEstimated fails unless count_tokens toward model is answered by the gateway itself: 200
// in Anthropic's shape, marked as an estimate of the tokenizer, a positive count that grows with
// the text by about its tokens.
func checkEstimated(t *testing.T, e *testenv.Env, key, model, tokenizer string) {
	t.Helper()
	sentence := "The gateway counts this sentence once more. "
	var counts []int64
	for _, reps := range []int{1, 200, 400} {
		status, n, body, h := countTokens(t, e, key, countTokensBody(model, strings.Repeat(sentence, reps)))
		if status != 200 || n <= 0 || gjson.Get(body, "input_tokens").Int() != n || h["estimate"] != "estimate" ||
			h["tokenizer"] != tokenizer || h["type"] != "application/json" {
			t.Fatalf("%s, %d sentences: %d %s %v", model, reps, status, body, h)
		}
		counts = append(counts, n)
	}
	// Each 200 sentences are some 1,600 tokens; the same text again adds about as many (within
	// 2 %: where the text joins, words merge differently).
	first, second := counts[1]-counts[0], counts[2]-counts[1]
	if first < 1000 || first > 2500 || second < first*98/100 || second > first*102/100 {
		t.Fatalf("%s: counts %v do not grow with the text", model, counts)
	}
}

// count_tokens toward an anthropic-compatible provider is the upstream's: forwarded to its
// count_tokens with the connection's key and the provider's model name, its answer relayed as it
// is and not marked as an estimate, also to the Anthropic SDK at its default settings. Toward an
// openai provider, a ChatGPT (codex) account and a Copilot account the gateway answers its own
// estimate without any upstream call, while the same upstreams serve the provider's requests.
func TestCountTokensTowardEveryProviderType(t *testing.T) {
	t.Run("anthropic-compatible forwards", func(t *testing.T) {
		up := testenv.NewFakeAnthropic(t, testenv.MessagesAnswer())
		e := testenv.New(t)
		e.AddProviderOfType("kimi", "anthropic-compatible", up.URL)
		e.AddConnection("kimi", "main", "sk-kimi-upstream", 0)
		key := e.NewKey()
		e.WaitModels(key, "kimi/claude-test")
		text := strings.Repeat("Count these words upstream. ", 50)
		status, n, body, h := countTokens(t, e, key, countTokensBody("kimi/claude-test", text))
		if status != 200 || n != 42 || body != `{"input_tokens":42}` || h["estimate"] != "" || h["tokenizer"] != "" {
			t.Fatalf("count: %d %s %v", status, body, h)
		}
		calls := up.Requests()
		var counted []testenv.Recorded
		for _, r := range calls {
			switch r.Path {
			case "/v1/messages/count_tokens":
				counted = append(counted, r)
			case "/v1/models":
			default:
				t.Fatalf("the upstream was called on %s", r.Path)
			}
		}
		if len(counted) != 1 {
			t.Fatalf("%d count_tokens calls upstream, want 1", len(counted))
		}
		r := counted[0]
		if r.Header.Get("x-api-key") != "sk-kimi-upstream" || strings.Contains(r.Header.Get("Authorization"), key) ||
			gjson.Get(r.Body, "model").String() != "claude-test" || gjson.Get(r.Body, "messages.0.content").String() != text {
			t.Fatalf("upstream call: %v %s", r.Header, r.Body)
		}

		ant := anthropic.NewClient(option.WithBaseURL(e.Base), option.WithAPIKey(key))
		res, err := ant.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "kimi/claude-test",
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello, world"))}})
		if err != nil || res.InputTokens != 42 {
			t.Fatalf("SDK: %+v %v", res, err)
		}
		if n := len(up.Requests()) - len(calls); n != 1 || up.Requests()[len(calls)].Path != "/v1/messages/count_tokens" {
			t.Fatalf("the SDK's count made %d upstream calls", n)
		}
	})

	t.Run("openai estimates", func(t *testing.T) {
		up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-5")
		e := testenv.New(t)
		e.AddProviderOfType("oai", "openai", up.URL+"/v1")
		e.AddConnection("oai", "main", "sk-oai", 0)
		key := e.NewKey()
		e.WaitModels(key, "oai/gpt-5")
		before := len(up.Requests())
		checkEstimated(t, e, key, "oai/gpt-5", "o200k_base")
		checkEstimated(t, e, key, "oai/gpt-4", "cl100k_base")
		for _, r := range up.Requests()[before:] {
			if r.Path != "/v1/models" {
				t.Fatalf("the upstream was called on %s", r.Path)
			}
		}
		r := e.Chat(context.Background(), key, `{"model":"oai/gpt-5","messages":[{"role":"user","content":"hi"}]}`)
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 || len(up.ChatRequests()) != 1 {
			t.Fatalf("chat: %d %s", r.StatusCode, body)
		}
	})

	t.Run("codex estimates", func(t *testing.T) {
		auth := testenv.NewFakeOpenAIAuth(t)
		backend := testenv.NewFakeCodex(t, auth.AccountOf)
		front := testenv.NewRecordingProxy(t, backend.URL)
		e := testenv.New(t)
		e.UseFakeOpenAIAuth(auth)
		e.MustAPI("POST", "/api/providers", map[string]any{"name": "codex", "type": "codex", "base_url": front.URL + "/backend-api/codex"}, 201)
		e.AddCodexAccount(auth, "codex", "acct-ada", "ada@example.com", "plus")
		key := e.NewKey()
		before := len(front.Requests())
		checkEstimated(t, e, key, chatgptModel, "o200k_base")
		for _, r := range front.Requests()[before:] {
			if !strings.HasSuffix(r.Path, "/models") {
				t.Fatalf("the Codex backend was called on %s", r.Path)
			}
		}
		// The proxy sees the account's calls: the same gateway reaches the backend through it.
		r := e.Chat(context.Background(), key, `{"model":"`+chatgptModel+`","messages":[{"role":"user","content":"hi"}]}`)
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 || len(backend.Requests()) != 1 {
			t.Fatalf("chat: %d %s", r.StatusCode, body)
		}
		if last := front.Requests()[len(front.Requests())-1]; last.Path != "/backend-api/codex/responses" {
			t.Fatalf("the chat call went to %s", last.Path)
		}
	})

	t.Run("copilot estimates", func(t *testing.T) {
		e, f, key := copilotSetup(t)
		e.AddCopilotAccount(f, "", "octocat", 1)
		before := len(f.AllRequests())
		checkEstimated(t, e, key, "copilot/gpt-4.1", "o200k_base")
		checkEstimated(t, e, key, "copilot/claude-sonnet-4", "o200k_base")
		for _, r := range f.AllRequests()[before:] {
			if r.Path != "/copilot/models" {
				t.Fatalf("GitHub was called on %s", r.Path)
			}
		}
		copilotChatOK(e, f, key)
	})
}

// noConnectionGateway is a gateway with two providers that have no connection, "bare"
// (openai-compatible) and "kimi" (anthropic-compatible), a client key, and a count of the calls
// their upstreams got besides model discovery.
func noConnectionGateway(t *testing.T) (*testenv.Env, string, func() int) {
	t.Helper()
	oai := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	ant := testenv.NewFakeAnthropic(t, testenv.MessagesAnswer())
	e := testenv.New(t)
	e.AddProvider("bare", oai.URL+"/v1")
	e.AddProviderOfType("kimi", "anthropic-compatible", ant.URL)
	upstreamCalls := func() int {
		n := 0
		for _, r := range append(oai.Requests(), ant.Requests()...) {
			if !strings.HasSuffix(r.Path, "/models") {
				n++
			}
		}
		return n
	}
	return e, e.NewKey(), upstreamCalls
}

// refusedRows counts the request log's rows refused for having no enabled connection.
func refusedRows(t *testing.T, e *testenv.Env) int {
	t.Helper()
	n := 0
	for _, r := range requestLog(t, e, "?status=404&limit=500") {
		if r.ErrorCode == "no_executable_targets" {
			n++
		}
	}
	return n
}

// The official OpenAI and Anthropic SDKs at their default retry settings (two retries with
// backoff) print the gateway's message for a provider without a connection at once: one request
// reaches the gateway (counted by the client and in the request log), the SDK's error is a 404
// carrying the message that names the provider and the page where connections are added, plain
// and streamed, and no upstream is called.
func TestSDKsShowTheNoConnectionMessageAtOnce(t *testing.T) {
	e, key, upstreamCalls := noConnectionGateway(t)
	var sent atomic.Int64
	count := func(req *http.Request, next oopt.MiddlewareNext) (*http.Response, error) {
		sent.Add(1)
		return next(req)
	}
	oc := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMiddleware(count))
	ac := anthropic.NewClient(option.WithBaseURL(e.Base), option.WithAPIKey(key), option.WithMiddleware(count))
	ctx := context.Background()
	chat := openai.ChatCompletionNewParams{Model: "bare/gpt-5", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	resp := responses.ResponseNewParams{Model: "bare/gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	msgs := anthropic.MessageNewParams{Model: "kimi/claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	cases := []struct {
		name, provider string
		call           func() error
	}{
		{"openai chat", "bare", func() error { _, err := oc.Chat.Completions.New(ctx, chat); return err }},
		{"openai chat streamed", "bare", func() error {
			st := oc.Chat.Completions.NewStreaming(ctx, chat)
			defer st.Close()
			for st.Next() {
			}
			return st.Err()
		}},
		{"openai responses", "bare", func() error { _, err := oc.Responses.New(ctx, resp); return err }},
		{"openai responses streamed", "bare", func() error {
			st := oc.Responses.NewStreaming(ctx, resp)
			defer st.Close()
			for st.Next() {
			}
			return st.Err()
		}},
		{"anthropic messages", "kimi", func() error { _, err := ac.Messages.New(ctx, msgs); return err }},
		{"anthropic messages streamed", "kimi", func() error {
			st := ac.Messages.NewStreaming(ctx, msgs)
			defer st.Close()
			for st.Next() {
			}
			return st.Err()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sent.Store(0)
			rows := refusedRows(t, e)
			start := time.Now()
			err := c.call()
			took := time.Since(start)
			if took > 2*time.Second {
				t.Fatalf("the SDK took %v to give up", took)
			}
			var msg string
			var oe *openai.Error
			var ae *anthropic.Error
			switch {
			case errors.As(err, &oe):
				if oe.StatusCode != 404 || oe.Code != "no_executable_targets" {
					t.Fatalf("OpenAI SDK error: %d %q %v", oe.StatusCode, oe.Code, err)
				}
				msg = oe.Message
			case errors.As(err, &ae):
				if ae.StatusCode != 404 || ae.Type() != "not_found_error" {
					t.Fatalf("Anthropic SDK error: %d %q %v", ae.StatusCode, ae.Type(), err)
				}
				msg = ae.Message
			default:
				t.Fatalf("not an API error: %v", err)
			}
			if !strings.Contains(msg, "provider "+c.provider+" has no enabled connection") || !strings.Contains(msg, "Providers & Connections") {
				t.Fatalf("message %q", msg)
			}
			if n := sent.Load(); n != 1 {
				t.Fatalf("the SDK sent %d requests", n)
			}
			e.Eventually("the request is logged", func() bool { return refusedRows(t, e) > rows })
			if n := refusedRows(t, e) - rows; n != 1 {
				t.Fatalf("the gateway logged %d requests", n)
			}
		})
	}
	if n := upstreamCalls(); n != 0 {
		t.Fatalf("%d upstream calls", n)
	}
}

// What Codex CLI (a streamed Responses request with its headers) and Claude Code (a streamed
// messages request with its betas and x-app: cli) send toward a provider without a connection
// is answered at once, before any stream starts: a JSON 404 in the client's format with
// x-should-retry: false and no Retry-After, which neither retries, naming the provider and the
// page where connections are added; the request log keeps the refusal with its model and stream
// flag.
func TestCodingAgentsGetTheNoConnectionAnswerAtOnce(t *testing.T) {
	e, key, upstreamCalls := noConnectionGateway(t)
	claude, _ := json.Marshal(claudeCodeParams("kimi/claude-sonnet-4-5", true))
	cases := []struct {
		name, surface, path, provider, model, body string
		header                                     map[string]string
	}{
		{"codex cli", "responses", "/v1/responses", "bare", "bare/gpt-5-codex", strings.Replace(codexRequest, "%s", "bare/gpt-5-codex", 1),
			map[string]string{"Authorization": "Bearer " + key, "OpenAI-Beta": "responses=experimental", "originator": "codex_cli_rs",
				"session_id": "019a6c3e-7f3b-7d31-b0c4-4c9a8f6f2a11", "version": "0.46.0", "Accept": "text/event-stream",
				"User-Agent": "codex_cli_rs/0.46.0 (Ubuntu 24.4.0; x86_64) xterm-256color"}},
		{"claude code", "messages", "/v1/messages", "kimi", "kimi/claude-sonnet-4-5", `{"stream":true,` + string(claude[1:]),
			map[string]string{"Authorization": "Bearer " + key, "anthropic-version": "2023-06-01", "x-app": "cli",
				"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
				"User-Agent":     "claude-cli/2.1.300 (external, cli)", "Accept": "application/json",
				"X-Stainless-Lang": "js", "X-Stainless-Retry-Count": "0", "anthropic-dangerous-direct-browser-access": "true"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(c.body, `"stream":true`) || !strings.Contains(c.body, `"model":"`+c.model+`"`) {
				t.Fatalf("not the client's streamed request: %s", c.body)
			}
			req, _ := http.NewRequest("POST", e.Base+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			start := time.Now()
			r, err := testenv.ChatClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got := testenv.ReadAll(t, r)
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("the answer took %v", took)
			}
			if r.StatusCode != 404 || r.Header.Get("X-Should-Retry") != "false" || r.Header.Get("Retry-After") != "" ||
				!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%d %v: %s", r.StatusCode, r.Header, got)
			}
			checkShape(t, c.surface, got)
			if c.surface == "messages" {
				if typ := gjson.Get(got, "error.type").String(); typ != "not_found_error" {
					t.Fatalf("type %s: %s", typ, got)
				}
			} else if gjson.Get(got, "error.code").String() != "no_executable_targets" || gjson.Get(got, "error.type").String() == "" {
				t.Fatalf("code: %s", got)
			}
			msg := gjson.Get(got, "error.message").String()
			if !strings.Contains(msg, "provider "+c.provider+" has no enabled connection") || !strings.Contains(msg, "Providers & Connections") {
				t.Fatalf("message %q", msg)
			}
			row := loggedRow(e, r)
			if row["status"] != 404.0 || row["error_code"] != "no_executable_targets" || row["stream"] != true || row["surface"] != c.path {
				t.Fatalf("logged %v", row)
			}
		})
	}
	if n := upstreamCalls(); n != 0 {
		t.Fatalf("%d upstream calls", n)
	}
}
