package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
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

	"switchyard/services/catalog"
	"switchyard/services/errs"
)

// fakeOpenAI is OpenAI's auth server: the token endpoint (form bodies only, PKCE checked against
// the challenge of the code's authorize address or device answer, the code's redirect checked,
// single-use rotating refresh tokens) and the device endpoints, with scripted answers.
type fakeOpenAI struct {
	*httptest.Server
	t *testing.T

	mu         sync.Mutex
	n          int
	codes      map[string]codexTestCode
	refresh    map[string]string // valid refresh token → account id
	used       map[string]bool
	plans      map[string]string // account id → plan of the next id_token
	forms      []url.Values
	types      []string // Content-Type of each token request
	tokenNext  []func(w http.ResponseWriter)
	deviceNext []func(w http.ResponseWriter)
	noRotate   bool // refresh answers carry neither a refresh token nor an id_token
	expiresIn  int64
	usercode   string // the body of the user code answer; "" = a default one
	devPolls   atomic.Int64
	devBodies  []map[string]string
}

type codexTestCode struct{ account, email, challenge, redirect string }

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{t: t, codes: map[string]codexTestCode{}, refresh: map[string]string{}, used: map[string]bool{},
		plans: map[string]string{}, expiresIn: 3600}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func testJWT(claims any) string {
	p, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString(p) + ".c2ln"
}

func idTokenFor(account, email, plan string) string {
	return testJWT(map[string]any{"email": email, codexAuthClaim: map[string]any{"chatgpt_account_id": account, "chatgpt_plan_type": plan}})
}

// authorize plays the browser: it checks the authorize address and returns the callback address
// the browser is sent to.
func (f *fakeOpenAI) authorize(authURL, account, email string) string {
	f.t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		f.t.Fatal(err)
	}
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" || q.Get("state") == "" {
		f.t.Fatalf("authorize address %s", authURL)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	code := fmt.Sprintf("ac_%d", f.n)
	f.codes[code] = codexTestCode{account: account, email: email, challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
	return q.Get("redirect_uri") + "?code=" + code + "&scope=openid&state=" + url.QueryEscape(q.Get("state"))
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/oauth/token":
		f.token(w, r)
	case "/deviceauth/usercode":
		f.mu.Lock()
		body := f.usercode
		f.mu.Unlock()
		var in map[string]string
		if json.NewDecoder(r.Body).Decode(&in) != nil || in["client_id"] == "" {
			w.WriteHeader(400)
			return
		}
		if body == "" {
			body = `{"device_auth_id":"dev-secret-1","user_code":"ABCD-1234","interval":"7"}`
		}
		io.WriteString(w, body)
	case "/deviceauth/token":
		f.devPolls.Add(1)
		var in map[string]string
		if json.NewDecoder(r.Body).Decode(&in) != nil {
			w.WriteHeader(400)
			return
		}
		f.mu.Lock()
		f.devBodies = append(f.devBodies, in)
		var next func(http.ResponseWriter)
		if len(f.deviceNext) > 0 {
			next, f.deviceNext = f.deviceNext[0], f.deviceNext[1:]
		}
		f.mu.Unlock()
		if next == nil {
			w.WriteHeader(403)
			io.WriteString(w, `{"error":{"message":"pending","code":"deviceauth_authorization_unknown"}}`)
			return
		}
		next(w)
	default:
		http.NotFound(w, r)
	}
}

// approveNext makes the next device poll answer an approved sign-in of account.
func (f *fakeOpenAI) approveNext(account, email, redirect string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deviceNext = append(f.deviceNext, func(w http.ResponseWriter) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.n++
		code, verifier := fmt.Sprintf("ac_dev_%d", f.n), fmt.Sprintf("device-verifier-%d-0123456789abcdefghijklmnopqrstuvwxyz", f.n)
		f.codes[code] = codexTestCode{account: account, email: email, challenge: s256(verifier), redirect: redirect}
		json.NewEncoder(w).Encode(map[string]string{"authorization_code": code, "code_challenge": s256(verifier), "code_verifier": verifier})
	})
}

func (f *fakeOpenAI) token(w http.ResponseWriter, r *http.Request) {
	err := r.ParseForm()
	f.mu.Lock()
	f.forms = append(f.forms, r.PostForm)
	f.types = append(f.types, r.Header.Get("Content-Type"))
	var next func(http.ResponseWriter)
	if len(f.tokenNext) > 0 {
		next, f.tokenNext = f.tokenNext[0], f.tokenNext[1:]
	}
	f.mu.Unlock()
	if err != nil || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_request","error_description":"form body expected"}`)
		return
	}
	if next != nil {
		next(w)
		return
	}
	form := r.PostForm
	f.mu.Lock()
	defer f.mu.Unlock()
	switch form.Get("grant_type") {
	case "authorization_code":
		c, ok := f.codes[form.Get("code")]
		delete(f.codes, form.Get("code"))
		if !ok || c.challenge != s256(form.Get("code_verifier")) || c.redirect != form.Get("redirect_uri") {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"code, verifier or redirect rejected"}`)
			return
		}
		f.issue(w, c.account, c.email, true)
	case "refresh_token":
		acct, ok := f.refresh[form.Get("refresh_token")]
		if !ok {
			w.WriteHeader(401)
			if f.used[form.Get("refresh_token")] {
				io.WriteString(w, `{"error":{"message":"Your refresh token has already been used","type":"invalid_request_error","param":null,"code":"refresh_token_reused"}}`)
			} else {
				io.WriteString(w, `{"error":"invalid_grant"}`)
			}
			return
		}
		if f.noRotate {
			io.WriteString(w, fmt.Sprintf(`{"access_token":"at-norotate-%d","expires_in":%d}`, f.n, f.expiresIn))
			f.n++
			return
		}
		delete(f.refresh, form.Get("refresh_token"))
		f.used[form.Get("refresh_token")] = true
		f.issue(w, acct, acct+"@example.com", true)
	default:
		w.WriteHeader(400)
	}
}

// issue answers a token set; f.mu is held.
func (f *fakeOpenAI) issue(w http.ResponseWriter, account, email string, withID bool) {
	f.n++
	access, refresh := fmt.Sprintf("at-%s-%d", account, f.n), fmt.Sprintf("rt-%s-%d", account, f.n)
	f.refresh[refresh] = account
	plan := f.plans[account]
	if plan == "" {
		plan = "plus"
	}
	out := map[string]any{"access_token": access, "refresh_token": refresh, "expires_in": f.expiresIn}
	if withID {
		out["id_token"] = idTokenFor(account, email, plan)
	}
	json.NewEncoder(w).Encode(out)
}

func (f *fakeOpenAI) form(i int) url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forms[i]
}

func (f *fakeOpenAI) formCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.forms)
}

// codexHarness is the harness with a codex provider and the codex settings pointing at a
// fakeOpenAI.
type codexHarness struct {
	*harness
	oai *fakeOpenAI
}

func newCodexHarness(t *testing.T) *codexHarness {
	t.Helper()
	h := newHarness(t)
	oai := newFakeOpenAI(t)
	patch, _ := json.Marshal(map[string]any{"codex": map[string]any{
		"authorize_url": oai.URL + "/oauth/authorize", "token_url": oai.URL + "/oauth/token",
		"device_usercode_url": oai.URL + "/deviceauth/usercode", "device_token_url": oai.URL + "/deviceauth/token",
		"device_verification_url": oai.URL + "/codex/device", "device_redirect_uri": oai.URL + "/deviceauth/callback"}})
	if _, err := h.opts.Patch(context.Background(), patch); err != nil {
		t.Fatal(err)
	}
	name, typ := "codex", catalog.TypeCodex
	if _, err := h.cat.CreateProvider(context.Background(), catalog.ProviderInput{Name: &name, Type: &typ}, nil); err != nil {
		t.Fatal(err)
	}
	return &codexHarness{harness: h, oai: oai}
}

func (h *codexHarness) codexSignIn(account, email string) (catalog.Connection, bool) {
	h.t.Helper()
	si, err := h.svc.StartCodex("", "")
	if err != nil {
		h.t.Fatal(err)
	}
	conn, created, err := h.svc.CompleteCodex(context.Background(), h.oai.authorize(si.AuthURL, account, email))
	if err != nil {
		h.t.Fatal(err)
	}
	return conn, created
}

func TestCodexSignInWithPKCE(t *testing.T) {
	h := newCodexHarness(t)
	ctx := context.Background()
	si, err := h.svc.StartCodex("", "")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(si.AuthURL)
	q := u.Query()
	want := map[string]string{"client_id": "app_EMoamEEZ73f0CkXaXp7hrann", "redirect_uri": "http://localhost:1455/auth/callback",
		"scope": "openid profile email offline_access", "response_type": "code", "code_challenge_method": "S256",
		"id_token_add_organizations": "true", "codex_cli_simplified_flow": "true", "originator": "codex_cli_rs", "prompt": "login",
		"state": si.State}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("authorize %s = %q, want %q", k, q.Get(k), v)
		}
	}
	if !strings.HasPrefix(si.AuthURL, h.oai.URL+"/oauth/authorize?") || len(q.Get("code_challenge")) != 43 {
		t.Fatalf("authorize address %s", si.AuthURL)
	}
	conn, created, err := h.svc.CompleteCodex(ctx, h.oai.authorize(si.AuthURL, "acct-1", "ada@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if !created || conn.Name != "chatgpt-1" || conn.Account == nil || conn.Account.Email != "ada@example.com" || conn.Account.Plan != "plus" {
		t.Fatalf("connection %+v account %+v", conn, conn.Account)
	}
	if b, _ := json.Marshal(conn); strings.Contains(string(b), "at-acct") || strings.Contains(string(b), "rt-acct") || strings.Contains(string(b), ".c2ln") {
		t.Fatalf("the connection shows a token: %s", b)
	}
	cred := h.stored(conn.ID)
	if cred.Account.UUID != "acct-1" || cred.IDToken == "" || cred.RefreshToken.Reveal() == "" ||
		!cred.ExpiresAt.Equal(h.clock.Now().Add(time.Hour)) {
		t.Fatalf("stored %+v", cred)
	}
	f := h.oai.form(0)
	if h.oai.types[0] != "application/x-www-form-urlencoded" || f.Get("grant_type") != "authorization_code" ||
		f.Get("client_id") != "app_EMoamEEZ73f0CkXaXp7hrann" || f.Get("redirect_uri") != "http://localhost:1455/auth/callback" ||
		f.Get("code") != "ac_1" || s256(f.Get("code_verifier")) != q.Get("code_challenge") || f.Has("state") {
		t.Fatalf("exchange body %v (%s)", f, h.oai.types[0])
	}

	// The same account again: the same connection; another account: chatgpt-2.
	again, created := h.codexSignIn("acct-1", "ada@example.com")
	if created || again.ID != conn.ID {
		t.Fatalf("signing in again made %d (created %v), want %d", again.ID, created, conn.ID)
	}
	if other, created := h.codexSignIn("acct-2", "bob@example.com"); !created || other.Name != "chatgpt-2" {
		t.Fatalf("second account %+v", other)
	}
	// CODE#STATE works as well as the callback address.
	si, _ = h.svc.StartCodex("codex", "")
	cb, _ := url.Parse(h.oai.authorize(si.AuthURL, "acct-3", "cy@example.com"))
	if _, _, err := h.svc.CompleteCodex(ctx, cb.Query().Get("code")+"#"+cb.Query().Get("state")); err != nil {
		t.Fatal(err)
	}
}

// The token endpoint checks the verifier against the challenge: a code whose challenge is not
// the sign-in's is refused, and the state is gone after one try.
func TestCodexWrongVerifierFails(t *testing.T) {
	h := newCodexHarness(t)
	ctx := context.Background()
	si, _ := h.svc.StartCodex("", "")
	pasted := h.oai.authorize(si.AuthURL, "acct-1", "ada@example.com")
	h.oai.mu.Lock()
	c := h.oai.codes["ac_1"]
	c.challenge = s256("some other verifier")
	h.oai.codes["ac_1"] = c
	h.oai.mu.Unlock()
	_, _, err := h.svc.CompleteCodex(ctx, pasted)
	if codeKey(t, err) != "codex.exchange_failed" || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("a wrong verifier: %v", err)
	}
	if _, _, err := h.svc.CompleteCodex(ctx, pasted); codeKey(t, err) != "oauth.state_unknown" {
		t.Fatalf("the state was not single use: %v", err)
	}
}

func TestCodexStateChecks(t *testing.T) {
	h := newCodexHarness(t)
	ctx := context.Background()
	// A Claude state is unknown to the ChatGPT sign-in and stays for Claude's, and vice versa.
	claude, _ := h.svc.Start("", "")
	claudeCode := h.fake.authorize(claude.AuthURL, "ada@example.com")
	if _, _, err := h.svc.CompleteCodex(ctx, claudeCode); codeKey(t, err) != "oauth.state_unknown" {
		t.Fatalf("a Claude state at the ChatGPT sign-in: %v", err)
	}
	codex, _ := h.svc.StartCodex("", "")
	cb := h.oai.authorize(codex.AuthURL, "acct-1", "ada@example.com")
	u, _ := url.Parse(cb)
	if _, _, err := h.svc.Complete(ctx, u.Query().Get("code")+"#"+codex.State); codeKey(t, err) != "oauth.state_unknown" {
		t.Fatalf("a ChatGPT state at the Claude sign-in: %v", err)
	}
	if h.oai.formCount() != 0 {
		t.Fatal("a refused state reached a token endpoint")
	}
	if _, _, err := h.svc.Complete(ctx, claudeCode); err != nil {
		t.Fatalf("the Claude sign-in after the ChatGPT sign-in refused its state: %v", err)
	}
	if _, _, err := h.svc.CompleteCodex(ctx, cb); err != nil {
		t.Fatalf("the ChatGPT sign-in after the Claude sign-in refused its state: %v", err)
	}

	cases := []struct{ pasted, key string }{
		{"", "codex.code_missing"},
		{"http://localhost:1455/auth/callback?state=abc", "codex.code_missing"},
		{"http://localhost:1455/auth/callback?code=abc", "codex.state_missing"},
		{"http://localhost:1455/auth/callback?error=access_denied&error_description=The+user+said+no&state=x", "codex.signin_refused"},
		{"abc#not-a-state", "oauth.state_unknown"},
	}
	for _, c := range cases {
		if _, _, err := h.svc.CompleteCodex(ctx, c.pasted); codeKey(t, err) != c.key {
			t.Errorf("%q: %v, want %s", c.pasted, err, c.key)
		}
	}
	// A state expires after SignInTTL.
	si, _ := h.svc.StartCodex("", "")
	cb = h.oai.authorize(si.AuthURL, "acct-2", "bob@example.com")
	h.clock.Advance(SignInTTL)
	if _, _, err := h.svc.CompleteCodex(ctx, cb); codeKey(t, err) != "oauth.state_expired" {
		t.Fatalf("an expired state: %v", err)
	}
	// A provider that is not of type codex is refused.
	if _, err := h.svc.StartCodex("anthropic", ""); err == nil {
		t.Fatal("a ChatGPT sign-in on an anthropic provider")
	}
	if _, err := h.svc.StartCodex("nope", ""); err == nil {
		t.Fatal("a ChatGPT sign-in on an unknown provider")
	}
}

func TestParseIDToken(t *testing.T) {
	good := idTokenFor("acct-9", "ada@example.com", "pro")
	c, err := parseIDToken(good)
	if err != nil || c.Auth.AccountID != "acct-9" || c.Auth.PlanType != "pro" || c.Email != "ada@example.com" {
		t.Fatalf("%+v %v", c, err)
	}
	// The e-mail of the profile claim when the top-level one is missing; base64 padding is
	// tolerated.
	parts := strings.Split(testJWT(map[string]any{"https://api.openai.com/profile": map[string]string{"email": "p@example.com"},
		codexAuthClaim: map[string]string{"chatgpt_account_id": "a"}}), ".")
	padded := parts[0] + "." + base64.URLEncoding.EncodeToString(mustDecode(t, parts[1])) + "." + parts[2]
	if c, err := parseIDToken(padded); err != nil || c.Email != "p@example.com" || c.Auth.AccountID != "a" {
		t.Fatalf("padded: %+v %v", c, err)
	}
	for _, bad := range []string{"", "abc", "a.b", "a.b.c.d", "x..y", "eyJ.!!!.sig", "eyJ." + base64.RawURLEncoding.EncodeToString([]byte("[1,2")) + ".s"} {
		if _, err := parseIDToken(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	now := time.Unix(1_800_000_000, 0)
	for name, a := range map[string]codexAnswer{
		"no id_token":   {AccessToken: "a", RefreshToken: "r"},
		"not a JWT":     {AccessToken: "a", RefreshToken: "r", IDToken: "nope"},
		"no account id": {AccessToken: "a", RefreshToken: "r", IDToken: testJWT(map[string]any{"email": "x@example.com"})},
	} {
		if _, err := a.signedIn(now); err == nil || errs.As(err) == nil || errs.As(err).Msg.Key != "codex.no_account" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := (codexAnswer{AccessToken: "a", IDToken: good}).signedIn(now); err == nil {
		t.Error("a sign-in without a refresh token")
	}
	// Without expires_in, the access token's own exp claim.
	exp := now.Add(90 * time.Minute)
	if got := (codexAnswer{AccessToken: testJWT(map[string]any{"exp": exp.Unix()})}).expiresAt(now); !got.Equal(exp) {
		t.Fatalf("expiry from exp: %v", got)
	}
	if got := (codexAnswer{AccessToken: "opaque"}).expiresAt(now); !got.Equal(now.Add(time.Hour)) {
		t.Fatalf("default expiry: %v", got)
	}
}

func mustDecode(t *testing.T, s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A redirect from the token endpoint is a failure that names its target, scrubbed, and is never
// followed: the code and its verifier would go with it.
func TestCodexTokenRedirectNotFollowed(t *testing.T) {
	h := newCodexHarness(t)
	ctx := context.Background()
	var stolen atomic.Int64
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stolen.Add(1) }))
	defer thief.Close()
	redirect := func(w http.ResponseWriter) {
		w.Header().Set("Location", thief.URL+"/steal?code=ac_1&tok=rt-secret")
		w.WriteHeader(http.StatusTemporaryRedirect)
	}
	h.oai.tokenNext = []func(http.ResponseWriter){redirect}
	si, _ := h.svc.StartCodex("", "")
	_, _, err := h.svc.CompleteCodex(ctx, h.oai.authorize(si.AuthURL, "acct-1", "ada@example.com"))
	if codeKey(t, err) != "codex.exchange_failed" || !strings.Contains(err.Error(), "/steal") || strings.Contains(err.Error(), "ac_1") ||
		strings.Contains(err.Error(), "rt-secret") {
		t.Fatalf("redirected exchange: %v", err)
	}
	// A refresh too.
	conn, _ := h.codexSignIn("acct-1", "ada@example.com")
	h.oai.tokenNext = []func(http.ResponseWriter){redirect}
	if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), h.stored(conn.ID).AccessToken.Reveal()); err == nil {
		t.Fatal("a redirected refresh succeeded")
	}
	st, _ := h.svc.State(conn.ID)
	if st.Strikes != 1 || !strings.Contains(st.LastError, "not followed") || strings.Contains(st.LastError, "rt-secret") {
		t.Fatalf("state %+v", st)
	}
	if stolen.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

func TestCodexRefreshRotates(t *testing.T) {
	h := newCodexHarness(t)
	ctx := context.Background()
	h.oai.expiresIn = 600
	conn, _ := h.codexSignIn("acct-1", "ada@example.com")
	first := h.stored(conn.ID)
	h.oai.mu.Lock()
	h.oai.plans["acct-1"] = "pro"
	h.oai.mu.Unlock()
	h.clock.Advance(6 * time.Minute) // within the 5-minute margin
	tok, err := h.svc.Token(ctx, h.entry(conn.ID))
	if err != nil || tok == first.AccessToken.Reveal() {
		t.Fatalf("no refresh: %q %v", tok, err)
	}
	f := h.oai.form(1)
	if h.oai.types[1] != "application/x-www-form-urlencoded" || f.Get("grant_type") != "refresh_token" ||
		f.Get("refresh_token") != first.RefreshToken.Reveal() || f.Get("client_id") != "app_EMoamEEZ73f0CkXaXp7hrann" ||
		f.Has("scope") || len(f) != 3 {
		t.Fatalf("refresh body %v", f)
	}
	next := h.stored(conn.ID)
	if next.AccessToken.Reveal() != tok || next.RefreshToken == first.RefreshToken || next.IDToken == first.IDToken ||
		next.Account.UUID != "acct-1" || next.Account.Plan != "pro" || next.Account.Email != "ada@example.com" ||
		!next.ExpiresAt.Equal(h.clock.Now().Add(10*time.Minute)) || next.Rev != first.Rev+1 {
		t.Fatalf("after the refresh %+v", next)
	}

	// An answer that rotates nothing keeps the refresh token and the id_token.
	h.oai.mu.Lock()
	h.oai.noRotate = true
	h.oai.mu.Unlock()
	h.clock.Advance(6 * time.Minute)
	if _, err := h.svc.Token(ctx, h.entry(conn.ID)); err != nil {
		t.Fatal(err)
	}
	kept := h.stored(conn.ID)
	if kept.AccessToken == next.AccessToken || kept.RefreshToken != next.RefreshToken || kept.IDToken != next.IDToken || kept.Account != next.Account {
		t.Fatalf("an answer without rotation: %+v", kept)
	}
}

// Refresh failures: OpenAI's codes for a dead refresh token expire the account at once; a 429
// waits its Retry-After; a 5xx is a strike.
func TestCodexRefreshFailures(t *testing.T) {
	answer := func(status int, body string, header ...string) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			for i := 0; i+1 < len(header); i += 2 {
				w.Header().Set(header[i], header[i+1])
			}
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	for _, c := range []struct {
		name    string
		answer  func(http.ResponseWriter)
		expired bool
		strikes int
		retry   time.Duration
	}{
		{"reused", answer(401, `{"error":{"message":"already used","type":"invalid_request_error","param":null,"code":"refresh_token_reused"}}`), true, MaxStrikes, 0},
		{"invalid_grant", answer(400, `{"error":"invalid_grant","error_description":"gone"}`), true, MaxStrikes, 0},
		{"expired", answer(401, `{"error":{"code":"refresh_token_expired","message":"expired"}}`), true, MaxStrikes, 0},
		{"invalidated", answer(401, `{"error":{"code":"refresh_token_invalidated","message":"revoked"}}`), true, MaxStrikes, 0},
		{"429", answer(429, `{"error":{"message":"slow down"}}`, "Retry-After", "90"), false, 0, 90 * time.Second},
		{"500", answer(500, `{"error":"server_error"}`), false, 1, StrikeBackoff},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newCodexHarness(t)
			conn, _ := h.codexSignIn("acct-1", "ada@example.com")
			h.oai.tokenNext = []func(http.ResponseWriter){c.answer}
			if _, err := h.svc.TokenRejected(context.Background(), h.entry(conn.ID), h.stored(conn.ID).AccessToken.Reveal()); err == nil {
				t.Fatal("no error")
			}
			st, _ := h.svc.State(conn.ID)
			if st.Expired != c.expired || st.Strikes != c.strikes || (c.retry > 0 && !st.RetryAt.Equal(h.clock.Now().Add(c.retry))) {
				t.Fatalf("state %+v", st)
			}
			if want := map[bool]int{true: 1}[c.expired]; h.expired.count() != want {
				t.Fatalf("marked expired %d times, want %d", h.expired.count(), want)
			}
		})
	}
	// The real thing: a refresh token used twice is answered refresh_token_reused.
	t.Run("reuse at the fake", func(t *testing.T) {
		h := newCodexHarness(t)
		ctx := context.Background()
		conn, _ := h.codexSignIn("acct-1", "ada@example.com")
		old := h.stored(conn.ID)
		if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), old.AccessToken.Reveal()); err != nil {
			t.Fatal(err)
		}
		_, err := h.svc.refreshCodex(ctx, old, h.clock.Now())
		var te *tokenError
		if !errors.As(err, &te) || te.code != "refresh_token_reused" || te.status != 401 || !deadRefresh(te.code) {
			t.Fatalf("a reused refresh token: %v", err)
		}
	})
}

func TestCodexDevicePoll(t *testing.T) {
	h := newCodexHarness(t)
	ctx := context.Background()
	flow, err := h.svc.StartCodexDevice(ctx, "", "", "token")
	if err != nil {
		t.Fatal(err)
	}
	if flow.UserCode != "ABCD-1234" || flow.VerificationURL != h.oai.URL+"/codex/device" || flow.Interval != 7 ||
		!flow.ExpiresAt.Equal(h.clock.Now().Add(15*time.Minute)) || strings.Contains(fmt.Sprint(flow), "dev-secret") {
		t.Fatalf("flow %+v", flow)
	}
	poll := func(owner string) (DevicePoll, error) { return h.svc.PollCodexDevice(ctx, flow.Flow, owner) }
	// Sooner than the interval: pending without a call upstream.
	if p, err := poll("token"); err != nil || !p.Pending || p.Interval != 7*time.Second || h.oai.devPolls.Load() != 0 {
		t.Fatalf("early poll %+v %v (%d calls)", p, err, h.oai.devPolls.Load())
	}
	// Another operator's poll is not found.
	if _, err := poll("session:x"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a foreign poll: %v", err)
	}
	h.clock.Advance(7 * time.Second)
	if p, err := poll("token"); err != nil || !p.Pending || h.oai.devPolls.Load() != 1 {
		t.Fatalf("pending poll %+v %v", p, err)
	}
	if b := h.oai.devBodies[0]; b["device_auth_id"] != "dev-secret-1" || b["user_code"] != "ABCD-1234" {
		t.Fatalf("poll body %v", b)
	}
	// slow_down: the interval grows by 5 s.
	h.oai.deviceNext = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		w.WriteHeader(429)
		io.WriteString(w, `{"error":"slow_down"}`)
	}}
	h.clock.Advance(7 * time.Second)
	if p, err := poll("token"); err != nil || !p.Pending || p.Interval != 12*time.Second {
		t.Fatalf("slow_down %+v %v", p, err)
	}
	h.clock.Advance(7 * time.Second)
	if p, _ := poll("token"); !p.Pending || h.oai.devPolls.Load() != 2 {
		t.Fatalf("polled upstream before the longer interval: %d calls", h.oai.devPolls.Load())
	}
	// A 404 is pending too.
	h.oai.deviceNext = []func(http.ResponseWriter){func(w http.ResponseWriter) { w.WriteHeader(404) }}
	h.clock.Advance(5 * time.Second)
	if p, err := poll("token"); err != nil || !p.Pending || h.oai.devPolls.Load() != 3 {
		t.Fatalf("404 %+v %v", p, err)
	}
	// A slow answer does not push the next poll later: the interval counts from a poll's start,
	// so an approval given while that answer was on its way is picked up one interval after it.
	h.oai.deviceNext = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		h.clock.Advance(4 * time.Second)
		w.WriteHeader(404)
	}}
	h.clock.Advance(12 * time.Second)
	if p, err := poll("token"); err != nil || !p.Pending || h.oai.devPolls.Load() != 4 {
		t.Fatalf("slow pending poll %+v %v", p, err)
	}
	// Approved: the code is exchanged with the device redirect and the verifier OpenAI made.
	h.oai.approveNext("acct-7", "dev@example.com", h.oai.URL+"/deviceauth/callback")
	h.clock.Advance(8 * time.Second)
	p, err := poll("token")
	if err != nil || p.Pending || !p.Created || p.Conn.Name != "chatgpt-1" || p.Conn.Account.Plan != "plus" {
		t.Fatalf("approved %+v %v", p, err)
	}
	f := h.oai.form(0)
	if f.Get("grant_type") != "authorization_code" || f.Get("redirect_uri") != h.oai.URL+"/deviceauth/callback" || !strings.HasPrefix(f.Get("code_verifier"), "device-verifier-") {
		t.Fatalf("device exchange %v", f)
	}
	if h.stored(p.Conn.ID).Account.UUID != "acct-7" {
		t.Fatal("the device sign-in stored another account")
	}
	// Once: the flow id is gone.
	h.clock.Advance(time.Minute)
	if _, err := poll("token"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a used flow: %v", err)
	}
}

func TestCodexDeviceAnswers(t *testing.T) {
	start := func(t *testing.T, usercode string) (*codexHarness, DeviceFlow) {
		h := newCodexHarness(t)
		h.oai.usercode = usercode
		f, err := h.svc.StartCodexDevice(context.Background(), "", "", "token")
		if err != nil {
			t.Fatal(err)
		}
		return h, f
	}
	t.Run("intervals", func(t *testing.T) {
		for body, want := range map[string]int64{
			`{"device_auth_id":"d","user_code":"U","interval":3}`:                            3,
			`{"device_auth_id":"d","user_code":"U"}`:                                         5,
			`{"device_auth_id":"d","usercode":"U","interval":"0.2"}`:                         1,
			`{"device_auth_id":"d","user_code":"U","interval":"soon"}`:                       5,
			`{"device_auth_id":"d","user_code":"U","interval":"5","expires_in":"120"}`:       5,
			`{"device_auth_id":"d","user_code":"U","interval":100000,"expires_in":99999999}`: 300,
		} {
			_, f := start(t, body)
			if f.Interval != want || f.UserCode != "U" {
				t.Errorf("%s: interval %d, want %d (%+v)", body, f.Interval, want, f)
			}
		}
		h, f := start(t, `{"device_auth_id":"d","user_code":"U","expires_in":"120"}`)
		if !f.ExpiresAt.Equal(h.clock.Now().Add(2 * time.Minute)) {
			t.Errorf("expires_in: %v", f.ExpiresAt)
		}
	})
	t.Run("broken answers", func(t *testing.T) {
		h := newCodexHarness(t)
		h.oai.usercode = `{"user_code":"U"}`
		if _, err := h.svc.StartCodexDevice(context.Background(), "", "", "token"); err == nil || errs.As(err).Msg.Key != "codex.device_start_failed" {
			t.Fatalf("no device id: %v", err)
		}
		if _, err := h.svc.StartCodexDevice(context.Background(), "anthropic", "", "token"); err == nil {
			t.Fatal("a device sign-in on an anthropic provider")
		}
	})
	for _, c := range []struct {
		name, key string
		answer    func(http.ResponseWriter)
	}{
		{"denied", "oauth.device_denied", func(w http.ResponseWriter) {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"access_denied","error_description":"the user said no"}`)
		}},
		{"expired", "oauth.device_expired", func(w http.ResponseWriter) {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"code":"deviceauth_expired","message":"expired"}}`)
		}},
		{"server error", "codex.device_failed", func(w http.ResponseWriter) { w.WriteHeader(502) }},
		{"no code", "codex.device_failed", func(w http.ResponseWriter) { io.WriteString(w, `{"code_verifier":"v"}`) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, f := start(t, "")
			h.oai.deviceNext = []func(http.ResponseWriter){c.answer}
			h.clock.Advance(7 * time.Second)
			_, err := h.svc.PollCodexDevice(context.Background(), f.Flow, "token")
			if e := errs.As(err); e == nil || e.Msg.Key != c.key || strings.Contains(err.Error(), "dev-secret") {
				t.Fatalf("%v, want %s", err, c.key)
			}
			h.clock.Advance(7 * time.Second)
			if _, err := h.svc.PollCodexDevice(context.Background(), f.Flow, "token"); errs.CodeOf(err) != errs.NotFound {
				t.Fatalf("the flow did not end: %v", err)
			}
		})
	}
	t.Run("expiry", func(t *testing.T) {
		h, f := start(t, "")
		h.clock.Advance(15 * time.Minute)
		if _, err := h.svc.PollCodexDevice(context.Background(), f.Flow, "token"); errs.CodeOf(err) != errs.NotFound || h.oai.devPolls.Load() != 0 {
			t.Fatalf("an expired flow: %v", err)
		}
	})
}
