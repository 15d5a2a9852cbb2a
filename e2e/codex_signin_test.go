package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// codexSetup is a gateway whose codex.* sign-in addresses point at a fake of OpenAI's auth
// server, with a provider "codex" of type codex at baseURL ("" = a closed address: no request
// reaches it) and retries off.
func codexSetup(t *testing.T, baseURL string) (*testenv.Env, *testenv.FakeOpenAIAuth) {
	t.Helper()
	f := testenv.NewFakeOpenAIAuth(t)
	e := testenv.New(t)
	e.UseFakeOpenAIAuth(f)
	if baseURL == "" {
		baseURL = "http://127.0.0.1:9/backend-api/codex"
	}
	e.MustAPI("POST", "/api/providers", map[string]any{"name": "codex", "type": "codex", "base_url": baseURL}, 201)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	return e, f
}

// noCodexTokens fails the test when a token the fake issued shows in text.
func noCodexTokens(t *testing.T, f *testenv.FakeOpenAIAuth, where, text string) {
	t.Helper()
	tokens := f.Tokens()
	if len(tokens) == 0 {
		t.Fatal("the fake issued no tokens: nothing to look for")
	}
	for _, tok := range tokens {
		if strings.Contains(text, tok) {
			t.Fatalf("%s shows a token (%.12s…)", where, tok)
		}
	}
	// Any JWT ({"alg":… base64url), whatever the fake's list holds.
	if strings.Contains(text, "eyJhbGciOi") {
		t.Fatalf("%s shows a JWT", where)
	}
}

// adminGet reads an admin API path as text.
func adminGet(t *testing.T, e *testenv.Env, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", e.Base+path, nil)
	req.Header.Set("Authorization", "Bearer "+testenv.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body
}

// Signing in through the admin API: start gives the Codex CLI's authorize address (PKCE S256,
// the loopback redirect), complete takes the callback address the browser was sent to; the fake
// checks the verifier against the challenge and the redirect against the code's. The connection
// is chatgpt-1 with the account's e-mail and plan; the same account again is the same connection
// (200), another one chatgpt-2. No token in any answer or log line.
func TestCodexSignInThroughTheAPI(t *testing.T) {
	e, f := codexSetup(t, "")
	start := e.MustAPI("POST", "/api/oauth/codex/start", map[string]any{}, 200)
	authURL := start["auth_url"].(string)
	u, _ := url.Parse(authURL)
	q := u.Query()
	if !strings.HasPrefix(authURL, f.URL+"/oauth/authorize?") || q.Get("redirect_uri") != testenv.CodexRedirectURI ||
		q.Get("scope") != "openid profile email offline_access" || q.Get("originator") != "codex_cli_rs" ||
		q.Get("codex_cli_simplified_flow") != "true" || q.Get("id_token_add_organizations") != "true" || q.Get("prompt") != "login" ||
		q.Get("state") != start["state"] {
		t.Fatalf("authorize address %s", authURL)
	}
	callback := f.Authorize(authURL, "acct-ada", "ada@example.com", "plus")
	if !strings.HasPrefix(callback, "http://localhost:1455/auth/callback?") {
		t.Fatalf("callback %s", callback)
	}
	var conn map[string]any
	if st := e.API("POST", "/api/oauth/codex/complete", map[string]any{"code": callback}, &conn); st != 201 {
		t.Fatalf("complete: %d %v", st, conn)
	}
	account, _ := conn["account"].(map[string]any)
	if conn["name"] != "chatgpt-1" || conn["auth_type"] != "oauth" || conn["provider"] != "codex" || account["email"] != "ada@example.com" || account["plan"] != "plus" {
		t.Fatalf("connection %v", conn)
	}
	id := int64(conn["id"].(float64))
	ex := f.Forms("authorization_code")
	if len(ex) != 1 || ex[0].Get("redirect_uri") != testenv.CodexRedirectURI || ex[0].Get("code_verifier") == "" {
		t.Fatalf("exchanges %v", ex)
	}
	// The callback address is used once.
	var refused map[string]any
	if st := e.API("POST", "/api/oauth/codex/complete", map[string]any{"code": callback}, &refused); st != 422 || f.Exchanges.Load() != 1 {
		t.Fatalf("a used callback: %d %v (%d exchanges)", st, refused, f.Exchanges.Load())
	}

	if again := e.AddCodexAccount(f, "codex", "acct-ada", "ada@example.com", "pro"); again != id {
		t.Fatalf("signing in again made connection %d, want %d", again, id)
	}
	if got := e.MustAPI("GET", "/api/connections/"+itoa(id), nil, 200); got["account"].(map[string]any)["plan"] != "pro" {
		t.Fatalf("after signing in again %v", got)
	}
	bob := e.AddCodexAccount(f, "", "acct-bob", "bob@example.com", "team")
	if got := e.MustAPI("GET", "/api/connections/"+itoa(bob), nil, 200); bob == id || got["name"] != "chatgpt-2" {
		t.Fatalf("second account %v", got)
	}
	// A provider of another type takes no ChatGPT account.
	e.MustAPI("POST", "/api/oauth/codex/start", map[string]any{"provider": "anthropic"}, 422)

	for _, path := range []string{"/api/connections", "/api/connections/" + itoa(id), "/api/resilience/state", "/api/providers"} {
		noCodexTokens(t, f, path, adminGet(t, e, path))
	}
	b, _ := json.Marshal(conn)
	noCodexTokens(t, f, "the complete answer", string(b))
	noCodexTokens(t, f, "the log", e.Logs.String())
	if strings.Contains(e.Logs.String(), "ada@example.com") {
		t.Fatal("the log names the account's e-mail")
	}
}

// sessionAPI calls the admin API with a dashboard session's cookies.
func sessionAPI(t *testing.T, e *testenv.Env, c *http.Client, method, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, e.Base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// devicePoller polls the device sign-in flow of kind (codex or copilot) through the admin API;
// want is the status the poll must answer.
func devicePoller(t *testing.T, e *testenv.Env, kind string, flow any) func(want int) map[string]any {
	return func(want int) map[string]any {
		t.Helper()
		return e.MustAPI("POST", "/api/oauth/"+kind+"/device/poll", map[string]any{"flow": flow}, want)
	}
}

// deviceIntervals checks how a device sign-in paces its polls of the upstream (counted by
// calls): a poll sooner than the 5 s interval calls nothing, the next one calls once, and once
// slowDown makes the upstream answer slow_down the interval is 10 s.
func deviceIntervals(t *testing.T, e *testenv.Env, poll func(want int) map[string]any, calls func() int64, slowDown func()) {
	t.Helper()
	if p := poll(202); p["status"] != "pending" || calls() != 0 {
		t.Fatalf("an early poll %v reached the upstream (%d polls)", p, calls())
	}
	e.Clock.Advance(5 * time.Second)
	if p := poll(202); p["interval"] != 5.0 || calls() != 1 {
		t.Fatalf("pending %v (%d polls)", p, calls())
	}
	slowDown()
	e.Clock.Advance(5 * time.Second)
	if p := poll(202); p["interval"] != 10.0 || calls() != 2 {
		t.Fatalf("slow_down %v (%d polls)", p, calls())
	}
}

// A device sign-in through the admin API: the user code and the device page come back, the
// device id never does; polls sooner than the interval make no call to OpenAI; a slow_down makes
// the interval 5 s longer; once approved, the code is exchanged with the device redirect and the
// connection is created (201), after which the flow id is unknown.
func TestCodexDeviceSignIn(t *testing.T) {
	e, f := codexSetup(t, "")
	flow := e.MustAPI("POST", "/api/oauth/codex/device", map[string]any{"provider": "codex"}, 200)
	id, code := flow["flow"].(string), flow["user_code"].(string)
	if code == "" || flow["verification_url"] != f.URL+"/codex/device" || flow["interval"].(float64) != 5 || strings.Contains(fmt.Sprint(flow), "deviceauth_") {
		t.Fatalf("flow %v", flow)
	}
	poll := devicePoller(t, e, "codex", id)
	deviceIntervals(t, e, poll, f.DevicePolls.Load, func() {
		f.DeviceAnswer.Store(&testenv.FakeAnswer{Status: 429, Body: `{"error":"slow_down"}`})
	})
	f.DeviceAnswer.Store(nil)
	e.Clock.Advance(5 * time.Second)
	if poll(202); f.DevicePolls.Load() != 2 {
		t.Fatal("polled OpenAI sooner than the longer interval")
	}
	e.Clock.Advance(5 * time.Second)
	if poll(202); f.DevicePolls.Load() != 3 {
		t.Fatalf("no poll after the longer interval (%d)", f.DevicePolls.Load())
	}
	f.Approve(code, "acct-dev", "dev@example.com", "pro")
	e.Clock.Advance(10 * time.Second)
	conn := poll(201)
	if conn["name"] != "chatgpt-1" || conn["account"].(map[string]any)["plan"] != "pro" {
		t.Fatalf("approved %v", conn)
	}
	if ex := f.Forms("authorization_code"); len(ex) != 1 || ex[0].Get("redirect_uri") != f.DeviceRedirectURI {
		t.Fatalf("device exchange %v", ex)
	}
	e.Clock.Advance(10 * time.Second)
	poll(404)

	// The same account through the device again: its connection, 200.
	flow = e.MustAPI("POST", "/api/oauth/codex/device", map[string]any{}, 200)
	f.Approve(flow["user_code"].(string), "acct-dev", "dev@example.com", "pro")
	e.Clock.Advance(5 * time.Second)
	again := e.MustAPI("POST", "/api/oauth/codex/device/poll", map[string]any{"flow": flow["flow"]}, 200)
	if again["id"] != conn["id"] {
		t.Fatalf("device sign-in again made %v, want %v", again["id"], conn["id"])
	}
	noCodexTokens(t, f, "the log", e.Logs.String())
	noCodexTokens(t, f, "the connections", adminGet(t, e, "/api/connections"))
}

// Flow ids are bound to the operator who started the flow: the admin token's flow is unknown to
// a dashboard session and the other way round, as are an id never given out and an expired one.
func TestCodexDeviceFlowsAreBound(t *testing.T) {
	e, f := codexSetup(t, "")
	session := e.Login()
	byToken := e.MustAPI("POST", "/api/oauth/codex/device", nil, 200)["flow"]
	st, started := sessionAPI(t, e, session, "POST", "/api/oauth/codex/device", map[string]any{})
	if st != 200 || started["flow"] == nil {
		t.Fatalf("session start: %d %v", st, started)
	}
	bySession := started["flow"]
	e.Clock.Advance(5 * time.Second)
	if st, out := sessionAPI(t, e, session, "POST", "/api/oauth/codex/device/poll", map[string]any{"flow": byToken}); st != 404 {
		t.Fatalf("the token's flow polled by a session: %d %v", st, out)
	}
	e.MustAPI("POST", "/api/oauth/codex/device/poll", map[string]any{"flow": bySession}, 404)
	e.MustAPI("POST", "/api/oauth/codex/device/poll", map[string]any{"flow": "no-such-flow"}, 404)
	if f.DevicePolls.Load() != 0 {
		t.Fatal("a foreign poll reached OpenAI")
	}
	// Each owner's own poll works.
	e.MustAPI("POST", "/api/oauth/codex/device/poll", map[string]any{"flow": byToken}, 202)
	if st, _ := sessionAPI(t, e, session, "POST", "/api/oauth/codex/device/poll", map[string]any{"flow": bySession}); st != 202 {
		t.Fatalf("the session's own poll: %d", st)
	}
	// Expired after 15 minutes.
	e.Clock.Advance(15 * time.Minute)
	e.MustAPI("POST", "/api/oauth/codex/device/poll", map[string]any{"flow": byToken}, 404)
	if st, _ := sessionAPI(t, e, session, "POST", "/api/oauth/codex/device/poll", map[string]any{"flow": bySession}); st != 404 {
		t.Fatalf("an expired flow: %d", st)
	}
}

// fakeCodexBackend is the least of the Codex backend: POST /responses with a bearer token of
// the fake auth server, answered with a short Responses stream. It records the tokens it saw.
type fakeCodexBackend struct {
	*httptest.Server
	mu      sync.Mutex
	bearers []string
}

func newFakeCodexBackend(t *testing.T, f *testenv.FakeOpenAIAuth) *fakeCodexBackend {
	b := &fakeCodexBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		b.mu.Lock()
		b.bearers = append(b.bearers, tok)
		b.mu.Unlock()
		if f.AccountOf(tok) == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"detail":"Unauthorized"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		resp := `{"id":"resp_1","object":"response","created_at":1700000000,"status":"%s","model":"gpt-5-codex","output":%s%s}`
		msg := `[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi","annotations":[]}]}]`
		events := []string{
			`{"type":"response.created","sequence_number":0,"response":` + fmt.Sprintf(resp, "in_progress", "[]", "") + `}`,
			`{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"hi"}`,
			`{"type":"response.completed","sequence_number":2,"response":` + fmt.Sprintf(resp, "completed", msg,
				`,"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":6}`) + `}`,
		}
		for _, ev := range events {
			var typ struct {
				Type string `json:"type"`
			}
			json.Unmarshal([]byte(ev), &typ)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, ev)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *fakeCodexBackend) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.bearers...)
}

const codexAccountRequest = `{"model":"codex/gpt-5-codex","stream":true,"input":"hi"}`

// Twenty requests that need the token while it is refreshed wait for that one refresh and all
// go out with the new token; the rotated refresh token is committed before they are answered,
// so a restarted gateway refreshes with it and never reuses a burned one.
func TestCodexRefreshOnceForTwentyRequests(t *testing.T) {
	f := testenv.NewFakeOpenAIAuth(t)
	backend := newFakeCodexBackend(t, f)
	e, _ := func() (*testenv.Env, *testenv.FakeOpenAIAuth) {
		e := testenv.New(t)
		e.UseFakeOpenAIAuth(f)
		e.MustAPI("POST", "/api/providers", map[string]any{"name": "codex", "type": "codex", "base_url": backend.URL}, 201)
		e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
		return e, f
	}()
	key := e.NewKey()
	e.AddCodexAccount(f, "codex", "acct-ada", "ada@example.com", "plus")
	send := func() (int, string) {
		resp := e.Post(t.Context(), "/v1/responses", key, codexAccountRequest, nil)
		return resp.StatusCode, testenv.ReadAll(t, resp)
	}
	if st, body := send(); st != 200 || !strings.Contains(body, "response.completed") {
		t.Fatalf("first request: %d %s", st, body)
	}
	first := backend.seen()[0]
	if f.AccountOf(first) != "acct-ada" {
		t.Fatal("the backend got no token of the account")
	}

	hold := make(chan struct{})
	f.RefreshHold.Store(&hold)
	e.Clock.Advance(time.Hour - 5*time.Minute + time.Second) // inside the 5-minute margin of the 1 h token
	oneRefreshFor(t, e, &f.Refreshes, hold, 20, func() *http.Response {
		return e.Post(t.Context(), "/v1/responses", key, codexAccountRequest, nil)
	})
	f.RefreshHold.Store(nil)
	seen := backend.seen()
	if len(seen) != 21 {
		t.Fatalf("%d backend calls, want 21", len(seen))
	}
	for _, tok := range seen[1:] {
		if tok == first || tok != seen[1] {
			t.Fatal("a request went out with the token that was being replaced, or with different tokens")
		}
	}
	if forms := f.Forms("refresh_token"); len(forms) != 1 || forms[0].Has("scope") {
		t.Fatalf("refresh body %v", forms)
	}

	// A restart reads the rotated pair from the database: the next refresh uses the new refresh
	// token, not the burned one.
	e.Restart()
	e.Clock.Advance(time.Hour - 5*time.Minute + time.Second)
	e.Eventually("the refresh after the restart", func() bool { return f.Refreshes.Load() == 2 })
	if st, body := send(); st != 200 {
		t.Fatalf("after the restart: %d %s", st, body)
	}
	if f.BurnedUses.Load() != 0 {
		t.Fatal("a refresh token was used twice")
	}
	if last := backend.seen(); last[len(last)-1] == seen[1] || f.AccountOf(last[len(last)-1]) != "acct-ada" {
		t.Fatal("the request after the second refresh did not carry the newest token")
	}
	noCodexTokens(t, f, "the log", e.Logs.String())
	noCodexTokens(t, f, "the state", adminGet(t, e, "/api/resilience/state"))
}

// A refresh token OpenAI calls reused ends the account at once: expired, no strikes to wait for.
func TestCodexReusedRefreshTokenExpires(t *testing.T) {
	e, f := codexSetup(t, "")
	id := e.AddCodexAccount(f, "", "acct-ada", "ada@example.com", "plus")
	f.RefreshFail.Store(&testenv.FakeAnswer{Status: 401,
		Body: `{"error":{"message":"Your refresh token has already been used","type":"invalid_request_error","param":null,"code":"refresh_token_reused"}}`})
	e.Clock.Advance(time.Hour - 5*time.Minute + time.Second)
	e.Eventually("the refresh", func() bool { return f.Refreshes.Load() >= 1 })
	e.Eventually("the account expired", func() bool { return e.State(id).Status == "expired" })
	if f.Refreshes.Load() != 1 {
		t.Fatalf("%d refresh calls for a dead refresh token", f.Refreshes.Load())
	}
	noCodexTokens(t, f, "the log", e.Logs.String())
}
