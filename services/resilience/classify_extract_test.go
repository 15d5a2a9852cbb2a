package resilience

import (
	"strings"
	"testing"
)

func TestExtractError(t *testing.T) {
	tests := []struct {
		name           string
		body           string
		msg, code, typ string
		status         int
		ok             bool
	}{
		{name: "openai", body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			msg: "Rate limit reached", code: "rate_limit_exceeded", typ: "requests", ok: true},
		{name: "anthropic", body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			msg: "Overloaded", typ: "overloaded_error", ok: true},
		{name: "string error", body: `{"error":"upstream exploded"}`, msg: "upstream exploded", ok: true},
		{name: "openrouter numeric code with metadata", body: `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"quota exceeded","provider_name":"x"}},"user_id":"u"}`,
			msg: "Provider returned error: quota exceeded", status: 429, ok: true},
		{name: "google", body: `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`,
			msg: "Resource has been exhausted", typ: "RESOURCE_EXHAUSTED", status: 429, ok: true},
		{name: "numeric status field wins over code", body: `{"error":{"message":"m","status":503,"code":429}}`,
			msg: "m", status: 503, ok: true},
		{name: "numeric string code", body: `{"error":{"message":"m","code":"404"}}`, msg: "m", status: 404, ok: true},
		{name: "non-status numeric code stays a code", body: `{"error":{"message":"blocked","code":1010}}`,
			msg: "blocked", code: "1010", ok: true},
		{name: "top-level status", body: `{"error":"slow down","status":429}`, msg: "slow down", status: 429, ok: true},
		{name: "top-level code", body: `{"code":502,"error":"bad gateway"}`, msg: "bad gateway", status: 502, ok: true},
		{name: "vllm object error", body: `{"object":"error","message":"max_tokens too large","type":"BadRequestError","param":null,"code":400}`,
			msg: "max_tokens too large", typ: "BadRequestError", status: 400, ok: true},
		{name: "array wrapper", body: ` [{"error":{"code":429,"message":"x","status":"RESOURCE_EXHAUSTED"}}]`,
			msg: "x", typ: "RESOURCE_EXHAUSTED", status: 429, ok: true},
		{name: "bom and whitespace", body: "\ufeff \n{\"error\":\"x\"}", msg: "x", ok: true},
		{name: "escaped message", body: `{"error":{"message":"\u8bf7\u6c42\u8fc7\u4e8e\u9891\u7e41 \"q\""}}`, msg: `请求过于频繁 "q"`, ok: true},
		{name: "error key after nested values", body: `{"id":"x","choices":[{"delta":{"content":"{\"error\":1}"}}],"error":{"message":"late"}}`,
			msg: "late", ok: true},
		{name: "success body", body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"message":{"content":"hi"}}]}`},
		{name: "null error", body: `{"id":"x","error":null}`},
		{name: "empty error object", body: `{"error":{}}`},
		{name: "empty string error", body: `{"error":""}`},
		{name: "nested error only", body: `{"choices":[{"error":{"message":"inner"}}]}`},
		{name: "not json", body: `upstream connect error`},
		{name: "truncated", body: `{"error":{"message":"cut`},
		{name: "empty", body: ``},
		{name: "top-level type error without message", body: `{"type":"error"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg, code, typ, status, ok := ExtractError([]byte(tc.body))
			if msg != tc.msg || code != tc.code || typ != tc.typ || status != tc.status || ok != tc.ok {
				t.Fatalf("ExtractError = %q, %q, %q, %d, %v; want %q, %q, %q, %d, %v",
					msg, code, typ, status, ok, tc.msg, tc.code, tc.typ, tc.status, tc.ok)
			}
		})
	}
}

// TestExtractErrorLargeSuccessBodyDoesNotAllocate: the hidden-error check runs on every
// successful non-streaming answer, so a large success body must cost a scan, not a decode.
func TestExtractErrorLargeSuccessBodyDoesNotAllocate(t *testing.T) {
	content := strings.Repeat(`lorem ipsum \"error\" dolor `, 40_000) // ~1 MiB
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		content + `"}}],"usage":{"prompt_tokens":1},"error":{"message":"beyond the scan limit"}}`)
	allocs := testing.AllocsPerRun(20, func() {
		if _, _, _, _, ok := ExtractError(body); ok {
			t.Fatal("an error key beyond the scan limit must not be found")
		}
	})
	if allocs != 0 {
		t.Fatalf("ExtractError allocated %v times on a success body", allocs)
	}
}

func BenchmarkExtractErrorSuccessBody(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("hello world ", 1000) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		ExtractError(body)
	}
}
