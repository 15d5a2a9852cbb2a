package ops

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/securecookie"

	"switchyard/e2e/testenv"
	"switchyard/services/secrets"
)

// loginAddr numbers the loopback addresses logins come from, so the login throttle (5 at once
// per address) never stands between a test and its sessions.
var loginAddr atomic.Int32

// sessionCookie logs in (each time from another loopback address) and returns the session
// cookie's value.
func sessionCookie(t *testing.T, e *testenv.Env) string {
	t.Helper()
	n := loginAddr.Add(1)
	c := testenv.ClientFrom(t, fmt.Sprintf("127.0.%d.%d", 10+n/250, 1+n%250))
	req, _ := http.NewRequest("POST", e.Base+"/login", strings.NewReader(url.Values{"password": {testenv.Password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "switchyard_session" && ck.Value != "" {
			return ck.Value
		}
	}
	t.Fatalf("login: %d without a session cookie", resp.StatusCode)
	return ""
}

// sessionID is the random session id a cookie carries, signed under the instance secret's
// cookie key.
func sessionID(t *testing.T, e *testenv.Env, cookie string) string {
	t.Helper()
	key, _, err := secrets.LoadOrCreateKey(e.DataDir, e.Vars["SWITCHYARD_SECRET_KEY"])
	if err != nil {
		t.Fatal(err)
	}
	var id []byte
	codec := securecookie.New(secrets.Derive(key, "dashboard session cookies v1", 32), nil).SetSerializer(securecookie.NopEncoder{})
	if err := codec.Decode("switchyard_session", cookie, &id); err != nil || len(id) != 43 {
		t.Fatalf("the session cookie is not a signed id: %q %v", id, err)
	}
	return string(id)
}

// withCookie makes a request carrying a session cookie by hand (a copied cookie, no jar), as a
// browser does (accepting HTML: without a session, dashboard pages send it to the login).
func withCookie(t *testing.T, e *testenv.Env, method, path, cookie string) int {
	t.Helper()
	req, _ := http.NewRequest(method, e.Base+path, nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	req.AddCookie(&http.Cookie{Name: "switchyard_session", Value: cookie})
	resp, err := testenv.NoRedirect().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// live reports whether a copied session cookie still opens the admin API.
func live(t *testing.T, e *testenv.Env, cookie string) bool {
	t.Helper()
	switch st := withCookie(t, e, "GET", "/api/providers", cookie); st {
	case http.StatusOK:
		return true
	case http.StatusUnauthorized:
		return false
	default:
		t.Fatalf("GET /api/providers: %d", st)
		return false
	}
}

// The cookie is only a random id: a copy taken before logout is worth nothing after it, on the
// API and on the dashboard, and other sessions are untouched.
func TestLogoutEndsTheSessionOnTheServer(t *testing.T) {
	e := testenv.New(t)
	copied, other := sessionCookie(t, e), sessionCookie(t, e)
	if !live(t, e, copied) || withCookie(t, e, "GET", "/", copied) != http.StatusOK {
		t.Fatal("a fresh session does not work")
	}
	if st := withCookie(t, e, "POST", "/logout", copied); st != http.StatusSeeOther {
		t.Fatalf("logout: %d", st)
	}
	if live(t, e, copied) {
		t.Fatal("a cookie copied before logout still reads the admin API")
	}
	if st := withCookie(t, e, "GET", "/", copied); st != http.StatusSeeOther {
		t.Fatalf("the dashboard after logout: %d, want a redirect to the login", st)
	}
	if !live(t, e, other) {
		t.Fatal("logging out one session ended another")
	}
	// Made-up and old-format cookies open nothing: a bare id as cookies held before they were
	// signed, a gorilla cookie-store value as before the sessions moved to the server.
	for _, junk := range []string{"x", strings.Repeat("A", 43), "MTcxNjAwMDAwMHxEdi1CQkFFQ180SUFBUkFCRUFBQUpfLUNBQUVHYzNSeWFXNW5EQWNBQldGa2JXbHVCR0p2YjJ3Q0FnQUJ8"} {
		if live(t, e, junk) {
			t.Fatalf("cookie %q was accepted", junk)
		}
	}
	// The cookie is signed under a key derived from the instance secret: another gateway's
	// cookie, or one altered, opens nothing here.
	if live(t, e, sessionCookie(t, testenv.New(t))) {
		t.Fatal("another instance's session cookie was accepted")
	}
	mine := sessionCookie(t, e)
	if !live(t, e, mine) {
		t.Fatal("a fresh session does not work")
	}
	if live(t, e, mine[:len(mine)-4]+"AAAA") {
		t.Fatal("a cookie with an altered signature was accepted")
	}
}

// "Log out everywhere" on the dashboard and POST /api/sessions/revoke-all end every session at
// once.
func TestLogOutEverywhere(t *testing.T) {
	e := testenv.New(t)
	a, b := sessionCookie(t, e), sessionCookie(t, e)
	if st := withCookie(t, e, "POST", "/logout-everywhere", a); st != http.StatusSeeOther {
		t.Fatalf("log out everywhere: %d", st)
	}
	if live(t, e, a) || live(t, e, b) {
		t.Fatal("a session survived logging out everywhere")
	}
	c, d := sessionCookie(t, e), sessionCookie(t, e)
	if out := e.MustAPI("POST", "/api/sessions/revoke-all", nil, 200); out["revoked"] != float64(2) {
		t.Fatalf("revoke-all: %v", out)
	}
	if live(t, e, c) || live(t, e, d) {
		t.Fatal("a session survived revoke-all")
	}
	// The button is on every page.
	cl := e.Login()
	resp, err := cl.Get(e.Base + "/")
	if err != nil {
		t.Fatal(err)
	}
	if body := testenv.ReadAll(t, resp); !strings.Contains(body, `action="/logout-everywhere"`) {
		t.Fatal("no log-out-everywhere button in the top bar")
	}
}

// Sessions end after their absolute lifetime however busy they are (7 days by default: a
// session begun 8 or 29 days ago is refused), after their idle lifetime (24 hours), and at once
// when an operator shortens either.
func TestSessionLifetimesAreEnforced(t *testing.T) {
	e := testenv.New(t)
	busy, idle := sessionCookie(t, e), sessionCookie(t, e)
	// Keep busy in use every 12 hours; idle goes unused.
	for elapsed := time.Duration(0); elapsed < 7*24*time.Hour-12*time.Hour; elapsed += 12 * time.Hour {
		e.Clock.Advance(12 * time.Hour)
		if !live(t, e, busy) {
			t.Fatalf("a session in use every 12 hours ended after %v", elapsed+12*time.Hour)
		}
		if elapsed == 0 && !live(t, e, idle) {
			t.Fatal("a session idle for 12 hours ended")
		}
		if elapsed == 24*time.Hour && live(t, e, idle) {
			t.Fatal("a session idle for 24 hours still works")
		}
	}
	e.Clock.Advance(12 * time.Hour) // 7 days
	if live(t, e, busy) {
		t.Fatal("a session began 7 days ago still works")
	}

	// Begun 8 and 29 days ago, with the idle lifetime raised to 30 days so that only the age
	// refuses them.
	e.MustAPI("PATCH", "/api/settings/sessions", map[string]any{"idle_timeout_ms": 30 * 24 * 3600 * 1000}, 200)
	old8, old29 := sessionCookie(t, e), sessionCookie(t, e)
	e.Clock.Advance(8 * 24 * time.Hour)
	if live(t, e, old8) {
		t.Fatal("a session begun 8 days ago works")
	}
	e.Clock.Advance(21 * 24 * time.Hour)
	if live(t, e, old29) {
		t.Fatal("a session begun 29 days ago works")
	}

	// The settings: strict, with their sources, applied at once; null restores a default.
	doc := e.MustAPI("PATCH", "/api/settings/sessions", map[string]any{"idle_timeout_ms": nil}, 200)
	if v := doc["values"].(map[string]any); v["absolute_lifetime_ms"] != float64(7*24*3600*1000) || v["idle_timeout_ms"] != float64(24*3600*1000) {
		t.Fatalf("defaults: %v", doc)
	}
	for _, bad := range []map[string]any{{"idle_timeout_ms": 1}, {"absolute_lifetime_ms": 100 * 24 * 3600 * 1000}, {"idle": 600000}, {"idle_timeout_ms": "10m"}} {
		if st := e.API("PATCH", "/api/settings/sessions", bad, nil); st != http.StatusUnprocessableEntity {
			t.Errorf("PATCH %v: %d, want 422", bad, st)
		}
	}
	s := sessionCookie(t, e)
	doc = e.MustAPI("PATCH", "/api/settings/sessions", map[string]any{"idle_timeout_ms": 10 * 60 * 1000}, 200)
	if doc["sources"].(map[string]any)["idle_timeout_ms"] != "persisted" {
		t.Fatalf("sources: %v", doc)
	}
	e.Clock.Advance(9 * time.Minute)
	if !live(t, e, s) {
		t.Fatal("a session idle for 9 minutes ended under a 10-minute idle lifetime")
	}
	e.Clock.Advance(11 * time.Minute)
	if live(t, e, s) {
		t.Fatal("a session idle for 11 minutes works under a 10-minute idle lifetime")
	}
	// Saved settings survive a restart; sessions do too.
	s = sessionCookie(t, e)
	e.Restart()
	if !live(t, e, s) {
		t.Fatal("a session did not survive a restart")
	}
	if v := e.MustAPI("GET", "/api/settings/sessions", nil, 200)["values"].(map[string]any); v["idle_timeout_ms"] != float64(600000) {
		t.Fatalf("after restart: %v", v)
	}
}

// With the shortest idle lifetime (a minute), a session used every 20 seconds stays logged in
// over many idle periods (its last use is written often enough), and one left alone ends.
func TestBusySessionOutlivesAShortIdleTimeout(t *testing.T) {
	e := testenv.New(t)
	e.MustAPI("PATCH", "/api/settings/sessions", map[string]any{"idle_timeout_ms": 60_000}, 200)
	busy, unused := sessionCookie(t, e), sessionCookie(t, e)
	for i := 1; i <= 30; i++ { // ten idle periods
		e.Clock.Advance(20 * time.Second)
		if !live(t, e, busy) {
			t.Fatalf("a session used every 20 s ended after %v under a one-minute idle lifetime", time.Duration(i)*20*time.Second)
		}
	}
	if live(t, e, unused) {
		t.Fatal("a session unused for 10 minutes works under a one-minute idle lifetime")
	}
	e.Clock.Advance(time.Minute)
	if live(t, e, busy) {
		t.Fatal("a session unused for a minute works under a one-minute idle lifetime")
	}
}

// One-time messages live in the server-side session: shown on the next page, then gone.
func TestFlashMessagesSurviveTheMoveToServerSessions(t *testing.T) {
	e := testenv.New(t)
	c := e.Login()
	resp, err := c.PostForm(e.Base+"/providers", url.Values{"name": {"flashy"}, "type": {"openai-compatible"}, "base_url": {"http://127.0.0.1:9/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "flash-success") {
		t.Fatalf("after the redirect: %d, flash missing", resp.StatusCode)
	}
	resp, err = c.Get(e.Base + "/providers")
	if err != nil {
		t.Fatal(err)
	}
	if body := testenv.ReadAll(t, resp); strings.Contains(body, "flash-success") {
		t.Fatal("the flash message was shown twice")
	}
}

// Neither a session id nor its hash, nor the password, reaches the log (which runs at debug in
// tests), whatever happens to the session.
func TestSessionIDsNeverReachTheLog(t *testing.T) {
	e := testenv.New(t)
	a, b := sessionCookie(t, e), sessionCookie(t, e)
	live(t, e, a)
	withCookie(t, e, "GET", "/providers", a)
	withCookie(t, e, "POST", "/logout", a)
	live(t, e, a)
	e.Clock.Advance(25 * time.Hour)
	live(t, e, b) // expired now
	withCookie(t, e, "POST", "/logout-everywhere", sessionCookie(t, e))
	e.Stop()
	logs := e.Logs.String()
	ida, idb := sessionID(t, e, a), sessionID(t, e, b)
	for _, s := range []string{a, b, ida, idb, secrets.SHA256Hex(ida), secrets.SHA256Hex(idb), testenv.Password} {
		if strings.Contains(logs, s) {
			t.Errorf("the log contains a session secret (%.6s…)", s)
		}
	}
}
