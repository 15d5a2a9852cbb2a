package settings

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
)

// The OAuth document layers like the resilience one: default < env < persisted, each value
// with its source; a patch is strict and saves all or nothing; null reverts a value.
func TestOAuthDocumentLayersAndStrictness(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	env := envFrom(map[string]string{"SWITCHYARD_CLAUDE_TOKEN_URL": "http://127.0.0.1:9/token", "SWITCHYARD_CLAUDE_BETAS": "a-1, b-2"})
	s, err := NewOAuth(ctx, store, env, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Snapshot().Claude()
	if c.TokenURL != "http://127.0.0.1:9/token" || !slices.Equal(c.Betas, []string{"a-1", "b-2"}) || c.ClientID != "9d1c250a-e61b-44d9-88ed-5944d1962f5e" ||
		c.UsageThreshold != 100 || c.RefreshMarginMS != 300_000 {
		t.Fatalf("effective %+v", c)
	}
	if got := s.Snapshot().Source("claude.token_url"); got != SourceEnv {
		t.Fatalf("token_url source %q", got)
	}
	if got := s.Snapshot().Source("claude.usage_url"); got != SourceDefault {
		t.Fatalf("usage_url source %q", got)
	}

	tests := []struct {
		name  string
		patch string
		keys  []string
	}{
		{"unknown key", `{"claude":{"token_uri":"https://x"}}`, []string{"claude.token_uri"}},
		{"unknown section", `{"gemini":{}}`, []string{"gemini"}},
		{"bad editor version", `{"copilot":{"editor_version":"vscode"}}`, []string{"copilot.editor_version"}},
		{"codex address", `{"codex":{"api_base_url":"chatgpt.com"}}`, []string{"codex.api_base_url"}},
		{"not an address", `{"claude":{"usage_url":"ftp://x/y"}}`, []string{"claude.usage_url"}},
		{"bad version", `{"claude":{"cli_version":"latest"}}`, []string{"claude.cli_version"}},
		{"empty betas", `{"claude":{"betas":[]}}`, []string{"claude.betas"}},
		{"bad beta", `{"claude":{"betas":["a,b"]}}`, []string{"claude.betas"}},
		{"threshold range", `{"claude":{"usage_threshold":0}}`, []string{"claude.usage_threshold"}},
		{"wrong type", `{"claude":{"refresh_margin_ms":"5m"}}`, []string{"claude.refresh_margin_ms"}},
		{"all or nothing", `{"claude":{"cli_version":"2.2.0","usage_threshold":101}}`, []string{"claude.usage_threshold"}},
		{"resilience key", `{"retry":{"max_retries":1}}`, []string{"retry"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := s.Patch(ctx, []byte(tc.patch))
			if snap != nil {
				t.Fatal("a refused patch returned a snapshot")
			}
			if got := fieldKeys(t, err); !slices.Equal(got, tc.keys) {
				t.Fatalf("fields %v, want %v", got, tc.keys)
			}
		})
	}
	if _, saves := store.snapshot(); saves != 0 {
		t.Fatalf("%d saves after refused patches", saves)
	}

	snap, err := s.Patch(ctx, []byte(`{"claude":{"token_url":"https://auth.example/token","cli_version":"2.2.0","scopes":["user:inference"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Claude().TokenURL != "https://auth.example/token" || snap.Source("claude.token_url") != SourcePersisted ||
		snap.Claude().CLIVersion != "2.2.0" {
		t.Fatalf("after patch %+v", snap.Document())
	}
	// A restart reads the saved values back; null reverts to the environment.
	s2, err := NewOAuth(ctx, store, env, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Snapshot().Claude().CLIVersion != "2.2.0" {
		t.Fatal("saved value lost")
	}
	snap, err = s2.Patch(ctx, []byte(`{"claude":{"token_url":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Claude().TokenURL != "http://127.0.0.1:9/token" || snap.Source("claude.token_url") != SourceEnv {
		t.Fatalf("after revert %+v", snap.Document())
	}
	doc, _ := json.Marshal(snap.Document())
	var back map[string]any
	if err := json.Unmarshal(doc, &back); err != nil || back["values"].(map[string]any)["claude"] == nil {
		t.Fatalf("document %s", doc)
	}
}

// An invalid environment value stops the start, naming the variable.
func TestOAuthEnvironmentIsChecked(t *testing.T) {
	_, err := NewOAuth(context.Background(), NewMemoryStore(), envFrom(map[string]string{"SWITCHYARD_CLAUDE_USAGE_THRESHOLD": "0"}), fixedNow)
	if err == nil {
		t.Fatal("accepted a threshold of 0")
	}
}

// Every OAuth setting is found by its path and a form reads each back (its label and help in
// both languages: handlers.TestSettingsRegistryHasTexts).
func TestOAuthSettingsAreDescribed(t *testing.T) {
	snap := func() *OAuthSnapshot {
		s, err := NewOAuth(context.Background(), NewMemoryStore(), nil, fixedNow)
		if err != nil {
			t.Fatal(err)
		}
		return s.Snapshot()
	}()
	for _, st := range OAuthSettings() {
		if _, ok := Lookup(st.Path()); !ok {
			t.Errorf("%s: Lookup does not find it", st.Path())
		}
		in := st.Input(snap.Value(st.Path()))
		v, _, problem := st.Parse(in)
		if problem != nil || !sameValue(v, snap.Value(st.Path())) {
			t.Errorf("%s: form round trip %v → %v (%v)", st.Path(), snap.Value(st.Path()), v, problem)
		}
	}
}
