package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// countTokens posts a count_tokens body on the Anthropic surface and returns the status, the
// count and the answer.
func countTokens(t *testing.T, e *testenv.Env, key, body string) (int, int64, string, map[string]string) {
	t.Helper()
	r := e.PostAnthropic("/v1/messages/count_tokens", key, body, nil)
	got := testenv.ReadAll(t, r)
	h := map[string]string{"estimate": r.Header.Get("X-Switchyard-Token-Count"), "tokenizer": r.Header.Get("X-Switchyard-Tokenizer"),
		"provider": r.Header.Get("X-Switchyard-Provider"), "type": r.Header.Get("Content-Type")}
	return r.StatusCode, gjson.Get(got, "input_tokens").Int(), got, h
}

// count_tokens toward a provider that has no such endpoint (OpenAI-compatible) is answered by
// the gateway with its own count, exactly in Anthropic's shape and marked as an estimate; the
// upstream is never called. The request still needs a client key, a model that resolves and a
// well-formed body.
func TestCountTokensTowardAnOpenAIProviderIsEstimated(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-test", "gpt-4")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	before := len(up.Requests())

	// "Hello, world" is 3 tokens in o200k_base; with the message and reply framing a small
	// number near it.
	status, n, body, h := countTokens(t, e, key, `{"model":"up/gpt-test","messages":[{"role":"user","content":"Hello, world"}]}`)
	if status != 200 || n < 3 || n > 12 || body != fmt.Sprintf(`{"input_tokens":%d}`, n) {
		t.Fatalf("count: %d %s", status, body)
	}
	if h["estimate"] != "estimate" || h["tokenizer"] != "o200k_base" || h["provider"] != "up" || h["type"] != "application/json" {
		t.Fatalf("headers %v", h)
	}
	small := n

	// The count grows with the content: system, text, tools, tool calls and results, an image.
	var msgs []map[string]any
	prose := strings.Repeat("The gateway counts every text of the request with a real tokenizer. ", 20)
	for i := range 60 {
		id := fmt.Sprintf("toolu_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "user", "content": prose},
			map[string]any{"role": "assistant", "content": []map[string]any{{"type": "thinking", "thinking": "I should read it.", "signature": "sig"},
				{"type": "tool_use", "id": id, "name": "read_file", "input": map[string]any{"path": fmt.Sprintf("file%d.go", i)}}}},
			map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": "package main\n\nfunc main() {}\n"}}})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": []map[string]any{
		{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}, {"type": "text", "text": "And this?"}}})
	big, _ := json.Marshal(map[string]any{"model": "up/gpt-test", "system": "You are a careful agent.", "messages": msgs,
		"tools": []map[string]any{{"name": "read_file", "description": "Reads a file.", "input_schema": map[string]any{"type": "object",
			"properties": map[string]any{"path": map[string]any{"type": "string"}}}}}})
	status, n, body, _ = countTokens(t, e, key, string(big))
	// About 100 KB of English and code: some 20,000 tokens of text, and the image's 1,600.
	if status != 200 || n < 15000 || n > 40000 {
		t.Fatalf("%d bytes counted as %d: %d %s", len(big), n, status, body)
	}
	withoutImage := strings.Replace(string(big), `{"source":{"data":"iVBORw0KGgo=","media_type":"image/png","type":"base64"},"type":"image"},`, "", 1)
	if withoutImage == string(big) {
		t.Fatal("the image was not found in the request")
	}
	if _, m, _, _ := countTokens(t, e, key, withoutImage); m != n-1600 {
		t.Fatalf("the image counted %d tokens, want 1600", n-m)
	}
	if n <= small {
		t.Fatal("the count does not grow with the content")
	}

	// The encoding follows the model: gpt-4 is cl100k_base.
	if status, _, body, h := countTokens(t, e, key, `{"model":"up/gpt-4","messages":[{"role":"user","content":"hi"}]}`); status != 200 || h["tokenizer"] != "cl100k_base" {
		t.Fatalf("gpt-4: %d %s %v", status, body, h)
	}
	// A bare name that one provider lists resolves; an unlisted model of the provider is
	// counted too (it would be forwarded).
	for _, model := range []string{"gpt-test", "up/gpt-unlisted"} {
		if status, _, body, _ := countTokens(t, e, key, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`); status != 200 {
			t.Fatalf("%s: %d %s", model, status, body)
		}
	}

	// The Anthropic SDK reads the answer.
	ant := anthropic.NewClient(option.WithBaseURL(e.Base), option.WithAPIKey(key), option.WithMaxRetries(0))
	res, err := ant.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "up/gpt-test",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello, world"))}})
	if err != nil || res.InputTokens != small {
		t.Fatalf("SDK: %+v %v", res, err)
	}

	// Refusals, each in Anthropic's shape, before any counting.
	for _, c := range []struct {
		name, key, body string
		status          int
		typ             string
	}{
		{"no client key", "sk-sy-wrong", `{"model":"up/gpt-test","messages":[]}`, 401, "authentication_error"},
		{"unknown model", key, `{"model":"nobody/gpt-test","messages":[]}`, 404, "not_found_error"},
		{"malformed JSON", key, `{"model":"up/gpt-test","messages":[`, 400, "invalid_request_error"},
		{"no messages", key, `{"model":"up/gpt-test"}`, 400, "invalid_request_error"},
		{"messages not a list", key, `{"model":"up/gpt-test","messages":"hi"}`, 400, "invalid_request_error"},
	} {
		status, _, body, h := countTokens(t, e, c.key, c.body)
		if status != c.status || gjson.Get(body, "type").String() != "error" || gjson.Get(body, "error.type").String() != c.typ || h["estimate"] != "" {
			t.Fatalf("%s: %d %s", c.name, status, body)
		}
	}

	// Nothing of it reached the upstream.
	for _, r := range up.Requests()[before:] {
		if r.Path != "/v1/models" {
			t.Fatalf("the upstream was called: %s", r.Path)
		}
	}
	// Each count is in the request log, answered without an upstream attempt.
	logged := requestLog(t, e, "?surface=/v1/messages/count_tokens&status=200")
	if len(logged) < 5 || logged[0].Provider != "up" || logged[0].AttemptCount != 0 || logged[0].Model != "gpt-test" {
		t.Fatalf("request log: %+v", logged)
	}
}
