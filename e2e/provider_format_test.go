package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

var defaultResponsesModels = []any{"*codex*", "o1-pro*", "o3-pro*"}

// providerFormat reads a provider's upstream_format and responses_models from the API.
func providerFormat(t *testing.T, e *testenv.Env, id int64) (string, []any) {
	t.Helper()
	p := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", id), nil, 200)
	models, ok := p["responses_models"].([]any)
	if !ok {
		t.Fatalf("responses_models is not a list: %v", p)
	}
	format, _ := p["upstream_format"].(string)
	return format, models
}

func sameList(a, b []any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// fieldError returns the 422 answer's message for one field, failing when there is none.
func fieldError(t *testing.T, out map[string]any, field string) string {
	t.Helper()
	fields, _ := out["error"].(map[string]any)["fields"].(map[string]any)
	msg, _ := fields[field].(string)
	if msg == "" {
		t.Fatalf("no message for %s: %v", field, out)
	}
	return msg
}

// A provider's upstream_format (chat | responses) and responses_models (patterns type openai
// sends to /v1/responses) through the admin API: defaults per type, the built-in openai provider
// included; create, read and partial update of both; every refusal a 422 naming its field; kept
// across a restart.
func TestProviderUpstreamFormatAPI(t *testing.T) {
	e := testenv.New(t)

	// The built-in providers, as the migration leaves them.
	if f, m := providerFormat(t, e, e.ProviderID("openai")); f != "chat" || !sameList(m, defaultResponsesModels) {
		t.Fatalf("built-in openai: %q %v", f, m)
	}
	if f, m := providerFormat(t, e, e.ProviderID("anthropic")); f != "chat" || len(m) != 0 {
		t.Fatalf("built-in anthropic: %q %v", f, m)
	}

	// Defaults on create, returned by the create itself.
	out := e.MustAPI("POST", "/api/providers", map[string]any{"name": "oai2", "type": "openai", "base_url": "https://api.openai.com/v1"}, 201)
	if out["upstream_format"] != "chat" || !sameList(out["responses_models"].([]any), defaultResponsesModels) {
		t.Fatalf("openai defaults: %v", out)
	}
	oai := int64(out["id"].(float64))
	compat := e.AddProvider("compat", "http://127.0.0.1:1/v1")
	if f, m := providerFormat(t, e, compat); f != "chat" || len(m) != 0 {
		t.Fatalf("openai-compatible defaults: %q %v", f, m)
	}
	out = e.MustAPI("POST", "/api/providers", map[string]any{"name": "resp", "type": "openai-compatible",
		"base_url": "http://127.0.0.1:1/v1", "upstream_format": "responses"}, 201)
	if out["upstream_format"] != "responses" {
		t.Fatalf("created with responses: %v", out)
	}
	resp := int64(out["id"].(float64))
	out = e.MustAPI("POST", "/api/providers", map[string]any{"name": "oai3", "type": "openai",
		"base_url": "https://api.openai.com/v1", "responses_models": []string{" gpt-5-pro* ", "o?-deep-research", "gpt-5-pro*"}}, 201)
	if !sameList(out["responses_models"].([]any), []any{"gpt-5-pro*", "o?-deep-research"}) {
		t.Fatalf("own list (trimmed, without duplicates): %v", out)
	}

	// Refusals on create: 422 with a message per field, nothing stored.
	refused := []struct {
		name  string
		body  map[string]any
		field string
		says  string
	}{
		{"responses on anthropic", map[string]any{"type": "anthropic", "upstream_format": "responses"}, "upstream_format", "anthropic"},
		{"responses on anthropic-compatible", map[string]any{"type": "anthropic-compatible", "upstream_format": "responses"},
			"upstream_format", "anthropic-compatible"},
		{"unknown format", map[string]any{"type": "openai", "upstream_format": "messages"}, "upstream_format", "chat, responses"},
		{"patterns on openai-compatible", map[string]any{"type": "openai-compatible", "responses_models": []string{"*codex*"}},
			"responses_models", "openai-compatible"},
		{"patterns on anthropic", map[string]any{"type": "anthropic", "responses_models": []string{"x"}}, "responses_models", "anthropic"},
		{"bad syntax", map[string]any{"type": "openai", "responses_models": []string{"ok*", "gpt-[5"}}, "responses_models[1]", "gpt-[5"},
		{"empty pattern", map[string]any{"type": "openai", "responses_models": []string{"  "}}, "responses_models[0]", "empty"},
		{"too long", map[string]any{"type": "openai", "responses_models": []string{strings.Repeat("x", 201)}}, "responses_models[0]", "200"},
		{"too many", map[string]any{"type": "openai", "responses_models": make([]string, 51)}, "responses_models", "50"},
		{"control character", map[string]any{"type": "openai", "responses_models": []string{"a\u0007b"}}, "responses_models[0]", "U+0007"},
	}
	for _, c := range refused {
		t.Run("create: "+c.name, func(t *testing.T) {
			body := map[string]any{"name": "refused", "base_url": "https://x.example/v1"}
			for k, v := range c.body {
				body[k] = v
			}
			out := e.MustAPI("POST", "/api/providers", body, 422)
			if msg := fieldError(t, out, c.field); !strings.Contains(msg, c.says) {
				t.Fatalf("%s: %q does not say %q", c.field, msg, c.says)
			}
		})
	}
	for _, it := range e.MustAPI("GET", "/api/providers", nil, 200)["items"].([]any) {
		if it.(map[string]any)["name"] == "refused" {
			t.Fatal("a refused provider was stored")
		}
	}

	path := fmt.Sprintf("/api/providers/%d", oai)
	// PATCH: a new list replaces, an absent one is kept, [] clears.
	out = e.MustAPI("PATCH", path, map[string]any{"responses_models": []string{"gpt-5-pro", "o3-pro*"}}, 200)
	if !sameList(out["responses_models"].([]any), []any{"gpt-5-pro", "o3-pro*"}) {
		t.Fatalf("patched list: %v", out)
	}
	e.MustAPI("PATCH", path, map[string]any{"listed_models_only": true}, 200)
	if f, m := providerFormat(t, e, oai); f != "chat" || !sameList(m, []any{"gpt-5-pro", "o3-pro*"}) {
		t.Fatalf("an absent list must be kept: %q %v", f, m)
	}
	out = e.MustAPI("PATCH", path, map[string]any{"upstream_format": "responses"}, 200)
	if out["upstream_format"] != "responses" || !sameList(out["responses_models"].([]any), []any{"gpt-5-pro", "o3-pro*"}) {
		t.Fatalf("patched format: %v", out)
	}
	out = e.MustAPI("PATCH", path, map[string]any{"responses_models": []string{}}, 200)
	if out["upstream_format"] != "responses" || len(out["responses_models"].([]any)) != 0 {
		t.Fatalf("cleared list: %v", out)
	}
	// A refused PATCH changes nothing.
	out = e.MustAPI("PATCH", path, map[string]any{"upstream_format": "chat", "responses_models": []string{"[z-a"}}, 422)
	fieldError(t, out, "responses_models[0]")
	if f, m := providerFormat(t, e, oai); f != "responses" || len(m) != 0 {
		t.Fatalf("a refused PATCH changed the provider: %q %v", f, m)
	}

	// A change of type: the list follows the new type's default; responses stays only where
	// the type speaks it.
	rpath := fmt.Sprintf("/api/providers/%d", resp)
	out = e.MustAPI("PATCH", rpath, map[string]any{"type": "anthropic-compatible"}, 422)
	if msg := fieldError(t, out, "upstream_format"); !strings.Contains(msg, "chat") {
		t.Fatalf("type change with responses: %q", msg)
	}
	out = e.MustAPI("PATCH", rpath, map[string]any{"type": "openai"}, 200)
	if out["upstream_format"] != "responses" || !sameList(out["responses_models"].([]any), defaultResponsesModels) {
		t.Fatalf("type change to openai: %v", out)
	}
	out = e.MustAPI("PATCH", rpath, map[string]any{"type": "anthropic-compatible", "upstream_format": "chat"}, 200)
	if out["upstream_format"] != "chat" || len(out["responses_models"].([]any)) != 0 {
		t.Fatalf("type change to anthropic-compatible: %v", out)
	}

	// The list is in the provider list too, never null.
	for _, it := range e.MustAPI("GET", "/api/providers", nil, 200)["items"].([]any) {
		p := it.(map[string]any)
		if _, ok := p["responses_models"].([]any); !ok || (p["upstream_format"] != "chat" && p["upstream_format"] != "responses") {
			t.Fatalf("listed provider %v", p)
		}
	}

	// Everything is stored: a restart reads it back.
	e.Restart()
	if f, m := providerFormat(t, e, oai); f != "responses" || len(m) != 0 {
		t.Fatalf("after restart: %q %v", f, m)
	}
	if f, m := providerFormat(t, e, e.ProviderID("oai3")); f != "chat" || !sameList(m, []any{"gpt-5-pro*", "o?-deep-research"}) {
		t.Fatalf("after restart: %q %v", f, m)
	}
	if f, _ := providerFormat(t, e, compat); f != "chat" {
		t.Fatalf("after restart: %q", f)
	}
}

// An openai-compatible provider whose upstream format is responses serves the Responses API
// itself: /v1/responses passes through to it, as with the responses_api box.
func TestUpstreamFormatResponsesPassesResponsesThrough(t *testing.T) {
	up := testenv.NewFakeUpstream(t, toolOpenAI)
	up.ServeResponses(nativeResponses)
	e := testenv.New(t)
	id := e.AddProvider("vllm", up.URL+"/v1")
	e.AddConnection("vllm", "main", "sk-v", 0)
	key := e.NewKey()
	e.WaitModels(key, "vllm/gpt-test")
	call := func() string {
		r := e.Post(context.Background(), "/v1/responses", key, `{"model":"vllm/gpt-test","input":"hi"}`, nil)
		body := testenv.ReadAll(t, r)
		if r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, body)
		}
		return gjson.Get(body, "id").String()
	}
	if call() == "resp_native" {
		t.Fatal("a chat provider served /v1/responses natively")
	}
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", id), map[string]any{"upstream_format": "responses"}, 200)
	if got := call(); got != "resp_native" {
		t.Fatalf("upstream format responses: answered %q, want the upstream's own response", got)
	}
}

// The dashboard's provider forms: the upstream format and the Responses-only models are saved
// from the add and edit forms, each bad pattern is named under its field, and fields that a
// type does not have (hidden on the page) are not held against it.
func TestProviderFormUpstreamFormat(t *testing.T) {
	e := testenv.New(t)
	c := e.Login()
	post := func(path string, form url.Values) (int, string) {
		return testenv.Fetch(t, c, http.MethodPost, e.Base+path, form, nil)
	}
	// The add form starts with chat and type openai's default patterns.
	code, page := testenv.Fetch(t, c, http.MethodGet, e.Base+"/providers", nil, nil)
	if code != 200 || !strings.Contains(page, `id="provider-upstream-format"`) ||
		!strings.Contains(testenv.Between(page, `id="provider-responses-models"`, "</textarea>"), "*codex*\no1-pro*\no3-pro*") {
		t.Fatalf("add form: %d", code)
	}
	code, _ = post("/providers", url.Values{"name": {"oai-form"}, "type": {"openai"}, "base_url": {"https://api.openai.com/v1"},
		"upstream_format": {"chat"}, "responses_models": {"*codex*\r\n\r\n gpt-5-pro \r\n"}})
	if code != 200 {
		t.Fatalf("create: %d", code)
	}
	id := e.ProviderID("oai-form")
	if f, m := providerFormat(t, e, id); f != "chat" || !sameList(m, []any{"*codex*", "gpt-5-pro"}) {
		t.Fatalf("created from the form: %q %v", f, m)
	}
	// An Anthropic provider sends the hidden fields as they were: chat and its own default.
	code, _ = post("/providers", url.Values{"name": {"ant-form"}, "type": {"anthropic-compatible"}, "base_url": {"https://x.example"},
		"upstream_format": {"responses"}, "responses_models": {"*codex*"}})
	if code != 200 {
		t.Fatalf("create anthropic-compatible: %d", code)
	}
	if f, m := providerFormat(t, e, e.ProviderID("ant-form")); f != "chat" || len(m) != 0 {
		t.Fatalf("anthropic-compatible from the form: %q %v", f, m)
	}

	edit := fmt.Sprintf("/providers/%d/edit", id)
	code, page = post(edit, url.Values{"type": {"openai"}, "base_url": {"https://api.openai.com/v1"},
		"upstream_format": {"responses"}, "responses_models": {"ok*\n[bad\n" + strings.Repeat("y", 201)}})
	errText := testenv.Between(page, `id="provider-responses-models-error">`, "</p>")
	if code != 422 || !strings.Contains(errText, "[bad") || !strings.Contains(errText, "200") {
		t.Fatalf("bad patterns: %d %q", code, errText)
	}
	if !strings.Contains(testenv.Between(page, `id="provider-responses-models"`, "</textarea>"), "[bad") {
		t.Fatal("the refused form lost what was typed")
	}
	if f, _ := providerFormat(t, e, id); f != "chat" {
		t.Fatal("a refused form was saved")
	}
	code, _ = post(edit, url.Values{"type": {"openai"}, "base_url": {"https://api.openai.com/v1"}, "strategy": {"priority"},
		"upstream_format": {"responses"}, "responses_models": {""}})
	if code != 200 {
		t.Fatalf("edit: %d", code)
	}
	if f, m := providerFormat(t, e, id); f != "responses" || len(m) != 0 {
		t.Fatalf("edited: %q %v", f, m)
	}
	// The list marks the provider; the edit page shows what is stored.
	_, page = testenv.Fetch(t, c, http.MethodGet, e.Base+"/providers", nil, nil)
	if !strings.Contains(page, fmt.Sprintf(`id="upstream-format-%d"`, id)) {
		t.Fatal("the provider list does not show the upstream format")
	}
	if strings.Contains(page, fmt.Sprintf(`id="upstream-format-%d"`, e.ProviderID("ant-form"))) {
		t.Fatal("the provider list marks a provider with the default format")
	}
	_, page = testenv.Fetch(t, c, http.MethodGet, e.Base+edit, nil, nil)
	if !strings.Contains(page, `value="responses" selected`) {
		t.Fatal("the edit page does not show the stored format")
	}
}
