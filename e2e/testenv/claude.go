package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FakeClaude plays Anthropic for Claude subscription accounts: the OAuth token endpoint (JSON
// bodies, PKCE checked as base64url(sha256(verifier)), single-use rotating refresh tokens), the
// usage API with the limit reset, the model list and the messages API with a scriptable handler.
// Every token it issues belongs to an account (by email); handlers can ask whose a request is.
type FakeClaude struct {
	*httptest.Server
	t testing.TB

	mu         sync.Mutex
	n          int
	challenges map[string]string // code → code_challenge of its authorize address
	codes      map[string]string // code → account email
	access     map[string]string // access token → email (every token ever issued stays valid unless revoked)
	refresh    map[string]string // valid refresh token → email
	burned     map[string]bool   // refresh tokens used once already
	revoked    map[string]bool   // access tokens the messages API answers 401
	usage      map[string]string // email → usage API answer
	plans      map[string]string // email → organization_type
	log        requestLog
	// ExpiresIn is the lifetime of issued access tokens, in seconds (default 8 h).
	ExpiresIn atomic.Int64
	refreshScript
	// Reset answers the limit reset: "reset", "already_used", "not_offered" (the usage check
	// offers none), "control" or "error".
	Reset atomic.Value
	// ResetChecks counts the usage checks of a limit reset; ResetClaims the claims.
	ResetChecks atomic.Int64
	ResetClaims atomic.Int64
	// Messages answers POST /v1/messages and /v1/messages/count_tokens.
	Messages http.HandlerFunc
	// usageHold, while set (HoldUsage), keeps the usage API's answers until it is closed;
	// UsageCalls counts the usage API's calls.
	usageHold  chan struct{}
	UsageCalls atomic.Int64
}

// HoldUsage makes the usage API hold its answers (reading them only then) until the returned
// function is called.
func (f *FakeClaude) HoldUsage() (release func()) {
	hold := make(chan struct{})
	f.mu.Lock()
	f.usageHold = hold
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.usageHold = nil
			f.mu.Unlock()
			close(hold)
		})
	}
}

// FakeAnswer is a scripted status and body.
type FakeAnswer struct {
	Status int
	Body   string
	Header map[string]string
}

func (a *FakeAnswer) write(w http.ResponseWriter) {
	for k, v := range a.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.Status)
	io.WriteString(w, a.Body)
}

// refreshScript is what a test scripts of an OAuth fake's refresh calls.
type refreshScript struct {
	// Refreshes counts refresh calls; BurnedUses counts refresh calls with a token already used.
	Refreshes  atomic.Int64
	BurnedUses atomic.Int64
	// RefreshFail, when set, answers refresh calls instead (status and body).
	RefreshFail atomic.Pointer[FakeAnswer]
	// RefreshHold, when set, makes refresh calls wait until it is closed.
	RefreshHold atomic.Pointer[chan struct{}]
}

// answered counts a refresh call, holds it while RefreshHold is set and answers it with
// RefreshFail when that is set; false leaves the answer to the fake.
func (s *refreshScript) answered(w http.ResponseWriter) bool {
	s.Refreshes.Add(1)
	if h := s.RefreshHold.Load(); h != nil {
		<-*h
	}
	if a := s.RefreshFail.Load(); a != nil {
		a.write(w)
		return true
	}
	return false
}

// NewFakeClaude starts the fake; messages answers the messages API (MessagesAnswer when nil).
func NewFakeClaude(t testing.TB, messages http.HandlerFunc) *FakeClaude {
	if messages == nil {
		messages = MessagesAnswer()
	}
	f := &FakeClaude{t: t, challenges: map[string]string{}, codes: map[string]string{}, access: map[string]string{},
		refresh: map[string]string{}, burned: map[string]bool{}, revoked: map[string]bool{}, usage: map[string]string{},
		plans: map[string]string{}, Messages: messages}
	f.ExpiresIn.Store(8 * 3600)
	f.Reset.Store("reset")
	f.Server = startServer(t, f.serve)
	return f
}

// Authorize plays the browser at the authorize address: it records the PKCE challenge and
// returns what Claude's page shows for pasting back (CODE#STATE) for the account email.
func (f *FakeClaude) Authorize(authURL, email string) string {
	u, err := url.Parse(authURL)
	if err != nil {
		f.t.Fatal(err)
	}
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" {
		f.t.Fatalf("authorize address without PKCE: %s", authURL)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	code := fmt.Sprintf("code%d", f.n)
	f.challenges[code], f.codes[code] = q.Get("code_challenge"), email
	return code + "#" + q.Get("state")
}

// SetPlan sets the organization_type an account's tokens are issued with (default claude_max).
func (f *FakeClaude) SetPlan(email, plan string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans[email] = plan
}

// SetUsage sets an account's usage API answer.
func (f *FakeClaude) SetUsage(email, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage[email] = body
}

// Revoke makes the messages API refuse an access token with 401.
func (f *FakeClaude) Revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[token] = true
}

// RevokeAll makes the messages API refuse every access token issued so far.
func (f *FakeClaude) RevokeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t := range f.access {
		f.revoked[t] = true
	}
}

// AccountOf names the account of a request's bearer token ("" when it has none of ours).
func (f *FakeClaude) AccountOf(r *http.Request) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.access[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
}

// MessageRequests returns the POST /v1/messages requests received so far.
func (f *FakeClaude) MessageRequests() []Recorded { return f.log.at("/v1/messages") }

// Requests returns every request with the path.
func (f *FakeClaude) Requests(path string) []Recorded { return f.log.at(path) }

func (f *FakeClaude) serve(w http.ResponseWriter, r *http.Request) {
	b := f.log.record(r)
	switch {
	case r.URL.Path == "/v1/oauth/token":
		f.token(w, b)
	case r.URL.Path == "/api/oauth/usage":
		f.serveUsage(w, r)
	case strings.HasPrefix(r.URL.Path, "/api/organizations/") && strings.HasSuffix(r.URL.Path, "/reset_rate_limits"):
		f.ResetClaims.Add(1)
		if f.AccountOf(r) == "" {
			w.WriteHeader(401)
			return
		}
		switch f.Reset.Load() {
		case "error":
			w.WriteHeader(500)
		default:
			io.WriteString(w, `{"result":"reset"}`)
		}
	case r.URL.Path == "/v1/models":
		if f.AccountOf(r) == "" || r.Header.Get("anthropic-beta") == "" {
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid bearer token"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[{"type":"model","id":"claude-test","display_name":"claude-test","created_at":"2025-02-19T00:00:00Z"}],"has_more":false}`)
	case r.URL.Path == "/v1/messages" || r.URL.Path == "/v1/messages/count_tokens":
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		_, known := f.access[tok]
		revoked := f.revoked[tok]
		f.mu.Unlock()
		if !known || revoked || r.Header.Get("x-api-key") != "" {
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"OAuth token has expired"}}`)
			return
		}
		if r.URL.Path == "/v1/messages/count_tokens" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"input_tokens":42}`)
			return
		}
		f.Messages(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *FakeClaude) token(w http.ResponseWriter, raw []byte) {
	var body map[string]string
	if err := json.Unmarshal(raw, &body); err != nil {
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_request","error_description":"JSON body expected"}`)
		return
	}
	switch body["grant_type"] {
	case "authorization_code":
		f.mu.Lock()
		defer f.mu.Unlock()
		email, ok := f.codes[body["code"]]
		if !ok || f.challenges[body["code"]] != pkceChallenge(body["code_verifier"]) {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid code or verifier"}`)
			return
		}
		delete(f.codes, body["code"])
		f.issue(w, email)
	case "refresh_token":
		if f.answered(w) {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		email, ok := f.refresh[body["refresh_token"]]
		if !ok {
			if f.burned[body["refresh_token"]] {
				f.BurnedUses.Add(1)
			}
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"Refresh token not found or invalid"}`)
			return
		}
		delete(f.refresh, body["refresh_token"])
		f.burned[body["refresh_token"]] = true
		f.issue(w, email)
	default:
		w.WriteHeader(400)
	}
}

// issue answers a new token pair of an account; f.mu is held.
func (f *FakeClaude) issue(w http.ResponseWriter, email string) {
	f.n++
	access := fmt.Sprintf("sk-ant-oat01-%s-%d", strings.Split(email, "@")[0], f.n)
	refresh := fmt.Sprintf("sk-ant-ort01-%s-%d", strings.Split(email, "@")[0], f.n)
	f.access[access], f.refresh[refresh] = email, email
	plan := f.plans[email]
	if plan == "" {
		plan = "claude_max"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": access, "refresh_token": refresh, "expires_in": f.ExpiresIn.Load(),
		"token_type": "Bearer", "account": map[string]string{"uuid": "uuid-" + email, "email_address": email},
		"organization": map[string]string{"uuid": "org-" + strings.Split(email, "@")[0], "name": "Org " + email, "organization_type": plan}})
}

func (f *FakeClaude) serveUsage(w http.ResponseWriter, r *http.Request) {
	email := f.AccountOf(r)
	if email == "" || r.Header.Get("anthropic-beta") != "oauth-2025-04-20" {
		w.WriteHeader(401)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("at_wall") == "1" {
		f.ResetChecks.Add(1)
		switch f.Reset.Load() {
		case "already_used":
			io.WriteString(w, `{"juniper_tide":{"arm":"reset","available":false,"next_available_at":"2099-01-01T00:00:00Z"}}`)
		case "not_offered":
			io.WriteString(w, `{}`)
		case "control":
			io.WriteString(w, `{"juniper_tide":{"arm":"control","available":false}}`)
		case "error":
			w.WriteHeader(503)
		default:
			io.WriteString(w, `{"juniper_tide":{"arm":"reset","available":true}}`)
		}
		return
	}
	f.UsageCalls.Add(1)
	f.mu.Lock()
	body, hold := f.usage[email], f.usageHold
	f.mu.Unlock()
	if hold != nil { // the answer is what the usage API read when asked, sent late
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if body == "" {
		body = `{"five_hour":{"utilization":0,"resets_at":null},"seven_day":{"utilization":0,"resets_at":null}}`
	}
	io.WriteString(w, body)
}

// UsageJSON is a usage API answer with the windows' utilisation and resets.
func UsageJSON(five float64, fiveReset time.Time, seven float64, sevenReset time.Time) string {
	return fmt.Sprintf(`{"five_hour":{"utilization":%g,"resets_at":%q},"seven_day":{"utilization":%g,"resets_at":%q}}`,
		five, fiveReset.UTC().Format(time.RFC3339), seven, sevenReset.UTC().Format(time.RFC3339))
}

// UseFakeClaude points the OAuth settings and the built-in anthropic provider at the fake.
func (e *Env) UseFakeClaude(f *FakeClaude) {
	e.T.Helper()
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{
		"token_url": f.URL + "/v1/oauth/token", "usage_url": f.URL + "/api/oauth/usage"}}, 200)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": f.URL}, 200)
}

// AddClaudeAccount signs an account in through the admin API (start → the fake's authorize →
// complete) and returns its connection id.
func (e *Env) AddClaudeAccount(f *FakeClaude, email string) int64 {
	e.T.Helper()
	start := e.MustAPI("POST", "/api/oauth/claude/start", map[string]any{}, 200)
	out := map[string]any{}
	st := e.API("POST", "/api/oauth/claude/complete", map[string]any{"code": f.Authorize(start["auth_url"].(string), email)}, &out)
	if st != 201 && st != 200 {
		e.T.Fatalf("complete: %d %v", st, out)
	}
	return int64(out["id"].(float64))
}
