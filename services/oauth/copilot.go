package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/redact"
	"switchyard/services/settings"
)

// GitHub Copilot accounts (provider type copilot). The sign-in is GitHub's device flow with the
// Copilot editor plugins' public client; what it yields is a GitHub token (gho_…, which lives
// until revoked, or a ghu_… with a refresh token when the client issues expiring tokens). Copilot
// itself is never called with it: the token is exchanged at copilot_internal/v2/token for a
// short-lived Copilot token, which names the API address to use. That token is held in memory
// per account and exchanged anew once GitHub's refresh_in has passed, one exchange at a time and
// in the background: requests keep using the current token until its expires_at, and wait for
// an exchange only when there is no working token (the first request after a start, a token
// past its expiry, or one Copilot refused with 401).

// DefaultCopilotAPI is Copilot's API address when the token answer names none.
const DefaultCopilotAPI = "https://api.githubcopilot.com"

// deviceGrant is the grant type of a device code poll (RFC 8628).
const deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

// copilotBackoff is how long no new exchange is tried after one failed; meanwhile a token that
// still works is used and requests that have none fail over at once.
const copilotBackoff = 30 * time.Second

// copilotHold is an account's Copilot token: the one in use and the exchange in flight. It lives
// with the account and goes with it.
type copilotHold struct {
	token   string
	apiBase string
	refresh time.Time // from here a new token is exchanged (GitHub's refresh_in)
	expires time.Time // the token stops working (GitHub's expires_at)
	// old is the token before this one: requests still carrying it may see it echoed.
	old     string
	flight  *copilotFlight
	retryAt time.Time // after a failed exchange: none before
	lastErr error
}

// copilotFlight is one exchange in progress; done closes when it ended.
type copilotFlight struct {
	done  chan struct{}
	token string
	base  string
	err   error
}

// secrets appends the held Copilot tokens to out.
func (h *copilotHold) secrets(out []string) []string {
	return append(out, h.token, h.old)
}

// copilotAnswer is the token exchange's answer.
type copilotAnswer struct {
	Token     string `json:"token"`
	ExpiresAt int64  `json:"expires_at"`
	RefreshIn int64  `json:"refresh_in"`
	SKU       string `json:"sku"`
	Endpoints struct {
		API string `json:"api"`
	} `json:"endpoints"`
}

// copilotRefusal is an exchange GitHub refused for good: the GitHub token is dead (401) or the
// account has no Copilot (403, 404). The account is then terminal until it signs in again (or,
// for Copilot access, an operator resets its state).
type copilotRefusal struct{ msg errs.Msg }

func (e *copilotRefusal) Error() string { return e.msg.String() }

// githubAnswer is what GitHub's OAuth endpoints answer: a token, or an error inside a 200.
type githubAnswer struct {
	AccessToken      string `json:"access_token"`
	TokenType        string `json:"token_type"`
	Scope            string `json:"scope"`
	RefreshToken     string `json:"refresh_token"`
	ExpiresIn        int64  `json:"expires_in"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
	Interval         int64  `json:"interval"`
}

// StartCopilotDevice begins a GitHub device sign-in for owner on provider ("" = copilot). name
// is the connection name for a new account ("" = the next free copilot-N).
func (s *Service) StartCopilotDevice(ctx context.Context, provider, name, owner string) (DeviceFlow, error) {
	provider, name, err := s.accountTarget(catalog.TypeCopilot, provider, name)
	if err != nil {
		return DeviceFlow{}, err
	}
	cfg := s.opt.Settings.Snapshot().Copilot()
	var ans struct {
		DeviceCode      string `json:"device_code"`
		UserCode        string `json:"user_code"`
		VerificationURI string `json:"verification_uri"`
		ExpiresIn       int64  `json:"expires_in"`
		Interval        int64  `json:"interval"`
		Error           string `json:"error"`
		ErrorDesc       string `json:"error_description"`
	}
	form := url.Values{"client_id": {cfg.ClientID}, "scope": {strings.Join(cfg.Scopes, " ")}}
	if err := s.githubPost(ctx, cfg.DeviceCodeURL, form, nil, &ans); err != nil {
		s.opt.Log.Warn("GitHub device sign-in could not start", "provider", provider, "error", err)
		return DeviceFlow{}, errs.Wrap(err, errs.Upstream, "copilot.device_failed", err.Error())
	}
	switch {
	case ans.Error != "":
		text := redact.String(strings.TrimSpace(ans.Error+": "+ans.ErrorDesc), ans.DeviceCode)
		return DeviceFlow{}, errs.New(errs.Upstream, "copilot.device_failed", text)
	case ans.DeviceCode == "" || ans.UserCode == "":
		return DeviceFlow{}, errs.New(errs.Upstream, "copilot.device_failed", "the answer has no device code")
	}
	interval := time.Duration(ans.Interval) * time.Second
	if interval <= 0 {
		interval = 5 * time.Second // RFC 8628's default
	}
	ttl := time.Duration(ans.ExpiresIn) * time.Second
	if ttl <= 0 {
		ttl = 15 * time.Minute // GitHub's device codes live 15 minutes
	}
	verify := ans.VerificationURI
	if u, err := url.Parse(verify); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		verify = "https://github.com/login/device" // the page shows the address as a link: never another kind
	}
	s.opt.Log.Info("GitHub device sign-in started", "provider", provider)
	return s.addFlow(&deviceFlow{kind: catalog.TypeCopilot, owner: owner, provider: provider, name: name,
		userCode: ans.UserCode, url: verify, secret: ans.DeviceCode, interval: interval,
		expires: s.opt.Clock.Now().Add(ttl)}), nil
}

// PollCopilotDevice polls owner's GitHub device sign-in. Once GitHub hands out the token, the
// account is named (GitHub's user) and its Copilot access checked with one token exchange: an
// account without Copilot is refused with GitHub's words and nothing is saved.
func (s *Service) PollCopilotDevice(ctx context.Context, flow, owner string) (DevicePoll, error) {
	var account string // the account whose entitlement check left a token (seeds)
	step := func(ctx context.Context, f *deviceFlow) (pollStep, catalog.OAuthCredential, error) {
		cfg := s.opt.Settings.Snapshot().Copilot()
		form := url.Values{"client_id": {cfg.ClientID}, "device_code": {f.secret}, "grant_type": {deviceGrant}}
		var ans githubAnswer
		if err := s.githubPost(ctx, cfg.AccessTokenURL, form, []string{f.secret}, &ans); err != nil {
			var te *tokenError
			switch {
			case errors.As(err, &te) && te.status == http.StatusTooManyRequests:
				return stepSlowDown, catalog.OAuthCredential{}, nil
			case errors.As(err, &te) && te.status < 500: // refused, or a redirect (never followed)
				return 0, catalog.OAuthCredential{}, errs.Wrap(err, errs.Upstream, "copilot.signin_failed", err.Error())
			}
			// GitHub down for a moment, or the network: the code is still good; the next poll asks again.
			s.opt.Log.Warn("GitHub device poll failed; polling on", "provider", f.provider, "error", err)
			return stepPending, catalog.OAuthCredential{}, nil
		}
		switch ans.Error {
		case "":
		case "authorization_pending":
			return stepPending, catalog.OAuthCredential{}, nil
		case "slow_down":
			if ans.Interval > 0 { // GitHub names the interval it wants: the larger of it and ours + 5 s
				s.mu.Lock()
				f.interval = max(f.interval, time.Duration(ans.Interval)*time.Second-slowDownStep)
				s.mu.Unlock()
			}
			return stepSlowDown, catalog.OAuthCredential{}, nil
		case "expired_token":
			return 0, catalog.OAuthCredential{}, &errs.Error{Code: errs.NotFound, Status: http.StatusGone,
				Reason: "device_expired", Msg: errs.M("oauth.device_expired")}
		case "access_denied":
			return 0, catalog.OAuthCredential{}, &errs.Error{Code: errs.Forbidden, Reason: "device_denied",
				Msg: errs.M("oauth.device_denied", redact.String(firstNonEmpty(ans.ErrorDescription, ans.Error), f.secret))}
		default:
			text := redact.String(strings.TrimSpace(ans.Error+": "+ans.ErrorDescription), f.secret)
			return 0, catalog.OAuthCredential{}, errs.New(errs.Upstream, "copilot.signin_failed", text)
		}
		if ans.AccessToken == "" {
			return 0, catalog.OAuthCredential{}, errs.New(errs.Upstream, "copilot.signin_failed", "the answer has no access token")
		}
		now := s.opt.Clock.Now()
		cred := githubCredential(ans, now, catalog.OAuthCredential{})
		login, id, err := s.githubUser(ctx, cfg, ans.AccessToken)
		if err != nil {
			return 0, catalog.OAuthCredential{}, errs.Wrap(err, errs.Upstream, "copilot.user_failed", err.Error())
		}
		cred.Account = catalog.OAuthAccount{UUID: "github:" + strconv.FormatInt(id, 10), Email: login}
		tok, err := s.exchangeCopilot(ctx, cfg, ans.AccessToken)
		if err != nil {
			var te *tokenError
			if errors.As(err, &te) && (te.status == http.StatusForbidden || te.status == http.StatusNotFound) {
				s.opt.Log.Warn("GitHub account without Copilot refused", "provider", f.provider, "error", err)
				return 0, catalog.OAuthCredential{}, &errs.Error{Code: errs.Forbidden, Reason: "copilot_not_entitled",
					Msg: errs.M("copilot.not_entitled", te.message)}
			}
			return 0, catalog.OAuthCredential{}, errs.Wrap(err, errs.Upstream, "copilot.exchange_failed", err.Error())
		}
		if tok.SKU != "" {
			cred.Account.Plan = tok.SKU
		}
		// The entitlement check's token serves the account's first requests. It is kept before
		// the account is saved: saving starts the model discovery, whose call must find it.
		s.mu.Lock()
		s.seeds[cred.Account.UUID] = tok
		s.mu.Unlock()
		account = cred.Account.UUID
		return stepDone, cred, nil
	}
	res, err := s.pollFlow(ctx, catalog.TypeCopilot, flow, owner, step)
	if account != "" {
		s.seedCopilot(res.Conn.ID, account, err == nil && !res.Pending)
	}
	return res, err
}

// githubCredential is a GitHub token answer as the credential that follows prev. A token
// without refresh token (the classic OAuth token) never expires and is never refreshed; one
// with a refresh token expires after expires_in (8 h when the answer names none).
func githubCredential(ans githubAnswer, now time.Time, prev catalog.OAuthCredential) catalog.OAuthCredential {
	c := catalog.OAuthCredential{AccessToken: catalog.Secret(ans.AccessToken), RefreshToken: catalog.Secret(ans.RefreshToken),
		RefreshedAt: now, Account: prev.Account}
	if c.RefreshToken == "" {
		c.RefreshToken = prev.RefreshToken
	}
	switch {
	case ans.ExpiresIn > 0:
		c.ExpiresAt = now.Add(time.Duration(ans.ExpiresIn) * time.Second)
	case c.RefreshToken != "":
		c.ExpiresAt = now.Add(8 * time.Hour)
	}
	return c
}

// refreshGitHub makes one refresh of a GitHub token that expires (one with a refresh token).
// GitHub answers a refused refresh with 200 and an error code (bad_refresh_token): it becomes
// the tokenError a 400 would have been, so that failed() classifies it.
func (s *Service) refreshGitHub(ctx context.Context, cred catalog.OAuthCredential, now time.Time) (catalog.OAuthCredential, error) {
	cfg := s.opt.Settings.Snapshot().Copilot()
	secrets := []string{cred.RefreshToken.Reveal(), cred.AccessToken.Reveal()}
	form := url.Values{"client_id": {cfg.ClientID}, "grant_type": {"refresh_token"}, "refresh_token": {cred.RefreshToken.Reveal()}}
	var ans githubAnswer
	if err := s.githubPost(ctx, cfg.AccessTokenURL, form, secrets, &ans); err != nil {
		return catalog.OAuthCredential{}, err
	}
	if ans.Error != "" {
		return catalog.OAuthCredential{}, &tokenError{status: http.StatusBadRequest, code: redact.String(ans.Error, secrets...),
			message: redact.Clip(ans.ErrorDescription, 200, secrets...)}
	}
	if ans.AccessToken == "" {
		return catalog.OAuthCredential{}, fmt.Errorf("token endpoint: the answer has no access token")
	}
	return githubCredential(ans, now, cred), nil
}

// githubPost posts a form to one of GitHub's OAuth endpoints and decodes the JSON answer into
// out. A status other than 200 is a *tokenError with GitHub's words, secrets removed; a
// redirect is one too, never followed. OAuth errors that come inside a 200 are out's to read.
func (s *Service) githubPost(ctx context.Context, target string, form url.Values, secrets []string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", settings.CopilotUserAgent)
	return s.githubCall(req, secrets, out)
}

// githubCall makes one call to GitHub and decodes its 200 answer into out.
func (s *Service) githubCall(req *http.Request, secrets []string, out any) error {
	status, header, raw, err := s.send(req, req.URL.Host, secrets)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		te := &tokenError{status: status, retryAfter: retryAfter(header.Get("Retry-After"), s.opt.Clock.Now())}
		var e struct {
			Error        string `json:"error"`
			ErrorDesc    string `json:"error_description"`
			Message      string `json:"message"`
			ErrorDetails struct {
				Message        string `json:"message"`
				NotificationID string `json:"notification_id"`
			} `json:"error_details"`
		}
		if json.Unmarshal(raw, &e) == nil {
			te.code = firstNonEmpty(e.Error, e.ErrorDetails.NotificationID)
			te.message = firstNonEmpty(e.ErrorDesc, e.ErrorDetails.Message, e.Message)
		}
		te.code = redact.Clip(te.code, 80, secrets...)
		te.message = redact.Clip(te.message, 200, secrets...)
		return te
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: the answer is not JSON", req.URL.Host)
	}
	return nil
}

// githubUser names the GitHub account of token: its login and numeric id.
func (s *Service) githubUser(ctx context.Context, cfg settings.CopilotOAuth, token string) (login string, id int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.UserURL, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Authorization", "token "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("User-Agent", settings.CopilotUserAgent)
	var u struct {
		Login string `json:"login"`
		ID    int64  `json:"id"`
	}
	if err := s.githubCall(req, []string{token}, &u); err != nil {
		return "", 0, err
	}
	if u.ID <= 0 || u.Login == "" {
		return "", 0, errors.New("the user answer names no account")
	}
	return u.Login, u.ID, nil
}

// exchangeCopilot trades a GitHub token for a Copilot token, as the Copilot Chat extension does.
func (s *Service) exchangeCopilot(ctx context.Context, cfg settings.CopilotOAuth, github string) (copilotAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.CopilotTokenURL, nil)
	if err != nil {
		return copilotAnswer{}, err
	}
	req.Header.Set("Authorization", "token "+github)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Editor-Version", cfg.EditorVersion)
	req.Header.Set("Editor-Plugin-Version", settings.CopilotPluginVersion)
	req.Header.Set("User-Agent", settings.CopilotUserAgent)
	req.Header.Set("X-GitHub-Api-Version", settings.GitHubAPIVersion)
	var ans copilotAnswer
	if err := s.githubCall(req, []string{github}, &ans); err != nil {
		return copilotAnswer{}, err
	}
	if ans.Token == "" {
		return copilotAnswer{}, errors.New("the Copilot token answer has no token")
	}
	return ans, nil
}

// copilotTimes reads a token answer's lifetime: when to exchange the next token (refresh_in
// from now) and when this one stops working (expires_at). When expires_at is missing, or
// already past by this clock (the two clocks disagree), refresh_in alone rules, so a skewed
// clock never makes every request exchange.
func copilotTimes(now time.Time, ans copilotAnswer) (refresh, expires time.Time) {
	expires = time.Unix(ans.ExpiresAt, 0)
	switch {
	case ans.RefreshIn > 0:
		refresh = now.Add(time.Duration(ans.RefreshIn) * time.Second)
	case ans.ExpiresAt > 0 && expires.Sub(now) > 10*time.Minute:
		refresh = expires.Add(-5 * time.Minute)
	default:
		refresh = now.Add(5 * time.Minute)
	}
	if ans.ExpiresAt <= 0 || !expires.After(refresh) {
		expires = refresh.Add(time.Minute)
	}
	return refresh, expires
}

// apiBase is the API address a token answer names, when it is one; else Copilot's own.
func apiBase(ans copilotAnswer) string {
	u, err := url.Parse(ans.Endpoints.API)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return DefaultCopilotAPI
	}
	return strings.TrimRight(ans.Endpoints.API, "/")
}

// CopilotToken returns the connection's Copilot token (exchanged from its GitHub token, cached)
// and the API base address its token answer named.
func (s *Service) CopilotToken(ctx context.Context, conn *catalog.ConnEntry) (token, apiBase string, err error) {
	return s.copilotToken(ctx, conn, "")
}

// CopilotRejected is told that Copilot answered 401 to rejected; it exchanges once more (unless
// another request already did) and returns the token to try again with.
func (s *Service) CopilotRejected(ctx context.Context, conn *catalog.ConnEntry, rejected string) (token, apiBase string, err error) {
	return s.copilotToken(ctx, conn, rejected)
}

func (s *Service) copilotToken(ctx context.Context, conn *catalog.ConnEntry, rejected string) (string, string, error) {
	now := s.opt.Clock.Now()
	s.mu.Lock()
	a := s.accounts[conn.ID]
	if a == nil {
		if conn.OAuth == nil {
			s.mu.Unlock()
			return "", "", ErrNoToken
		}
		a = &account{kind: conn.ProviderType, cred: *conn.OAuth, state: RefreshState{ConnectionID: conn.ID, Rev: conn.OAuth.Rev}}
		s.accounts[conn.ID] = a
	}
	if seed, ok := s.seeds[a.cred.Account.UUID]; ok && a.cred.Account.UUID != "" {
		delete(s.seeds, a.cred.Account.UUID)
		a.takeSeed(seed, now)
	}
	h := &a.copilot
	valid := h.token != "" && now.Before(h.expires)
	switch {
	case a.state.Expired: // the GitHub token is dead: only a sign-in helps
		s.mu.Unlock()
		return "", "", ErrNoToken
	case rejected != "" && valid && h.token != rejected: // another request exchanged meanwhile
		token, base := h.token, h.apiBase
		s.mu.Unlock()
		return token, base, nil
	case rejected == "" && valid:
		// Past refresh_in the successor is exchanged in the background (unless an exchange runs
		// or failed a moment ago); the token in hand works until expires_at, so nobody waits.
		if !now.Before(h.refresh) && h.flight == nil && !now.Before(h.retryAt) {
			s.startCopilotLocked(conn, a)
		}
		token, base := h.token, h.apiBase
		s.mu.Unlock()
		return token, base, nil
	case h.flight == nil && now.Before(h.retryAt):
		err := h.lastErr
		s.mu.Unlock()
		if err == nil {
			err = ErrNoToken
		}
		return "", "", err
	}
	if rejected != "" && h.token == rejected { // refused: no other request takes it any more
		h.old, h.token = h.token, ""
	}
	f := s.startCopilotLocked(conn, a)
	s.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
	if f.err == nil {
		return f.token, f.base, nil
	}
	if rejected == "" {
		s.mu.Lock()
		token, base, exp := h.token, h.apiBase, h.expires
		s.mu.Unlock()
		if token != "" && s.opt.Clock.Now().Before(exp) {
			return token, base, nil // the exchange failed, but the current token still works for now
		}
	}
	return "", "", f.err
}

// startCopilotLocked starts the account's token exchange, or returns the one in flight. It runs
// detached from the request that needed it (a client leaving must not cut it for the others
// waiting) and ends within refreshTimeout. s.mu is held.
func (s *Service) startCopilotLocked(conn *catalog.ConnEntry, a *account) *copilotFlight {
	if a.copilot.flight != nil {
		return a.copilot.flight
	}
	f := &copilotFlight{done: make(chan struct{})}
	a.copilot.flight = f
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		ans, github, err := s.mintShared(ctx, conn, a)
		now := s.opt.Clock.Now()
		s.mu.Lock()
		h := &a.copilot
		h.flight = nil
		var next time.Time
		switch {
		case err == nil:
			h.set(ans, now)
			f.token, f.base, next = h.token, h.apiBase, h.refresh
		case github != "" && a.cred.AccessToken.Reveal() != github:
			// The account signed in again meanwhile: the failure was the old token's.
			f.err = err
		default:
			f.err = err
			h.retryAt, h.lastErr = now.Add(copilotBackoff), err
			var refusal *copilotRefusal
			if errors.As(err, &refusal) && h.token != "" { // refused for good: the token is not used again
				h.old, h.token = h.token, ""
			}
		}
		s.mu.Unlock()
		close(f.done)
		if err == nil {
			s.opt.Log.Info("Copilot token exchanged", "connection_id", conn.ID, "next_exchange", next)
		} else {
			s.opt.Log.Warn("Copilot token exchange failed", "connection_id", conn.ID, "error", err)
		}
	}()
	return f
}

// set holds a new token; s.mu is held.
func (h *copilotHold) set(ans copilotAnswer, now time.Time) {
	if h.token != "" && h.token != ans.Token {
		h.old = h.token
	}
	h.token, h.apiBase = ans.Token, apiBase(ans)
	h.refresh, h.expires = copilotTimes(now, ans)
	h.retryAt, h.lastErr = time.Time{}, nil
}

// seedCopilot ends the seed of a sign-in's account: when the account was saved (saved) and no
// request took the token yet, the account holds it, so its first request needs no exchange.
func (s *Service) seedCopilot(id int64, account string, saved bool) {
	now := s.opt.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	seed, ok := s.seeds[account]
	delete(s.seeds, account)
	if a := s.accounts[id]; ok && saved && a != nil {
		a.takeSeed(seed, now)
	}
}

// takeSeed gives the account a sign-in's Copilot token unless it holds a working one or an
// exchange runs; s.mu is held.
func (a *account) takeSeed(seed copilotAnswer, now time.Time) {
	if h := &a.copilot; h.flight == nil && (h.token == "" || !now.Before(h.expires)) {
		h.set(seed, now)
	}
}

// sharedCopilot is a Copilot token as one replica tells the others: GitHub's answer and when it
// was exchanged, so its refresh_in counts from then.
type sharedCopilot struct {
	Answer      copilotAnswer `json:"answer"`
	ExchangedAt int64         `json:"exchanged_at"` // unix ms
}

// copilotAdoptMargin is the least time before a shared token's refresh_in that makes it worth
// taking instead of exchanging anew.
const copilotAdoptMargin = 30 * time.Second

// mintShared is mintCopilot for one of several replicas sharing a store: under the account's
// lease, a token another replica exchanged a moment ago (before its refresh_in, and not the one
// this replica holds or saw refused) is taken as it is; else this replica exchanges and leaves
// the token for the others. One replica alone exchanges as mintCopilot does.
func (s *Service) mintShared(ctx context.Context, conn *catalog.ConnEntry, a *account) (copilotAnswer, string, error) {
	if s.opt.Leases == nil || s.opt.Shared == nil {
		return s.mintCopilot(ctx, conn, a)
	}
	id := strconv.FormatInt(conn.ID, 10)
	release, err := s.opt.Leases.Acquire(ctx, "copilot_exchange:"+id, refreshTimeout+5*time.Second)
	if err != nil {
		return copilotAnswer{}, "", fmt.Errorf("wait for the Copilot exchange lease: %w", err)
	}
	defer release()
	name := "copilot_token:" + id
	if raw, ok, err := s.opt.Shared.GetValue(ctx, name); err != nil {
		s.opt.Log.Warn("Copilot token of the other replicas unreadable; exchanging", "connection_id", conn.ID, "error", err)
	} else if ok {
		var sh sharedCopilot
		if json.Unmarshal([]byte(raw), &sh) == nil && sh.Answer.Token != "" {
			now := s.opt.Clock.Now()
			refresh, _ := copilotTimes(time.UnixMilli(sh.ExchangedAt), sh.Answer)
			s.mu.Lock()
			held, old := a.copilot.token, a.copilot.old
			s.mu.Unlock()
			if left := refresh.Sub(now); left > copilotAdoptMargin && sh.Answer.Token != held && sh.Answer.Token != old {
				ans := sh.Answer
				ans.RefreshIn = int64(left / time.Second) // from now, as set counts it
				return ans, "", nil
			}
		}
	}
	ans, github, err := s.mintCopilot(ctx, conn, a)
	if err != nil {
		return ans, github, err
	}
	v, _ := json.Marshal(sharedCopilot{Answer: ans, ExchangedAt: s.opt.Clock.Now().UnixMilli()})
	if err := s.opt.Shared.PutValue(ctx, name, string(v)); err != nil {
		s.opt.Log.Warn("Copilot token not left for the other replicas", "connection_id", conn.ID, "error", err)
	}
	return ans, github, nil
}

// mintCopilot makes one exchange for the account. A 401 means the GitHub token is dead; a token
// that expires gets one refresh first (it may have lapsed early), any other is expired at once.
// A 403 or 404 means the account has no Copilot (any more): terminal, with GitHub's words.
// It returns the GitHub token it used.
func (s *Service) mintCopilot(ctx context.Context, conn *catalog.ConnEntry, a *account) (copilotAnswer, string, error) {
	github, err := s.token(ctx, conn, "")
	if err != nil {
		return copilotAnswer{}, "", err
	}
	cfg := s.opt.Settings.Snapshot().Copilot()
	ans, err := s.exchangeCopilot(ctx, cfg, github)
	var te *tokenError
	if errors.As(err, &te) && te.status == http.StatusUnauthorized {
		s.mu.Lock()
		refreshable := !a.cred.SetupToken()
		s.mu.Unlock()
		if refreshable {
			if next, rerr := s.token(ctx, conn, github); rerr == nil && next != github {
				github = next
				ans, err = s.exchangeCopilot(ctx, cfg, github)
			}
		}
	}
	if !errors.As(err, &te) {
		return ans, github, err
	}
	switch te.status {
	case http.StatusUnauthorized:
		msg := errs.M("copilot.github_token_dead", firstNonEmpty(te.message, te.code, "401"))
		s.copilotTerminal(conn.ID, github, msg, true)
		return copilotAnswer{}, github, &copilotRefusal{msg: msg}
	case http.StatusForbidden, http.StatusNotFound:
		msg := errs.M("copilot.not_entitled", firstNonEmpty(te.message, te.code, strconv.Itoa(te.status)))
		s.copilotTerminal(conn.ID, github, msg, false)
		return copilotAnswer{}, github, &copilotRefusal{msg: msg}
	}
	return ans, github, err
}

// copilotTerminal puts the account into the expired state with msg, unless a sign-in replaced
// the GitHub token meanwhile. dead also expires the token holder's account (nothing but a
// sign-in brings a dead GitHub token back); a missing entitlement is left to the connection's
// state, which an operator may reset once the account has Copilot again.
func (s *Service) copilotTerminal(id int64, github string, msg errs.Msg, dead bool) {
	now := s.opt.Clock.Now()
	s.mu.Lock()
	a := s.accounts[id]
	if a == nil || a.cred.AccessToken.Reveal() != github {
		s.mu.Unlock()
		return
	}
	if dead {
		a.state.Expired, a.state.LastError, a.state.LastTry = true, msg.String(), now
		s.persistState(a.state)
	}
	s.mu.Unlock()
	s.opt.Log.Warn("Copilot account terminal", "connection_id", id, "error", msg.String())
	if s.opt.Expire != nil {
		s.opt.Expire.MarkExpired(id, msg.String())
	}
}
