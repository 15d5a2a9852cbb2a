package e2e

import (
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

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
