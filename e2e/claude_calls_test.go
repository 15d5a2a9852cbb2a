package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// Claude Code itself (User-Agent claude-cli/…) is passed through: its body reaches Anthropic byte
// for byte and its headers as they came; only the credential is swapped for the account's
// bearer token and the two betas are added when missing.
func TestClaudeCodePassthrough(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	e.AddClaudeAccount(f, "ada@example.com")
	e.WaitModels(key, "anthropic/claude-test")
	body := "{\"model\":\"claude-test\",  \"max_tokens\":64,\"system\":[{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: cc_version=2.1.300\"}]," +
		"\"metadata\":{\"user_id\":\"{\\\"session_id\\\":\\\"cc-session-1\\\"}\"},\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9\"}]}\n"
	req, _ := http.NewRequest("POST", e.Base+"/v1/messages", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json",
		"User-Agent": "claude-cli/2.1.300 (external, cli)", "x-app": "cli", "anthropic-version": "2023-06-01",
		"anthropic-beta": "interleaved-thinking-2025-05-14,context-1m-2025-08-07", "X-Claude-Code-Session-Id": "cc-session-1",
		"anthropic-dangerous-direct-browser-access": "true", "X-Stainless-Retry-Count": "0", "X-Session-Id": "pin-me"} {
		req.Header.Set(k, v)
	}
	resp, err := testenv.ChatClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if out := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	got := f.MessageRequests()[0]
	if got.Body != body {
		t.Fatalf("the body changed on the way:\n got %q\nwant %q", got.Body, body)
	}
	h := got.Header
	want := map[string]string{"User-Agent": "claude-cli/2.1.300 (external, cli)", "X-App": "cli", "Anthropic-Version": "2023-06-01",
		"Anthropic-Beta":           "interleaved-thinking-2025-05-14,context-1m-2025-08-07,claude-code-20250219,oauth-2025-04-20",
		"X-Claude-Code-Session-Id": "cc-session-1", "Anthropic-Dangerous-Direct-Browser-Access": "true", "X-Stainless-Retry-Count": "0"}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v)
		}
	}
	if !strings.HasPrefix(h.Get("Authorization"), "Bearer sk-ant-oat01-ada-") || h.Get("x-api-key") != "" || h.Get("X-Session-Id") != "" ||
		strings.Contains(h.Get("Authorization"), key) || h.Get("Anthropic-Usage-Limit") != "" {
		t.Fatalf("credential or session headers: %v", h)
	}
	// With both betas already there, the header stays exactly as it came.
	req, _ = http.NewRequest("POST", e.Base+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("User-Agent", "claude-cli/2.1.300 (external, cli)")
	req.Header.Set("anthropic-beta", "oauth-2025-04-20,claude-code-20250219,fine-grained-tool-streaming-2025-05-14")
	resp, err = testenv.ChatClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	testenv.ReadAll(t, resp)
	if got := f.MessageRequests()[1].Header.Get("anthropic-beta"); got != "oauth-2025-04-20,claude-code-20250219,fine-grained-tool-streaming-2025-05-14" {
		t.Fatalf("betas %q", got)
	}
}

// Every other client gets Claude Code's identity: the identity line first in the system prompt,
// Claude Code's User-Agent with x-app: cli, the betas (without context-1m-* on a plan without the
// 1M context) and the account's own metadata.user_id instead of the client's.
func TestClaudeIdentityForOtherClients(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	f.SetPlan("ada@example.com", "claude_pro")
	ada := e.AddClaudeAccount(f, "ada@example.com")
	bob := e.AddClaudeAccount(f, "bob@example.com")
	e.MustAPI("PATCH", "/api/connections/"+itoa(bob), map[string]any{"priority": 1}, 200)
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{"cli_version": "2.1.299"}}, 200)
	e.WaitModels(key, "anthropic/claude-test")

	body := `{"model":"anthropic/claude-test","max_tokens":64,"system":"Answer in French.","metadata":{"user_id":"client-session-123"},` +
		`"messages":[{"role":"user","content":"hi"}]}`
	resp := e.PostAnthropic("/v1/messages", key, body, map[string]string{"anthropic-beta": "context-1m-2025-08-07,interleaved-thinking-2025-05-14",
		"User-Agent": "Anthropic/Python 0.60.0", "X-Claude-Code-Session-Id": "leaked"})
	if out := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	got := f.MessageRequests()[0]
	h := got.Header
	if h.Get("User-Agent") != "claude-cli/2.1.299 (external, cli)" || h.Get("X-App") != "cli" || h.Get("Anthropic-Version") != "2023-06-01" ||
		h.Get("Anthropic-Beta") != "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14" ||
		h.Get("x-api-key") != "" || !strings.HasPrefix(h.Get("Authorization"), "Bearer sk-ant-oat01-ada-") || h.Get("X-Claude-Code-Session-Id") != "" {
		t.Fatalf("headers %v", h)
	}
	if sys := gjson.Get(got.Body, "system"); sys.Get("0.text").String() != "You are Claude Code, Anthropic's official CLI for Claude." ||
		sys.Get("1.text").String() != "Answer in French." {
		t.Fatalf("system %s", sys.Raw)
	}
	uid := gjson.Get(got.Body, "metadata.user_id").String()
	if strings.Contains(got.Body, "client-session-123") || !strings.Contains(uid, `"account_uuid":"uuid-ada@example.com"`) {
		t.Fatalf("metadata %s", gjson.Get(got.Body, "metadata").Raw)
	}

	// A translated chat completions request is an identity call too; the other account's
	// user_id is its own.
	e.MustAPI("PATCH", "/api/connections/"+itoa(ada), map[string]any{"enabled": false}, 200)
	resp = e.Chat(t.Context(), key, `{"model":"anthropic/claude-test","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`)
	if out := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, out)
	}
	got = f.MessageRequests()[1]
	if !strings.HasPrefix(got.Header.Get("Authorization"), "Bearer sk-ant-oat01-bob-") || got.Header.Get("Anthropic-Version") != "2023-06-01" ||
		gjson.Get(got.Body, "system.0.text").String() != "You are Claude Code, Anthropic's official CLI for Claude." {
		t.Fatalf("chat upstream %v %s", got.Header, got.Body)
	}
	if other := gjson.Get(got.Body, "metadata.user_id").String(); other == uid || !strings.Contains(other, "uuid-bob@example.com") {
		t.Fatalf("user ids %s / %s", uid, other)
	}
	// count_tokens: identity, without metadata.
	resp = e.PostAnthropic("/v1/messages/count_tokens", key, `{"model":"anthropic/claude-test","messages":[{"role":"user","content":"hi"}]}`, nil)
	testenv.ReadAll(t, resp)
	ct := f.Requests("/v1/messages/count_tokens")
	if len(ct) != 1 || gjson.Get(ct[0].Body, "metadata").Exists() || gjson.Get(ct[0].Body, "system.0.text").String() == "" {
		t.Fatalf("count_tokens %v", ct)
	}
	if !bytes.Contains([]byte(ct[0].Header.Get("Authorization")), []byte("Bearer ")) {
		t.Fatal("count_tokens without the bearer token")
	}
}

// claudeCode posts to /v1/messages as Claude Code does (User-Agent claude-cli/…), with extra
// headers.
func claudeCode(e *testenv.Env, key, body string, header map[string]string) {
	e.T.Helper()
	req, _ := http.NewRequest("POST", e.Base+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "claude-cli/2.1.300 (external, cli)")
	req.Header.Set("anthropic-version", "2023-06-01")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := testenv.ChatClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	if out := testenv.ReadAll(e.T, resp); resp.StatusCode != 200 {
		e.T.Fatalf("%d %s", resp.StatusCode, out)
	}
}

// Claude Code on a plan without the 1M context: context-1m-* is dropped from anthropic-beta (it
// would be refused with 400), the client's other betas stay as they came and the two are added;
// the body still goes byte for byte.
func TestClaudeCodePassthroughWithoutLongContext(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	f.SetPlan("ada@example.com", "claude_pro")
	e.AddClaudeAccount(f, "ada@example.com")
	e.WaitModels(key, "anthropic/claude-test")
	body := `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	claudeCode(e, key, body, map[string]string{
		"anthropic-beta": "interleaved-thinking-2025-05-14,context-1m-2025-08-07,fine-grained-tool-streaming-2025-05-14"})
	got := f.MessageRequests()[0]
	if b := got.Header.Get("Anthropic-Beta"); b != "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,claude-code-20250219,oauth-2025-04-20" {
		t.Fatalf("anthropic-beta %q", b)
	}
	if got.Body != body || got.Header.Get("Anthropic-Version") != "2023-06-01" || !strings.HasPrefix(got.Header.Get("Authorization"), "Bearer sk-ant-oat01-ada-") {
		t.Fatalf("upstream %v %s", got.Header, got.Body)
	}
}

// A Claude Code session is bound to the first account it is sent to, which sees its ids as they
// came. When another account serves it (here after the first failed), that account sees a
// session id of its own in X-Claude-Code-Session-Id and in metadata.user_id, the same on each
// request of the session, and only those bytes of the body change. Once the first account is
// back it gets the original ids again, and a session first served by the other account is
// hidden from it the same way.
func TestClaudeCodeSessionIdsStayWithTheirAccount(t *testing.T) {
	const (
		s1 = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
		s2 = "6fa459ea-ee8a-4ca4-894e-db77e160355e"
	)
	bodyOf := func(session string) string {
		return "{\"model\":\"claude-test\",\"max_tokens\":64,\"metadata\":{\"user_id\":\"{\\\"device_id\\\":\\\"" + strings.Repeat("d", 64) +
			"\\\",\\\"account_uuid\\\":\\\"\\\",\\\"session_id\\\":\\\"" + session + "\\\"}\"},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
	}
	inner := func(r testenv.Recorded) string {
		return gjson.Get(gjson.Get(r.Body, "metadata.user_id").String(), "session_id").String()
	}
	for _, tc := range []struct {
		name string
		fail func(w http.ResponseWriter, r *http.Request, reset time.Time)
	}{
		{"usage wall", func(w http.ResponseWriter, r *http.Request, reset time.Time) {
			withHeaders(429, limitMsg, uStatus, "rejected", uReset, epochS(reset), uClaim, "five_hour", u5hReset, epochS(reset))(w, r)
		}},
		{"server error", func(w http.ResponseWriter, r *http.Request, _ time.Time) {
			withHeaders(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)(w, r)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var adaFails atomic.Bool
			var f *testenv.FakeClaude
			var reset time.Time
			e, f, key := claudeSetup(t, func(w http.ResponseWriter, r *http.Request) {
				if adaFails.Load() && f.AccountOf(r) == "ada@example.com" {
					tc.fail(w, r, reset)
					return
				}
				testenv.MessagesAnswer()(w, r)
			})
			reset = e.Clock.Now().Add(time.Hour)
			e.AddClaudeAccount(f, "ada@example.com")
			bob := e.AddClaudeAccount(f, "bob@example.com")
			e.MustAPI("PATCH", "/api/connections/"+itoa(bob), map[string]any{"priority": 1}, 200)
			e.WaitModels(key, "anthropic/claude-test")
			send := func(session string) (first, served testenv.Recorded) {
				t.Helper()
				before := len(f.MessageRequests())
				claudeCode(e, key, bodyOf(session), map[string]string{"X-Claude-Code-Session-Id": session})
				reqs := f.MessageRequests()[before:]
				return reqs[0], reqs[len(reqs)-1]
			}
			whose := func(r testenv.Recorded) string { return f.AccountOf(&http.Request{Header: r.Header}) }
			original := func(r testenv.Recorded, session string) bool {
				return r.Header.Get("X-Claude-Code-Session-Id") == session && r.Body == bodyOf(session)
			}
			// derived checks that r carries one id of its own in place of session, and returns it.
			derived := func(r testenv.Recorded, session string) string {
				t.Helper()
				id := r.Header.Get("X-Claude-Code-Session-Id")
				if id == session || len(id) != len(session) || inner(r) != id || strings.Contains(r.Body, session) {
					t.Fatalf("%s saw header %q, body %s", whose(r), id, r.Body)
				}
				if r.Body != strings.ReplaceAll(bodyOf(session), session, id) {
					t.Fatalf("more than the session id changed: %s", r.Body)
				}
				return id
			}

			// ada fails: she got the original ids; bob serves with his own.
			adaFails.Store(true)
			first, served := send(s1)
			if whose(first) != "ada@example.com" || !original(first, s1) || whose(served) != "bob@example.com" {
				t.Fatalf("first %s, served by %s", whose(first), whose(served))
			}
			bobS1 := derived(served, s1)
			// The session's next request (ada cools) gets bob's same id.
			if first, served = send(s1); whose(first) != "bob@example.com" || derived(served, s1) != bobS1 {
				t.Fatalf("second request: %s, %q", whose(first), served.Header.Get("X-Claude-Code-Session-Id"))
			}
			// A session bob serves first is his, as it came.
			if first, served = send(s2); whose(first) != "bob@example.com" || !original(served, s2) {
				t.Fatalf("s2 on bob: %v %s", served.Header, served.Body)
			}

			// ada is back: s1 is hers as it came; s2 is bob's, so she sees an id of her own.
			adaFails.Store(false)
			e.Clock.Advance(2 * time.Hour)
			if first, served = send(s1); whose(served) != "ada@example.com" || first.Body != served.Body || !original(served, s1) {
				t.Fatalf("s1 back on ada: %s %v %s", whose(served), served.Header, served.Body)
			}
			_, served = send(s2)
			if whose(served) != "ada@example.com" {
				t.Fatalf("s2 served by %s", whose(served))
			}
			if adaS2 := derived(served, s2); adaS2 == bobS1 {
				t.Fatal("two sessions share an id")
			}
		})
	}
}
