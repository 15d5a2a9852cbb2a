package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// claudeSetup is a gateway whose anthropic provider and OAuth settings point at a fake Claude,
// with retries off.
func claudeSetup(t *testing.T, messages http.HandlerFunc) (*testenv.Env, *testenv.FakeClaude, string) {
	t.Helper()
	f := testenv.NewFakeClaude(t, messages)
	e := testenv.New(t)
	e.UseFakeClaude(f)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	return e, f, e.NewKey()
}

// connState reads one connection of GET /api/resilience/state as a map.
func connState(e *testenv.Env, id int64) map[string]any {
	e.T.Helper()
	out := e.MustAPI("GET", "/api/resilience/state", nil, 200)
	for _, c := range out["connections"].([]any) {
		m := c.(map[string]any)
		if int64(m["id"].(float64)) == id {
			return m
		}
	}
	e.T.Fatalf("connection %d not in state", id)
	return nil
}

func bearerOf(r testenv.Recorded) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// Signing in through the admin API: start gives an authorize address with PKCE (S256), complete
// takes CODE#STATE and answers the connection (named claude-1, not after the account) with the
// account's email and never a token. The same account again updates its connection; a state that
// was never given out, or given out 10 minutes ago, is refused.
func TestClaudeSignInThroughTheAPI(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	start := e.MustAPI("POST", "/api/oauth/claude/start", nil, 200)
	authURL := start["auth_url"].(string)
	for _, want := range []string{"client_id=9d1c250a-e61b-44d9-88ed-5944d1962f5e", "code_challenge_method=S256", "code=true",
		"redirect_uri=https%3A%2F%2Fplatform.claude.com%2Foauth%2Fcode%2Fcallback", "scope=user%3Aprofile+user%3Ainference"} {
		if !strings.Contains(authURL, want) {
			t.Fatalf("authorize address lacks %s: %s", want, authURL)
		}
	}
	if !strings.HasPrefix(authURL, "https://claude.ai/oauth/authorize?") || start["state"] == "" {
		t.Fatalf("start %v", start)
	}
	pasted := f.Authorize(authURL, "ada@example.com")
	var conn map[string]any
	if st := e.API("POST", "/api/oauth/claude/complete", map[string]any{"code": pasted}, &conn); st != 201 {
		t.Fatalf("complete: %d %v", st, conn)
	}
	account := conn["account"].(map[string]any)
	if conn["auth_type"] != "oauth" || conn["name"] != "claude-1" || account["email"] != "ada@example.com" || account["plan"] != "claude_max" {
		t.Fatalf("connection %v", conn)
	}
	id := int64(conn["id"].(float64))
	// No token anywhere in the admin API.
	for _, path := range []string{"/api/connections", fmt.Sprintf("/api/connections/%d", id), "/api/resilience/state"} {
		req, _ := http.NewRequest("GET", e.Base+path, nil)
		req.Header.Set("Authorization", "Bearer "+testenv.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := testenv.ReadAll(t, resp); strings.Contains(body, "sk-ant-o") {
			t.Fatalf("%s shows a token: %s", path, body)
		}
	}
	// The account serves requests at once.
	e.WaitModels(key, "anthropic/claude-test")
	resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}

	// The same account again: the same connection, new tokens.
	before := len(f.MessageRequests())
	if again := e.AddClaudeAccount(f, "ada@example.com"); again != id {
		t.Fatalf("re-auth made connection %d, want %d updated", again, id)
	}
	if items := e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any); len(items) != 1 {
		t.Fatalf("%d connections after re-auth", len(items))
	}
	resp = e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	testenv.ReadAll(t, resp)
	reqs := f.MessageRequests()
	if len(reqs) != before+1 || bearerOf(reqs[before]) == bearerOf(reqs[before-1]) {
		t.Fatal("the re-authed connection still uses the old token")
	}

	// A state mismatch, a missing state, an expired state.
	second := e.MustAPI("POST", "/api/oauth/claude/start", map[string]any{"provider": "anthropic"}, 200)
	code, _, _ := strings.Cut(f.Authorize(second["auth_url"].(string), "bob@example.com"), "#")
	out := e.MustAPI("POST", "/api/oauth/claude/complete", map[string]any{"code": code + "#forged-state"}, 422)
	if !strings.Contains(fmt.Sprint(out), "no sign-in started here") {
		t.Fatalf("state mismatch: %v", out)
	}
	third := e.MustAPI("POST", "/api/oauth/claude/start", nil, 200)
	late := f.Authorize(third["auth_url"].(string), "cy@example.com")
	e.Clock.Advance(10*time.Minute + time.Second)
	if out := e.MustAPI("POST", "/api/oauth/claude/complete", map[string]any{"code": late}, 422); !strings.Contains(fmt.Sprint(out), "expired") {
		t.Fatalf("expired state: %v", out)
	}
	if out := e.MustAPI("POST", "/api/oauth/claude/start", map[string]any{"provider": "openai"}, 422); !strings.Contains(fmt.Sprint(out), "anthropic") {
		t.Fatalf("start on openai: %v", out)
	}
	e.MustAPI("POST", "/api/oauth/claude/start", map[string]any{"provider": "openai", "extra": 1}, 422)
}

// adaServedOnce signs ada in, sends one message and returns her connection and the bearer token
// the fake saw.
func adaServedOnce(t *testing.T, e *testenv.Env, f *testenv.FakeClaude, key string) (int64, string) {
	t.Helper()
	id := e.AddClaudeAccount(f, "ada@example.com")
	e.WaitModels(key, "anthropic/claude-test")
	testenv.ReadAll(t, e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil))
	return id, bearerOf(f.MessageRequests()[0])
}

// A pasted setup token is an OAuth connection that is used as it is and never refreshed.
func TestClaudeSetupToken(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	// The fake knows the token as one of its own: sign an account in to mint one, then paste it.
	id, token := adaServedOnce(t, e, f, key)
	e.MustAPI("DELETE", fmt.Sprintf("/api/connections/%d", id), nil, 204)

	e.MustAPI("POST", "/api/connections", map[string]any{"provider": "anthropic", "name": "cli", "auth_type": "oauth",
		"setup_token": "not-a-setup-token"}, 422)
	e.MustAPI("POST", "/api/connections", map[string]any{"provider": "anthropic", "name": "cli", "auth_type": "oauth",
		"api_key": token}, 422)
	conn := e.MustAPI("POST", "/api/connections", map[string]any{"provider": "anthropic", "name": "cli", "auth_type": "oauth",
		"setup_token": token}, 201)
	if conn["account"].(map[string]any)["setup_token"] != true || strings.Contains(fmt.Sprint(conn), token) {
		t.Fatalf("connection %v", conn)
	}
	e.Clock.Advance(24 * time.Hour) // long-lived: nothing to refresh
	resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}
	reqs := f.MessageRequests()
	if last := reqs[len(reqs)-1]; bearerOf(last) != token || last.Header.Get("x-api-key") != "" {
		t.Fatalf("headers %v", last.Header)
	}
	if f.Refreshes.Load() != 0 {
		t.Fatal("a setup token was refreshed")
	}
	st := connState(e, int64(conn["id"].(float64)))
	if st["token"].(map[string]any)["setup_token"] != true {
		t.Fatalf("state %v", st["token"])
	}
}

// A token is refreshed ahead of its expiry, and once when the upstream answers 401; the
// request is then served with the new token.
func TestClaudeRefreshAheadOfExpiryAndOn401(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	id, first := adaServedOnce(t, e, f, key)

	// The upstream refuses the token: one refresh, and the same request succeeds.
	f.Revoke(first)
	resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("after a 401: %d %s", resp.StatusCode, body)
	}
	reqs := f.MessageRequests()
	if f.Refreshes.Load() != 1 || len(reqs) != 3 || bearerOf(reqs[1]) != first || bearerOf(reqs[2]) == first {
		t.Fatalf("refreshes %d, requests %d", f.Refreshes.Load(), len(reqs))
	}
	if st := e.State(id); st.Status != "active" {
		t.Fatalf("the 401 cooled the connection: %+v", st)
	}
	second := bearerOf(reqs[2])

	// Inside the refresh margin (5 min before the 8 h expiry) the token is refreshed first.
	e.Clock.Advance(8*time.Hour - 5*time.Minute)
	e.Eventually("the refresher refreshes ahead of expiry", func() bool { return f.Refreshes.Load() == 2 })
	resp = e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	testenv.ReadAll(t, resp)
	reqs = f.MessageRequests()
	if third := bearerOf(reqs[len(reqs)-1]); third == second || f.Refreshes.Load() != 2 {
		t.Fatalf("not refreshed ahead of expiry (refreshes %d)", f.Refreshes.Load())
	}
	tok := connState(e, id)["token"].(map[string]any)
	if tok["strikes"].(float64) != 0 || tok["last_refresh"] == nil || tok["expires_at"] == nil {
		t.Fatalf("token state %v", tok)
	}
	if f.BurnedUses.Load() != 0 {
		t.Fatal("a refresh token was used twice")
	}
}

// oneRefreshFor sends n requests at once while the refresh they all need is held at the fake
// (hold is closed once the first refresh call arrives): exactly one refresh call is made and
// every request is served.
func oneRefreshFor(t *testing.T, e *testenv.Env, refreshes *atomic.Int64, hold chan struct{}, n int, send func() *http.Response) {
	t.Helper()
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := send()
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	e.Eventually("a refresh call", func() bool { return refreshes.Load() >= 1 })
	close(hold)
	wg.Wait()
	if n := refreshes.Load(); n != 1 {
		t.Fatalf("%d refresh calls, want exactly 1", n)
	}
	for i, st := range statuses {
		if st != 200 {
			t.Fatalf("request %d: %d", i, st)
		}
	}
}

// Fifty requests that arrive while the token is being refreshed wait for that one refresh.
func TestClaudeFiftyRequestsOneRefresh(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	hold := make(chan struct{})
	f.RefreshHold.Store(&hold)
	f.ExpiresIn.Store(60) // inside the refresh margin at once
	e.AddClaudeAccount(f, "ada@example.com")
	f.ExpiresIn.Store(8 * 3600)
	e.Clock.Advance(30 * time.Second) // a token issued moments ago is not refreshed at once
	oneRefreshFor(t, e, &f.Refreshes, hold, 50, func() *http.Response {
		return e.PostAnthropic("/v1/messages", key, `{"model":"anthropic/claude-test","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, nil)
	})
	if f.BurnedUses.Load() != 0 {
		t.Fatal("a refresh token was used twice")
	}
}

// Failed refreshes count strikes; the third makes the connection expired. invalid_grant makes it
// expired at once. Signing in again clears both.
func TestClaudeRefreshStrikesAndInvalidGrant(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	id := e.AddClaudeAccount(f, "ada@example.com")
	e.WaitModels(key, "anthropic/claude-test")
	f.RefreshFail.Store(&testenv.FakeAnswer{Status: 503, Body: `{"error":"temporarily_unavailable"}`})
	e.Clock.Advance(8*time.Hour - 5*time.Minute) // the refresher tries, and fails
	e.Eventually("strike 1", func() bool { return connState(e, id)["token"].(map[string]any)["strikes"].(float64) == 1 })
	e.Clock.Advance(30 * time.Second)
	e.Eventually("strike 2", func() bool { return connState(e, id)["token"].(map[string]any)["strikes"].(float64) == 2 })
	if st := e.State(id); st.Status != "active" {
		t.Fatalf("expired after two strikes: %+v", st)
	}
	e.Clock.Advance(60 * time.Second)
	e.Eventually("strike 3 expires the account", func() bool { return e.State(id).Status == "expired" })
	if f.Refreshes.Load() != 3 {
		t.Fatalf("%d refresh calls", f.Refreshes.Load())
	}
	resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 401 || !strings.Contains(body, "expired") {
		t.Fatalf("an expired account: %d %s", resp.StatusCode, body)
	}

	f.RefreshFail.Store(nil)
	e.AddClaudeAccount(f, "ada@example.com")
	if st := e.State(id); st.Status != "active" {
		t.Fatalf("a new sign-in did not clear expired: %+v", st)
	}
	if tok := connState(e, id)["token"].(map[string]any); tok["strikes"].(float64) != 0 {
		t.Fatalf("strikes after a new sign-in: %v", tok)
	}

	f.RefreshFail.Store(&testenv.FakeAnswer{Status: 400, Body: `{"error":"invalid_grant","error_description":"Refresh token revoked"}`})
	e.Clock.Advance(8*time.Hour - 5*time.Minute)
	e.Eventually("invalid_grant expires at once", func() bool { return e.State(id).Status == "expired" })
	if tok := connState(e, id)["token"].(map[string]any); !strings.Contains(tok["last_error"].(string), "invalid_grant") {
		t.Fatalf("token state %v", tok)
	}
}

// A 429 of the token endpoint waits its Retry-After and is no strike.
func TestClaudeRefreshWaitsRetryAfter(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	id := e.AddClaudeAccount(f, "ada@example.com")
	e.WaitModels(key, "anthropic/claude-test")
	f.RefreshFail.Store(&testenv.FakeAnswer{Status: 429, Header: map[string]string{"Retry-After": "120"}, Body: `{"error":"rate_limited"}`})
	e.Clock.Advance(8*time.Hour - 5*time.Minute)
	e.Eventually("the refresh was tried", func() bool { return connState(e, id)["token"].(map[string]any)["retry_at"] != nil })
	tok := connState(e, id)["token"].(map[string]any)
	if tok["strikes"].(float64) != 0 || f.Refreshes.Load() != 1 {
		t.Fatalf("token %v, refreshes %d", tok, f.Refreshes.Load())
	}
	// Requests keep the token that still works.
	resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	if testenv.ReadAll(t, resp); resp.StatusCode != 200 || f.Refreshes.Load() != 1 {
		t.Fatalf("status %d, refreshes %d", resp.StatusCode, f.Refreshes.Load())
	}
	f.RefreshFail.Store(nil)
	e.Clock.Advance(120 * time.Second)
	e.Eventually("the refresh after Retry-After", func() bool { return f.Refreshes.Load() == 2 })
	e.Eventually("committed", func() bool { return connState(e, id)["token"].(map[string]any)["retry_at"] == nil })
}

// The settings document of the OAuth client: layers and strictness like the resilience one.
func TestOAuthSettingsDocument(t *testing.T) {
	e := testenv.New(t)
	doc := e.MustAPI("GET", "/api/settings/oauth", nil, 200)
	claude := doc["values"].(map[string]any)["claude"].(map[string]any)
	if claude["token_url"] != "https://platform.claude.com/v1/oauth/token" || doc["sources"].(map[string]any)["claude.token_url"] != "default" {
		t.Fatalf("document %v", doc)
	}
	out := e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{"token_url": "nope", "tokn_url": "x"}}, 422)
	fields, _ := json.Marshal(out)
	if !strings.Contains(string(fields), "claude.token_url") || !strings.Contains(string(fields), "claude.tokn_url") {
		t.Fatalf("refusal %s", fields)
	}
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{"cli_version": "2.3.0"}}, 200)
	e.Restart()
	doc = e.MustAPI("GET", "/api/settings/oauth", nil, 200)
	if doc["values"].(map[string]any)["claude"].(map[string]any)["cli_version"] != "2.3.0" ||
		doc["sources"].(map[string]any)["claude.cli_version"] != "persisted" {
		t.Fatalf("after restart %v", doc)
	}
}

// The Claude accounts card saves the OAuth document in place and refuses bad values at their
// field, saving nothing.
func TestClaudeOAuthCard(t *testing.T) {
	s := newSettingsSite(t)
	form := cardForm(t, s.get(t, "/settings"), "claude-oauth")
	if form["claude.betas"][0] != "claude-code-20250219 oauth-2025-04-20" || form["claude.token_url"][0] != "https://platform.claude.com/v1/oauth/token" {
		t.Fatalf("card form %v", form)
	}
	form["claude.cli_version"] = []string{"2.2.0"}
	form["claude.betas"] = []string{"claude-code-20250219, oauth-2025-04-20 interleaved-thinking-2025-05-14"}
	code, body := s.post(t, "/settings/claude-oauth", form, true)
	if code != http.StatusOK || !strings.Contains(body, "saved-note") {
		t.Fatalf("save: %d %.300s", code, body)
	}
	doc := s.get(t, "/api/settings/oauth")
	if !strings.Contains(doc, `"cli_version":"2.2.0"`) || !strings.Contains(doc, `"interleaved-thinking-2025-05-14"]`) ||
		!strings.Contains(doc, `"claude.cli_version":"persisted"`) || !strings.Contains(doc, `"claude.token_url":"default"`) {
		t.Fatalf("document %s", doc)
	}
	form["claude.usage_url"] = []string{"ftp://nowhere"}
	code, body = s.post(t, "/settings/claude-oauth", form, true)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "http or https") {
		t.Fatalf("refusal: %d %.300s", code, body)
	}
	if after := s.get(t, "/api/settings/oauth"); after != doc {
		t.Fatal("a refused save changed the document")
	}
}

// The lane and limit-reset switches are per Claude account, off by default, and refused on API
// keys; an OAuth connection's kind and credential do not change through PATCH.
func TestClaudeConnectionToggles(t *testing.T) {
	e, f, _ := claudeSetup(t, nil)
	id := e.AddClaudeAccount(f, "ada@example.com")
	conn := e.MustAPI("GET", "/api/connections/"+itoa(id), nil, 200)
	if conn["low_priority_lane"] != false || conn["limit_reset"] != false {
		t.Fatalf("defaults %v", conn)
	}
	conn = e.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"low_priority_lane": true, "limit_reset": true}, 200)
	if conn["low_priority_lane"] != true || conn["limit_reset"] != true {
		t.Fatalf("after PATCH %v", conn)
	}
	if lane := connState(e, id)["lane"].(map[string]any); lane["enabled"] != true || lane["limit_reset"] != true || lane["state"] != "idle" {
		t.Fatalf("lane %v", lane)
	}
	e.Restart()
	if conn = e.MustAPI("GET", "/api/connections/"+itoa(id), nil, 200); conn["low_priority_lane"] != true {
		t.Fatal("the switch did not survive a restart")
	}
	e.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"auth_type": "api_key"}, 422)
	e.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"api_key": "sk-whatever-1234"}, 422)
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e.AddProvider("up", up.URL+"/v1")
	key := e.AddConnection("up", "k", "sk-k", 0)
	out := e.MustAPI("PATCH", "/api/connections/"+itoa(key), map[string]any{"low_priority_lane": true}, 422)
	if !strings.Contains(fmt.Sprint(out), "low_priority_lane") {
		t.Fatalf("refusal %v", out)
	}
	e.MustAPI("POST", "/api/connections", map[string]any{"provider": "up", "name": "o", "auth_type": "oauth", "setup_token": "sk-ant-oat01-x"}, 422)
}
