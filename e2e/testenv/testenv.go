// Package testenv boots the real gateway (app.Start, as production) on a temporary data
// directory and a fake clock, and gives end-to-end, browser and benchmark tests the admin API,
// client keys and scriptable fake upstreams to drive it. It is imported only by tests.
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"switchyard/app"
	"switchyard/db/dbtest"
)

// AdminToken is the admin API token every Env starts with.
const AdminToken = "test-admin-token-0123456789"

// Password is the dashboard password every Env starts with.
const Password = "correct horse battery staple"

// Env is a real gateway on a temporary data directory.
type Env struct {
	T       testing.TB
	App     *app.App
	Base    string // http://host:port of the running gateway
	DataDir string
	// Vars are the environment variables the gateway sees; change them before Restart.
	Vars  map[string]string
	Logs  *SyncBuffer
	log   *slog.Logger // the running gateway's
	Clock *clockwork.FakeClock
	// Args are extra command-line flags, applied at every start.
	Args []string
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (the gateway's log). When the
// gateway's logger holds lines back (app.NewLogger), String writes them first, so a test reads
// every line logged before it asks.
type SyncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	flush func()
}

// Flushing sets what String calls first.
func (s *SyncBuffer) Flushing(flush func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush = flush
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	flush := s.flush
	s.mu.Unlock()
	if flush != nil {
		flush() // outside mu: it writes to s
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// SecretKey is the secret key every Env on PostgreSQL starts with (one on SQLite generates its own).
const SecretKey = "test-secret-key-0123456789"

// New starts a gateway with the admin token and password set; it stops with the test. The store
// is a SQLite file in the data directory, or a fresh PostgreSQL database when the tests run with
// SWITCHYARD_TEST_STORE=postgres (make test-postgres).
func New(t testing.TB, args ...string) *Env {
	t.Helper()
	e := &Env{T: t, DataDir: t.TempDir(), Logs: &SyncBuffer{}, Clock: clockwork.NewFakeClockAt(time.Now()), Args: args,
		Vars: map[string]string{"SWITCHYARD_ADMIN_TOKEN": AdminToken, "SWITCHYARD_ADMIN_PASSWORD": Password}}
	if dbtest.OnPostgres() {
		e.Vars["SWITCHYARD_DATABASE_URL"] = dbtest.Postgres(t)
		e.Vars["SWITCHYARD_SECRET_KEY"] = SecretKey
	}
	e.Start()
	return e
}

// ProcessStore is the store a gateway process started by a test keeps its data in: the
// variables to add to its environment (none on SQLite, where the store is the data directory's
// file) and what db.Open opens to read it behind its back.
func ProcessStore(t testing.TB, dataDir string) (env []string, target string) {
	if !dbtest.OnPostgres() {
		return nil, filepath.Join(dataDir, "switchyard.db")
	}
	u := dbtest.Postgres(t)
	return []string{"SWITCHYARD_DATABASE_URL=" + u, "SWITCHYARD_SECRET_KEY=" + SecretKey}, u
}

// Store is what db.Open opens to read the gateway's store behind its back: the PostgreSQL URL,
// or the SQLite file in the data directory.
func (e *Env) Store() string {
	if u := e.Vars["SWITCHYARD_DATABASE_URL"]; u != "" {
		return u
	}
	return filepath.Join(e.DataDir, "switchyard.db")
}

// RunCheckingLeaks runs a test package's tests and fails it when any test leaves a goroutine
// behind (ignore names goroutines a package knows to outlive its tests): every app a test
// starts must stop its background work, and every proxied request and stream must end its
// goroutines.
func RunCheckingLeaks(m *testing.M, ignore ...goleak.Option) {
	goleak.VerifyTestMain(closingIdle{m}, append([]goleak.Option{
		// Idle keep-alive connections of test HTTP clients belong to the clients, not the gateway.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	}, ignore...)...)
}

// closingIdle closes the test clients' idle connections after the tests, before the check.
type closingIdle struct{ m *testing.M }

func (c closingIdle) Run() int {
	code := c.m.Run()
	http.DefaultClient.CloseIdleConnections()
	ChatClient.CloseIdleConnections()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	// The tests' shared PostgreSQL server (make test-postgres) has a goroutine waiting on it.
	if err := dbtest.StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the tests' PostgreSQL:", err)
		code = max(code, 1)
	}
	return code
}

// LookupEnv is the environment the gateway sees.
func (e *Env) LookupEnv(k string) (string, bool) {
	v, ok := e.Vars[k]
	return v, ok
}

// Start starts the gateway (again) on the Env's data directory.
func (e *Env) Start() {
	e.T.Helper()
	args := append([]string{"--addr", "127.0.0.1:0", "--data-dir", e.DataDir, "--log-level", "debug"}, e.Args...)
	cfg, _, err := app.ParseConfig(args, e.LookupEnv, io.Discard)
	if err != nil {
		e.T.Fatal(err)
	}
	cfg.Clock = e.Clock
	// The production logger (text, at debug), so the tests read the lines users read.
	log, err := app.NewLogger(cfg, io.MultiWriter(e.Logs, logWriter()))
	if err != nil {
		e.T.Fatal(err)
	}
	e.Logs.Flushing(func() { app.FlushLogger(log) })
	a, err := app.Start(context.Background(), cfg, e.LookupEnv, log)
	if err != nil {
		e.T.Fatal(err)
	}
	e.App, e.Base, e.log = a, "http://"+a.Addr, log
	e.T.Cleanup(func() { e.Stop() })
}

// Stop shuts the gateway down (idempotent).
func (e *Env) Stop() {
	if e.App == nil {
		return
	}
	if err := e.App.Shutdown(5 * time.Second); err != nil {
		e.T.Errorf("shutdown: %v", err)
	}
	app.CloseLogger(e.log)
	e.App = nil
}

// Restart stops the gateway and starts it again on the same data directory.
func (e *Env) Restart() {
	e.Stop()
	e.Start()
}

// logWriter shows the gateway's log on stderr when SWITCHYARD_TEST_LOG is set.
func logWriter() io.Writer {
	if os.Getenv("SWITCHYARD_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// API calls the admin API with the admin token and decodes the JSON answer into out (if given).
func (e *Env) API(method, path string, body any, out any) int {
	e.T.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.Base+path, rd)
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			e.T.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

// MustAPI is API that fails the test unless the status is want.
func (e *Env) MustAPI(method, path string, body any, want int) map[string]any {
	e.T.Helper()
	var out map[string]any
	if got := e.API(method, path, body, &out); got != want {
		e.T.Fatalf("%s %s: status %d, want %d: %v", method, path, got, want, out)
	}
	return out
}

// AddProvider creates an openai-compatible provider.
func (e *Env) AddProvider(name, baseURL string) int64 {
	e.T.Helper()
	return e.AddProviderOfType(name, "openai-compatible", baseURL)
}

// AddConnection creates an API-key connection.
func (e *Env) AddConnection(provider, name, key string, priority int) int64 {
	e.T.Helper()
	out := e.MustAPI("POST", "/api/connections", map[string]any{"provider": provider, "name": name,
		"auth_type": "api_key", "api_key": key, "priority": priority}, 201)
	return int64(out["id"].(float64))
}

// NewWithCooledProvider starts a gateway whose providers up and ok share one fake upstream: the
// only connection of up, cool, has just been answered 429 with a ten-minute Retry-After (retries
// are off), and ok's connection, fine, serves. It returns the gateway and cool's id.
func NewWithCooledProvider(t testing.TB) (*Env, int64) {
	t.Helper()
	up := NewFakeUpstream(t, ByKey(map[string]http.HandlerFunc{
		"sk-cool": Status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`),
		"sk-ok":   JSONAnswer(CompletionJSON),
	}))
	e := New(t)
	e.AddProvider("up", up.URL+"/v1")
	cool := e.AddConnection("up", "cool", "sk-cool", 0)
	e.AddProvider("ok", up.URL+"/v1")
	e.AddConnection("ok", "fine", "sk-ok", 0)
	key := e.NewKey()
	e.WaitModels(key, "ok/gpt-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	r := e.Chat(context.Background(), key, ChatBody)
	if body := ReadAll(t, r); r.StatusCode != 429 {
		t.Fatalf("chat: %d %s, want 429", r.StatusCode, body)
	}
	return e, cool
}

// NewKey creates a client key and returns it.
func (e *Env) NewKey() string {
	e.T.Helper()
	out := e.MustAPI("POST", "/api/keys", map[string]any{"name": "test"}, 201)
	return out["key"].(string)
}

// WaitModels waits (bounded) until GET /v1/models lists want; discovery runs in the background.
func (e *Env) WaitModels(key string, want string) {
	e.T.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := e.get("/v1/models", key)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), `"`+want+`"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("model %s never listed", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ListModels returns the ids of GET /v1/models.
func (e *Env) ListModels(key string) []string {
	e.T.Helper()
	resp, err := e.get("/v1/models", key)
	if err != nil {
		e.T.Fatal(err)
	}
	var out struct{ Data []struct{ ID string } }
	json.Unmarshal([]byte(ReadAll(e.T, resp)), &out)
	var ids []string
	for _, d := range out.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

// get sends GET path with a bearer token.
func (e *Env) get(path, bearer string) (*http.Response, error) {
	req, _ := http.NewRequest("GET", e.Base+path, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	return http.DefaultClient.Do(req)
}

// Eventually polls cond (bounded) while background work catches up.
func (e *Env) Eventually(what string, cond func() bool) {
	e.T.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.T.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Chat posts a chat completions body with a client key.
func (e *Env) Chat(ctx context.Context, key string, body string) *http.Response {
	e.T.Helper()
	return e.Post(ctx, "/v1/chat/completions", key, body, nil)
}

// Post posts a JSON body to a proxy surface with a client key and extra headers.
func (e *Env) Post(ctx context.Context, path, key, body string, header map[string]string) *http.Response {
	e.T.Helper()
	return e.postJSON(ctx, path, body, map[string]string{"Authorization": "Bearer " + key}, header)
}

// postJSON posts a JSON body to a proxy surface with the client's credentials (auth) and extra
// headers, which win over both.
func (e *Env) postJSON(ctx context.Context, path, body string, auth, header map[string]string) *http.Response {
	e.T.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.Base+path, strings.NewReader(body))
	for k, v := range auth {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := ChatClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	return resp
}

// ChatClient bounds every test request, so a request that waits on a fake-clock timer nobody
// advances fails the test within a minute instead of hanging the suite.
var ChatClient = &http.Client{Timeout: time.Minute}

// ReadAll reads and closes a response body.
func ReadAll(t testing.TB, r *http.Response) string {
	t.Helper()
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Login returns a client holding an admin session.
func (e *Env) Login() *http.Client {
	e.T.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(e.Base+"/login", url.Values{"password": {Password}})
	if err != nil {
		e.T.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/" {
		e.T.Fatalf("login failed: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	return c
}

// NoRedirect is a client that returns redirects instead of following them.
func NoRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Metrics scrapes /metrics with the admin token.
func (e *Env) Metrics() string {
	e.T.Helper()
	resp, err := e.get("/metrics", AdminToken)
	if err != nil {
		e.T.Fatal(err)
	}
	if resp.StatusCode != 200 {
		e.T.Fatalf("metrics: %d", resp.StatusCode)
	}
	return ReadAll(e.T, resp)
}

// ConnState is one connection of GET /api/resilience/state.
type ConnState struct {
	ID           int64  `json:"id"`
	Status       string `json:"status"`
	RemainingMS  int64  `json:"remaining_ms"`
	Reason       string `json:"reason"`
	BackoffLevel int    `json:"backoff_level"`
	LastError    string `json:"last_error"`
	ErrorCode    int    `json:"error_code"`
}

// State returns a connection's state from the admin API.
func (e *Env) State(id int64) ConnState {
	e.T.Helper()
	var out struct{ Connections []ConnState }
	if st := e.API("GET", "/api/resilience/state", nil, &out); st != 200 {
		e.T.Fatalf("state: %d", st)
	}
	for _, c := range out.Connections {
		if c.ID == id {
			return c
		}
	}
	e.T.Fatalf("connection %d not in state", id)
	return ConnState{}
}

// ProviderStatus returns a provider's entry of GET /api/resilience/state.
func (e *Env) ProviderStatus(name string) map[string]any {
	e.T.Helper()
	out := e.MustAPI("GET", "/api/resilience/state", nil, 200)
	for _, p := range out["providers"].([]any) {
		m := p.(map[string]any)
		if m["provider"] == name {
			return m
		}
	}
	e.T.Fatalf("provider %s not in state", name)
	return nil
}

// ModelCooldowns lists the active model lockouts.
func (e *Env) ModelCooldowns() []map[string]any {
	e.T.Helper()
	out := e.MustAPI("GET", "/api/resilience/model-cooldowns", nil, 200)
	var items []map[string]any
	for _, it := range out["items"].([]any) {
		items = append(items, it.(map[string]any))
	}
	return items
}

// ConnectionID finds a connection's id by name.
func (e *Env) ConnectionID(name string) int64 {
	e.T.Helper()
	return e.idByName("/api/connections", "connection", name)
}

// idByName finds the id of the item named name in the admin API's list at path.
func (e *Env) idByName(path, what, name string) int64 {
	e.T.Helper()
	for _, it := range e.MustAPI("GET", path, nil, 200)["items"].([]any) {
		m := it.(map[string]any)
		if m["name"] == name {
			return int64(m["id"].(float64))
		}
	}
	e.T.Fatalf("no %s %s", what, name)
	return 0
}

// QueueStats returns a connection's queue numbers from the admin API.
func (e *Env) QueueStats(id int64) map[string]any {
	e.T.Helper()
	out := e.MustAPI("GET", "/api/resilience/state", nil, 200)
	for _, c := range out["connections"].([]any) {
		m := c.(map[string]any)
		if int64(m["id"].(float64)) == id {
			return m["queue"].(map[string]any)
		}
	}
	e.T.Fatalf("no connection %d", id)
	return nil
}

// built is the gateway binary of this test process, built once by BuildBinary and removed when
// the tests end.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// BuildBinary builds the real gateway binary from the working tree, once per test process, and
// returns its path.
func BuildBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "switchyard-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "switchyard")
		cmd := exec.Command("go", "build", "-o", built.bin, "switchyard")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}
