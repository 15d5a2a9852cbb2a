package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// FakeAnthropic is a scriptable Anthropic API: GET /v1/models (x-api-key required), POST
// /v1/messages and /v1/messages/count_tokens. It records what it received.
type FakeAnthropic struct {
	*httptest.Server
	log      requestLog
	models   []string
	messages http.HandlerFunc
}

// NewFakeAnthropic starts an Anthropic upstream answering messages with handler and listing the
// models (claude-test when none are given); it stops with the test.
func NewFakeAnthropic(t testing.TB, handler http.HandlerFunc, models ...string) *FakeAnthropic {
	f := &FakeAnthropic{models: modelsOr(models, "claude-test"), messages: handler}
	f.Server = startServer(t, f.serve)
	return f
}

func (f *FakeAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	f.log.record(r)
	switch r.URL.Path {
	case "/v1/models":
		if r.Header.Get("x-api-key") == "" || r.Header.Get("anthropic-version") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"x-api-key header is required"}}`)
			return
		}
		var data []string
		for _, m := range f.models {
			data = append(data, fmt.Sprintf(`{"type":"model","id":%q,"display_name":%q,"created_at":"2025-02-19T00:00:00Z"}`, m, m))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data":[%s],"has_more":false}`, strings.Join(data, ","))
	case "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":42}`)
	case "/v1/messages":
		f.messages(w, r)
	default:
		http.NotFound(w, r)
	}
}

// MessageRequests returns the POST /v1/messages requests received so far.
func (f *FakeAnthropic) MessageRequests() []Recorded { return f.log.at("/v1/messages") }

// Requests returns every request received so far.
func (f *FakeAnthropic) Requests() []Recorded { return f.log.all() }

// MessageJSON is a small non-streamed Anthropic answer.
const MessageJSON = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Hello there"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`

// MessageJSONNaming is MessageJSON as a client that asked for model gets it: the same bytes,
// naming the model asked for.
func MessageJSONNaming(model string) string {
	return strings.Replace(MessageJSON, `"model":"claude-test"`, `"model":`+strconv.Quote(model), 1)
}

// MessageEvents are the events of a small streamed Anthropic answer.
var MessageEvents = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
	"event: ping\ndata: {\"type\":\"ping\"}",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}",
}

// MessagesAnswer answers a streamed request with MessageEvents and a buffered one with MessageJSON.
func MessagesAnswer() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"stream":true`)) {
			SSEAnswer(MessageEvents, -1)(w, r)
			return
		}
		JSONAnswer(MessageJSON)(w, r)
	}
}

// AddProviderOfType creates a provider of any type.
func (e *Env) AddProviderOfType(name, typ, baseURL string) int64 {
	e.T.Helper()
	out := e.MustAPI("POST", "/api/providers", map[string]any{"name": name, "type": typ, "base_url": baseURL}, 201)
	return int64(out["id"].(float64))
}

// PostAnthropic posts to a proxy surface as an Anthropic SDK does: x-api-key and
// anthropic-version, plus extra headers.
func (e *Env) PostAnthropic(path, key, body string, header map[string]string) *http.Response {
	e.T.Helper()
	return e.postJSON(context.Background(), path, body, map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01"}, header)
}

// ByAPIKey answers per connection, by the x-api-key the gateway sent.
func ByAPIKey(m map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h, ok := m[r.Header.Get("x-api-key")]
		if !ok {
			http.Error(w, "no handler", 500)
			return
		}
		h(w, r)
	}
}

// AnthropicError answers with an Anthropic error body.
func AnthropicError(status int, typ, message string, header map[string]string) http.HandlerFunc {
	return Status(status, header, fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q}}`, typ, message))
}

// ProviderID finds a provider's id by name.
func (e *Env) ProviderID(name string) int64 {
	e.T.Helper()
	return e.idByName("/api/providers", "provider", name)
}
