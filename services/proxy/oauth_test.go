package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/services/catalog"
)

func account(id int64, uuid, plan string) *catalog.ConnEntry {
	return &catalog.ConnEntry{ID: id, AuthType: catalog.AuthOAuth, OAuth: &catalog.OAuthCredential{Account: catalog.OAuthAccount{UUID: uuid, Plan: plan}}}
}

func TestIdentityBody(t *testing.T) {
	conn := account(1, "uuid-a", "")
	id := `{"type":"text","text":"` + ClaudeIdentity + `"}`
	tests := []struct {
		name, body, system string
	}{
		{"no system", `{"model":"m","messages":[]}`, `[` + id + `]`},
		{"string system", `{"model":"m","system":"Be brief.","messages":[]}`, `[` + id + `,{"type":"text","text":"Be brief."}]`},
		{"the identity as a string", `{"model":"m","system":"` + ClaudeIdentity + `","messages":[]}`, `[` + id + `]`},
		{"blocks", `{"model":"m","system":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}}],"messages":[]}`,
			`[` + id + `,{"type":"text","text":"A","cache_control":{"type":"ephemeral"}}]`},
		{"blocks starting with the identity", `{"model":"m","system":[` + id + `,{"type":"text","text":"B"}],"messages":[]}`,
			`[` + id + `,{"type":"text","text":"B"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := identityBody([]byte(tc.body), conn, true)
			if got := gjson.GetBytes(out, "system").Raw; got != tc.system {
				t.Fatalf("system %s\nwant %s", got, tc.system)
			}
			if !json.Valid(out) || gjson.GetBytes(out, "model").String() != "m" || !gjson.GetBytes(out, "messages").IsArray() {
				t.Fatalf("body %s", out)
			}
		})
	}
	// The client's metadata (its own session ids) is replaced by the account's.
	out := identityBody([]byte(`{"model":"m","metadata":{"user_id":"client-session-xyz"},"messages":[]}`), conn, true)
	uid := gjson.GetBytes(out, "metadata.user_id").String()
	if strings.Contains(string(out), "client-session-xyz") || !strings.Contains(uid, `"account_uuid":"uuid-a"`) {
		t.Fatalf("metadata %s", gjson.GetBytes(out, "metadata").Raw)
	}
	if uid != accountUserID(account(2, "uuid-a", "")) {
		t.Fatal("the user id is not the account's own (it changed with the connection)")
	}
	if uid == accountUserID(account(1, "uuid-b", "")) {
		t.Fatal("two accounts share a user id")
	}
	if out := identityBody([]byte(`{"model":"m","messages":[]}`), conn, false); gjson.GetBytes(out, "metadata").Exists() {
		t.Fatal("count_tokens got metadata")
	}
}

func TestBetas(t *testing.T) {
	ours := []string{"claude-code-20250219", "oauth-2025-04-20"}
	if got := mergeBetas(ours, []string{"context-1m-2025-08-07, interleaved-thinking-2025-05-14", "oauth-2025-04-20"}, false); got !=
		"claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14" {
		t.Fatalf("without long context: %s", got)
	}
	if got := mergeBetas(ours, []string{"context-1m-2025-08-07"}, true); got != "claude-code-20250219,oauth-2025-04-20,context-1m-2025-08-07" {
		t.Fatalf("with long context: %s", got)
	}
	if !longContext(account(1, "u", "claude_max")) || longContext(account(1, "u", "claude_pro")) || longContext(account(1, "u", "")) {
		t.Fatal("plans")
	}
	h := http.Header{"Anthropic-Beta": {"oauth-2025-04-20,claude-code-20250219, fine-grained-tool-streaming-2025-05-14"}}
	addMissingBetas(h, ours)
	if h.Get("anthropic-beta") != "oauth-2025-04-20,claude-code-20250219, fine-grained-tool-streaming-2025-05-14" {
		t.Fatalf("a complete header was changed: %q", h.Get("anthropic-beta"))
	}
	h = http.Header{"Anthropic-Beta": {"a-1", "b-2"}}
	addMissingBetas(h, ours)
	if got := h.Values("anthropic-beta"); len(got) != 2 || got[0] != "a-1" || got[1] != "b-2,claude-code-20250219,oauth-2025-04-20" {
		t.Fatalf("missing betas: %q", got)
	}
}

// Passthrough on a plan without the 1M context: context-1m-* goes, every other beta stays as it
// came.
func TestDropBetas(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string // nil: no header left
	}{
		{"none to drop", []string{"a-1, b-2", "c-3"}, []string{"a-1, b-2", "c-3"}},
		{"in the middle", []string{"a-1,context-1m-2025-08-07, b-2"}, []string{"a-1, b-2"}},
		{"one of several values", []string{"context-1m-2025-08-07", "a-1,context-1m-2099-01-01"}, []string{"a-1"}},
		{"the only beta", []string{" context-1m-2025-08-07 "}, nil},
		{"no header", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.in != nil {
				h["Anthropic-Beta"] = append([]string(nil), tc.in...)
			}
			dropBetas(h, "context-1m-")
			if got := h.Values("anthropic-beta"); strings.Join(got, "|") != strings.Join(tc.want, "|") || (tc.want == nil) != (got == nil) {
				t.Fatalf("%q, want %q", got, tc.want)
			}
		})
	}
}

func TestPassthroughHeader(t *testing.T) {
	in := http.Header{"Authorization": {"Bearer sk-client"}, "X-Api-Key": {"sk-client"}, "User-Agent": {"claude-cli/2.1.291 (external, cli)"},
		"X-App": {"cli"}, "X-Claude-Code-Session-Id": {"s-1"}, "Anthropic-Dangerous-Direct-Browser-Access": {"true"},
		"Accept-Encoding": {"gzip"}, "Connection": {"keep-alive"}, "X-Session-Id": {"pin"}, "X-Switchyard-Session": {"pin"},
		"X-Forwarded-For": {"10.0.0.1"}, "X-Stainless-Retry-Count": {"0"}}
	h := passthroughHeader(in)
	for _, k := range []string{"Authorization", "X-Api-Key", "Accept-Encoding", "Connection", "X-Session-Id", "X-Switchyard-Session", "X-Forwarded-For"} {
		if h.Get(k) != "" {
			t.Errorf("%s was forwarded", k)
		}
	}
	for _, k := range []string{"User-Agent", "X-App", "X-Claude-Code-Session-Id", "Anthropic-Dangerous-Direct-Browser-Access", "X-Stainless-Retry-Count"} {
		if h.Get(k) != in.Get(k) {
			t.Errorf("%s was not forwarded as it came", k)
		}
	}
}

// Passthrough drops the 1M beta only where the plan is known to lack it.
func TestLacksLongContext(t *testing.T) {
	for plan, want := range map[string]bool{"claude_pro": true, "claude_max": false, "team": false, "": false} {
		if got := lacksLongContext(&catalog.ConnEntry{OAuth: &catalog.OAuthCredential{Account: catalog.OAuthAccount{Plan: plan}}}); got != want {
			t.Errorf("plan %q: %v, want %v", plan, got, want)
		}
	}
	if lacksLongContext(&catalog.ConnEntry{}) {
		t.Error("a connection without an account")
	}
}
