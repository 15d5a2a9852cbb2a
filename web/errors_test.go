package web

import (
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
)

// Each address answers errors in its caller's format: the proxy surfaces with and without /v1,
// the admin API, the dashboard; an address without a route answers an API client (an API key,
// or no HTML accepted) in its client's JSON and a browser with a page.
func TestAnswerSurface(t *testing.T) {
	notFound := edgeError(echo.ErrNotFound)
	other := errs.New(errs.Unauthorized, "err.login_required")
	html := map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
	av := map[string]string{"anthropic-version": "2023-06-01"}
	cases := []struct {
		name, path string
		header     map[string]string
		err        *errs.Error
		want       surface
	}{
		{"messages", "/v1/messages", nil, other, surfaceAnthropic},
		{"messages without /v1", "/messages", nil, other, surfaceAnthropic},
		{"count_tokens without /v1", "/messages/count_tokens", nil, other, surfaceAnthropic},
		{"chat", "/v1/chat/completions", av, other, surfaceOpenAI},
		{"chat without /v1", "/chat/completions", nil, other, surfaceOpenAI},
		{"responses without /v1", "/responses", nil, other, surfaceOpenAI},
		{"models", "/v1/models", nil, other, surfaceOpenAI},
		{"models for Anthropic", "/v1/models", av, other, surfaceAnthropic},
		{"a model without /v1 for Anthropic", "/models/up/x", av, other, surfaceAnthropic},
		{"session leases without /v1", "/session-leases", nil, other, surfaceOpenAI},
		{"session leases for Anthropic", "/session-leases", av, other, surfaceAnthropic},
		{"unknown under /v1", "/v1/files", nil, notFound, surfaceOpenAI},
		{"unknown under /v1 for Anthropic", "/v1/files", av, notFound, surfaceAnthropic},
		{"a look-alike is no surface", "/messagesx", html, other, surfaceDashboard},
		{"admin API", "/api/providers", av, notFound, surfaceAdmin},
		{"metrics", "/metrics", nil, other, surfaceAdmin},
		{"dashboard page, its own error", "/providers", nil, other, surfaceDashboard},
		{"unknown, browser", "/nope", html, notFound, surfaceDashboard},
		{"unknown, htmx", "/nope", map[string]string{"HX-Request": "true"}, notFound, surfaceDashboard},
		{"unknown, curl", "/nope", map[string]string{"Accept": "*/*"}, notFound, surfaceOpenAI},
		{"unknown, Anthropic client", "/nope", av, notFound, surfaceAnthropic},
		{"unknown, a key and HTML accepted", "/nope", map[string]string{"Accept": "text/html", "x-api-key": "k"}, notFound, surfaceOpenAI},
		{"unknown, a bearer and HTML accepted", "/nope", map[string]string{"Accept": "text/html", "Authorization": "Bearer k"}, notFound, surfaceOpenAI},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", c.path, nil)
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
			if got := answerSurface(r, c.err); got != c.want {
				t.Fatalf("surface %d, want %d", got, c.want)
			}
		})
	}
}

func TestSurfaceRoute(t *testing.T) {
	for in, want := range map[string]string{"/chat/completions": "/v1/chat/completions", "/v1/messages": "/v1/messages",
		"/models/*": "/v1/models/*", "/v1/*": "/v1/*"} {
		if got := surfaceRoute(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	for p, want := range map[string]bool{"/v1": true, "/v1/x": true, "/messages": true, "/models/a/b": true, "/v1x": false,
		"/providers": false, "/": false, "/api/keys": false, "/responsesx": false, "/session-leases": true} {
		if got := isProxyPath(p); got != want {
			t.Errorf("isProxyPath(%s) = %v", p, got)
		}
	}
}
