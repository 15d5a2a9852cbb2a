// Package oauth owns subscription accounts — Claude (provider type anthropic), ChatGPT/Codex
// (codex) and GitHub Copilot (copilot): the sign-ins (authorization code with PKCE and paste-back,
// device codes), the token holder that refreshes without ever burning a single-use refresh token,
// Copilot's short-lived token, Claude's usage poller and limit reset call. The engine asks it for a connection's bearer token
// and waits, at most, for the refresh in flight; every other call here runs off the request path.
package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/redact"
	"switchyard/services/resilience"
	"switchyard/services/settings"
	"switchyard/services/statestore"
)

// MaxStrikes failed refreshes in a row make an account expired.
const MaxStrikes = 3

// Refresh back-off: after a failed refresh the next is tried no sooner than StrikeBackoff <<
// (strikes-1); a 429 without Retry-After waits DefaultRetryAfter.
const (
	// MinRefreshGap keeps a token issued moments ago from being refreshed again ahead of its
	// expiry: a token that lives less than the refresh margin would otherwise be refreshed on
	// every use. A 401 or an expired token still refreshes at once.
	MinRefreshGap     = 30 * time.Second
	StrikeBackoff     = 30 * time.Second
	DefaultRetryAfter = 60 * time.Second
	// refreshTimeout bounds one refresh call. It runs detached from the request that needed it:
	// a client leaving must never cut a refresh whose answer carries the only valid token pair.
	refreshTimeout = 30 * time.Second
)

// Catalog is what the service needs of the catalog.
type Catalog interface {
	Registry() *catalog.Registry
	SaveOAuthAccount(ctx context.Context, provider, name string, cred catalog.OAuthCredential) (catalog.Connection, bool, error)
	StoreRefreshed(ctx context.Context, id, prev int64, cred catalog.OAuthCredential) error
	OAuthCredential(ctx context.Context, id int64) (catalog.OAuthCredential, error)
}

// Settings gives the current OAuth client settings.
type Settings interface {
	Snapshot() *settings.OAuthSnapshot
}

// Expirer puts a connection into the expired state for good (resilience.Cooldowns).
type Expirer interface {
	MarkExpired(id int64, message string)
}

// Options configures a Service.
type Options struct {
	Catalog  Catalog
	Settings Settings
	Client   *http.Client
	Clock    clockwork.Clock
	Log      *slog.Logger
	// Store persists the refresh state (strikes, back-off); nil keeps it in memory only.
	Store statestore.Store
	// Expire marks an account expired when its refresh token is dead.
	Expire Expirer
	// Usage receives the usage poller's readings.
	Usage *resilience.Usage
	// Leases makes each refresh exclusive across replicas sharing a store; nil (one replica)
	// leaves the in-process single flight alone in charge.
	Leases Leaser
	// Shared keeps what the replicas sharing a store hand each other (the Copilot token one of
	// them exchanged), sealed at rest; nil on one replica. It is used only with Leases.
	Shared SharedValues
}

// SharedValues are named values in the store the replicas share, sealed at rest.
type SharedValues interface {
	GetValue(ctx context.Context, name string) (value string, ok bool, err error)
	PutValue(ctx context.Context, name, value string) error
}

// Leaser hands out leases shared by the replicas of one store.
type Leaser interface {
	// Acquire waits until this replica holds the named lease, for at most ttl, or ctx ends; the
	// release it returns gives the lease up.
	Acquire(ctx context.Context, name string, ttl time.Duration) (release func(), err error)
}

// noRedirects returns a copy of c (nil: the default client) that hands back a redirect instead of
// following it: a followed redirect would send an OAuth code and its verifier, a refresh token or
// an access token to wherever the token or usage endpoint points. The 3xx is a failed call.
func noRedirects(c *http.Client) *http.Client {
	out := http.Client{}
	if c != nil {
		out = *c
	}
	out.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &out
}

// isRedirect reports whether a status is a redirect, which is never followed.
func isRedirect(status int) bool { return status >= 300 && status < 400 }

// send makes one call to a sign-in server (Anthropic's, OpenAI's or GitHub's token and device
// endpoints) and reads its answer, 1 MiB at most, whatever its status. A redirect is a failure
// that names its target, scrubbed of secrets, and is never followed: it would carry a code, a
// verifier or a token wherever it points. where names the server in a failed call's error,
// whose text never carries secrets.
func (s *Service) send(req *http.Request, where string, secrets []string) (int, http.Header, []byte, error) {
	resp, err := s.opt.Client.Do(req)
	if err != nil {
		// The transport's error names the address, which is a setting; a secret in it all the
		// same is scrubbed.
		return 0, nil, nil, fmt.Errorf("%s: %w", where, scrubbed(err, secrets))
	}
	defer resp.Body.Close()
	if isRedirect(resp.StatusCode) {
		return resp.StatusCode, resp.Header, nil, &tokenError{status: resp.StatusCode, code: "upstream_redirect",
			message: "a redirect to " + redact.Redirect(req.URL, resp.Header.Get("Location"), secrets...) + ", not followed"}
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s: %w", where, scrubbed(err, secrets))
	}
	return resp.StatusCode, resp.Header, raw, nil
}

// scrubbed is err, or, when its text carries one of secrets, that text scrubbed.
func scrubbed(err error, secrets []string) error {
	if text := redact.String(err.Error(), secrets...); text != err.Error() {
		return errors.New(text)
	}
	return err
}

// RefreshState is what the refresher remembers of an account besides its tokens.
type RefreshState struct {
	ConnectionID int64 `json:"connection_id"`
	// Strikes counts failed refreshes in a row; MaxStrikes make the account expired.
	Strikes   int       `json:"strikes,omitempty"`
	LastError string    `json:"last_error,omitempty"`
	LastTry   time.Time `json:"last_try,omitzero"`
	// RetryAt: no refresh before (a 429's Retry-After, or the back-off after a strike).
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Expired is set once the refresh token is known to be dead.
	Expired bool `json:"expired,omitempty"`
	// Rev is the credential revision the state belongs to; new credentials start afresh.
	Rev int64 `json:"rev,omitempty"`
}

func (r RefreshState) empty() bool {
	return r.Strikes == 0 && r.LastError == "" && r.RetryAt.IsZero() && !r.Expired
}

// account is one OAuth connection's live credential.
type account struct {
	kind    string // the provider type: catalog.TypeAnthropic, TypeCodex or TypeCopilot
	cred    catalog.OAuthCredential
	state   RefreshState
	flight  *flight
	pending *catalog.OAuthCredential // a refreshed pair whose commit failed: committed before anything else
	copilot copilotHold              // a Copilot account's short-lived Copilot token (copilot.go)
}

// flight is one refresh in progress; done closes when it ended.
type flight struct {
	done  chan struct{}
	token string
	err   error
}

// Service is the token holder, the sign-in flow, the usage poller and the limit reset client.
type Service struct {
	opt Options

	mu       sync.Mutex
	accounts map[int64]*account
	pending  map[string]pendingSignIn
	flows    map[string]*deviceFlow // device sign-ins waiting for approval, by flow id
	// seeds are the Copilot tokens of sign-ins' entitlement checks, by account, until the
	// account's first use or the end of its sign-in takes them (copilot.go).
	seeds   map[string]copilotAnswer
	wake    chan struct{} // the refresher recomputes its next due time
	changed chan struct{} // the usage poller looks at the accounts again
	polls   chan int64    // accounts to poll soon (after a 429)
	wg      sync.WaitGroup
}

// New builds the service and loads the persisted refresh state.
func New(ctx context.Context, opt Options) (*Service, error) {
	if opt.Clock == nil {
		opt.Clock = clockwork.NewRealClock()
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	opt.Client = noRedirects(opt.Client)
	s := &Service{opt: opt, accounts: map[int64]*account{}, pending: map[string]pendingSignIn{}, flows: map[string]*deviceFlow{}, seeds: map[string]copilotAnswer{},
		wake: make(chan struct{}, 1), changed: make(chan struct{}, 1), polls: make(chan int64, 64)}
	if opt.Store != nil {
		states, err := statestore.LoadAll[RefreshState](ctx, opt.Store, statestore.OAuthRefresh)
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			s.accounts[st.ConnectionID] = &account{state: st}
		}
	}
	s.Sync(opt.Catalog.Registry())
	return s, nil
}

// Sync takes the registry's OAuth connections: new ones, and new credentials of known ones (a
// sign-in again, a new setup token), which start with a clean refresh state. A pair this
// service refreshed is newer than the registry's copy and is kept. Deleted connections go.
func (s *Service) Sync(reg *catalog.Registry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[int64]bool{}
	for _, p := range reg.Providers() {
		for _, c := range reg.ConnectionsOf(p.ID) {
			if c.OAuth == nil {
				continue
			}
			seen[c.ID] = true
			a := s.accounts[c.ID]
			if a != nil {
				a.kind = p.Type
			}
			switch {
			case a == nil:
				s.accounts[c.ID] = &account{kind: p.Type, cred: *c.OAuth, state: RefreshState{ConnectionID: c.ID, Rev: c.OAuth.Rev}}
			case a.cred.Rev == 0 && a.state.Rev == c.OAuth.Rev: // loaded refresh state of this credential
				a.cred = *c.OAuth
			case c.OAuth.Rev > a.cred.Rev:
				// A state already of this revision came from a replica that holds it (ApplyRefresh)
				// and is kept.
				newCreds := a.state.Rev != c.OAuth.Rev
				a.cred, a.pending = *c.OAuth, nil
				if newCreds {
					a.state = RefreshState{ConnectionID: c.ID, Rev: c.OAuth.Rev}
					s.persistState(a.state)
				}
			}
		}
	}
	for id, a := range s.accounts {
		if !seen[id] && a.flight == nil {
			delete(s.accounts, id)
		}
	}
	s.kick()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *Service) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Service) persistState(st RefreshState) {
	if s.opt.Store == nil {
		return
	}
	r := statestore.Record{Kind: statestore.OAuthRefresh, Key: strconv.FormatInt(st.ConnectionID, 10), ConnectionID: st.ConnectionID,
		ID: st.ConnectionID}
	if !st.empty() {
		r.Value = st
	}
	s.opt.Store.Put(r)
}

// ApplyRefresh installs an account's refresh state as another replica recorded it, without
// persisting it: a back-off, strikes or a dead refresh token seen there hold this replica's
// refresher too, so the replicas do not each call the token endpoint for them.
//
// The state belongs to a credential revision. One of an older revision than the credential
// held here is stale and ignored; one of a newer revision (the other replica refreshed first
// and the registry here has not caught up) is installed and kept when that revision arrives,
// so this replica does not refresh with the pair the other one rotated away. st nil (the other
// replica's state went clean: a refresh succeeded or new credentials came, each a new revision)
// clears only a state that is ahead of the credential held here; a state of the held credential
// stays until Sync brings the new revision, which starts it afresh. An account this replica
// does not hold yet is left to Sync.
func (s *Service) ApplyRefresh(id int64, st *RefreshState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[id]
	if a == nil {
		return
	}
	switch {
	case st == nil:
		if a.state.Rev <= a.cred.Rev {
			return
		}
		a.state = RefreshState{ConnectionID: id, Rev: a.cred.Rev}
	case st.Rev < a.cred.Rev:
		return
	default:
		a.state = *st
		a.state.ConnectionID = id
	}
	s.kick() // the refresher's next due time may have moved
}

// ApplyRefreshRecord is ApplyRefresh for an OAuthRefresh record as statestore.Tables.Apply
// passes it: the connection id and the state as JSON (nil or null for a cleared state).
func (s *Service) ApplyRefreshRecord(id, value []byte) error {
	var connID int64
	if err := json.Unmarshal(id, &connID); err != nil {
		return fmt.Errorf("decode refresh state id: %w", err)
	}
	if len(value) == 0 || string(value) == "null" {
		s.ApplyRefresh(connID, nil)
		return nil
	}
	var st RefreshState
	if err := json.Unmarshal(value, &st); err != nil {
		return fmt.Errorf("decode refresh state: %w", err)
	}
	s.ApplyRefresh(connID, &st)
	return nil
}

// ErrNoToken says that an OAuth connection has no usable access token now: its refresh failed
// (or waits for a back-off) and the last token expired, or the account is expired.
var ErrNoToken = errors.New("no usable access token")

// Token returns the connection's access token. A token within the refresh margin of its expiry
// is refreshed first; concurrent callers wait for the one refresh in flight. While a refresh
// cannot be made (back-off, a failure) a token that has not expired yet is still returned.
func (s *Service) Token(ctx context.Context, conn *catalog.ConnEntry) (string, error) {
	return s.token(ctx, conn, "")
}

// TokenRejected is called when the upstream answered 401 to token: it refreshes once, unless
// another request already got a newer token, and returns the token to try again with.
func (s *Service) TokenRejected(ctx context.Context, conn *catalog.ConnEntry, rejected string) (string, error) {
	return s.token(ctx, conn, rejected)
}

func (s *Service) token(ctx context.Context, conn *catalog.ConnEntry, rejected string) (string, error) {
	now := s.opt.Clock.Now()
	margin := s.margin(conn.ProviderType)
	s.mu.Lock()
	a := s.accounts[conn.ID]
	if a == nil {
		if conn.OAuth == nil {
			s.mu.Unlock()
			return "", ErrNoToken
		}
		a = &account{kind: conn.ProviderType, cred: *conn.OAuth, state: RefreshState{ConnectionID: conn.ID, Rev: conn.OAuth.Rev}}
		s.accounts[conn.ID] = a
	}
	cur, exp := a.cred.AccessToken.Reveal(), a.cred.ExpiresAt
	valid := exp.IsZero() || now.Before(exp)
	switch {
	case a.cred.SetupToken():
		s.mu.Unlock()
		if rejected != "" {
			return "", ErrNoToken // nothing to refresh
		}
		return cur, nil
	case rejected != "" && rejected != cur: // another request refreshed meanwhile
		s.mu.Unlock()
		return cur, nil
	case rejected == "" && a.flight == nil && (now.Before(exp.Add(-margin)) || valid && now.Before(a.cred.RefreshedAt.Add(MinRefreshGap))):
		s.mu.Unlock()
		return cur, nil
	case a.flight == nil && (a.state.Expired || now.Before(a.state.RetryAt)):
		s.mu.Unlock()
		if valid && rejected == "" {
			return cur, nil
		}
		return "", ErrNoToken
	}
	f := s.startLocked(conn.ID, a)
	s.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if f.err == nil {
		return f.token, nil
	}
	if rejected == "" && (exp.IsZero() || s.opt.Clock.Now().Before(exp)) {
		return cur, nil // the refresh failed, but the token still works for now
	}
	return "", ErrNoToken
}

// startLocked starts the account's refresh, or returns the one in flight. s.mu is held.
func (s *Service) startLocked(id int64, a *account) *flight {
	if a.flight != nil {
		return a.flight
	}
	f := &flight{done: make(chan struct{})}
	a.flight = f
	due := a.cred.Rev // the revision found due; a newer one arriving meanwhile needs no refresh
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		f.token, f.err = s.refresh(ctx, id, due)
		s.mu.Lock()
		a.flight = nil
		s.mu.Unlock()
		close(f.done)
		s.kick()
	}()
	return f
}

// refresh makes one refresh of account id, whose revision due was found due, and returns the
// new access token. The rotated pair is committed to the database before this returns, so no
// request uses a token that a crash could lose; a pair whose commit failed is held and committed
// first on the next try. A newer revision than due that reached the account meanwhile (another
// replica's refresh, through the registry or the store) is taken instead of refreshing again.
func (s *Service) refresh(ctx context.Context, id, due int64) (string, error) {
	cred, pending, kind, ok := s.held(id)
	if !ok {
		return "", ErrNoToken
	}
	if pending != nil {
		return s.commit(ctx, id, cred, *pending)
	}
	if s.opt.Leases != nil {
		// A refresh token works once: of the replicas that find the token due, one refreshes
		// while the others wait, and each re-reads the store before it refreshes.
		release, err := s.opt.Leases.Acquire(ctx, "oauth_refresh:"+strconv.FormatInt(id, 10), refreshTimeout+5*time.Second)
		if err != nil {
			return "", fmt.Errorf("wait for the refresh lease: %w", err)
		}
		defer release()
		// Read again with the lease held: the registry may have brought a newer pair.
		if cred, _, _, ok = s.held(id); !ok {
			return "", ErrNoToken
		}
	}
	if due > 0 && cred.Rev > due {
		return cred.AccessToken.Reveal(), nil
	}
	if s.opt.Leases != nil {
		if stored, err := s.opt.Catalog.OAuthCredential(ctx, id); err == nil && stored.Rev > cred.Rev {
			return s.adopt(id, stored), nil
		}
	}
	now := s.opt.Clock.Now()
	var next catalog.OAuthCredential
	var err error
	switch kind {
	case catalog.TypeCodex:
		next, err = s.refreshCodex(ctx, cred, now)
	case catalog.TypeCopilot:
		next, err = s.refreshGitHub(ctx, cred, now)
	default:
		next, err = s.refreshClaude(ctx, cred, now)
	}
	if err != nil {
		s.failed(id, cred.Rev, err, now)
		return "", err
	}
	return s.commit(ctx, id, cred, next)
}

// held is account id's credential, the refreshed pair waiting to be committed over it and the
// account's kind; ok is false when the account is gone.
func (s *Service) held(id int64) (cred catalog.OAuthCredential, pending *catalog.OAuthCredential, kind string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[id]
	if a == nil {
		return catalog.OAuthCredential{}, nil, "", false
	}
	return a.cred, a.pending, a.kind, true
}

// refreshClaude makes one refresh of a Claude account (JSON body).
func (s *Service) refreshClaude(ctx context.Context, cred catalog.OAuthCredential, now time.Time) (catalog.OAuthCredential, error) {
	cfg := s.opt.Settings.Snapshot().Claude()
	res, err := s.exchange(ctx, cfg, map[string]string{"grant_type": "refresh_token",
		"refresh_token": cred.RefreshToken.Reveal(), "client_id": cfg.ClientID})
	if err != nil {
		return catalog.OAuthCredential{}, err
	}
	return res.credential(now, cred), nil
}

// margin is how long before its expiry an account kind's access token is refreshed.
func (s *Service) margin(kind string) time.Duration {
	snap := s.opt.Settings.Snapshot()
	if kind == catalog.TypeCodex {
		return time.Duration(snap.Codex().RefreshMarginMS) * time.Millisecond
	}
	return time.Duration(snap.Claude().RefreshMarginMS) * time.Millisecond
}

// commit stores next over cred and, once committed, hands it to every caller.
func (s *Service) commit(ctx context.Context, id int64, cred, next catalog.OAuthCredential) (string, error) {
	err := s.opt.Catalog.StoreRefreshed(ctx, id, cred.Rev, next)
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[id]
	if a == nil {
		return "", ErrNoToken
	}
	switch {
	case errors.Is(err, catalog.ErrStaleCredential):
		// A sign-in replaced the credential meanwhile: it wins; the registry brings it.
		a.pending = nil
		s.opt.Log.Info("refreshed token discarded: the connection signed in again meanwhile", "connection_id", id)
		return "", ErrNoToken
	case err != nil:
		a.pending = &next
		s.opt.Log.Error("could not commit a refreshed token pair; holding it to commit before anything else", "connection_id", id, "error", err)
		return "", err
	}
	next.Rev = cred.Rev + 1
	a.cred, a.pending = next, nil
	a.state = RefreshState{ConnectionID: id, Rev: next.Rev, LastTry: s.opt.Clock.Now()}
	s.persistState(a.state)
	s.opt.Log.Info("access token refreshed", "connection_id", id, "expires_at", next.ExpiresAt)
	return next.AccessToken.Reveal(), nil
}

// adopt takes a pair another replica refreshed and committed (a newer revision in the store)
// instead of refreshing: the token this replica holds was spent by that refresh.
func (s *Service) adopt(id int64, stored catalog.OAuthCredential) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.accounts[id]; a != nil && stored.Rev > a.cred.Rev {
		a.cred, a.pending = stored, nil
		a.state = RefreshState{ConnectionID: id, Rev: stored.Rev, LastTry: s.opt.Clock.Now()}
		s.opt.Log.Info("access token taken from the store: another replica refreshed it", "connection_id", id)
	}
	return stored.AccessToken.Reveal()
}

// deadRefresh reports whether a refresh error code says the refresh token will never work again:
// OAuth's invalid_grant, and OpenAI's names for a token used once already, expired or revoked.
func deadRefresh(code string) bool {
	switch code {
	case "invalid_grant", "refresh_token_reused", "refresh_token_expired", "refresh_token_invalidated",
		"bad_refresh_token": // GitHub's name for it
		return true
	}
	return false
}

// failed counts a failed refresh: a 429 waits its Retry-After without a strike; a dead refresh
// token (deadRefresh) expires the account at once; anything else is a strike, and MaxStrikes in a
// row expire it.
func (s *Service) failed(id, rev int64, err error, now time.Time) {
	var te *tokenError
	errors.As(err, &te)
	s.mu.Lock()
	a := s.accounts[id]
	if a == nil || a.cred.Rev != rev {
		s.mu.Unlock()
		return
	}
	st := &a.state
	st.LastTry, st.LastError = now, err.Error()
	switch {
	case te != nil && te.status == http.StatusTooManyRequests:
		wait := te.retryAfter
		if wait <= 0 {
			wait = DefaultRetryAfter
		}
		st.RetryAt = now.Add(wait)
	case te != nil && deadRefresh(te.code):
		st.Expired, st.Strikes = true, max(st.Strikes, MaxStrikes)
	default:
		st.Strikes++
		st.RetryAt = now.Add(StrikeBackoff << min(st.Strikes-1, 10))
		st.Expired = st.Strikes >= MaxStrikes
	}
	snapshot := *st
	s.persistState(snapshot)
	s.mu.Unlock()
	s.opt.Log.Warn("token refresh failed", "connection_id", id, "strikes", snapshot.Strikes, "expired", snapshot.Expired, "error", err)
	if snapshot.Expired && s.opt.Expire != nil {
		s.opt.Expire.MarkExpired(id, errs.M("oauth.refresh_dead", err.Error()).String())
	}
}

// Secrets returns an account's live tokens: the access and refresh token it holds now, a
// refreshed pair waiting for its commit and a Copilot account's Copilot tokens. Text from
// upstreams is scrubbed of them; nil for a connection that is no account.
func (s *Service) Secrets(id int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[id]
	if a == nil {
		return nil
	}
	return a.secrets(nil)
}

// AllSecrets returns the live tokens of every account (for the request log's scrubbing).
func (s *Service) AllSecrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range s.accounts {
		out = a.secrets(out)
	}
	return out
}

// secrets appends the account's tokens to out; s.mu is held.
func (a *account) secrets(out []string) []string {
	out = append(out, a.cred.AccessToken.Reveal(), a.cred.RefreshToken.Reveal(), a.cred.IDToken.Reveal())
	if a.pending != nil {
		out = append(out, a.pending.AccessToken.Reveal(), a.pending.RefreshToken.Reveal(), a.pending.IDToken.Reveal())
	}
	return a.copilot.secrets(out)
}

// TokenState is what the dashboard shows of an account's token.
type TokenState struct {
	ExpiresAt   time.Time
	RefreshedAt time.Time
	Strikes     int
	LastError   string
	RetryAt     time.Time
	Expired     bool
	SetupToken  bool
	Refreshing  bool
}

// State returns an OAuth connection's token state; ok is false for other connections.
func (s *Service) State(id int64) (TokenState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[id]
	if a == nil || a.cred.AccessToken == "" {
		return TokenState{}, false
	}
	return TokenState{ExpiresAt: a.cred.ExpiresAt, RefreshedAt: a.cred.RefreshedAt, Strikes: a.state.Strikes,
		LastError: a.state.LastError, RetryAt: a.state.RetryAt, Expired: a.state.Expired, SetupToken: a.cred.SetupToken(),
		Refreshing: a.flight != nil}, true
}

// Wait returns once every refresh in flight has ended (each commits or gives up within 30 s).
// The app calls it after its background work stopped, before it closes the database.
func (s *Service) Wait() { s.wg.Wait() }

// RunRefresher refreshes every account ahead of its expiry (by the refresh margin) so requests
// rarely wait, until ctx ends; then it waits for the refreshes in flight to commit.
func (s *Service) RunRefresher(ctx context.Context) {
	defer s.wg.Wait()
	for {
		due := s.startDue()
		tick, stop, ok := alarmAt(s.opt.Clock, due)
		if !ok {
			continue
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-s.wake:
		case <-tick:
		}
		stop()
	}
}

// alarmAt returns a channel that fires at t (never, for the zero time) and what stops its timer.
// When the clock jumped while the timer was being set (a duration read before the jump would be
// counted from after it), ok is false and the caller looks at its work again.
func alarmAt(clock clockwork.Clock, t time.Time) (tick <-chan time.Time, stop func(), ok bool) {
	if t.IsZero() {
		return nil, func() {}, true
	}
	now := clock.Now()
	timer := clock.NewTimer(max(t.Sub(now), 0))
	if clock.Since(now) > 10*time.Millisecond {
		timer.Stop()
		return nil, nil, false
	}
	return timer.Chan(), func() { timer.Stop() }, true
}

// startDue starts the refresh of every account that is due and returns when the next one is
// (zero when none is).
func (s *Service) startDue() time.Time {
	now := s.opt.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for id, a := range s.accounts {
		if a.cred.AccessToken == "" || a.cred.SetupToken() || a.state.Expired || a.flight != nil {
			continue
		}
		due := a.cred.ExpiresAt.Add(-s.margin(a.kind))
		if gap := a.cred.RefreshedAt.Add(MinRefreshGap); gap.After(due) && gap.Before(a.cred.ExpiresAt) {
			due = gap
		}
		if a.state.RetryAt.After(due) {
			due = a.state.RetryAt
		}
		if a.pending != nil && !now.Before(a.state.RetryAt) {
			due = now
		}
		if !now.Before(due) {
			s.startLocked(id, a)
			continue
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}
