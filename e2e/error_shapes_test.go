package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// surfaceCall is one way to ask for the same thing on each client surface.
type surfaceCall struct {
	name string
	path string
	body func(model string) string
}

var surfaces = []surfaceCall{
	{"chat", "/v1/chat/completions", func(m string) string { return `{"model":"` + m + `","messages":[{"role":"user","content":"hi"}]}` }},
	{"messages", "/v1/messages", func(m string) string {
		return `{"model":"` + m + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	}},
	{"responses", "/v1/responses", func(m string) string { return `{"model":"` + m + `","input":"hi"}` }},
}

// checkShape fails unless body is the surface's documented error shape: OpenAI (and Responses)
// {"error":{"message","type","code","param"}} with a string type and code; Anthropic
// {"type":"error","error":{"type","message"}}.
func checkShape(t *testing.T, surface, body string) {
	t.Helper()
	if surface == "messages" {
		if gjson.Get(body, "type").String() != "error" || gjson.Get(body, "error.type").Type != gjson.String ||
			gjson.Get(body, "error.type").String() == "" || gjson.Get(body, "error.message").String() == "" {
			t.Fatalf("not an Anthropic error: %s", body)
		}
		return
	}
	e := gjson.Get(body, "error")
	if e.Get("message").String() == "" || e.Get("type").Type != gjson.String || e.Get("type").String() == "" ||
		e.Get("code").Type != gjson.String || !e.Get("param").Exists() {
		t.Fatalf("not an OpenAI error: %s", body)
	}
}

// TestEveryErrorHasTheSurfacesShape walks every class of failure on the three surfaces: the
// gateway's own errors, the upstream's errors and errors hidden in a 200 all come in the
// surface's shape, keeping the upstream's words and status, with the classified reason as the
// code and Retry-After where the client should wait.
func TestEveryErrorHasTheSurfacesShape(t *testing.T) {
	type class struct {
		name       string
		model      string // up/<model>; the fake answers per model
		key        string // "" = a valid client key
		raw        string // a body instead of the surface's
		status     int
		code       string // OpenAI code (also checked on Responses)
		anthropic  string // Anthropic error.type
		words      string // part of the message
		retryAfter bool
	}
	classes := []class{
		{name: "malformed json", raw: `{"model":`, status: 400, code: "invalid_request", anthropic: "invalid_request_error", words: "not valid JSON"},
		{name: "unknown model", model: "up/nope", status: 404, code: "model_not_found", anthropic: "not_found_error", words: "up/nope"},
		{name: "bad client key", model: "up/ok", key: "sk-wrong", status: 401, code: "invalid_api_key", anthropic: "authentication_error", words: "invalid API key"},
		{name: "rate limited", model: "up/limited", status: 429, code: "rate_limit", anthropic: "rate_limit_error", words: "slow down please", retryAfter: true},
		{name: "server error", model: "up/broken", status: 500, code: "server_error", anthropic: "api_error", words: "kaboom"},
		{name: "overloaded", model: "up/busy", status: 503, code: "server_error", anthropic: "overloaded_error", words: "try again later", retryAfter: true},
		{name: "hidden in 200", model: "up/hidden", status: 502, code: "server_error", anthropic: "api_error", words: "hidden failure"},
		{name: "hidden in 200 with its status", model: "up/hidden500", status: 500, code: "server_error", anthropic: "api_error", words: "hidden failure"},
		{name: "bad request upstream", model: "up/picky", status: 400, code: "request_rejected", anthropic: "invalid_request_error", words: "temperature is odd"},
		{name: "unauthorized upstream", model: "up/locked", status: 401, code: "connections_unusable", anthropic: "authentication_error", words: "reconnect"},
	}
	up := testenv.NewFakeUpstream(t, testenv.PerModel(map[string]http.HandlerFunc{
		"limited":   testenv.Status(429, map[string]string{"Retry-After": "7"}, `{"error":{"message":"slow down please","type":"sim_error","code":"sim_429"}}`),
		"broken":    testenv.Status(500, nil, `{"error":{"message":"kaboom","code":500}}`),
		"busy":      testenv.Status(503, nil, `{"error":{"message":"try again later"}}`),
		"hidden":    testenv.JSONAnswer(`{"error":{"message":"hidden failure","type":"server_error"}}`),
		"hidden500": testenv.JSONAnswer(`{"error":{"message":"hidden failure","code":500}}`),
		"picky":     testenv.Status(400, nil, `{"error":{"message":"temperature is odd","type":"invalid_request_error"}}`),
		"locked":    testenv.Status(401, nil, `{"error":{"message":"key revoked"}}`),
	}), "ok", "limited", "broken", "busy", "hidden", "hidden500", "picky", "locked")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/ok")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"enabled": false}}, 200)
	id := e.ConnectionID("main")
	for _, c := range classes {
		for _, s := range surfaces {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				e.MustAPI("POST", "/api/resilience/reset", nil, 200)
				e.MustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", id), map[string]any{"terminal": true}, 200)
				body := c.raw
				if body == "" {
					body = s.body(c.model)
				}
				k := key
				if c.key != "" {
					k = c.key
				}
				r := e.Post(context.Background(), s.path, k, body, map[string]string{"anthropic-version": "2023-06-01"})
				got := testenv.ReadAll(t, r)
				if r.StatusCode != c.status {
					t.Fatalf("status %d, want %d: %s", r.StatusCode, c.status, got)
				}
				checkShape(t, s.name, got)
				msg := gjson.Get(got, "error.message").String()
				if !strings.Contains(msg, c.words) {
					t.Fatalf("the message lost the words %q: %s", c.words, got)
				}
				if s.name == "messages" {
					if typ := gjson.Get(got, "error.type").String(); typ != c.anthropic {
						t.Fatalf("type %s, want %s: %s", typ, c.anthropic, got)
					}
				} else if code := gjson.Get(got, "error.code").String(); code != c.code {
					t.Fatalf("code %s, want %s: %s", code, c.code, got)
				}
				if c.retryAfter && r.Header.Get("Retry-After") == "" {
					t.Fatalf("no Retry-After on %d", r.StatusCode)
				}
			})
		}
	}
}
