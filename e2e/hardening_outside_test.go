package e2e

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// deviceStarter plays GitHub's device flow: a start is answered with the verification_uri it is
// told to, so a test decides what address the gateway keeps for a sign-in, and every poll with
// authorization_pending.
type deviceStarter struct {
	*httptest.Server
	mu  sync.Mutex
	uri string
	n   int
}

func newDeviceStarter(t *testing.T) *deviceStarter {
	t.Helper()
	d := &deviceStarter{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method != http.MethodPost:
			http.NotFound(w, r)
			return
		case r.URL.Path == "/login/oauth/access_token":
			io.WriteString(w, `{"error":"authorization_pending","error_description":"The authorization request is still pending."}`)
			return
		case r.URL.Path != "/login/device/code":
			http.NotFound(w, r)
			return
		}
		d.mu.Lock()
		d.n++
		uri, n := d.uri, d.n
		d.mu.Unlock()
		fmt.Fprintf(w, `{"device_code":"ghdev_%04d_secret","user_code":"WDJB-%04d","verification_uri":%q,"expires_in":900,"interval":5}`, n, n, uri)
	}))
	t.Cleanup(d.Close)
	return d
}

// answer sets the verification_uri of the next starts.
func (d *deviceStarter) answer(uri string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.uri = uri
}

// hrefs lists every href and formaction value of a page, unescaped.
func hrefs(page string) []string {
	var out []string
	for _, m := range hrefRE.FindAllStringSubmatch(page, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

var hrefRE = regexp.MustCompile(`(?i)\b(?:href|formaction|action|src)\s*=\s*"([^"]*)"`)

// unsafeLink names the first link of a page that is neither on the gateway (a path) nor an
// https address, nor an http address on one of the allowed hosts ("" when there is none).
func unsafeLink(page string, httpHosts ...string) string {
	for _, h := range hrefs(page) {
		if h == "" || strings.HasPrefix(h, "/") && !strings.HasPrefix(h, "//") || strings.HasPrefix(h, "#") {
			continue
		}
		u, err := url.Parse(h)
		if err != nil {
			return h
		}
		switch strings.ToLower(u.Scheme) {
		case "https":
			if u.Host != "" && u.User == nil {
				continue
			}
		case "http":
			ok := false
			for _, allowed := range httpHosts {
				ok = ok || strings.EqualFold(u.Host, allowed)
			}
			if ok && u.User == nil {
				continue
			}
		}
		return h
	}
	return ""
}

// claudeLink is the address the Claude card links to for signing in ("" when none).
func claudeLink(page string) string {
	if m := claudeLinkRE.FindStringSubmatch(page); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

var claudeLinkRE = regexp.MustCompile(`<a href="([^"]*)"[^>]*\bid="claude-auth-link"`)

// The dashboard renders as links only addresses kept on the server, and of those only https ones
// (or http ones on the host of a configured http address, for tests): an address an upstream
// answered (javascript:, data:, a scheme-relative one, http to another host) is never a link,
// neither when the sign-in starts nor when the page shows it again from the server's copy; the
// OAuth settings refuse addresses that are no http(s) and an https address with user-info is
// shown as text; an address a form sends is never shown.
func TestDashboardLinksComeOnlyFromSafeAddresses(t *testing.T) {
	gh := newDeviceStarter(t)
	e := testenv.New(t)
	e.MustAPI("POST", "/api/providers", map[string]any{"name": "copilot", "type": "copilot"}, 201)
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"copilot": map[string]any{
		"device_code_url": gh.URL + "/login/device/code", "access_token_url": gh.URL + "/login/oauth/access_token",
		"copilot_token_url": gh.URL + "/copilot_internal/v2/token", "user_url": gh.URL + "/user"}}, 200)
	ghHost := strings.TrimPrefix(gh.URL, "http://")
	admin := e.Login()

	verification := func(page string) (link, text string) {
		return html.UnescapeString(testenv.Between(page, `id="copilot-verification-link">`, `<`)),
			html.UnescapeString(testenv.Between(page, `id="copilot-verification-text">`, `<`))
	}
	for _, c := range []struct {
		name, uri string
		link      string // the address shown as the link ("" = none)
		text      string // the address shown as text ("" = none)
	}{
		{"javascript", "javascript:alert(1)", "https://github.com/login/device", ""},
		{"javascript, mixed case", "JavaScript:alert(document.cookie)", "https://github.com/login/device", ""},
		{"data", "data:text/html,<script>alert(1)</script>", "https://github.com/login/device", ""},
		{"scheme-relative", "//evil.example/device", "https://github.com/login/device", ""},
		{"http to another host", "http://evil.example/device", "", "http://evil.example/device"},
		{"http to another port of the host", "http://127.0.0.1:1/device", "", "http://127.0.0.1:1/device"},
		{"https with user-info", "https://user:pw@evil.example/device", "", "https://user:pw@evil.example/device"},
		{"http on the configured host", gh.URL + "/login/device", gh.URL + "/login/device", ""},
		{"https", "https://github.com/login/device", "https://github.com/login/device", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			gh.answer(c.uri)
			st, page := testenv.Fetch(t, admin, "POST", e.Base+"/oauth/copilot/device", url.Values{"provider": {"copilot"}}, nil)
			if st != http.StatusOK {
				t.Fatalf("start: %d", st)
			}
			flow := testenv.Between(page, `name="flow" value="`, `"`)
			if flow == "" {
				t.Fatal("the page shows no device sign-in")
			}
			// The same sign-in shown again from the server's copy (a poll without JavaScript).
			st, again := testenv.Fetch(t, admin, "POST", e.Base+"/oauth/copilot/device/poll",
				url.Values{"flow": {flow}, "provider": {"copilot"}}, nil)
			if st != http.StatusOK {
				t.Fatalf("poll: %d", st)
			}
			for which, p := range map[string]string{"start": page, "again": again} {
				if bad := unsafeLink(p, ghHost); bad != "" {
					t.Errorf("%s: the page links to %q", which, bad)
				}
				if strings.Contains(strings.ToLower(p), "javascript:alert") || strings.Contains(p, "data:text/html") {
					t.Errorf("%s: the page carries the address the upstream answered", which)
				}
				link, text := verification(p)
				if link != c.link || text != c.text {
					t.Errorf("%s: link %q, text %q; want link %q, text %q", which, link, text, c.link, c.text)
				}
				if c.link != "" && !strings.Contains(p, `href="`+html.EscapeString(c.link)+`"`) {
					t.Errorf("%s: no href to %s", which, c.link)
				}
			}
		})
	}

	// The OAuth settings hold only http(s) addresses.
	for _, u := range []string{"javascript:alert(1)", "data:text/html,x", "//claude.ai/oauth/authorize", "/oauth/authorize"} {
		for _, field := range []string{"claude.authorize_url", "codex.authorize_url", "codex.device_verification_url"} {
			kind, name, _ := strings.Cut(field, ".")
			if fields := apiFields(t, e, "PATCH", "/api/settings/oauth", map[string]any{kind: map[string]any{name: u}}); fields[field] == "" {
				t.Errorf("%s = %q: fields %v", field, u, fields)
			}
		}
	}

	// An https authorize address with user-info is allowed as a setting, but shown as text.
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{
		"authorize_url": "https://user:pw@claude.example/oauth/authorize"}}, 200)
	st, page := testenv.Fetch(t, admin, "POST", e.Base+"/oauth/claude/start", url.Values{"provider": {"anthropic"}}, nil)
	if st != http.StatusOK || strings.Contains(page, `id="claude-auth-link"`) ||
		!strings.HasPrefix(html.UnescapeString(testenv.Between(page, `id="claude-auth-text">`, `<`)), "https://user:pw@claude.example/oauth/authorize?") {
		t.Fatalf("claude start with user-info: %d %q", st, testenv.Between(page, `<ol class="signin-steps">`, `</ol>`))
	}
	if bad := unsafeLink(page); bad != "" {
		t.Fatalf("claude start links to %q", bad)
	}

	// A refused code shows the sign-in's address kept on the server, never one the form sent.
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{
		"authorize_url": "https://claude.ai/oauth/authorize"}}, 200)
	_, page = testenv.Fetch(t, admin, "POST", e.Base+"/oauth/claude/start", url.Values{"provider": {"anthropic"}}, nil)
	state := testenv.Between(page, `name="state" value="`, `"`)
	authURL := claudeLink(page)
	if state == "" || !strings.HasPrefix(authURL, "https://claude.ai/oauth/authorize?") {
		t.Fatalf("claude start: state %q, link %q", state, authURL)
	}
	for _, forged := range []string{"javascript:alert(1)", "https://evil.example/oauth/authorize"} {
		st, page = testenv.Fetch(t, admin, "POST", e.Base+"/oauth/claude/complete", url.Values{"state": {state},
			"code": {"not-a-code#forged-state"}, "auth_url": {forged}, "url": {forged}, "href": {forged}}, nil)
		if st != http.StatusUnprocessableEntity {
			t.Fatalf("claude complete with a bad code: %d", st)
		}
		if got := claudeLink(page); got != authURL {
			t.Errorf("after a refused code the link is %q, want the server's %q", got, authURL)
		}
		if strings.Contains(page, "evil.example") || strings.Contains(strings.ToLower(page), "javascript:alert") {
			t.Errorf("the page shows the address the form sent (%s)", forged)
		}
	}
}

// Combo names must be printable: a control character, a bidirectional override or a line break
// is refused with 422 naming the field, through the admin API (create and update) and the combo
// form on the dashboard (new and edit, in English and German), and nothing is saved.
func TestComboNamesArePrintable(t *testing.T) {
	e := comboEnv(t)
	target := []any{map[string]any{"provider": "a", "model": "gpt-x"}}
	id := comboID(t, e.MustAPI("POST", "/api/combos", map[string]any{"name": "chat", "targets": target}, 201))
	bad := map[string]string{
		"right-to-left override": "chat\u202eevil",
		"bell":                   "a\x07b",
		"line break":             "chat\nevil",
		"carriage return":        "chat\revil",
		"NUL":                    "a\x00b",
		"escape":                 "a\x1b[31mb",
		"isolate":                "a\u2066b\u2069",
		"left-to-right mark":     "a\u200eb",
		"line separator":         "a\u2028b",
		"DEL":                    "a\x7fb",
	}
	for what, name := range bad {
		t.Run(what, func(t *testing.T) {
			for _, c := range []struct {
				method, path string
				body         map[string]any
			}{
				{"POST", "/api/combos", map[string]any{"name": name, "targets": target}},
				{"PATCH", "/api/combos/" + id, map[string]any{"name": name}},
			} {
				if msg := apiFields(t, e, c.method, c.path, c.body)["name"]; !strings.Contains(msg, "invisible character U+") {
					t.Errorf("%s %s: fields.name %q", c.method, c.path, msg)
				}
			}
		})
	}
	items := e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["name"] != "chat" {
		t.Fatalf("combos after the refusals: %v", items)
	}
	// Allowed: umlauts, an emoji, a joined emoji sequence; surrounding spaces are trimmed.
	e.MustAPI("PATCH", "/api/combos/"+id, map[string]any{"name": " Büro-chat 🚀👩‍💻 "}, 200)
	if got := e.MustAPI("GET", "/api/combos/"+id, nil, 200)["name"]; got != "Büro-chat 🚀👩‍💻" {
		t.Fatalf("name %q", got)
	}

	admin := e.Login()
	form := func(name string) url.Values {
		return url.Values{"name": {name}, "strategy": {"priority"}, "target": {"a/gpt-x"}, "connection": {""}, "weight": {""}, "op": {"save"}}
	}
	for _, lang := range []i18n.Lang{i18n.EN, i18n.DE} {
		for _, c := range []struct{ name, cp string }{{"chat\u202eevil", "U+202E"}, {"a\x07b", "U+0007"}, {"chat\nevil", "U+000A"}} {
			want := html.EscapeString(i18n.TL(lang, "err.name_invisible", c.cp))
			for _, path := range []string{"/combos", "/combos/" + id + "/edit"} {
				st, page := postForm(t, admin, e.Base+path, form(c.name), lang)
				if got := testenv.Between(page, `id="combo-name-error">`, `</p>`); st != http.StatusUnprocessableEntity || got != want {
					t.Errorf("%s (%s) with %q: %d, name field error %q, want 422 with %q", path, lang, c.name, st, got, want)
				}
			}
		}
	}
	items = e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["name"] != "Büro-chat 🚀👩‍💻" {
		t.Fatalf("combos after the refused forms: %v", items)
	}
}

// --public-host given twice: both names are answered (any port, any case, a trailing dot) on the
// dashboard, the admin API and /health, and a third name gets 421 on them.
func TestTwoPublicHostsAreBothAnswered(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON),
		"--public-host", "gateway.example.com", "--public-host", "llm.internal.example")
	// The session's cookie, sent by hand: a cookie jar files it under the address the test
	// dials, not under the names the requests carry.
	u, _ := url.Parse(e.Base)
	cookies := e.Login().Jar.Cookies(u)
	if len(cookies) == 0 {
		t.Fatal("no session cookie")
	}
	session := map[string]string{"Cookie": cookies[0].String(), "Accept": "text/html"}
	admin := map[string]string{"Authorization": "Bearer " + testenv.AdminToken}
	send := func(c *http.Client, host, path string, header map[string]string) (int, string) {
		t.Helper()
		h := map[string]string{"Host": host}
		for k, v := range header {
			h[k] = v
		}
		st, _, body := testenv.Call(t, c, "GET", e.Base+path, "", h)
		return st, body
	}
	type route struct {
		name, path string
		client     *http.Client
		header     map[string]string
	}
	routes := []route{
		{"health", "/health", http.DefaultClient, nil},
		{"login page", "/login", http.DefaultClient, nil},
		{"dashboard with a session", "/", testenv.NoRedirect(), session},
		{"admin API with the token", "/api/providers", http.DefaultClient, admin},
	}
	for _, host := range []string{"gateway.example.com", "GATEWAY.example.com:8443", "gateway.example.com.",
		"llm.internal.example", "llm.internal.example:443", "LLM.Internal.Example"} {
		for _, r := range routes {
			if st, body := send(r.client, host, r.path, r.header); st != http.StatusOK {
				t.Errorf("%s for %s: %d %.200s", r.name, host, st, body)
			}
		}
	}
	for _, host := range []string{"third.example.com", "gateway.example.com.llm.internal.example", "internal.example", "example.com"} {
		for _, r := range routes {
			if st, _ := send(r.client, host, r.path, r.header); st != http.StatusMisdirectedRequest {
				t.Errorf("%s for %s: %d, want 421", r.name, host, st)
			}
		}
		st, body := send(http.DefaultClient, host, "/api/providers", admin)
		if !strings.Contains(body, `"code":"misdirected_request"`) {
			t.Errorf("admin API for %s: %d %.200s", host, st, body)
		}
	}
	// A proxy call with a valid client key is answered for any name.
	st, _, body := testenv.Call(t, http.DefaultClient, "POST", e.Base+"/v1/chat/completions", testenv.ChatBody,
		map[string]string{"Host": "third.example.com", "Authorization": "Bearer " + key, "Content-Type": "application/json"})
	if st != http.StatusOK {
		t.Fatalf("proxy call for a third name: %d %s", st, body)
	}
}
