package testenv

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CodexClientID is the Codex CLI's public OAuth client, the codex.client_id default the fake
// expects.
const CodexClientID = "app_EMoamEEZ73f0CkXaXp7hrann"

// CodexRedirectURI is the loopback redirect the Codex client is registered with.
const CodexRedirectURI = "http://localhost:1455/auth/callback"

// FakeOpenAIAuth plays auth.openai.com for ChatGPT/Codex accounts: the token endpoint (form
// bodies, PKCE checked as base64url(sha256(verifier)), the redirect_uri of the code's own flow,
// single-use rotating refresh tokens) and the device sign-in (user code, pending polls, approval
// by the test). Every access token it issues belongs to a ChatGPT account id and stays valid
// unless revoked, so a fake Codex backend can check bearer tokens with AccountOf.
type FakeOpenAIAuth struct {
	*httptest.Server
	t testing.TB

	// DeviceRedirectURI is the redirect device codes are exchanged with; UseFakeOpenAIAuth makes
	// it the gateway's codex.device_redirect_uri (the fake's URL + /deviceauth/callback).
	DeviceRedirectURI string

	mu       sync.Mutex
	n        int
	codes    map[string]*codexCode // authorization code → its flow (used once)
	access   map[string]string     // access token → account id
	refresh  map[string]string     // valid refresh token → account id
	burned   map[string]bool       // refresh tokens used once already
	revoked  map[string]bool
	accounts map[string]codexIdent // account id → email and plan
	devices  map[string]*codexDevice
	forms    []url.Values // every /oauth/token body, in order

	// ExpiresIn is the lifetime of issued access tokens, in seconds (default 1 h).
	ExpiresIn atomic.Int64
	refreshScript
	// Exchanges counts authorization code exchanges (successful or not).
	Exchanges atomic.Int64
	// DevicePolls counts calls of the device token endpoint.
	DevicePolls atomic.Int64
	// DeviceAnswer, when set, answers device token polls instead (a 429 slow_down, a 400 …).
	DeviceAnswer atomic.Pointer[FakeAnswer]
	// DeviceInterval is the interval the user code answer names, as a string like OpenAI's
	// (default "5"); a number in JSON when DeviceIntervalNumber is set.
	DeviceInterval       atomic.Value
	DeviceIntervalNumber atomic.Bool
}

// codexIdent is who an account is.
type codexIdent struct{ accountID, email, plan string }

// codexCode is one authorization code waiting for its exchange.
type codexCode struct {
	ident     codexIdent
	challenge string
	redirect  string
}

// codexDevice is one device sign-in.
type codexDevice struct {
	userCode string
	approved *codexIdent
	issued   bool
}

// NewFakeOpenAIAuth starts the fake; it stops with the test.
func NewFakeOpenAIAuth(t testing.TB) *FakeOpenAIAuth {
	f := &FakeOpenAIAuth{t: t, codes: map[string]*codexCode{}, access: map[string]string{}, refresh: map[string]string{},
		burned: map[string]bool{}, revoked: map[string]bool{}, accounts: map[string]codexIdent{}, devices: map[string]*codexDevice{}}
	f.ExpiresIn.Store(3600)
	f.DeviceInterval.Store("5")
	f.Server = startServer(t, f.serve)
	f.DeviceRedirectURI = f.URL + "/deviceauth/callback"
	return f
}

// Authorize plays the browser at the authorize address: it checks the PKCE parameters, records
// the challenge and the redirect, and returns the callback address the browser is sent to
// (http://localhost:1455/auth/callback?code=…&state=…) for the account.
func (f *FakeOpenAIAuth) Authorize(authURL, accountID, email, plan string) string {
	f.t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		f.t.Fatal(err)
	}
	q := u.Query()
	if u.Path != "/oauth/authorize" || !strings.HasPrefix(authURL, f.URL) {
		f.t.Fatalf("authorize address not at the fake: %s", authURL)
	}
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("state") == "" || q.Get("client_id") != CodexClientID || q.Get("redirect_uri") == "" {
		f.t.Fatalf("authorize address without PKCE, state, client or redirect: %s", authURL)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	code := fmt.Sprintf("ac_codex_%d", f.n)
	ident := codexIdent{accountID, email, plan}
	f.accounts[accountID] = ident
	f.codes[code] = &codexCode{ident: ident, challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
	cb, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		f.t.Fatal(err)
	}
	cq := url.Values{"code": {code}, "scope": {q.Get("scope")}, "state": {q.Get("state")}}
	cb.RawQuery = cq.Encode()
	return cb.String()
}

// Approve plays the person who entered userCode at the device page and signed in as the
// account: the next poll of that device sign-in gets its authorization code.
func (f *FakeOpenAIAuth) Approve(userCode, accountID, email, plan string) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.devices {
		if d.userCode == userCode {
			ident := codexIdent{accountID, email, plan}
			f.accounts[accountID] = ident
			d.approved = &ident
			return
		}
	}
	f.t.Fatalf("no device sign-in with user code %q", userCode)
}

// SetPlan changes the plan an account's next id_token names.
func (f *FakeOpenAIAuth) SetPlan(accountID, plan string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.accounts[accountID]
	id.plan = plan
	f.accounts[accountID] = id
}

// AccountOf returns the ChatGPT account id of an access token ("" when unknown or revoked).
func (f *FakeOpenAIAuth) AccountOf(accessToken string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.revoked[accessToken] {
		return ""
	}
	return f.access[accessToken]
}

// Revoke makes AccountOf disown an access token.
func (f *FakeOpenAIAuth) Revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[token] = true
}

// Tokens returns every access and refresh token issued so far (for leak checks).
func (f *FakeOpenAIAuth) Tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.AppendSeq(slices.Collect(maps.Keys(f.access)), maps.Keys(f.refresh))
	return slices.AppendSeq(out, maps.Keys(f.burned))
}

// Forms returns the token endpoint's request bodies of a grant type, in order.
func (f *FakeOpenAIAuth) Forms(grantType string) []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []url.Values
	for _, v := range f.forms {
		if v.Get("grant_type") == grantType {
			out = append(out, v)
		}
	}
	return out
}

func (f *FakeOpenAIAuth) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/oauth/token":
		f.token(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/api/accounts/deviceauth/usercode":
		f.userCode(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/api/accounts/deviceauth/token":
		f.deviceToken(w, r)
	default:
		http.NotFound(w, r)
	}
}

func oauthError(w http.ResponseWriter, status int, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}

func (f *FakeOpenAIAuth) token(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		oauthError(w, 400, "invalid_request", "form body expected")
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, 400, "invalid_request", "bad form body")
		return
	}
	form := r.PostForm
	f.mu.Lock()
	f.forms = append(f.forms, form)
	f.mu.Unlock()
	if form.Get("client_id") != CodexClientID {
		oauthError(w, 401, "invalid_client", "unknown client")
		return
	}
	switch form.Get("grant_type") {
	case "authorization_code":
		f.Exchanges.Add(1)
		f.mu.Lock()
		defer f.mu.Unlock()
		c, ok := f.codes[form.Get("code")]
		delete(f.codes, form.Get("code")) // used once, whatever happens
		switch {
		case !ok:
			oauthError(w, 400, "invalid_grant", "unknown or used authorization code")
		case c.challenge != pkceChallenge(form.Get("code_verifier")):
			oauthError(w, 400, "invalid_grant", "code_verifier does not match the code_challenge")
		case c.redirect != form.Get("redirect_uri"):
			oauthError(w, 400, "invalid_grant", "redirect_uri does not match the authorization request")
		default:
			f.issue(w, c.ident.accountID, true)
		}
	case "refresh_token":
		if f.answered(w) {
			return
		}
		if form.Has("scope") {
			oauthError(w, 400, "invalid_scope", "a refresh must not re-scope")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		rt := form.Get("refresh_token")
		acct, ok := f.refresh[rt]
		if !ok {
			if f.burned[rt] {
				f.BurnedUses.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(401)
				io.WriteString(w, `{"error":{"message":"Your refresh token has already been used to generate a new access token. Please try signing in again.","type":"invalid_request_error","param":null,"code":"refresh_token_reused"}}`)
				return
			}
			oauthError(w, 400, "invalid_grant", "refresh token not found")
			return
		}
		delete(f.refresh, rt)
		f.burned[rt] = true
		f.issue(w, acct, true)
	default:
		oauthError(w, 400, "unsupported_grant_type", "")
	}
}

// issue answers a new token set of an account; f.mu is held.
func (f *FakeOpenAIAuth) issue(w http.ResponseWriter, accountID string, withID bool) {
	f.n++
	ident := f.accounts[accountID]
	now := time.Now()
	claims := map[string]any{"chatgpt_account_id": ident.accountID, "chatgpt_plan_type": ident.plan,
		"chatgpt_user_id": "user-" + ident.accountID}
	access := FakeJWT(map[string]any{"iss": "https://auth.openai.com", "aud": []string{"https://api.openai.com/v1"},
		"jti": fmt.Sprintf("at-%d", f.n), "exp": now.Add(time.Duration(f.ExpiresIn.Load()) * time.Second).Unix(),
		"https://api.openai.com/auth": claims})
	refresh := fmt.Sprintf("rt_%s_%d", strings.ReplaceAll(ident.accountID, "-", ""), f.n)
	f.access[access], f.refresh[refresh] = accountID, accountID
	out := map[string]any{"access_token": access, "refresh_token": refresh, "expires_in": f.ExpiresIn.Load(),
		"token_type": "Bearer", "scope": "openid profile email offline_access"}
	if withID {
		out["id_token"] = FakeJWT(map[string]any{"iss": "https://auth.openai.com", "aud": []string{CodexClientID},
			"sub": "auth0|" + ident.accountID, "email": ident.email, "email_verified": true,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": fmt.Sprintf("id-%d", f.n),
			"https://api.openai.com/auth":    claims,
			"https://api.openai.com/profile": map[string]any{"email": ident.email}})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// FakeJWT encodes claims as a JWT with a made-up signature (nothing here checks one).
func FakeJWT(claims map[string]any) string {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT","kid":"fake"}`))
	p, _ := json.Marshal(claims)
	return h + "." + base64.RawURLEncoding.EncodeToString(p) + "." + base64.RawURLEncoding.EncodeToString([]byte("not-a-signature"))
}

// pkceChallenge is the S256 code_challenge of a PKCE code_verifier: base64url (unpadded) of its
// SHA-256 (RFC 7636).
func pkceChallenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (f *FakeOpenAIAuth) userCode(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ClientID != CodexClientID {
		oauthError(w, 400, "invalid_request", "JSON body with the client_id expected")
		return
	}
	f.mu.Lock()
	f.n++
	id := fmt.Sprintf("deviceauth_%d", f.n)
	code := fmt.Sprintf("CDX%d-%04d", f.n, f.n*37%10000)
	f.devices[id] = &codexDevice{userCode: code}
	f.mu.Unlock()
	var interval any = f.DeviceInterval.Load().(string)
	if f.DeviceIntervalNumber.Load() {
		var n int
		fmt.Sscan(interval.(string), &n)
		interval = n
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"device_auth_id": id, "user_code": code, "usercode": code, "interval": interval})
}

func (f *FakeOpenAIAuth) deviceToken(w http.ResponseWriter, r *http.Request) {
	f.DevicePolls.Add(1)
	var in struct {
		DeviceAuthID string `json:"device_auth_id"`
		UserCode     string `json:"user_code"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		oauthError(w, 400, "invalid_request", "JSON body expected")
		return
	}
	if a := f.DeviceAnswer.Load(); a != nil {
		a.write(w)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.devices[in.DeviceAuthID]
	switch {
	case d == nil || d.userCode != in.UserCode || d.issued:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"message":"Device authorization not found","code":"deviceauth_not_found"}}`)
	case d.approved == nil:
		w.WriteHeader(403)
		io.WriteString(w, `{"error":{"message":"Device authorization is pending","code":"deviceauth_authorization_pending"}}`)
	default:
		d.issued = true
		f.n++
		code := fmt.Sprintf("ac_device_%d", f.n)
		verifier := fmt.Sprintf("device-verifier-%d-%s", f.n, strings.Repeat("v", 43))
		challenge := pkceChallenge(verifier)
		f.codes[code] = &codexCode{ident: *d.approved, challenge: challenge, redirect: f.DeviceRedirectURI}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"authorization_code": code, "code_challenge": challenge, "code_verifier": verifier})
	}
}

// UseFakeOpenAIAuth points every codex.* sign-in address of the OAuth settings at the fake (the
// Codex backend, codex.api_base_url, stays as it is).
func (e *Env) UseFakeOpenAIAuth(f *FakeOpenAIAuth) {
	e.T.Helper()
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"codex": map[string]any{
		"authorize_url":           f.URL + "/oauth/authorize",
		"token_url":               f.URL + "/oauth/token",
		"device_usercode_url":     f.URL + "/api/accounts/deviceauth/usercode",
		"device_token_url":        f.URL + "/api/accounts/deviceauth/token",
		"device_verification_url": f.URL + "/codex/device",
		"device_redirect_uri":     f.DeviceRedirectURI,
	}}, 200)
}

// AddCodexAccount signs a ChatGPT account in through the admin API (start → the fake's
// authorize → complete with the callback address) on provider ("" = codex) and returns its
// connection id.
func (e *Env) AddCodexAccount(f *FakeOpenAIAuth, provider, accountID, email, plan string) int64 {
	e.T.Helper()
	start := e.MustAPI("POST", "/api/oauth/codex/start", map[string]any{"provider": provider}, 200)
	out := map[string]any{}
	st := e.API("POST", "/api/oauth/codex/complete", map[string]any{"code": f.Authorize(start["auth_url"].(string), accountID, email, plan)}, &out)
	if st != 201 && st != 200 {
		e.T.Fatalf("codex complete: %d %v", st, out)
	}
	return int64(out["id"].(float64))
}
