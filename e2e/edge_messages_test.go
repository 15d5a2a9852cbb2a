package e2e

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// A message whose catalog text writes a number with %d shows the number on the dashboard, in
// the operator's language (it used to read "Höchstens %!d(string=200) Muster."), and in English
// on the admin API.
func TestFormMessagesWriteTheirNumbers(t *testing.T) {
	e := testenv.New(t)
	admin := e.Login()
	many := strings.Repeat("up/m\n", 201)
	long := "up/" + strings.Repeat("m", 300)
	cases := []struct {
		name, patterns string
		want           map[i18n.Lang]string
	}{
		{"too many patterns", many, map[i18n.Lang]string{i18n.EN: "At most 200 patterns.", i18n.DE: "Höchstens 200 Muster."}},
		{"a pattern too long", long, map[i18n.Lang]string{i18n.EN: "A pattern has at most 300 bytes.", i18n.DE: "Ein Muster hat höchstens 300 Bytes."}},
	}
	for _, c := range cases {
		for _, lang := range i18n.Langs {
			st, page := postForm(t, admin, e.Base+"/keys", url.Values{"name": {"agent"}, "allowed_models": {c.patterns}}, lang)
			if st != http.StatusUnprocessableEntity || !strings.Contains(page, html.EscapeString(c.want[lang])) || strings.Contains(page, "%!") {
				t.Errorf("%s (%s): %d, want 422 with %q", c.name, lang, st, c.want[lang])
			}
		}
	}
	var out map[string]any
	if st := e.API("POST", "/api/keys", map[string]any{"name": "agent", "allowed_models": strings.Split(strings.TrimSpace(many), "\n")}, &out); st != 422 {
		t.Fatalf("admin API: %d %v", st, out)
	}
	if _, fields := adminFields(out); fields["allowed_models"] != "At most 200 patterns." {
		t.Fatalf("admin API fields %v", fields)
	}
}

// The request log's API writes what the gateway told a client in English, a message nested in
// another included (an upstream that hangs up: "provider up could not be reached: …"), and a
// dashboard page that does not exist says so in the browser's language.
func TestEdgeWritesMessagesInItsLanguage(t *testing.T) {
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-a", 0)
	// No retries: a retry waits its backoff on the test's fake clock.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	resp := e.Chat(context.Background(), key, `{"model":"up/gpt-test","messages":[{"role":"user","content":"hi"}]}`)
	testenv.ReadAll(t, resp)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	msg, _ := loggedRow(e, resp)["error"].(string)
	if !strings.HasPrefix(msg, "provider up could not be reached: ") || strings.Contains(msg, "proxy.") {
		t.Fatalf("logged error %q", msg)
	}

	admin := e.Login()
	for _, lang := range i18n.Langs {
		st, page := testenv.Fetch(t, admin, "GET", e.Base+"/no-such-page", nil,
			map[string]string{"Accept": "text/html", "Accept-Language": string(lang)})
		if want := html.EscapeString(i18n.TL(lang, "err.route_not_found")); st != http.StatusNotFound || !strings.Contains(page, want) {
			t.Errorf("missing page (%s): %d, want 404 with %q", lang, st, want)
		}
	}
}
