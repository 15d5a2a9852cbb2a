package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// FakeUpstream is a scriptable OpenAI-compatible upstream that records what it received.
type FakeUpstream struct {
	*httptest.Server
	log    requestLog
	mu     sync.Mutex
	models []string
	chat   http.HandlerFunc
	// ModelsDown makes GET /models fail with 503.
	ModelsDown atomic.Bool
	responses  http.HandlerFunc
}

// ServeResponses makes the upstream answer POST /v1/responses with h (an upstream that serves
// the Responses API itself).
func (f *FakeUpstream) ServeResponses(h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.responses = h
}

// Recorded is one request the fake upstream received.
type Recorded struct {
	Path   string
	Header http.Header
	Body   string
}

// requestLog keeps every request a fake received, for the tests to read back.
type requestLog struct {
	mu       sync.Mutex
	requests []Recorded
}

// record keeps r and returns its body, put back for the handler to read again.
func (l *requestLog) record(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	l.requests = append(l.requests, Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: string(b)})
	l.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// all returns every request received so far.
func (l *requestLog) all() []Recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Recorded(nil), l.requests...)
}

// at returns the requests received so far with the path.
func (l *requestLog) at(path string) []Recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Recorded
	for _, r := range l.requests {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// NewFakeUpstream starts an upstream answering chat completions with chat and listing models
// (gpt-test when none are given); it stops with the test.
func NewFakeUpstream(t testing.TB, chat http.HandlerFunc, models ...string) *FakeUpstream {
	f := &FakeUpstream{models: modelsOr(models, "gpt-test"), chat: chat}
	f.Server = startServer(t, f.serve)
	return f
}

// startServer starts a test server answering with h; it stops with the test.
func startServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// modelsOr is models, or the one model def when there are none.
func modelsOr(models []string, def string) []string {
	if len(models) == 0 {
		return []string{def}
	}
	return models
}

func (f *FakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	f.log.record(r)
	switch r.URL.Path {
	case "/v1/models":
		if f.ModelsDown.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var data []string
		f.mu.Lock()
		models := f.models
		f.mu.Unlock()
		for _, m := range models {
			data = append(data, fmt.Sprintf(`{"id":%q,"object":"model","created":1,"owned_by":"x"}`, m))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(data, ","))
	case "/v1/chat/completions":
		f.chat(w, r)
	case "/v1/responses":
		f.mu.Lock()
		h := f.responses
		f.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	default:
		http.NotFound(w, r)
	}
}

// SetModels changes the models GET /v1/models lists from now on (a model released upstream).
func (f *FakeUpstream) SetModels(models ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.models = models
}

// Requests returns every request received so far, model lists included.
func (f *FakeUpstream) Requests() []Recorded { return f.log.all() }

// ChatRequests returns the chat completions requests received so far.
func (f *FakeUpstream) ChatRequests() []Recorded { return f.log.at("/v1/chat/completions") }

// CompletionJSON is a small non-streamed chat completion.
const CompletionJSON = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`

// JSONAnswer answers with a JSON body.
func JSONAnswer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// SSEChunks are the events of a small streamed completion.
var SSEChunks = []string{
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`data: [DONE]`,
}

// SSEAnswer streams events, flushing each; with cutAfter >= 0 it stops after that many events.
func SSEAnswer(events []string, cutAfter int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i, ev := range events {
			if cutAfter >= 0 && i >= cutAfter {
				return
			}
			io.WriteString(w, ev+"\n\n")
			rc.Flush()
		}
	}
}

// ByKey answers per connection: the handler for the request's credential.
func ByKey(m map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h, ok := m[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			http.Error(w, "no handler", 500)
			return
		}
		h(w, r)
	}
}

// PerModel answers per requested model (a completion for models not listed).
func PerModel(m map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		json.NewDecoder(r.Body).Decode(&req)
		h, ok := m[req.Model]
		if !ok {
			h = JSONAnswer(CompletionJSON)
		}
		h(w, r)
	}
}

// Status answers with a status, headers and a JSON body.
func Status(code int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}
