package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"switchyard/services/catalog"
	"switchyard/services/settings"
)

func TestCopilotInitiatorAndVision(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		f         Format
		initiator string
		vision    bool
	}{
		{"user text", `{"messages":[{"role":"user","content":"hi"}]}`, FormatChat, "user", false},
		{"tool result last", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"1"}]},{"role":"tool","tool_call_id":"1","content":"42"}]}`,
			FormatChat, "agent", false},
		{"user after a tool", `{"messages":[{"role":"tool","tool_call_id":"1","content":"42"},{"role":"user","content":"and?"}]}`, FormatChat, "user", false},
		{"image", `{"messages":[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]}`,
			FormatChat, "user", true},
		{"the word image_url in text", `{"messages":[{"role":"user","content":"what is \"image_url\"?"}]}`, FormatChat, "user", false},
		{"no messages", `{}`, FormatChat, "user", false},
		{"responses string input", `{"input":"hi"}`, FormatResponses, "user", false},
		{"responses tool output", `{"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c"},{"type":"function_call_output","call_id":"c","output":"42"}]}`,
			FormatResponses, "agent", false},
		{"responses image", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AA"}]}]}`,
			FormatResponses, "user", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := initiator([]byte(tc.body), tc.f); got != tc.initiator {
				t.Fatalf("X-Initiator %s, want %s", got, tc.initiator)
			}
			if got := hasImages([]byte(tc.body), tc.f); got != tc.vision {
				t.Fatalf("vision %v, want %v", got, tc.vision)
			}
		})
	}
}

// copilotAccounts is the account holder for model discovery: fixed tokens.
type copilotAccounts struct {
	token, copilot, base string
	err                  error
}

func (f *copilotAccounts) Token(context.Context, *catalog.ConnEntry) (string, error) {
	return f.token, f.err
}
func (f *copilotAccounts) Secrets(int64) []string { return []string{f.token, f.copilot} }
func (f *copilotAccounts) CopilotToken(context.Context, *catalog.ConnEntry) (string, string, error) {
	return f.copilot, f.base, f.err
}
func (f *copilotAccounts) CopilotRejected(context.Context, *catalog.ConnEntry, string) (string, string, error) {
	return f.copilot, f.base, f.err
}

// Copilot's and the Codex backend's model lists are read with the account's own token, headers
// and address; their failures never carry a token, and a redirect is not followed.
func TestFetchModelsOfAccounts(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/copilot/models" && r.Header.Get("Authorization") == "Bearer tid=copilot-1":
			io.WriteString(w, `{"data":[{"id":"gpt-4.1","model_picker_enabled":true,"capabilities":{"type":"chat"}},{"id":"claude-sonnet-4","capabilities":{"type":"chat"}},{"id":"gpt-4.1"}],"object":"list"}`)
		case r.URL.Path == "/codex/models" && r.URL.Query().Get("client_version") == codexClientVersion &&
			r.Header.Get("Authorization") == "Bearer chatgpt-access" && r.Header.Get("chatgpt-account-id") == "acct-1":
			io.WriteString(w, `{"models":[{"slug":"gpt-5-codex","display_name":"GPT-5 Codex"},{"slug":"gpt-5"}]}`)
		case r.URL.Path == "/moved/models":
			http.Redirect(w, r, "https://elsewhere.test/models?token="+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), http.StatusFound)
		default:
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"bad token `+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`"}}`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	opts, err := settings.NewOAuth(ctx, &memSettings{m: map[string]string{}}, func(k string) (string, bool) {
		if k == "SWITCHYARD_CODEX_API_BASE_URL" {
			return srv.URL + "/codex", true
		}
		return "", false
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(typ string) *catalog.ConnEntry {
		return &catalog.ConnEntry{ID: 1, AuthType: catalog.AuthOAuth, ProviderType: typ,
			OAuth: &catalog.OAuthCredential{AccessToken: "gho_github", Account: catalog.OAuthAccount{UUID: "acct-1"}}}
	}
	accounts := &copilotAccounts{token: "chatgpt-access", copilot: "tid=copilot-1", base: srv.URL + "/copilot"}
	auth := ModelAuth{Tokens: accounts, Copilot: accounts, OAuth: opts}

	copilot := &catalog.ProviderEntry{Name: "copilot", Type: catalog.TypeCopilot}
	names, err := FetchModels(ctx, srv.Client(), copilot, conn(catalog.TypeCopilot), auth)
	if err != nil || !slices.Equal(names, []string{"claude-sonnet-4", "gpt-4.1"}) {
		t.Fatalf("copilot models %v %v", names, err)
	}
	for k, want := range map[string]string{"Editor-Version": "vscode/1.104.1", "Copilot-Integration-Id": "vscode-chat",
		"Editor-Plugin-Version": settings.CopilotPluginVersion, "User-Agent": settings.CopilotUserAgent} {
		if seen.Get(k) != want {
			t.Fatalf("%s: %q, want %q", k, seen.Get(k), want)
		}
	}
	if seen.Get("anthropic-beta") != "" {
		t.Fatal("Claude's beta on a Copilot call")
	}

	codex := &catalog.ProviderEntry{Name: "codex", Type: catalog.TypeCodex}
	names, err = FetchModels(ctx, srv.Client(), codex, conn(catalog.TypeCodex), auth)
	if err != nil || !slices.Equal(names, []string{"gpt-5", "gpt-5-codex"}) {
		t.Fatalf("codex models %v %v", names, err)
	}
	// The provider's own address wins over the setting.
	if _, err := FetchModels(ctx, srv.Client(), &catalog.ProviderEntry{Name: "codex", Type: catalog.TypeCodex, BaseURL: srv.URL + "/other"},
		conn(catalog.TypeCodex), auth); err == nil {
		t.Fatal("the provider's base URL was not used")
	}

	// A refused token never shows in the error; a redirect is not followed.
	wrong := &copilotAccounts{token: "chatgpt-wrong-token", copilot: "tid=copilot-wrong", base: srv.URL + "/copilot"}
	_, err = FetchModels(ctx, srv.Client(), copilot, conn(catalog.TypeCopilot), ModelAuth{Tokens: wrong, Copilot: wrong, OAuth: opts})
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != 401 || strings.Contains(err.Error(), "copilot-wrong") {
		t.Fatalf("refused: %v", err)
	}
	moved := &copilotAccounts{copilot: "tid=copilot-1", base: srv.URL + "/moved"}
	_, err = FetchModels(ctx, srv.Client(), copilot, conn(catalog.TypeCopilot), ModelAuth{Tokens: moved, Copilot: moved, OAuth: opts})
	if !errors.As(err, &fe) || fe.Kind != "redirect" || strings.Contains(err.Error(), "copilot-1") {
		t.Fatalf("redirect: %v", err)
	}
	// Without the account holder the kind has no list (and no call is made).
	if _, err := FetchModels(ctx, srv.Client(), copilot, conn(catalog.TypeCopilot), ModelAuth{}); err == nil {
		t.Fatal("a Copilot list without the account holder")
	}
	if _, err := FetchModels(ctx, srv.Client(), copilot, conn(catalog.TypeCopilot),
		ModelAuth{Tokens: accounts, Copilot: &copilotAccounts{err: errors.New("no Copilot")}, OAuth: opts}); err == nil {
		t.Fatal("a list without a Copilot token")
	}
}
