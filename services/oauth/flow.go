package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/redact"
	"switchyard/services/settings"
)

// SignInTTL is how long a started sign-in waits for its code.
const SignInTTL = 10 * time.Minute

// maxPending bounds the sign-ins waiting for their code; the oldest goes first.
const maxPending = 64

// pendingSignIn is a started sign-in: the PKCE verifier stays here, server-side, until the code
// comes back (once). So does the address to sign in at, so a page that shows it again takes it
// from here, never from what a browser sent.
type pendingSignIn struct {
	// kind is the account kind the sign-in is for (catalog.TypeAnthropic, TypeCodex): a state
	// is completed only by its own kind's Complete, so a code never reaches another token
	// endpoint.
	kind     string
	state    string // set when taken: the state it was kept under
	verifier string
	provider string
	// name is the connection name the operator chose for a new account; "" = claude-N / chatgpt-N.
	name    string
	authURL string
	expires time.Time
	started time.Time
}

// SignIn is what Start answers: the address to open and the state that ties the code to it.
type SignIn struct {
	AuthURL   string    `json:"auth_url"`
	State     string    `json:"state"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Start begins a Claude sign-in for provider ("" = anthropic): authorization code with PKCE
// (S256). The browser opens AuthURL; Claude's page then shows CODE#STATE to paste back. name is
// the connection name for a new account ("" = the next free claude-N); an account signed in
// before keeps its connection and that connection's name.
func (s *Service) Start(provider, name string) (SignIn, error) {
	provider, name = strings.TrimSpace(provider), strings.TrimSpace(name)
	if provider == "" {
		provider = catalog.TypeAnthropic
	}
	if err := checkName(name); err != nil {
		return SignIn{}, err
	}
	p, ok := s.opt.Catalog.Registry().Provider(provider)
	switch {
	case !ok:
		return SignIn{}, errs.Field("provider", "err.no_provider")
	case p.Type != catalog.TypeAnthropic:
		return SignIn{}, errs.Field("provider", "err.oauth_provider")
	}
	// code=true asks Claude's page to show the code for pasting; prompt=login lets several
	// accounts sign in one after another, each with its own refresh token family.
	return s.startSignIn(catalog.TypeAnthropic, provider, name, oauthConfig(s.opt.Settings.Snapshot().Claude()),
		oauth2.SetAuthURLParam("code", "true"), oauth2.SetAuthURLParam("prompt", "login")), nil
}

// startSignIn keeps a paste-back sign-in of kind for provider and name (authorization code with
// PKCE, S256; the verifier stays here) and answers the address conf and params make for it.
func (s *Service) startSignIn(kind, provider, name string, conf *oauth2.Config, params ...oauth2.AuthCodeOption) SignIn {
	verifier := oauth2.GenerateVerifier()
	state := randomState()
	now := s.opt.Clock.Now()
	authURL := conf.AuthCodeURL(state, append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}, params...)...)
	s.addPending(state, pendingSignIn{kind: kind, verifier: verifier, provider: provider, name: name,
		authURL: authURL, expires: now.Add(SignInTTL), started: now})
	return SignIn{AuthURL: authURL, State: state, ExpiresAt: now.Add(SignInTTL)}
}

// addPending keeps a started sign-in under its state; when maxPending are waiting, the oldest goes.
func (s *Service) addPending(state string, p pendingSignIn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(p.started)
	if len(s.pending) >= maxPending {
		var oldest string
		for k, q := range s.pending {
			if oldest == "" || q.started.Before(s.pending[oldest].started) {
				oldest = k
			}
		}
		delete(s.pending, oldest)
	}
	s.pending[state] = p
}

// takePending removes and returns the sign-in of kind started with state: single use, whatever
// happens next. A state of another kind is unknown here and stays for its own Complete.
func (s *Service) takePending(state, kind string) (pendingSignIn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[state]
	if !ok || p.kind != kind {
		return pendingSignIn{}, false
	}
	delete(s.pending, state)
	return p, true
}

// Pending returns the Claude sign-in started with state while it still waits for its code: the
// page that asks for the code shows its address again from here (never another kind's).
func (s *Service) Pending(state string) (SignIn, bool) {
	return s.PendingOf(catalog.TypeAnthropic, state)
}

func oauthConfig(cfg settings.ClaudeOAuth) *oauth2.Config {
	return &oauth2.Config{ClientID: cfg.ClientID, RedirectURL: cfg.RedirectURI, Scopes: cfg.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: cfg.AuthorizeURL, TokenURL: cfg.TokenURL}}
}

func randomState() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Service) sweepLocked(now time.Time) {
	for k, p := range s.pending {
		if !now.Before(p.expires) {
			delete(s.pending, k)
		}
	}
}

// Complete finishes a sign-in with what the person pasted: CODE#STATE, or the whole callback
// address (…?code=CODE&state=STATE). The state must be one Start gave out within SignInTTL, and
// is used once. The account's connection is created, or, when the account is already there,
// updated in place. created reports which.
func (s *Service) Complete(ctx context.Context, pasted string) (catalog.Connection, bool, error) {
	code, p, err := s.pastedSignIn(pasted, catalog.TypeAnthropic, "oauth.code_missing", "oauth.state_missing")
	if err != nil {
		return catalog.Connection{}, false, err
	}
	now := s.opt.Clock.Now()
	cfg := s.opt.Settings.Snapshot().Claude()
	res, err := s.exchange(ctx, cfg, map[string]string{"grant_type": "authorization_code", "code": code, "state": p.state,
		"client_id": cfg.ClientID, "redirect_uri": cfg.RedirectURI, "code_verifier": p.verifier})
	if err != nil {
		s.opt.Log.Warn("sign-in code exchange failed", "provider", p.provider, "error", err)
		return catalog.Connection{}, false, errs.Wrap(err, errs.Upstream, "oauth.exchange_failed", err.Error())
	}
	if res.RefreshToken == "" {
		return catalog.Connection{}, false, errs.New(errs.Upstream, "oauth.exchange_failed", "the answer has no refresh token")
	}
	cred := res.credential(now, catalog.OAuthCredential{})
	conn, created, err := s.opt.Catalog.SaveOAuthAccount(ctx, p.provider, p.name, cred)
	if err != nil {
		return catalog.Connection{}, false, err
	}
	s.opt.Log.Info("Claude account signed in", "provider", p.provider, "connection_id", conn.ID, "created", created)
	return conn, created, nil
}

// pastedSignIn reads what was pasted to complete a sign-in of kind and takes the started sign-in
// its state names (single use); noCode and noState are the kind's messages for what is missing.
func (s *Service) pastedSignIn(pasted, kind, noCode, noState string) (string, pendingSignIn, error) {
	code, state := parsePasted(pasted)
	switch {
	case code == "":
		return "", pendingSignIn{}, errs.Field("code", noCode)
	case state == "":
		return "", pendingSignIn{}, errs.Field("code", noState)
	}
	now := s.opt.Clock.Now()
	p, ok := s.takePending(state, kind)
	switch {
	case !ok:
		return "", pendingSignIn{}, errs.Field("code", "oauth.state_unknown")
	case !now.Before(p.expires):
		return "", pendingSignIn{}, errs.Field("code", "oauth.state_expired")
	}
	p.state = state
	return code, p, nil
}

// parsePasted reads CODE#STATE, or a callback address carrying code and state.
func parsePasted(in string) (code, state string) {
	in = strings.TrimSpace(in)
	if u, err := url.Parse(in); err == nil && u.Scheme != "" && u.Host != "" {
		q := u.Query()
		code, state = q.Get("code"), q.Get("state")
		if state == "" && u.Fragment != "" { // some pages show …?code=CODE#STATE
			state = u.Fragment
		}
		return strings.TrimSpace(code), strings.TrimSpace(state)
	}
	code, state, _ = strings.Cut(in, "#")
	return strings.TrimSpace(code), strings.TrimSpace(state)
}

// tokenAnswer is the token endpoint's answer to a code exchange or a refresh.
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
	Account      struct {
		UUID  string `json:"uuid"`
		Email string `json:"email_address"`
	} `json:"account"`
	Organization struct {
		UUID string `json:"uuid"`
		Name string `json:"name"`
		Type string `json:"organization_type"`
	} `json:"organization"`
	SubscriptionType string `json:"subscription_type"`
}

// credential is the answer as the credential that follows prev (a refresh keeps the account
// and, when the answer rotates none, the refresh token).
func (t tokenAnswer) credential(now time.Time, prev catalog.OAuthCredential) catalog.OAuthCredential {
	c := catalog.OAuthCredential{AccessToken: catalog.Secret(t.AccessToken), RefreshToken: catalog.Secret(t.RefreshToken),
		RefreshedAt: now, Account: prev.Account}
	if c.RefreshToken == "" {
		c.RefreshToken = prev.RefreshToken
	}
	if t.ExpiresIn > 0 {
		c.ExpiresAt = now.Add(time.Duration(t.ExpiresIn) * time.Second)
	} else {
		c.ExpiresAt = now.Add(time.Hour)
	}
	a := &c.Account
	if t.Account.UUID != "" {
		a.UUID, a.Email = t.Account.UUID, t.Account.Email
	}
	if t.Organization.UUID != "" {
		a.OrganizationUUID, a.OrganizationName = t.Organization.UUID, t.Organization.Name
	}
	if plan := firstNonEmpty(t.Organization.Type, t.SubscriptionType); plan != "" {
		a.Plan = plan
	}
	return c
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// tokenError is a refused token call: its status, the OAuth error code and Retry-After.
type tokenError struct {
	status     int
	code       string
	message    string
	retryAfter time.Duration
}

func (e *tokenError) Error() string {
	text := "token endpoint answered HTTP " + strconv.Itoa(e.status)
	if e.code != "" {
		text += ": " + e.code
	}
	if e.message != "" {
		text += ": " + e.message
	}
	return text
}

// exchange posts one token request. Claude's token endpoint takes JSON bodies, not the form
// encoding of RFC 6749 that oauth2.Config.Exchange and its TokenSource send, so this small
// exchange is ours; x/oauth2 still makes the PKCE verifier, challenge and authorize address.
func (s *Service) exchange(ctx context.Context, cfg settings.ClaudeOAuth, body map[string]string) (tokenAnswer, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.TokenURL, bytes.NewReader(b))
	if err != nil {
		return tokenAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("anthropic-beta", oauthBeta)
	req.Header.Set("User-Agent", userAgent(cfg))
	status, header, raw, err := s.send(req, "token endpoint", bodySecrets(body))
	if err != nil {
		return tokenAnswer{}, err
	}
	if status != http.StatusOK {
		te := &tokenError{status: status, retryAfter: retryAfter(header.Get("Retry-After"), s.opt.Clock.Now())}
		var e struct {
			Error            any    `json:"error"`
			ErrorDescription string `json:"error_description"`
		}
		if json.Unmarshal(raw, &e) == nil {
			switch v := e.Error.(type) {
			case string:
				te.code, te.message = v, e.ErrorDescription
			case map[string]any: // Anthropic's own error shape
				te.code, _ = v["type"].(string)
				te.message, _ = v["message"].(string)
			}
		}
		// The endpoint may echo what it was sent (a refresh token, a code): none of it goes on.
		secrets := bodySecrets(body)
		te.code, te.message = redact.String(te.code, secrets...), redact.String(te.message, secrets...)
		if len(te.message) > 200 {
			te.message = te.message[:200]
		}
		return tokenAnswer{}, te
	}
	var t tokenAnswer
	if err := json.Unmarshal(raw, &t); err != nil || t.AccessToken == "" {
		return tokenAnswer{}, fmt.Errorf("token endpoint: the answer has no access token")
	}
	return t, nil
}

// bodySecrets are the values of a token request that must never be repeated: everything but the
// grant type and the client id (a code, its verifier and state, a refresh token).
func bodySecrets(body map[string]string) []string {
	out := make([]string, 0, len(body))
	for k, v := range body {
		if k != "grant_type" && k != "client_id" {
			out = append(out, v)
		}
	}
	return out
}

func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 && n < 86400*30 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now)
	}
	return 0
}

// oauthBeta is the beta every call to Anthropic's account endpoints carries.
const oauthBeta = "oauth-2025-04-20"

// UserAgent is Claude Code's User-Agent for the configured version.
func UserAgent(cfg settings.ClaudeOAuth) string { return userAgent(cfg) }

func userAgent(cfg settings.ClaudeOAuth) string {
	return "claude-cli/" + cfg.CLIVersion + " (external, cli)"
}
