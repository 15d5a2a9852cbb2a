package ops

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// Every route that is not public refuses a caller without credentials; the test walks the route
// table, so routes added later are covered without touching it. Dashboard routes send a browser
// to the login page (or refuse its form post) and answer any other caller with a JSON 404, as for
// an address that does not exist.
func TestEveryProtectedRouteRefusesAnonymousCallers(t *testing.T) {
	e := testenv.New(t)
	c := testenv.NoRedirect()
	seen := map[string]bool{}
	for _, r := range e.App.Routes {
		seen[r.Access] = true
		if r.Access == "public" {
			continue
		}
		path := strings.NewReplacer(":id", "1", ":code", "en").Replace(r.Path)
		req, _ := http.NewRequest(r.Method, e.Base+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		if r.Access == "dashboard" {
			req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch r.Access {
		case "dashboard":
			loc := resp.Header.Get("Location")
			if !(resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(loc, "/login")) && resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s: %d %s", r.Method, r.Path, resp.StatusCode, loc)
			}
			req, _ := http.NewRequest(r.Method, e.Base+path, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := testenv.ReadAll(t, resp)
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
				t.Errorf("%s %s without a browser's Accept: %d %s", r.Method, r.Path, resp.StatusCode, body)
			}
		default: // admin, client, metrics (the admin token is set in tests)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s (%s): %d", r.Method, r.Path, r.Access, resp.StatusCode)
			}
		}
	}
	for _, a := range []string{"admin", "dashboard", "client", "metrics", "public"} {
		if !seen[a] {
			t.Errorf("no route with access %q: the table changed shape", a)
		}
	}
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	e := testenv.New(t)
	c := e.Login()
	for _, path := range []string{"/api/providers", "/keys", "/settings/connection-cooldown"} {
		for _, h := range []map[string]string{
			{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
			{"Content-Type": "application/json", "Origin": "http://evil.example"},
		} {
			if st, _, _ := testenv.Call(t, c, "POST", e.Base+path, `{"name":"x","type":"openai","base_url":"http://a/v1"}`, h); st != http.StatusForbidden {
				t.Errorf("POST %s with %v: %d", path, h, st)
			}
		}
	}
	// Same-origin browser requests pass.
	req, _ := http.NewRequest("POST", e.Base+"/api/keys", strings.NewReader(`{"name":"same"}`))
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", e.Base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("same-origin POST: %d", resp.StatusCode)
	}
}

// The session cookie is HttpOnly and SameSite=Lax, and Secure when the client came over TLS. A
// reverse proxy's X-Forwarded-Proto says so only when the proxy is listed in --trusted-proxies:
// from anyone else (here a peer outside the trusted list, or any peer without one) it is
// ignored, for the session cookie, the language cookie and the base URL the overview shows.
func TestSessionCookieFlags(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		forward bool
		secure  bool
	}{
		{"plain", nil, false, false},
		{"forwarded, no trusted proxies", nil, true, false},
		{"forwarded by an untrusted peer", []string{"--trusted-proxies", "10.0.0.0/8"}, true, false},
		{"forwarded by a trusted proxy", []string{"--trusted-proxies", "127.0.0.1/32"}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := testenv.New(t, c.args...)
			header := func(req *http.Request) {
				if c.forward {
					req.Header.Set("X-Forwarded-Proto", "https")
				}
			}
			req, _ := http.NewRequest("POST", e.Base+"/login", strings.NewReader(url.Values{"password": {testenv.Password}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			header(req)
			resp, err := testenv.NoRedirect().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var session *http.Cookie
			for _, ck := range resp.Cookies() {
				if ck.Name == "switchyard_session" {
					session = ck
				}
			}
			if session == nil {
				t.Fatalf("no session cookie (%d)", resp.StatusCode)
			}
			if !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure != c.secure {
				t.Errorf("session cookie flags HttpOnly=%v SameSite=%v Secure=%v, want Secure=%v", session.HttpOnly,
					session.SameSite, session.Secure, c.secure)
			}

			req, _ = http.NewRequest("GET", e.Base+"/lang/de?next=/", nil)
			header(req)
			resp, err = testenv.NoRedirect().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for _, ck := range resp.Cookies() {
				if ck.Name == "switchyard_lang" && ck.Secure != c.secure {
					t.Errorf("language cookie Secure=%v, want %v", ck.Secure, c.secure)
				}
			}

			req, _ = http.NewRequest("GET", e.Base+"/", nil)
			req.AddCookie(session)
			header(req)
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Replace(e.Base, "http://", map[bool]string{false: "http://", true: "https://"}[c.secure], 1) + "/v1"
			if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, `id="base-url">`+want+`<`) {
				t.Errorf("overview: %d, base URL is not %s", resp.StatusCode, want)
			}
		})
	}
}

func TestLoginIsRateLimited(t *testing.T) {
	e := testenv.New(t)
	statuses := []int{}
	for i := 0; i < 7; i++ {
		resp, err := http.PostForm(e.Base+"/login", url.Values{"password": {"guess"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	if statuses[0] != http.StatusUnauthorized || statuses[6] != http.StatusTooManyRequests {
		t.Fatalf("statuses %v", statuses)
	}
	// Even the right password is refused while the budget is spent.
	resp, _ := testenv.NoRedirect().PostForm(e.Base+"/login", url.Values{"password": {testenv.Password}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right password during lockout: %d", resp.StatusCode)
	}
}

// No page, API answer or log line contains a stored secret: seed known secrets, use the gateway,
// then fetch every GET route as the admin and scan.
func TestNoSecretInAnyResponseOrLog(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.Status(429, map[string]string{"Retry-After": "5"}, `{"error":{"message":"slow down"}}`))
	e := testenv.New(t)
	const upstreamKey = "sk-upstream-SECRET-0123456789abcdef"
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", upstreamKey, 0)
	clientKey := e.NewKey()
	e.WaitModels(clientKey, "up/gpt-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	testenv.ReadAll(t, e.Chat(context.Background(), clientKey, testenv.ChatBody))
	secrets := []string{upstreamKey, clientKey, testenv.Password, testenv.AdminToken}
	c := e.Login()
	for _, r := range e.App.Routes {
		if r.Method != http.MethodGet || strings.Contains(r.Path, ":") {
			continue
		}
		req, _ := http.NewRequest("GET", e.Base+r.Path, nil)
		if r.Access == "client" {
			req.Header.Set("Authorization", "Bearer "+clientKey)
		}
		if r.Access == "metrics" {
			req.Header.Set("Authorization", "Bearer "+testenv.AdminToken)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := testenv.ReadAll(t, resp)
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("GET %s contains a secret", r.Path)
			}
		}
	}
	for _, p := range []string{"/api/connections/1", "/connections/1/edit", "/providers/1/edit"} {
		resp, err := c.Get(e.Base + p)
		if err != nil {
			t.Fatal(err)
		}
		if body := testenv.ReadAll(t, resp); strings.Contains(body, upstreamKey) {
			t.Errorf("GET %s contains the upstream key", p)
		}
	}
	e.Stop()
	for _, s := range secrets {
		if strings.Contains(e.Logs.String(), s) {
			t.Errorf("the log contains a secret (%.6s…)", s)
		}
	}
}

// Every answer a browser may render or load (pages, the login, error pages, static files, the
// admin API) forbids framing, MIME sniffing, inline script and cross-site referrers.
func TestDashboardSecurityHeaders(t *testing.T) {
	e := testenv.New(t)
	c := e.Login()
	for _, path := range []string{"/", "/providers", "/keys", "/model-cooldowns", "/settings", "/login", "/no-such-page",
		"/static/app.css", "/static/app.js", "/static/dist/js/htmx.min.js", "/api/providers"} {
		resp, err := c.Get(e.Base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP allows inline code: %q", path, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: X-Frame-Options %q, X-Content-Type-Options %q, Referrer-Policy %q", path,
				h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
	}
	// The proxy surfaces answer API clients, not browsers: no page headers on the hot path.
	req, _ := http.NewRequest("GET", e.Base+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+e.NewKey())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != "" {
		t.Fatalf("/v1/models: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
}
