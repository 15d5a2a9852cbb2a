package ops

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// Without an admin token, /metrics answers loopback clients (and the logged-in dashboard) only:
// a client elsewhere, here one a trusted reverse proxy names, gets 403.
func TestMetricsWithoutATokenAnswerLoopbackClientsOnly(t *testing.T) {
	e := testenv.New(t, "--trusted-proxies", "127.0.0.1/32")
	delete(e.Vars, "SWITCHYARD_ADMIN_TOKEN")
	e.Restart()
	proxy := testenv.ClientFrom(t, "127.0.0.1")
	remote := map[string]string{"X-Forwarded-For": "203.0.113.5"}
	if st, h, _ := testenv.Call(t, proxy, "GET", e.Base+"/metrics", "", nil); st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("loopback client: %d %s", st, h.Get("Content-Type"))
	}
	// A scraper configured with some bearer token is not guessing anything: no token is set.
	for i := range 7 {
		if st, _, _ := testenv.Call(t, proxy, "GET", e.Base+"/metrics", "", map[string]string{"Authorization": "Bearer stale-token-0123456789"}); st != 200 {
			t.Fatalf("loopback scraper with a bearer token, scrape %d: %d", i, st)
		}
	}
	if st, _, _ := testenv.Call(t, testenv.ClientFrom(t, "127.0.0.2"), "GET", e.Base+"/metrics", "", map[string]string{"X-Forwarded-For": "203.0.113.5"}); st != 200 {
		t.Fatalf("loopback client that is no trusted proxy (its header is not believed): %d", st)
	}
	st, h, body := testenv.Call(t, proxy, "GET", e.Base+"/metrics", "", remote)
	if st != http.StatusForbidden || h.Get("Content-Type") != "application/json" || !strings.Contains(body, "loopback") {
		t.Fatalf("remote client: %d %s", st, body)
	}
	// A remote admin logs in and reads them.
	dash := e.Login()
	req, _ := http.NewRequest("GET", e.Base+"/metrics", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.5")
	resp, err := dash.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.ReadAll(t, resp); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("remote client with a session: %d", resp.StatusCode)
	}
}

// An anonymous /health (and /ready) says only the status; the version and the schema are for
// the admin's token or session.
func TestHealthShowsTheVersionOnlyToTheAdmin(t *testing.T) {
	e := testenv.New(t)
	fields := func(c *http.Client, path string, header map[string]string) map[string]any {
		t.Helper()
		st, _, body := testenv.Call(t, c, "GET", e.Base+path, "", header)
		var out map[string]any
		if st != 200 || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("%s: %d %s", path, st, body)
		}
		return out
	}
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer wrong-token-0123456789"}} {
		if got := fields(http.DefaultClient, "/health", h); len(got) != 1 || got["status"] != "ok" {
			t.Errorf("anonymous /health: %v", got)
		}
		if got := fields(http.DefaultClient, "/ready", h); len(got) != 1 || got["status"] != "ready" {
			t.Errorf("anonymous /ready: %v", got)
		}
	}
	token := map[string]string{"Authorization": "Bearer " + testenv.AdminToken}
	for name, c := range map[string]*http.Client{"token": http.DefaultClient, "session": e.Login()} {
		h := token
		if name == "session" {
			h = nil
		}
		got := fields(c, "/health", h)
		if got["status"] != "ok" || got["version"] == nil || got["schema"] == nil {
			t.Errorf("/health with the %s: %v", name, got)
		}
		if got := fields(c, "/ready", h); got["status"] != "ready" || got["schema"] == nil {
			t.Errorf("/ready with the %s: %v", name, got)
		}
	}
}

// A browser that sends neither Sec-Fetch-Site nor Origin is judged by its Referer: a
// state-changing request referred by another site is refused, one from the dashboard passes.
func TestCrossOriginChecksFallBackToTheReferer(t *testing.T) {
	e := testenv.New(t)
	c := e.Login()
	noRedirect := *c
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	post := func(path, ctype, body, referer string) int {
		st, _, _ := testenv.Call(t, &noRedirect, "POST", e.Base+path, body, map[string]string{"Content-Type": ctype, "Referer": referer})
		return st
	}
	form := url.Values{"name": {"laptop"}}.Encode()
	if st := post("/keys", "application/x-www-form-urlencoded", form, "http://evil.example/page"); st != http.StatusForbidden {
		t.Fatalf("dashboard form referred by another site: %d", st)
	}
	if st := post("/api/keys", "application/json", `{"name":"x"}`, "http://evil.example/page"); st != http.StatusForbidden {
		t.Fatalf("admin API referred by another site: %d", st)
	}
	if out := e.MustAPI("GET", "/api/keys", nil, 200); len(out["items"].([]any)) != 0 {
		t.Fatalf("a refused request created a key: %v", out["items"])
	}
	if st := post("/keys", "application/x-www-form-urlencoded", form, e.Base+"/keys"); st != http.StatusOK {
		t.Fatalf("dashboard form referred by the dashboard: %d", st)
	}
	if out := e.MustAPI("GET", "/api/keys", nil, 200); len(out["items"].([]any)) != 1 {
		t.Fatalf("the dashboard's own request created no key: %v", out["items"])
	}
}
