package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/servicetest"
)

// fakeGitHub is GitHub for Copilot accounts: the device flow (each poll answers the next
// scripted step), the user API and the Copilot token exchange (counted, holdable, scriptable).
type fakeGitHub struct {
	t     *testing.T
	clock clockwork.Clock

	mu        sync.Mutex
	steps     []string          // the next device polls' answers: pending, slow_down[:N], expired, denied, ok
	users     map[string]string // GitHub token → "login:id"
	refresh   map[string]string // refresh token → login:id (expiring tokens only)
	expiring  bool              // issue tokens with a refresh token and expires_in
	n         int
	polls     int
	forms     []url.Values
	exchange  func(w http.ResponseWriter, r *http.Request) bool // scripted exchange answer; true = answered
	hold      chan struct{}
	refreshIn int64
	exchanges atomic.Int64
	login     string // the account the next approval signs in
	id        int64
}

func newFakeGitHub(t *testing.T, clock clockwork.Clock) *fakeGitHub {
	return &fakeGitHub{t: t, clock: clock, users: map[string]string{}, refresh: map[string]string{}, refreshIn: 1500,
		login: "octo", id: 42}
}

func (g *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/login/device/code":
		r.ParseForm()
		if r.Method != http.MethodPost || r.Form.Get("client_id") != "Iv1.b507a08c87ecfe98" || r.Form.Get("scope") != "read:user" ||
			r.Header.Get("Accept") != "application/json" {
			w.WriteHeader(400)
			return
		}
		io.WriteString(w, `{"device_code":"dev-secret-code","user_code":"ABCD-1234","verification_uri":"https://github.com/login/device","expires_in":900,"interval":5}`)
	case "/login/oauth/access_token":
		r.ParseForm()
		g.mu.Lock()
		defer g.mu.Unlock()
		g.forms = append(g.forms, r.PostForm)
		switch r.PostForm.Get("grant_type") {
		case deviceGrant:
			g.polls++
			if r.PostForm.Get("device_code") != "dev-secret-code" {
				io.WriteString(w, `{"error":"incorrect_device_code"}`)
				return
			}
			step := "pending"
			if len(g.steps) > 0 {
				step, g.steps = g.steps[0], g.steps[1:]
			}
			switch {
			case step == "pending":
				io.WriteString(w, `{"error":"authorization_pending","error_description":"The authorization request is still pending."}`)
			case strings.HasPrefix(step, "slow_down"):
				_, n, _ := strings.Cut(step, ":")
				if n == "" {
					n = "0"
				}
				fmt.Fprintf(w, `{"error":"slow_down","error_description":"Too many requests.","interval":%s}`, n)
			case step == "expired":
				io.WriteString(w, `{"error":"expired_token","error_description":"The device code has expired."}`)
			case step == "denied":
				io.WriteString(w, `{"error":"access_denied","error_description":"The user has denied your application access."}`)
			default:
				g.issue(w, fmt.Sprintf("%s:%d", g.login, g.id))
			}
		case "refresh_token":
			who, ok := g.refresh[r.PostForm.Get("refresh_token")]
			if !ok {
				io.WriteString(w, `{"error":"bad_refresh_token","error_description":"The refresh token passed is incorrect or expired."}`)
				return
			}
			delete(g.refresh, r.PostForm.Get("refresh_token"))
			g.issue(w, who)
		default:
			w.WriteHeader(400)
		}
	case "/user":
		g.mu.Lock()
		who, ok := g.users[strings.TrimPrefix(r.Header.Get("Authorization"), "token ")]
		g.mu.Unlock()
		if !ok {
			w.WriteHeader(401)
			io.WriteString(w, `{"message":"Bad credentials"}`)
			return
		}
		login, id, _ := strings.Cut(who, ":")
		fmt.Fprintf(w, `{"login":%q,"id":%s}`, login, id)
	case "/copilot_internal/v2/token":
		g.exchanges.Add(1)
		g.mu.Lock()
		hold, script := g.hold, g.exchange
		g.mu.Unlock()
		if hold != nil {
			<-hold
		}
		if script != nil && script(w, r) {
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if _, ok := g.users[strings.TrimPrefix(r.Header.Get("Authorization"), "token ")]; !ok || r.Header.Get("Editor-Version") == "" ||
			r.Header.Get("Editor-Plugin-Version") == "" {
			w.WriteHeader(401)
			io.WriteString(w, `{"message":"Bad credentials"}`)
			return
		}
		g.n++
		json.NewEncoder(w).Encode(map[string]any{"token": fmt.Sprintf("tid=copilot-%d;exp=1", g.n),
			"expires_at": g.clock.Now().Add(30 * time.Minute).Unix(), "refresh_in": g.refreshIn, "sku": "copilot_pro",
			"endpoints": map[string]string{"api": "https://api.individual.githubcopilot.test/"}})
	default:
		http.NotFound(w, r)
	}
}

// issue answers a new GitHub token for who; g.mu is held.
func (g *fakeGitHub) issue(w http.ResponseWriter, who string) {
	g.n++
	token := fmt.Sprintf("gho_token%d", g.n)
	g.users[token] = who
	answer := map[string]any{"access_token": token, "token_type": "bearer", "scope": "read:user"}
	if g.expiring {
		rt := fmt.Sprintf("ghr_refresh%d", g.n)
		g.refresh[rt] = who
		answer["refresh_token"], answer["expires_in"] = rt, 28800
	}
	json.NewEncoder(w).Encode(answer)
}

func (g *fakeGitHub) revokeAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.users)
}

func (g *fakeGitHub) script(steps ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.steps = append(g.steps, steps...)
}

func (g *fakeGitHub) setExchange(f func(w http.ResponseWriter, r *http.Request) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.exchange = f
}

func (g *fakeGitHub) pollCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.polls
}

type copilotHarness struct {
	*harness
	gh *fakeGitHub
}

// newCopilotHarness is the harness with GitHub on the fake's server and a provider copilot.
func newCopilotHarness(t *testing.T) *copilotHarness {
	t.Helper()
	gh := newFakeGitHub(t, nil)
	h := newHarnessWith(t, gh)
	gh.clock = h.clock
	ctx := context.Background()
	base := h.fake.URL
	if _, err := h.opts.Patch(ctx, []byte(fmt.Sprintf(`{"copilot":{"device_code_url":%q,"access_token_url":%q,"copilot_token_url":%q,"user_url":%q}}`,
		base+"/login/device/code", base+"/login/oauth/access_token", base+"/copilot_internal/v2/token", base+"/user"))); err != nil {
		t.Fatal(err)
	}
	name, typ := "copilot", catalog.TypeCopilot
	if _, err := h.cat.CreateProvider(ctx, catalog.ProviderInput{Name: &name, Type: &typ}, nil); err != nil {
		t.Fatal(err)
	}
	return &copilotHarness{harness: h, gh: gh}
}

// signInCopilot runs the device flow to its end: the first poll after the interval approves.
func (h *copilotHarness) signInCopilot(login string, id int64) (DevicePoll, error) {
	h.t.Helper()
	h.gh.mu.Lock()
	h.gh.login, h.gh.id = login, id
	h.gh.mu.Unlock()
	h.gh.script("ok")
	f, err := h.svc.StartCopilotDevice(context.Background(), "", "", "token")
	if err != nil {
		h.t.Fatal(err)
	}
	h.clock.Advance(time.Duration(f.Interval) * time.Second)
	return h.svc.PollCopilotDevice(context.Background(), f.Flow, "token")
}

func (h *copilotHarness) mustSignIn(login string, id int64) catalog.Connection {
	h.t.Helper()
	res, err := h.signInCopilot(login, id)
	if err != nil || res.Pending {
		h.t.Fatalf("sign-in: %+v %v", res, err)
	}
	return res.Conn
}

func errKey(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Msg.Key
	}
	return ""
}

// The device flow polls GitHub no sooner than its interval, slows down by 5 s (or to GitHub's
// own interval when that is larger), and once approved names the account by its GitHub user and
// checks its Copilot access with one exchange. The same user again signs the same connection in.
func TestCopilotDeviceFlow(t *testing.T) {
	h := newCopilotHarness(t)
	ctx := context.Background()
	f, err := h.svc.StartCopilotDevice(ctx, "", "", "token")
	if err != nil {
		t.Fatal(err)
	}
	if f.UserCode != "ABCD-1234" || f.VerificationURL != "https://github.com/login/device" || f.Interval != 5 ||
		!f.ExpiresAt.Equal(h.clock.Now().Add(900*time.Second)) {
		t.Fatalf("flow %+v", f)
	}
	if b, _ := json.Marshal(f); strings.Contains(string(b), "dev-secret-code") {
		t.Fatalf("the device code left the gateway: %s", b)
	}
	h.gh.script("pending", "slow_down", "slow_down:30", "ok")
	poll := func() DevicePoll {
		t.Helper()
		res, err := h.svc.PollCopilotDevice(ctx, f.Flow, "token")
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := poll(); !res.Pending || h.gh.pollCount() != 0 {
		t.Fatalf("polled GitHub before the interval: %+v, %d polls", res, h.gh.pollCount())
	}
	if _, err := h.svc.PollCopilotDevice(ctx, f.Flow, "session:other"); errKey(err) != "oauth.flow_unknown" {
		t.Fatalf("another operator's poll: %v", err)
	}
	h.clock.Advance(5 * time.Second)
	if res := poll(); !res.Pending || res.Interval != 5*time.Second || h.gh.pollCount() != 1 {
		t.Fatalf("pending: %+v, %d polls", res, h.gh.pollCount())
	}
	h.clock.Advance(5 * time.Second)
	if res := poll(); !res.Pending || res.Interval != 10*time.Second {
		t.Fatalf("slow_down: %+v", res)
	}
	h.clock.Advance(10 * time.Second)
	if res := poll(); !res.Pending || res.Interval != 30*time.Second || h.gh.pollCount() != 3 {
		t.Fatalf("slow_down to GitHub's 30 s: %+v, %d polls", res, h.gh.pollCount())
	}
	h.clock.Advance(29 * time.Second)
	if res := poll(); !res.Pending || h.gh.pollCount() != 3 {
		t.Fatal("polled before GitHub's interval")
	}
	h.clock.Advance(time.Second)
	res := poll()
	if res.Pending || !res.Created || res.Conn.Name != "copilot-1" || res.Conn.AuthType != catalog.AuthOAuth {
		t.Fatalf("approved: %+v", res)
	}
	if h.gh.exchanges.Load() != 1 {
		t.Fatalf("%d exchanges at sign-in, want 1 (the entitlement check)", h.gh.exchanges.Load())
	}
	cred := h.stored(res.Conn.ID)
	if cred.Account.UUID != "github:42" || cred.Account.Email != "octo" || cred.Account.Plan != "copilot_pro" ||
		!cred.SetupToken() || !cred.ExpiresAt.IsZero() || !strings.HasPrefix(cred.AccessToken.Reveal(), "gho_") {
		t.Fatalf("credential %+v", cred.Account)
	}
	if b, _ := json.Marshal(res.Conn); strings.Contains(string(b), "gho_") || strings.Contains(string(b), "copilot-") && strings.Contains(string(b), "tid=") {
		t.Fatalf("the connection shows a token: %s", b)
	}
	// The entitlement check's token serves the first request: no exchange.
	tok, base, err := h.svc.CopilotToken(ctx, h.entry(res.Conn.ID))
	if err != nil || !strings.HasPrefix(tok, "tid=copilot-") || base != "https://api.individual.githubcopilot.test" || h.gh.exchanges.Load() != 1 {
		t.Fatalf("first token %q %q %v, %d exchanges", tok, base, err, h.gh.exchanges.Load())
	}
	if _, err := h.svc.PollCopilotDevice(ctx, f.Flow, "token"); errKey(err) != "oauth.flow_unknown" {
		t.Fatalf("a used flow: %v", err)
	}
	for _, form := range h.gh.forms {
		if form.Get("grant_type") != deviceGrant || form.Get("client_id") != "Iv1.b507a08c87ecfe98" {
			t.Fatalf("poll form %v", form)
		}
	}

	again := h.mustSignIn("octo", 42)
	if again.ID != res.Conn.ID {
		t.Fatalf("the same GitHub user made connection %d, want %d", again.ID, res.Conn.ID)
	}
	other := h.mustSignIn("hubot", 7)
	if other.ID == res.Conn.ID || other.Name != "copilot-2" {
		t.Fatalf("another user: %+v", other)
	}
}

func TestCopilotDeviceFlowEnds(t *testing.T) {
	for _, tc := range []struct {
		step, key string
		status    int
	}{
		{"expired", "oauth.device_expired", http.StatusGone},
		{"denied", "oauth.device_denied", http.StatusForbidden},
	} {
		t.Run(tc.step, func(t *testing.T) {
			h := newCopilotHarness(t)
			ctx := context.Background()
			f, err := h.svc.StartCopilotDevice(ctx, "", "", "token")
			if err != nil {
				t.Fatal(err)
			}
			h.gh.script(tc.step)
			h.clock.Advance(5 * time.Second)
			_, err = h.svc.PollCopilotDevice(ctx, f.Flow, "token")
			var e *errs.Error
			if !errors.As(err, &e) || e.Msg.Key != tc.key || e.HTTPStatus() != tc.status {
				t.Fatalf("poll: %v", err)
			}
			h.clock.Advance(5 * time.Second)
			if _, err := h.svc.PollCopilotDevice(ctx, f.Flow, "token"); errKey(err) != "oauth.flow_unknown" {
				t.Fatalf("the flow lives on: %v", err)
			}
			if conns, _ := h.cat.ListConnections(ctx); len(conns) != 0 {
				t.Fatalf("%d connections", len(conns))
			}
		})
	}
	t.Run("wrong provider", func(t *testing.T) {
		h := newCopilotHarness(t)
		if _, err := h.svc.StartCopilotDevice(context.Background(), "anthropic", "", "token"); err == nil {
			t.Fatal("a device sign-in on an anthropic provider")
		}
	})
}

// An account without Copilot is refused at sign-in with GitHub's words (its token removed) and
// nothing is saved.
func TestCopilotSignInNotEntitled(t *testing.T) {
	h := newCopilotHarness(t)
	var seen atomic.Value
	h.gh.setExchange(func(w http.ResponseWriter, r *http.Request) bool {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "token ")
		seen.Store(tok)
		w.WriteHeader(403)
		fmt.Fprintf(w, `{"message":"Token %s is not authorized to use Copilot: no subscription","error_details":{"notification_id":"no_copilot_access"}}`, tok)
		return true
	})
	_, err := h.signInCopilot("octo", 42)
	var e *errs.Error
	if !errors.As(err, &e) || e.Msg.Key != "copilot.not_entitled" || e.HTTPStatus() != http.StatusForbidden {
		t.Fatalf("sign-in: %v", err)
	}
	text := e.Msg.String()
	if !strings.Contains(text, "not authorized to use Copilot") || strings.Contains(text, seen.Load().(string)) || !strings.Contains(text, "[redacted]") {
		t.Fatalf("message %s", text)
	}
	if conns, _ := h.cat.ListConnections(context.Background()); len(conns) != 0 {
		t.Fatalf("%d connections saved", len(conns))
	}
}

// The Copilot token is reused until refresh_in has passed; then one exchange runs in the
// background for any number of callers, who keep the current token meanwhile. Once the token has
// expired callers wait, again for one exchange.
func TestCopilotTokenCache(t *testing.T) {
	h := newCopilotHarness(t)
	ctx := context.Background()
	conn := h.mustSignIn("octo", 42)
	entry := h.entry(conn.ID)
	first, _, err := h.svc.CopilotToken(ctx, entry)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(1499 * time.Second)
	if tok, _, _ := h.svc.CopilotToken(ctx, entry); tok != first || h.gh.exchanges.Load() != 1 {
		t.Fatalf("exchanged before refresh_in: %d", h.gh.exchanges.Load())
	}
	h.clock.Advance(time.Second)
	hold := make(chan struct{})
	h.gh.mu.Lock()
	h.gh.hold = hold
	h.gh.mu.Unlock()
	concurrent := func() []string {
		out := make([]string, 20)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i], _, _ = h.svc.CopilotToken(ctx, entry)
			}()
		}
		wg.Wait()
		return out
	}
	for i, tok := range concurrent() { // nobody waits for the exchange: the token still works
		if tok != first {
			t.Fatalf("caller %d got %q during the exchange", i, tok)
		}
	}
	h.gh.mu.Lock()
	h.gh.hold = nil
	h.gh.mu.Unlock()
	close(hold)
	var second string
	servicetest.Eventually(func() bool { second, _, _ = h.svc.CopilotToken(ctx, entry); return second != first })
	if second == first || h.gh.exchanges.Load() != 2 {
		t.Fatalf("after refresh_in: %q, %d exchanges, want 2", second, h.gh.exchanges.Load())
	}
	if live := h.svc.Secrets(conn.ID); !slices.Contains(live, second) || !slices.Contains(live, first) {
		t.Fatal("the Copilot tokens are not among the account's secrets")
	}

	// Past expires_at, with no request meanwhile: the callers wait for one exchange.
	h.clock.Advance(31 * time.Minute)
	hold = make(chan struct{})
	h.gh.mu.Lock()
	h.gh.hold = hold
	h.gh.mu.Unlock()
	go func() {
		for h.gh.exchanges.Load() != 3 {
			time.Sleep(time.Millisecond)
		}
		close(hold)
	}()
	for i, tok := range concurrent() {
		if tok == second || tok == "" {
			t.Fatalf("caller %d got %q after expiry", i, tok)
		}
	}
	if n := h.gh.exchanges.Load(); n != 3 {
		t.Fatalf("%d exchanges, want 3", n)
	}
}

// A 401 from Copilot exchanges once; a request refused with a token already replaced takes the
// new one without another exchange.
func TestCopilotRejectedExchangesOnce(t *testing.T) {
	h := newCopilotHarness(t)
	ctx := context.Background()
	conn := h.mustSignIn("octo", 42)
	old, _, _ := h.svc.CopilotToken(ctx, h.entry(conn.ID))
	fresh, _, err := h.svc.CopilotRejected(ctx, h.entry(conn.ID), old)
	if err != nil || fresh == old || h.gh.exchanges.Load() != 2 {
		t.Fatalf("after a 401: %q %v, %d exchanges", fresh, err, h.gh.exchanges.Load())
	}
	again, _, err := h.svc.CopilotRejected(ctx, h.entry(conn.ID), old)
	if err != nil || again != fresh || h.gh.exchanges.Load() != 2 {
		t.Fatalf("a second 401 with the old token: %q %v, %d exchanges", again, err, h.gh.exchanges.Load())
	}
	if tok, _, _ := h.svc.CopilotToken(ctx, h.entry(conn.ID)); tok != fresh {
		t.Fatal("the refused token is still handed out")
	}
}

// An account that loses Copilot becomes terminal with GitHub's words at the next exchange; a
// dead GitHub token (401 at the exchange) expires the account.
func TestCopilotTerminal(t *testing.T) {
	t.Run("not entitled any more", func(t *testing.T) {
		h := newCopilotHarness(t)
		ctx := context.Background()
		conn := h.mustSignIn("octo", 42)
		h.gh.setExchange(func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(404)
			io.WriteString(w, `{"message":"Not Found: the account is not authorized to use Copilot"}`)
			return true
		})
		h.clock.Advance(1500 * time.Second)
		h.svc.CopilotToken(ctx, h.entry(conn.ID)) // starts the exchange in the background
		servicetest.Eventually(func() bool { return h.expired.count() > 0 })
		if h.expired.count() != 1 {
			t.Fatal("the connection was not made terminal")
		}
		_, _, err := h.svc.CopilotToken(ctx, h.entry(conn.ID))
		if err == nil || !strings.Contains(err.Error(), "not authorized to use Copilot") {
			t.Fatalf("after the refusal: %v", err)
		}
		// A sign-in again with Copilot back brings the account back.
		h.gh.setExchange(nil)
		h.clock.Advance(time.Minute)
		h.mustSignIn("octo", 42)
		if _, _, err := h.svc.CopilotToken(ctx, h.entry(conn.ID)); err != nil {
			t.Fatalf("after signing in again: %v", err)
		}
	})
	t.Run("GitHub token revoked", func(t *testing.T) {
		h := newCopilotHarness(t)
		ctx := context.Background()
		conn := h.mustSignIn("octo", 42)
		old, _, _ := h.svc.CopilotToken(ctx, h.entry(conn.ID))
		h.gh.revokeAll()
		if _, _, err := h.svc.CopilotRejected(ctx, h.entry(conn.ID), old); err == nil {
			t.Fatal("a token from a revoked GitHub token")
		}
		st, _ := h.svc.State(conn.ID)
		if !st.Expired || !strings.Contains(st.LastError, "copilot.github_token_dead") || h.expired.count() != 1 {
			t.Fatalf("state %+v, marked %d", st, h.expired.count())
		}
		h.clock.Advance(time.Hour)
		calls := h.gh.exchanges.Load()
		if _, _, err := h.svc.CopilotToken(ctx, h.entry(conn.ID)); !errors.Is(err, ErrNoToken) || h.gh.exchanges.Load() != calls {
			t.Fatalf("an expired account exchanged again: %v", err)
		}
	})
	t.Run("a failed exchange keeps the working token and backs off", func(t *testing.T) {
		h := newCopilotHarness(t)
		ctx := context.Background()
		conn := h.mustSignIn("octo", 42)
		first, _, _ := h.svc.CopilotToken(ctx, h.entry(conn.ID))
		h.gh.setExchange(func(w http.ResponseWriter, r *http.Request) bool { w.WriteHeader(502); return true })
		h.clock.Advance(1500 * time.Second)
		for i := 0; i < 5; i++ {
			if tok, _, err := h.svc.CopilotToken(ctx, h.entry(conn.ID)); tok != first || err != nil {
				t.Fatalf("the working token was not used: %q %v", tok, err)
			}
			h.svc.Wait()
		}
		if n := h.gh.exchanges.Load(); n != 2 || h.expired.count() != 0 {
			t.Fatalf("%d exchanges during the back-off, marked %d", n, h.expired.count())
		}
	})
}

// A GitHub token that expires is refreshed with its refresh token; GitHub's bad_refresh_token
// (in a 200) expires the account at once.
func TestGitHubTokenRefresh(t *testing.T) {
	h := newCopilotHarness(t)
	h.gh.expiring = true
	ctx := context.Background()
	conn := h.mustSignIn("octo", 42)
	cred := h.stored(conn.ID)
	if cred.SetupToken() || !cred.ExpiresAt.Equal(h.clock.Now().Add(8*time.Hour)) {
		t.Fatalf("expiring credential %+v", cred.ExpiresAt)
	}
	h.clock.Advance(8*time.Hour - time.Minute)
	next, err := h.svc.Token(ctx, h.entry(conn.ID))
	if err != nil || next == cred.AccessToken.Reveal() || h.stored(conn.ID).Rev != cred.Rev+1 {
		t.Fatalf("refresh: %q %v", next, err)
	}
	h.gh.mu.Lock()
	clear(h.gh.refresh)
	h.gh.mu.Unlock()
	h.clock.Advance(8*time.Hour - time.Minute)
	h.svc.Token(ctx, h.entry(conn.ID))
	if st, _ := h.svc.State(conn.ID); !st.Expired || !strings.Contains(st.LastError, "bad_refresh_token") || h.expired.count() != 1 {
		t.Fatalf("state %+v", st)
	}
}
