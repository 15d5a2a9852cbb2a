package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

const testAdminToken = "test-admin-token-0123456789"

// testEnv is a real gateway (Start, as production) on a temporary data directory.
type testEnv struct {
	t       *testing.T
	app     *App
	base    string
	dataDir string
	env     map[string]string
	logs    *syncBuffer
	clock   *clockwork.FakeClock
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dataDir: t.TempDir(), logs: &syncBuffer{}, clock: clockwork.NewFakeClockAt(time.Now()), env: map[string]string{
		"SWITCHYARD_ADMIN_TOKEN":    testAdminToken,
		"SWITCHYARD_ADMIN_PASSWORD": "correct horse battery staple",
	}}
	e.start()
	return e
}

func (e *testEnv) lookupEnv(k string) (string, bool) {
	v, ok := e.env[k]
	return v, ok
}

func (e *testEnv) start() {
	e.t.Helper()
	cfg, _, err := parseConfig([]string{"--addr", "127.0.0.1:0", "--data-dir", e.dataDir, "--log-level", "debug"}, e.lookupEnv, io.Discard)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.Clock = e.clock
	log := slog.New(slog.NewTextHandler(io.MultiWriter(e.logs, testLogWriter()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	app, err := Start(context.Background(), cfg, e.lookupEnv, log)
	if err != nil {
		e.t.Fatal(err)
	}
	e.app, e.base = app, "http://"+app.Addr
	e.t.Cleanup(func() { e.stop() })
}

func (e *testEnv) stop() {
	if e.app == nil {
		return
	}
	if err := e.app.Shutdown(5 * time.Second); err != nil {
		e.t.Errorf("shutdown: %v", err)
	}
	e.app = nil
}

// restart stops the gateway and starts it again on the same data directory.
func (e *testEnv) restart() {
	e.stop()
	e.start()
}

func testLogWriter() io.Writer {
	if os.Getenv("SWITCHYARD_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// api calls the admin API with the admin token and decodes the JSON answer into out (if given).
func (e *testEnv) api(method, path string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

func (e *testEnv) mustAPI(method, path string, body any, want int) map[string]any {
	e.t.Helper()
	var out map[string]any
	if got := e.api(method, path, body, &out); got != want {
		e.t.Fatalf("%s %s: status %d, want %d: %v", method, path, got, want, out)
	}
	return out
}

func (e *testEnv) addProvider(name, baseURL string) int64 {
	e.t.Helper()
	out := e.mustAPI("POST", "/api/providers", map[string]any{"name": name, "type": "openai-compatible", "base_url": baseURL}, 201)
	return int64(out["id"].(float64))
}

func (e *testEnv) addConnection(provider, name, key string, priority int) int64 {
	e.t.Helper()
	out := e.mustAPI("POST", "/api/connections", map[string]any{"provider": provider, "name": name,
		"auth_type": "api_key", "api_key": key, "priority": priority}, 201)
	return int64(out["id"].(float64))
}

func (e *testEnv) newKey() string {
	e.t.Helper()
	out := e.mustAPI("POST", "/api/keys", map[string]any{"name": "test"}, 201)
	return out["key"].(string)
}

// waitModels waits (bounded) until GET /v1/models lists want; discovery runs in the background.
func (e *testEnv) waitModels(key string, want string) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		req, _ := http.NewRequest("GET", e.base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), `"`+want+`"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("model %s never listed", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listModels returns the ids of GET /v1/models.
func (e *testEnv) listModels(key string) []string {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.base+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	var out struct{ Data []struct{ ID string } }
	json.Unmarshal([]byte(readAll(e.t, resp)), &out)
	var ids []string
	for _, d := range out.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

// eventually polls cond (bounded) while background work catches up.
func (e *testEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// chat posts a chat completions body with a client key.
func (e *testEnv) chat(ctx context.Context, key string, body string) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := chatClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// chatClient bounds every test request, so a request that waits on a fake-clock timer nobody
// advances fails the test within a minute instead of hanging the suite.
var chatClient = &http.Client{Timeout: time.Minute}

func readAll(t *testing.T, r *http.Response) string {
	t.Helper()
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeUpstream is a scriptable OpenAI-compatible upstream that records what it received.
type fakeUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
	models   []string
	chat     http.HandlerFunc
	// modelsDown makes GET /models fail with 503.
	modelsDown atomic.Bool
}

type recorded struct {
	Path   string
	Header http.Header
	Body   string
}

func newFakeUpstream(t *testing.T, chat http.HandlerFunc, models ...string) *fakeUpstream {
	f := &fakeUpstream{models: models, chat: chat}
	if len(f.models) == 0 {
		f.models = []string{"gpt-test"}
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: string(b)})
	f.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(b))
	switch r.URL.Path {
	case "/v1/models":
		if f.modelsDown.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var data []string
		for _, m := range f.models {
			data = append(data, fmt.Sprintf(`{"id":%q,"object":"model","created":1,"owned_by":"x"}`, m))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(data, ","))
	case "/v1/chat/completions":
		f.chat(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeUpstream) chatRequests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recorded
	for _, r := range f.requests {
		if r.Path == "/v1/chat/completions" {
			out = append(out, r)
		}
	}
	return out
}

const completionJSON = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`

func jsonAnswer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// sseChunks are the events of a small streamed completion.
var sseChunks = []string{
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`data: [DONE]`,
}

// sseAnswer streams events, flushing each; with cutAfter >= 0 it stops after that many events.
func sseAnswer(events []string, cutAfter int) http.HandlerFunc {
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
