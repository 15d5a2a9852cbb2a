package ops

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// DNS rebinding: a request whose Host is not one of the gateway's names (loopback names and
// addresses, the listen address, --public-host) is refused with 421 in the caller's format on
// every route, with or without credentials; only a proxy call with a valid client key passes.
func TestRequestsForForeignHostsAreRefused(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON), "--public-host", "gateway.example.com")
	dash := e.Login()

	send := func(c *http.Client, host, method, path, body string, header map[string]string) (int, http.Header, string) {
		t.Helper()
		h := map[string]string{"Host": host}
		maps.Copy(h, header)
		return testenv.Call(t, c, method, e.Base+path, body, h)
	}
	admin := map[string]string{"Authorization": "Bearer " + testenv.AdminToken}
	client := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}

	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "gateway.example.com.evil.example"} {
		for _, c := range []struct {
			name, method, path, body string
			header                   map[string]string
			client                   *http.Client
			html                     bool
		}{
			{"health", "GET", "/health", "", nil, http.DefaultClient, true},
			{"login page", "GET", "/login", "", nil, http.DefaultClient, true},
			{"login", "POST", "/login", "password=" + testenv.Password, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, testenv.NoRedirect(), true},
			{"static file", "GET", "/static/app.css", "", nil, http.DefaultClient, true},
			{"dashboard with a session", "GET", "/", "", nil, dash, true},
			{"admin API with the token", "GET", "/api/providers", "", admin, http.DefaultClient, false},
			{"metrics with the token", "GET", "/metrics", "", admin, http.DefaultClient, false},
		} {
			st, h, body := send(c.client, host, c.method, c.path, c.body, c.header)
			if st != http.StatusMisdirectedRequest {
				t.Errorf("%s for %s: %d", c.name, host, st)
				continue
			}
			if c.html && !strings.HasPrefix(h.Get("Content-Type"), "text/html") ||
				!c.html && !strings.Contains(body, `"code":"misdirected_request"`) {
				t.Errorf("%s for %s: not in its format: %s %.200s", c.name, host, h.Get("Content-Type"), body)
			}
		}
	}

	// The proxy surfaces: a valid client key passes whatever the host.
	if st, _, body := send(http.DefaultClient, "evil.example", "POST", "/v1/chat/completions", testenv.ChatBody, client); st != 200 {
		t.Fatalf("proxy call with a valid key for a foreign host: %d %s", st, body)
	}
	if st, _, body := send(http.DefaultClient, "evil.example", "GET", "/v1/models", "", client); st != 200 {
		t.Fatalf("model list with a valid key for a foreign host: %d %s", st, body)
	}
	st, _, body := send(http.DefaultClient, "evil.example", "POST", "/v1/chat/completions", testenv.ChatBody,
		map[string]string{"Authorization": "Bearer sk-sy-wrong"})
	var oa struct{ Error struct{ Type, Code string } }
	if json.Unmarshal([]byte(body), &oa) != nil || st != http.StatusMisdirectedRequest || oa.Error.Code != "misdirected_request" {
		t.Fatalf("proxy call with a wrong key for a foreign host: %d %s", st, body)
	}
	st, _, body = send(http.DefaultClient, "evil.example", "POST", "/v1/messages", `{}`, map[string]string{"anthropic-version": "2023-06-01"})
	var an struct {
		Type  string
		Error struct{ Type string }
	}
	if json.Unmarshal([]byte(body), &an) != nil || st != http.StatusMisdirectedRequest || an.Type != "error" {
		t.Fatalf("Anthropic call without a key for a foreign host: %d %s", st, body)
	}

	// The gateway's own names pass: loopback, the listen address, the public name on any port and
	// in any case.
	for _, host := range []string{"127.0.0.1", strings.TrimPrefix(e.Base, "http://"), "localhost:8080", "LOCALHOST", "[::1]:80",
		"gateway.example.com", "Gateway.Example.COM:8443", "gateway.example.com."} {
		if st, _, body := send(http.DefaultClient, host, "GET", "/health", "", nil); st != 200 {
			t.Errorf("health for %s: %d %s", host, st, body)
		}
		if st, _, _ := send(http.DefaultClient, host, "GET", "/api/providers", "", admin); st != 200 {
			t.Errorf("admin API for %s: %d", host, st)
		}
	}
}
