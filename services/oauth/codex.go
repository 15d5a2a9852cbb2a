package oauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
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

// ChatGPT/Codex accounts (provider type codex). OpenAI's auth server is a plain OAuth server:
// the token endpoint takes form bodies (RFC 6749), and its answers carry an OpenID id_token whose
// claims name the ChatGPT account (chatgpt_account_id, which every call to the Codex backend
// carries as a header) and its plan. Two ways to sign in: the Codex CLI's authorization code
// with PKCE, whose registered redirect is a loopback address (http://localhost:1455/…) that a
// remote gateway cannot listen on, so the operator pastes the address the browser failed to
// open; or OpenAI's device sign-in (its own, not RFC 8628), for when no browser is at hand.

// Device sign-in bounds: OpenAI names no lifetime for a user code; the Codex CLI waits 15
// minutes. An interval it does not name is 5 s, and none is shorter than a second.
const (
	codexDeviceTTL      = 15 * time.Minute
	codexDeviceMaxTTL   = time.Hour
	codexDefaultPoll    = 5 * time.Second
	codexMinPoll        = time.Second
	codexMaxPoll        = 5 * time.Minute
	codexDefaultExpires = time.Hour
)

// codexAuthClaim is the id_token claim that holds the ChatGPT account.
const codexAuthClaim = "https://api.openai.com/auth"

// codexClaims are the id_token claims the gateway reads.
type codexClaims struct {
	Email string `json:"email"`
	Auth  struct {
		AccountID string `json:"chatgpt_account_id"`
		PlanType  string `json:"chatgpt_plan_type"`
	} `json:"https://api.openai.com/auth"`
	Profile struct {
		Email string `json:"email"`
	} `json:"https://api.openai.com/profile"`
}

// parseIDToken reads the claims of an id_token. Its signature is not checked and cannot be: the
// keys that sign it are OpenAI's, and the token comes straight from the token endpoint over TLS
// in answer to our own code or refresh token, which is what vouches for it. The claims only name
// the account and its plan; nothing here grants access on their strength.
func parseIDToken(tok string) (codexClaims, error) {
	var c codexClaims
	parts := strings.Split(strings.TrimSpace(tok), ".")
	if len(parts) != 3 || parts[1] == "" {
		return c, errors.New("the id_token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return c, errors.New("the id_token's payload is not base64url")
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return c, errors.New("the id_token's payload is not a JSON object")
	}
	if c.Email == "" {
		c.Email = c.Profile.Email
	}
	return c, nil
}

// jwtExpiry is the exp claim of a JWT access token (zero when it is none or has none).
func jwtExpiry(tok string) time.Time {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var c struct {
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &c) != nil || c.Exp <= 0 || c.Exp > 1e12 {
		return time.Time{}
	}
	return time.Unix(int64(c.Exp), 0)
}

// codexAnswer is the token endpoint's answer to a code exchange or a refresh.
type codexAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	IDToken      string `json:"id_token"`
	ExpiresIn    int64  `json:"expires_in"`
}

// expiresAt is when the answer's access token stops working: expires_in when the answer names
// it, else the access token's own exp claim (the Codex CLI reads that), else an hour.
func (a codexAnswer) expiresAt(now time.Time) time.Time {
	if a.ExpiresIn > 0 {
		return now.Add(time.Duration(a.ExpiresIn) * time.Second)
	}
	if exp := jwtExpiry(a.AccessToken); exp.After(now) {
		return exp
	}
	return now.Add(codexDefaultExpires)
}

// signedIn is the credential of a sign-in's answer: it must carry a refresh token and an
// id_token naming the ChatGPT account, whose id every call to the Codex backend needs.
func (a codexAnswer) signedIn(now time.Time) (catalog.OAuthCredential, error) {
	if a.RefreshToken == "" {
		return catalog.OAuthCredential{}, errors.New("the answer has no refresh token")
	}
	if a.IDToken == "" {
		return catalog.OAuthCredential{}, errs.New(errs.Upstream, "codex.no_account", "the answer has no id_token")
	}
	c, err := parseIDToken(a.IDToken)
	if err != nil {
		return catalog.OAuthCredential{}, errs.New(errs.Upstream, "codex.no_account", err.Error())
	}
	if c.Auth.AccountID == "" {
		return catalog.OAuthCredential{}, errs.New(errs.Upstream, "codex.no_account", "the id_token has no "+codexAuthClaim+" chatgpt_account_id")
	}
	return catalog.OAuthCredential{AccessToken: catalog.Secret(a.AccessToken), RefreshToken: catalog.Secret(a.RefreshToken),
		IDToken: catalog.Secret(a.IDToken), ExpiresAt: a.expiresAt(now), RefreshedAt: now,
		Account: catalog.OAuthAccount{UUID: c.Auth.AccountID, Email: c.Email, Plan: c.Auth.PlanType}}, nil
}

// refreshed is the credential that follows prev after a refresh. OpenAI may or may not rotate
// the refresh token and send a new id_token; what the answer leaves out stays. The account stays
// too; only its plan follows a new id_token (an upgrade, a lapsed subscription).
func (a codexAnswer) refreshed(now time.Time, prev catalog.OAuthCredential) catalog.OAuthCredential {
	c := catalog.OAuthCredential{AccessToken: catalog.Secret(a.AccessToken), RefreshToken: prev.RefreshToken,
		IDToken: prev.IDToken, ExpiresAt: a.expiresAt(now), RefreshedAt: now, Account: prev.Account}
	if a.RefreshToken != "" {
		c.RefreshToken = catalog.Secret(a.RefreshToken)
	}
	if a.IDToken != "" {
		c.IDToken = catalog.Secret(a.IDToken)
		if claims, err := parseIDToken(a.IDToken); err == nil && claims.Auth.PlanType != "" {
			c.Account.Plan = claims.Auth.PlanType
		}
	}
	return c
}

// authPost makes one call to OpenAI's auth server: a form body for the token endpoint, JSON for
// the device endpoints. A redirect is a failure and is never followed (send).
func (s *Service) authPost(ctx context.Context, target string, body map[string]string, form bool) (int, http.Header, []byte, error) {
	var rd io.Reader
	ctype := "application/json"
	if form {
		v := url.Values{}
		for k, x := range body {
			v.Set(k, x)
		}
		rd, ctype = strings.NewReader(v.Encode()), "application/x-www-form-urlencoded"
	} else {
		b, _ := json.Marshal(body) // plain strings: cannot fail
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Accept", "application/json")
	return s.send(req, "OpenAI auth server", bodySecrets(body))
}

// authError reads a refused call's answer: OAuth's {"error": CODE, "error_description": …} or
// OpenAI's {"error": {"code", "type", "message"}}, scrubbed of what the call sent.
func (s *Service) authError(status int, header http.Header, raw []byte, body map[string]string) *tokenError {
	te := &tokenError{status: status, retryAfter: retryAfter(header.Get("Retry-After"), s.opt.Clock.Now())}
	var e struct {
		Error            json.RawMessage `json:"error"`
		ErrorDescription string          `json:"error_description"`
		Code             string          `json:"code"`
		Message          string          `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil {
		var code string
		var obj struct {
			Code    string `json:"code"`
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		switch {
		case len(e.Error) == 0:
		case json.Unmarshal(e.Error, &code) == nil:
			te.code, te.message = code, e.ErrorDescription
		case json.Unmarshal(e.Error, &obj) == nil:
			te.code, te.message = firstNonEmpty(obj.Code, obj.Type), obj.Message
		}
		te.code, te.message = firstNonEmpty(te.code, e.Code), firstNonEmpty(te.message, e.Message)
	}
	// The server may echo what it was sent (a refresh token, a code, a device id): none of it goes on.
	secrets := bodySecrets(body)
	te.code, te.message = redact.Clip(te.code, 80, secrets...), redact.Clip(te.message, 200, secrets...)
	return te
}

// reason is what a refused call said, for a message that names the endpoint itself.
func (e *tokenError) reason() string {
	switch {
	case e.code != "" && e.message != "":
		return e.code + ": " + e.message
	case e.code != "" || e.message != "":
		return e.code + e.message
	}
	return "HTTP " + strconv.Itoa(e.status)
}

// codexToken posts one token request (form body) and reads the answer.
func (s *Service) codexToken(ctx context.Context, cfg settings.CodexOAuth, body map[string]string) (codexAnswer, error) {
	status, header, raw, err := s.authPost(ctx, cfg.TokenURL, body, true)
	if err != nil {
		return codexAnswer{}, err
	}
	if status != http.StatusOK {
		return codexAnswer{}, s.authError(status, header, raw, body)
	}
	var a codexAnswer
	if err := json.Unmarshal(raw, &a); err != nil || a.AccessToken == "" {
		return codexAnswer{}, errors.New("token endpoint: the answer has no access token")
	}
	return a, nil
}

// codexExchange trades an authorization code and its PKCE verifier for the account's tokens;
// redirect is the one the code was issued for.
func (s *Service) codexExchange(ctx context.Context, cfg settings.CodexOAuth, code, verifier, redirect string) (catalog.OAuthCredential, error) {
	now := s.opt.Clock.Now()
	a, err := s.codexToken(ctx, cfg, map[string]string{"grant_type": "authorization_code", "client_id": cfg.ClientID,
		"code": code, "redirect_uri": redirect, "code_verifier": verifier})
	if err != nil {
		return catalog.OAuthCredential{}, errs.Wrap(err, errs.Upstream, "codex.exchange_failed", err.Error())
	}
	cred, err := a.signedIn(now)
	if err != nil {
		if e := errs.As(err); e != nil {
			return catalog.OAuthCredential{}, e
		}
		return catalog.OAuthCredential{}, errs.Wrap(err, errs.Upstream, "codex.exchange_failed", err.Error())
	}
	return cred, nil
}

// refreshCodex makes one refresh of a ChatGPT account. It sends no scope: asking for scopes
// again can invalidate the account's other refresh token families (the Codex CLI's own sign-in
// on the operator's machine).
func (s *Service) refreshCodex(ctx context.Context, cred catalog.OAuthCredential, now time.Time) (catalog.OAuthCredential, error) {
	cfg := s.opt.Settings.Snapshot().Codex()
	a, err := s.codexToken(ctx, cfg, map[string]string{"grant_type": "refresh_token",
		"refresh_token": cred.RefreshToken.Reveal(), "client_id": cfg.ClientID})
	if err != nil {
		return catalog.OAuthCredential{}, err
	}
	return a.refreshed(now, cred), nil
}

func codexConfig(cfg settings.CodexOAuth) *oauth2.Config {
	return &oauth2.Config{ClientID: cfg.ClientID, RedirectURL: cfg.RedirectURI, Scopes: cfg.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: cfg.AuthorizeURL, TokenURL: cfg.TokenURL}}
}

// StartCodex begins a ChatGPT sign-in for provider ("" = codex): authorization code with PKCE
// (S256) and the Codex CLI's loopback redirect. The browser opens AuthURL, signs in and is sent
// to http://localhost:1455/auth/callback?code=…&state=…, which fails unless the gateway runs on
// that machine; the operator pastes that address back. name is the connection name for a new
// account ("" = the next free chatgpt-N); an account signed in before keeps its connection.
func (s *Service) StartCodex(provider, name string) (SignIn, error) {
	provider, name, err := s.accountTarget(catalog.TypeCodex, provider, name)
	if err != nil {
		return SignIn{}, err
	}
	// The Codex CLI's parameters: organizations in the id_token, the simplified consent page,
	// and prompt=login so several accounts sign in one after another, each with its own refresh
	// token family, instead of the browser's current session being taken again.
	return s.startSignIn(catalog.TypeCodex, provider, name, codexConfig(s.opt.Settings.Snapshot().Codex()),
		oauth2.SetAuthURLParam("id_token_add_organizations", "true"),
		oauth2.SetAuthURLParam("codex_cli_simplified_flow", "true"),
		oauth2.SetAuthURLParam("originator", "codex_cli_rs"),
		oauth2.SetAuthURLParam("prompt", "login")), nil
}

// CompleteCodex finishes a ChatGPT sign-in with what the operator pasted: the whole callback
// address the browser was sent to, or CODE#STATE. The state must be one StartCodex gave out
// within SignInTTL, and is used once. The account's connection is created, or, when the account
// (by its ChatGPT account id) is already there, updated in place; created reports which.
func (s *Service) CompleteCodex(ctx context.Context, pasted string) (catalog.Connection, bool, error) {
	if refused := callbackError(pasted); refused != "" {
		return catalog.Connection{}, false, errs.Field("code", "codex.signin_refused", refused)
	}
	code, p, err := s.pastedSignIn(pasted, catalog.TypeCodex, "codex.code_missing", "codex.state_missing")
	if err != nil {
		return catalog.Connection{}, false, err
	}
	cfg := s.opt.Settings.Snapshot().Codex()
	// The code is exchanged with the redirect it was issued for, even if the setting changed
	// since the sign-in started.
	redirect := cfg.RedirectURI
	if u, err := url.Parse(p.authURL); err == nil && u.Query().Get("redirect_uri") != "" {
		redirect = u.Query().Get("redirect_uri")
	}
	cred, err := s.codexExchange(ctx, cfg, code, p.verifier, redirect)
	if err != nil {
		s.opt.Log.Warn("ChatGPT sign-in code exchange failed", "provider", p.provider, "error", err)
		return catalog.Connection{}, false, err
	}
	conn, created, err := s.opt.Catalog.SaveOAuthAccount(ctx, p.provider, p.name, cred)
	if err != nil {
		return catalog.Connection{}, false, err
	}
	s.opt.Log.Info("ChatGPT account signed in", "provider", p.provider, "connection_id", conn.ID, "created", created,
		"plan", cred.Account.Plan)
	return conn, created, nil
}

// callbackError is the error a pasted callback address carries when the sign-in was refused
// (…?error=access_denied&error_description=…), scrubbed; "" for anything else.
func callbackError(pasted string) string {
	u, err := url.Parse(strings.TrimSpace(pasted))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	q := u.Query()
	if q.Get("error") == "" || q.Get("code") != "" {
		return ""
	}
	return redact.Clip(firstNonEmpty(q.Get("error_description"), q.Get("error")), 200)
}

// StartCodexDevice begins a ChatGPT device sign-in for owner on provider ("" = codex): OpenAI
// hands out a user code that the person enters at the device page while signed in. The device
// id stays in the flow table; the operator polls by flow id (PollCodexDevice).
func (s *Service) StartCodexDevice(ctx context.Context, provider, name, owner string) (DeviceFlow, error) {
	provider, name, err := s.accountTarget(catalog.TypeCodex, provider, name)
	if err != nil {
		return DeviceFlow{}, err
	}
	cfg := s.opt.Settings.Snapshot().Codex()
	body := map[string]string{"client_id": cfg.ClientID}
	status, header, raw, err := s.authPost(ctx, cfg.DeviceUserCodeURL, body, false)
	if err == nil && status != http.StatusOK {
		err = s.authError(status, header, raw, body)
	}
	if err != nil {
		s.opt.Log.Warn("ChatGPT device sign-in could not start", "provider", provider, "error", err)
		return DeviceFlow{}, errs.Wrap(err, errs.Upstream, "codex.device_start_failed", err.Error())
	}
	var a struct {
		DeviceAuthID string          `json:"device_auth_id"`
		UserCode     string          `json:"user_code"`
		UserCodeAlt  string          `json:"usercode"`
		Interval     json.RawMessage `json:"interval"`
		ExpiresIn    json.RawMessage `json:"expires_in"`
		ExpiresAt    string          `json:"expires_at"`
	}
	if err := json.Unmarshal(raw, &a); err != nil || a.DeviceAuthID == "" || firstNonEmpty(a.UserCode, a.UserCodeAlt) == "" {
		return DeviceFlow{}, errs.New(errs.Upstream, "codex.device_start_failed", "the answer has no device id or user code")
	}
	now := s.opt.Clock.Now()
	interval := codexDefaultPoll
	if n, ok := jsonNumber(a.Interval); ok && n > 0 {
		interval = min(max(time.Duration(n*float64(time.Second)), codexMinPoll), codexMaxPoll)
	}
	expires := now.Add(codexDeviceTTL)
	if n, ok := jsonNumber(a.ExpiresIn); ok && n > 0 {
		expires = now.Add(min(time.Duration(n*float64(time.Second)), codexDeviceMaxTTL))
	} else if t, err := time.Parse(time.RFC3339, a.ExpiresAt); err == nil && t.After(now) {
		expires = t
		if limit := now.Add(codexDeviceMaxTTL); t.After(limit) {
			expires = limit
		}
	}
	f := s.addFlow(&deviceFlow{kind: catalog.TypeCodex, owner: owner, provider: provider, name: name,
		userCode: firstNonEmpty(a.UserCode, a.UserCodeAlt), url: cfg.DeviceVerificationURL, secret: a.DeviceAuthID,
		interval: interval, expires: expires})
	s.opt.Log.Info("ChatGPT device sign-in started", "provider", provider, "interval", interval, "expires_at", expires)
	return f, nil
}

// jsonNumber reads a number that OpenAI may send as a JSON number or as a string ("5").
func jsonNumber(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		n, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		return n, err == nil && !math.IsNaN(n) && !math.IsInf(n, 0)
	}
	return 0, false
}

// PollCodexDevice polls owner's ChatGPT device sign-in: at most one call to OpenAI per interval.
// Once the person approved, OpenAI answers an authorization code with the PKCE verifier it made
// for it, which is exchanged at the token endpoint with the device redirect.
func (s *Service) PollCodexDevice(ctx context.Context, flow, owner string) (DevicePoll, error) {
	return s.pollFlow(ctx, catalog.TypeCodex, flow, owner, s.codexDeviceStep)
}

// codexDeviceStep is one poll of OpenAI's device token endpoint. 403 and 404 mean not approved
// yet (as the Codex CLI reads them); a 429 or slow_down asks for a longer interval.
func (s *Service) codexDeviceStep(ctx context.Context, f *deviceFlow) (pollStep, catalog.OAuthCredential, error) {
	cfg := s.opt.Settings.Snapshot().Codex()
	body := map[string]string{"device_auth_id": f.secret, "user_code": f.userCode}
	status, header, raw, err := s.authPost(ctx, cfg.DeviceTokenURL, body, false)
	if err != nil {
		var te *tokenError
		if !errors.As(err, &te) && ctx.Err() != nil {
			return stepPending, catalog.OAuthCredential{}, nil // the operator left; the flow waits for the next poll
		}
		s.opt.Log.Warn("ChatGPT device sign-in poll failed", "provider", f.provider, "error", err)
		return 0, catalog.OAuthCredential{}, errs.Wrap(err, errs.Upstream, "codex.device_failed", err.Error())
	}
	if status == http.StatusOK {
		var a struct {
			Code     string `json:"authorization_code"`
			Verifier string `json:"code_verifier"`
		}
		if err := json.Unmarshal(raw, &a); err != nil || a.Code == "" || a.Verifier == "" {
			return 0, catalog.OAuthCredential{}, errs.New(errs.Upstream, "codex.device_failed", "the answer has no authorization code")
		}
		cred, err := s.codexExchange(ctx, cfg, a.Code, a.Verifier, cfg.DeviceRedirectURI)
		if err != nil {
			s.opt.Log.Warn("ChatGPT device sign-in code exchange failed", "provider", f.provider, "error", err)
			return 0, catalog.OAuthCredential{}, err
		}
		return stepDone, cred, nil
	}
	te := s.authError(status, header, raw, body)
	code := strings.ToLower(te.code)
	switch {
	case status == http.StatusTooManyRequests || code == "slow_down":
		return stepSlowDown, catalog.OAuthCredential{}, nil
	case status == http.StatusForbidden || status == http.StatusNotFound || code == "authorization_pending":
		return stepPending, catalog.OAuthCredential{}, nil
	case strings.Contains(code, "expired"):
		return 0, catalog.OAuthCredential{}, errs.New(errs.Upstream, "oauth.device_expired")
	case status >= 400 && status < 500:
		return 0, catalog.OAuthCredential{}, errs.New(errs.Upstream, "oauth.device_denied", te.reason())
	default:
		s.opt.Log.Warn("ChatGPT device sign-in poll failed", "provider", f.provider, "error", te)
		return 0, catalog.OAuthCredential{}, errs.Wrap(te, errs.Upstream, "codex.device_failed", te.reason())
	}
}
