package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

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
	if h.Get("User-Agent") != "claude-cli/2.1.299 (external, cli)" || h.Get("X-App") != "cli" ||
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
	if !strings.HasPrefix(got.Header.Get("Authorization"), "Bearer sk-ant-oat01-bob-") ||
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
