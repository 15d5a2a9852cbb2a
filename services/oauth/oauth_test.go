package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"switchyard/db/dbtest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/resilience"
	"switchyard/services/secrets"
	"switchyard/services/servicetest"
	"switchyard/services/settings"
)

// fakeClaude is Claude's token endpoint: it checks PKCE (the challenge of the authorize address
// against the verifier), issues accounts by code, rotates single-use refresh tokens and can be
// scripted to fail or to hold its answers.
type fakeClaude struct {
	*httptest.Server
	t *testing.T

	mu         sync.Mutex
	challenges map[string]string // code → the code_challenge of the authorize address it came from
	codes      map[string]string // code → account email
	refresh    map[string]string // valid refresh token → account email
	used       map[string]bool   // refresh tokens already rotated away
	n          int
	refreshes  atomic.Int64
	failNext   []func(w http.ResponseWriter) // scripted answers of the next refresh calls
	hold       chan struct{}                 // when set, refresh answers wait for it to close
	expiresIn  int64
	bodies     []map[string]string
	other      http.Handler // answers every path but the token endpoint's
}

func newFakeClaude(t *testing.T, other http.Handler) *fakeClaude {
	f := &fakeClaude{t: t, challenges: map[string]string{}, codes: map[string]string{}, refresh: map[string]string{},
		used: map[string]bool{}, expiresIn: 28800, other: other}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// authorize plays the browser: it records the challenge of the authorize address and returns
// what Claude's page shows for pasting (CODE#STATE) for an account.
func (f *fakeClaude) authorize(authURL, email string) string {
	u, err := url.Parse(authURL)
	if err != nil {
		f.t.Fatal(err)
	}
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" || q.Get("code") != "true" {
		f.t.Fatalf("authorize address %s", authURL)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	code := fmt.Sprintf("code-%d", f.n)
	f.challenges[code] = q.Get("code_challenge")
	f.codes[code] = email
	return code + "#" + q.Get("state")
}

func (f *fakeClaude) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/oauth/token" && f.other != nil {
		f.other.ServeHTTP(w, r)
		return
	}
	var body map[string]string
	if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&body) != nil {
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_request","error_description":"JSON body expected"}`)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	hold := f.hold
	f.mu.Unlock()
	switch body["grant_type"] {
	case "authorization_code":
		f.mu.Lock()
		defer f.mu.Unlock()
		sum := sha256.Sum256([]byte(body["code_verifier"]))
		email, ok := f.codes[body["code"]]
		if !ok || f.challenges[body["code"]] != base64.RawURLEncoding.EncodeToString(sum[:]) {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"code or verifier rejected"}`)
			return
		}
		delete(f.codes, body["code"])
		f.issue(w, email)
	case "refresh_token":
		f.refreshes.Add(1)
		if hold != nil {
			<-hold
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.failNext) > 0 {
			fail := f.failNext[0]
			f.failNext = f.failNext[1:]
			fail(w)
			return
		}
		email, ok := f.refresh[body["refresh_token"]]
		if !ok {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"refresh token not found or already used"}`)
			return
		}
		delete(f.refresh, body["refresh_token"])
		f.used[body["refresh_token"]] = true
		f.issue(w, email)
	default:
		w.WriteHeader(400)
	}
}

// issue answers a new pair for an account; f.mu is held.
func (f *fakeClaude) issue(w http.ResponseWriter, email string) {
	f.n++
	access, refresh := fmt.Sprintf("sk-ant-oat01-access-%d", f.n), fmt.Sprintf("sk-ant-ort01-refresh-%d", f.n)
	f.refresh[refresh] = email
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": access, "refresh_token": refresh, "expires_in": f.expiresIn,
		"token_type": "Bearer", "account": map[string]string{"uuid": "uuid-" + email, "email_address": email},
		"organization": map[string]string{"uuid": "org-" + email, "name": "Org of " + email, "organization_type": "claude_max"}})
}

type memStore struct {
	mu sync.Mutex
	m  map[string]string
}

func (m *memStore) GetValue(_ context.Context, k string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok, nil
}

func (m *memStore) PutValue(_ context.Context, k, v string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[k] = v
	return nil
}

func (m *memStore) SaveRevision(_ context.Context, k, v string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[k] = v
	return 1, nil
}

type expirer struct {
	mu  sync.Mutex
	ids []int64
}

func (e *expirer) MarkExpired(id int64, _ string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ids = append(e.ids, id)
}

func (e *expirer) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.ids)
}

type harness struct {
	t       *testing.T
	svc     *Service
	cat     *catalog.Service
	fake    *fakeClaude
	clock   *clockwork.FakeClock
	expired *expirer
	usage   *resilience.Usage
	opts    *settings.OAuthService
	db      *db.DB
	box     *secrets.Box
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, nil) }

// newHarnessWith is newHarness with other answering the fake's paths besides the token endpoint.
func newHarnessWith(t *testing.T, other http.Handler) *harness {
	t.Helper()
	ctx := context.Background()
	d := dbtest.Open(t)
	box, err := secrets.NewBox(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	cat, err := catalog.New(ctx, d, box, log)
	if err != nil {
		t.Fatal(err)
	}
	fake := newFakeClaude(t, other)
	env := map[string]string{"SWITCHYARD_CLAUDE_TOKEN_URL": fake.URL + "/v1/oauth/token", "SWITCHYARD_CLAUDE_USAGE_URL": fake.URL + "/api/oauth/usage"}
	opts, err := settings.NewOAuth(ctx, &memStore{m: map[string]string{}}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cat: cat, fake: fake, db: d, box: box, clock: clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0)), expired: &expirer{}, opts: opts}
	h.usage = resilience.NewUsage(h.clock, nil)
	h.svc, err = New(ctx, Options{Catalog: cat, Settings: opts, Client: fake.Client(), Clock: h.clock, Log: log, Expire: h.expired, Usage: h.usage})
	if err != nil {
		t.Fatal(err)
	}
	cat.OnChange(h.svc.Sync)
	return h
}

// signIn runs start → authorize → complete for an account.
func (h *harness) signIn(email string) (catalog.Connection, bool) {
	h.t.Helper()
	si, err := h.svc.Start("", "")
	if err != nil {
		h.t.Fatal(err)
	}
	conn, created, err := h.svc.Complete(context.Background(), h.fake.authorize(si.AuthURL, email))
	if err != nil {
		h.t.Fatal(err)
	}
	return conn, created
}

func (h *harness) entry(id int64) *catalog.ConnEntry {
	h.t.Helper()
	c, ok := h.cat.Registry().Connection(id)
	if !ok {
		h.t.Fatalf("connection %d not in the registry", id)
	}
	return c
}

func (h *harness) stored(id int64) catalog.OAuthCredential {
	h.t.Helper()
	c, err := h.cat.OAuthCredential(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func codeKey(t *testing.T, err error) string {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is no *errs.Error", err)
	}
	if m, ok := e.Fields["code"]; ok {
		return m.Key
	}
	return e.Msg.Key
}

func TestSignInWithPKCE(t *testing.T) {
	h := newHarness(t)
	conn, created := h.signIn("ada@example.com")
	if !created || conn.AuthType != catalog.AuthOAuth || conn.Name != "claude-1" || conn.Account == nil ||
		conn.Account.Email != "ada@example.com" || conn.Account.Plan != "claude_max" || conn.Account.SetupToken {
		t.Fatalf("connection %+v account %+v", conn, conn.Account)
	}
	if b, _ := json.Marshal(conn); strings.Contains(string(b), "sk-ant") {
		t.Fatalf("the connection shows a token: %s", b)
	}
	cred := h.stored(conn.ID)
	if cred.AccessToken.Reveal() == "" || cred.RefreshToken.Reveal() == "" || cred.Account.UUID != "uuid-ada@example.com" ||
		cred.Account.OrganizationUUID != "org-ada@example.com" || !cred.ExpiresAt.Equal(h.clock.Now().Add(8*time.Hour)) {
		t.Fatalf("stored %+v", cred)
	}
	body := h.fake.bodies[0]
	if body["client_id"] != "9d1c250a-e61b-44d9-88ed-5944d1962f5e" || body["redirect_uri"] != "https://platform.claude.com/oauth/code/callback" ||
		body["state"] == "" || body["code_verifier"] == "" {
		t.Fatalf("exchange body %v", body)
	}

	// Signing in again with the same account updates that connection.
	again, created := h.signIn("ada@example.com")
	if created || again.ID != conn.ID {
		t.Fatalf("re-auth made connection %d (created %v), want %d updated", again.ID, created, conn.ID)
	}
	if next := h.stored(conn.ID); next.AccessToken == cred.AccessToken || next.Rev != cred.Rev+1 {
		t.Fatalf("re-auth did not replace the tokens: %+v", next)
	}
	// A second account is a second connection.
	if other, created := h.signIn("bob@example.com"); !created || other.ID == conn.ID || other.Name != "claude-2" {
		t.Fatalf("a second account did not get its own connection: %+v", other)
	}
	// The whole callback address works as well as CODE#STATE.
	si, _ := h.svc.Start("anthropic", "")
	pasted := h.fake.authorize(si.AuthURL, "cy@example.com")
	code, state, _ := strings.Cut(pasted, "#")
	if _, _, err := h.svc.Complete(context.Background(), "https://platform.claude.com/oauth/code/callback?code="+code+"&state="+state); err != nil {
		t.Fatal(err)
	}
}

func TestSignInStateChecks(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	si, _ := h.svc.Start("", "")
	pasted := h.fake.authorize(si.AuthURL, "ada@example.com")
	code, _, _ := strings.Cut(pasted, "#")

	if _, _, err := h.svc.Complete(ctx, code+"#not-the-state"); codeKey(t, err) != "oauth.state_unknown" {
		t.Fatalf("state mismatch: %v", err)
	}
	if _, _, err := h.svc.Complete(ctx, code); codeKey(t, err) != "oauth.state_missing" {
		t.Fatalf("no state: %v", err)
	}
	if _, _, err := h.svc.Complete(ctx, "#"+si.State); codeKey(t, err) != "oauth.code_missing" {
		t.Fatalf("no code: %v", err)
	}
	// Expired: the pending sign-in lives 10 minutes.
	h.clock.Advance(SignInTTL + time.Second)
	if _, _, err := h.svc.Complete(ctx, pasted); codeKey(t, err) != "oauth.state_expired" {
		t.Fatalf("expired: %v", err)
	}
	// Single use: a state is gone once tried.
	if _, _, err := h.svc.Complete(ctx, pasted); codeKey(t, err) != "oauth.state_unknown" {
		t.Fatalf("used twice: %v", err)
	}
	// A wrong verifier (a code of another sign-in) is refused by the token endpoint.
	a, _ := h.svc.Start("", "")
	b, _ := h.svc.Start("", "")
	codeA, _, _ := strings.Cut(h.fake.authorize(a.AuthURL, "x@example.com"), "#")
	h.fake.authorize(b.AuthURL, "y@example.com")
	if _, _, err := h.svc.Complete(ctx, codeA+"#"+b.State); codeKey(t, err) != "oauth.exchange_failed" {
		t.Fatalf("wrong verifier: %v", err)
	}
	if _, err := h.svc.Start("openai", ""); err == nil {
		t.Fatal("a sign-in on an openai provider started")
	}
	if conns, _ := h.cat.ListConnections(ctx); len(conns) != 0 {
		t.Fatalf("connections after refused sign-ins: %d", len(conns))
	}
}

func TestSetupTokenIsUsedAsIs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	oauth, token := catalog.AuthOAuth, "sk-ant-oat01-setup-token-abcdef"
	prov, name := "anthropic", "cli"
	conn, err := h.cat.CreateConnection(ctx, catalog.ConnectionInput{Provider: &prov, Name: &name, AuthType: &oauth, SetupToken: &token}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if conn.Account == nil || !conn.Account.SetupToken {
		t.Fatalf("account %+v", conn.Account)
	}
	got, err := h.svc.Token(ctx, h.entry(conn.ID))
	if err != nil || got != token {
		t.Fatalf("token %q %v", got, err)
	}
	if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), token); !errors.Is(err, ErrNoToken) {
		t.Fatal("a setup token was refreshed")
	}
	bad := "sk-live-whatever"
	if _, err := h.cat.CreateConnection(ctx, catalog.ConnectionInput{Provider: &prov, Name: &name, AuthType: &oauth, SetupToken: &bad}, nil); err == nil {
		t.Fatal("a token of the wrong shape was taken")
	}
	if h.fake.refreshes.Load() != 0 {
		t.Fatal("a refresh was made")
	}
}

// A token within the refresh margin is refreshed before it is used, and the rotated pair is in
// the database before the caller gets it.
func TestRefreshAheadOfExpiryCommitsFirst(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.fake.expiresIn = 600 // 10 min, the margin is 5 min
	conn, _ := h.signIn("ada@example.com")
	first := h.stored(conn.ID)
	got, err := h.svc.Token(ctx, h.entry(conn.ID))
	if err != nil || got != first.AccessToken.Reveal() {
		t.Fatalf("outside the margin the token is used as it is: %q %v", got, err)
	}
	h.clock.Advance(5*time.Minute + time.Second)
	got, err = h.svc.Token(ctx, h.entry(conn.ID))
	if err != nil || got == first.AccessToken.Reveal() {
		t.Fatalf("inside the margin: %q %v", got, err)
	}
	stored := h.stored(conn.ID)
	if stored.AccessToken.Reveal() != got || stored.RefreshToken == first.RefreshToken || stored.Rev != first.Rev+1 ||
		!h.fake.used[first.RefreshToken.Reveal()] {
		t.Fatalf("the rotated pair is not what is stored: %+v", stored)
	}
	if st, _ := h.svc.State(conn.ID); !st.RefreshedAt.Equal(h.clock.Now()) || st.Strikes != 0 {
		t.Fatalf("state %+v", st)
	}
	// A registry rebuild (any catalog write) brings the stored pair; it is never older.
	other := "other"
	if _, err := h.cat.UpdateConnection(ctx, conn.ID, catalog.ConnectionInput{Name: &other}, nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := h.svc.Token(ctx, h.entry(conn.ID)); again != got {
		t.Fatal("a rebuild brought back an older token")
	}
}

// Fifty requests that need the token while it is being refreshed wait for the one refresh.
func TestConcurrentRequestsShareOneRefresh(t *testing.T) {
	h := newHarness(t)
	h.fake.expiresIn = 60
	conn, _ := h.signIn("ada@example.com")
	h.clock.Advance(MinRefreshGap)
	hold := make(chan struct{})
	h.fake.mu.Lock()
	h.fake.hold = hold
	h.fake.mu.Unlock()
	var wg sync.WaitGroup
	tokens := make([]string, 50)
	errsSeen := make([]error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens[i], errsSeen[i] = h.svc.Token(context.Background(), h.entry(conn.ID))
		}()
	}
	servicetest.Eventually(func() bool { return h.fake.refreshes.Load() > 0 })
	close(hold)
	wg.Wait()
	if n := h.fake.refreshes.Load(); n != 1 {
		t.Fatalf("%d refresh calls, want 1", n)
	}
	for i := range 50 {
		if errsSeen[i] != nil || tokens[i] != tokens[0] || tokens[0] == "" {
			t.Fatalf("caller %d got %q %v", i, tokens[i], errsSeen[i])
		}
	}
}

// A 401 refreshes once; a request that was refused with a token already replaced takes the new
// one without another refresh.
func TestRefreshOn401(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	conn, _ := h.signIn("ada@example.com")
	old, _ := h.svc.Token(ctx, h.entry(conn.ID))
	fresh, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), old)
	if err != nil || fresh == old {
		t.Fatalf("after a 401: %q %v", fresh, err)
	}
	again, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), old)
	if err != nil || again != fresh || h.fake.refreshes.Load() != 1 {
		t.Fatalf("a second 401 with the old token refreshed again: %q %v, %d calls", again, err, h.fake.refreshes.Load())
	}
}

func TestRefreshStrikesAndInvalidGrant(t *testing.T) {
	fail500 := func(w http.ResponseWriter) { w.WriteHeader(500); io.WriteString(w, `{"error":"server_error"}`) }
	t.Run("three strikes expire the account", func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		h.fake.expiresIn = 60
		conn, _ := h.signIn("ada@example.com")
		h.fake.failNext = []func(http.ResponseWriter){fail500, fail500, fail500}
		for strike := 1; strike <= 3; strike++ {
			_, _ = h.svc.TokenRejected(ctx, h.entry(conn.ID), h.stored(conn.ID).AccessToken.Reveal())
			st, _ := h.svc.State(conn.ID)
			if st.Strikes != strike || st.Expired != (strike == 3) {
				t.Fatalf("after strike %d: %+v", strike, st)
			}
			if strike < 3 && h.expired.count() != 0 {
				t.Fatal("expired before the third strike")
			}
			// No refresh during the back-off.
			calls := h.fake.refreshes.Load()
			if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), h.stored(conn.ID).AccessToken.Reveal()); err == nil || h.fake.refreshes.Load() != calls {
				t.Fatal("refreshed during the back-off")
			}
			h.clock.Advance(StrikeBackoff << (strike - 1))
		}
		if h.expired.count() != 1 {
			t.Fatalf("marked expired %d times", h.expired.count())
		}
		// Signing in again starts afresh.
		h.signIn("ada@example.com")
		if st, _ := h.svc.State(conn.ID); st.Strikes != 0 || st.Expired {
			t.Fatalf("after a new sign-in %+v", st)
		}
	})
	t.Run("a success clears the strikes", func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		conn, _ := h.signIn("ada@example.com")
		h.fake.failNext = []func(http.ResponseWriter){fail500}
		_, _ = h.svc.TokenRejected(ctx, h.entry(conn.ID), h.stored(conn.ID).AccessToken.Reveal())
		h.clock.Advance(StrikeBackoff)
		if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), h.stored(conn.ID).AccessToken.Reveal()); err != nil {
			t.Fatal(err)
		}
		if st, _ := h.svc.State(conn.ID); st.Strikes != 0 {
			t.Fatalf("strikes %d after a good refresh", st.Strikes)
		}
	})
	t.Run("invalid_grant expires at once", func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		conn, _ := h.signIn("ada@example.com")
		h.fake.failNext = []func(http.ResponseWriter){func(w http.ResponseWriter) {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"Refresh token not found or invalid"}`)
		}}
		if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), h.stored(conn.ID).AccessToken.Reveal()); err == nil {
			t.Fatal("no error")
		}
		if st, _ := h.svc.State(conn.ID); !st.Expired || h.expired.count() != 1 {
			t.Fatalf("state %+v, marked %d", st, h.expired.count())
		}
	})
	t.Run("a 429 waits its Retry-After without a strike", func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		conn, _ := h.signIn("ada@example.com")
		h.fake.failNext = []func(http.ResponseWriter){func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"type":"rate_limit_error","message":"slow down"}}`)
		}}
		tok := h.stored(conn.ID).AccessToken.Reveal()
		_, _ = h.svc.TokenRejected(ctx, h.entry(conn.ID), tok)
		st, _ := h.svc.State(conn.ID)
		if st.Strikes != 0 || !st.RetryAt.Equal(h.clock.Now().Add(120*time.Second)) {
			t.Fatalf("state %+v", st)
		}
		h.clock.Advance(119 * time.Second)
		if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), tok); err == nil || h.fake.refreshes.Load() != 1 {
			t.Fatal("refreshed before Retry-After")
		}
		h.clock.Advance(time.Second)
		if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), tok); err != nil || h.fake.refreshes.Load() != 2 {
			t.Fatalf("no refresh after Retry-After: %v", err)
		}
	})
}

// The refresher refreshes ahead of expiry by itself, on the clock.
func TestRefresherRunsAheadOfExpiry(t *testing.T) {
	h := newHarness(t)
	h.fake.expiresIn = 3600
	conn, _ := h.signIn("ada@example.com")
	ctx, stop := servicetest.Start(t, h.svc.RunRefresher)
	defer stop()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(55*time.Minute - time.Second)
	if h.fake.refreshes.Load() != 0 {
		t.Fatal("refreshed before the margin")
	}
	h.clock.Advance(time.Second)
	if !servicetest.Eventually(func() bool { return h.stored(conn.ID).Rev == 2 }) {
		st, _ := h.svc.State(conn.ID)
		t.Fatalf("the refresher never refreshed: refreshes %d, state %+v, now %v", h.fake.refreshes.Load(), st, h.clock.Now())
	}
}

func TestUsagePollerAndLimitReset(t *testing.T) {
	var h *harness
	var polls atomic.Int64
	var reset atomic.Value // what the limit reset answers
	reset.Store("available")
	mux := http.NewServeMux()
	mux.HandleFunc("/api/oauth/usage", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sk-ant-oat01-") || r.Header.Get("anthropic-beta") != "oauth-2025-04-20" ||
			!strings.HasPrefix(r.Header.Get("User-Agent"), "claude-cli/") {
			w.WriteHeader(401)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("at_wall") == "1" {
			switch reset.Load() {
			case "available":
				io.WriteString(w, `{"juniper_tide":{"arm":"reset","available":true}}`)
			case "used":
				io.WriteString(w, `{"juniper_tide":{"arm":"reset","available":false,"next_available_at":"2027-01-20T10:00:00Z"}}`)
			case "control":
				io.WriteString(w, `{"juniper_tide":{"arm":"control","available":false}}`)
			default:
				w.WriteHeader(500)
			}
			return
		}
		polls.Add(1)
		resets := h.clock.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
		fmt.Fprintf(w, `{"five_hour":{"utilization":100.0,"resets_at":%q},"seven_day":{"utilization":41.5,"resets_at":%q}}`,
			resets, h.clock.Now().Add(72*time.Hour).UTC().Format(time.RFC3339))
	})
	mux.HandleFunc("/api/organizations/org-ada@example.com/reset_rate_limits", func(w http.ResponseWriter, r *http.Request) {
		var b map[string]string
		json.NewDecoder(r.Body).Decode(&b)
		if r.Method != http.MethodPost || b["program"] != "juniper_tide" {
			w.WriteHeader(400)
			return
		}
		io.WriteString(w, `{"result":"reset"}`)
	})
	h = newHarnessWith(t, mux)
	conn, _ := h.signIn("ada@example.com")

	ctx, stop := servicetest.Start(t, h.svc.RunUsagePoller)
	defer stop()
	servicetest.WaitUntil(t, "the first poll", func() bool { _, ok := h.usage.Get(conn.ID); return ok })
	u, _ := h.usage.Get(conn.ID)
	if u.FiveHour.Utilization != 100 || u.SevenDay.Utilization != 41.5 || !u.FiveHour.ResetsAt.Equal(h.clock.Now().Add(2*time.Hour)) {
		t.Fatalf("usage %+v %+v", u.FiveHour, u.SevenDay)
	}
	if at, until := h.usage.AtWall(conn.ID, 100); !at || !until.Equal(h.clock.Now().Add(2*time.Hour)) {
		t.Fatal("a full window is not the wall")
	}
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(5 * time.Minute)
	servicetest.WaitUntil(t, "the second poll", func() bool { return polls.Load() == 2 })
	// PollSoon reads at once, but not twice within 30 s.
	h.clock.Advance(30 * time.Second)
	h.svc.PollSoon(conn.ID)
	servicetest.WaitUntil(t, "the poll after a 429", func() bool { return polls.Load() == 3 })

	e := h.entry(conn.ID)
	for _, tc := range []struct {
		answer string
		want   string
	}{{"available", resilience.ResetDone}, {"used", resilience.ResetAlreadyUsed}, {"control", resilience.ResetNotOffered}, {"broken", resilience.ResetError}} {
		reset.Store(tc.answer)
		if got := h.svc.LimitReset(context.Background(), e); got.Result != tc.want {
			t.Errorf("%s: result %q, want %q", tc.answer, got.Result, tc.want)
		} else if tc.answer == "used" && !got.NextAvailable.Equal(time.Date(2027, 1, 20, 10, 0, 0, 0, time.UTC)) {
			t.Errorf("next available %v", got.NextAvailable)
		}
	}
}

// A token endpoint that quotes the refresh token it was sent never gets it into the account's
// state or the expiry message; Secrets names the live pair for the engine's scrubbing.
func TestRefreshErrorsNeverCarryTheTokens(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	conn, _ := h.signIn("ada@example.com")
	cred := h.stored(conn.ID)
	live := h.svc.Secrets(conn.ID)
	if !slices.Contains(live, cred.AccessToken.Reveal()) || !slices.Contains(live, cred.RefreshToken.Reveal()) {
		t.Fatalf("Secrets does not name the live pair: %d entries", len(live))
	}
	if h.svc.Secrets(conn.ID+100) != nil {
		t.Fatal("secrets for a connection that is no account")
	}
	refresh := cred.RefreshToken.Reveal()
	h.fake.failNext = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_grant","error_description":"refresh token `+refresh+` was revoked"}`)
	}}
	if _, err := h.svc.TokenRejected(ctx, h.entry(conn.ID), cred.AccessToken.Reveal()); err == nil {
		t.Fatal("no error")
	}
	st, _ := h.svc.State(conn.ID)
	if !st.Expired || strings.Contains(st.LastError, refresh) || !strings.Contains(st.LastError, "[redacted]") {
		t.Fatalf("state %+v", st)
	}
}
