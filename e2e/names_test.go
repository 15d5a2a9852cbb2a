package e2e

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// postForm posts a dashboard form with a logged-in client in a language and returns the status
// and the page.
func postForm(t *testing.T, c *http.Client, u string, form url.Values, lang i18n.Lang) (int, string) {
	t.Helper()
	return testenv.Fetch(t, c, "POST", u, form, map[string]string{"Accept-Language": string(lang)})
}

// Names must be printable: a control character, a bidirectional override or a line break in a
// connection's, client key's or provider's name is refused with 422 naming the field, through the
// admin API and the dashboard forms (in English and German), and nothing is saved.
func TestNamesArePrintable(t *testing.T) {
	up := testenv.NewFakeUpstream(t, nil)
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	id := e.AddConnection("up", "main", "sk-a", 0)
	bad := map[string]string{
		"NUL":                    "a\x00b",
		"line break":             "a\nb",
		"right-to-left override": "prod\u202eved",
		"isolate":                "a\u2066b",
		"line separator":         "a\u2028b",
	}
	fieldOf := func(t *testing.T, method, path string, body map[string]any) string {
		t.Helper()
		return apiFields(t, e, method, path, body)["name"]
	}
	for what, name := range bad {
		t.Run(what, func(t *testing.T) {
			for _, c := range []struct {
				method, path string
				body         map[string]any
			}{
				{"POST", "/api/connections", map[string]any{"provider": "up", "name": name, "auth_type": "api_key", "api_key": "sk-b"}},
				{"PATCH", "/api/connections/" + itoa(id), map[string]any{"name": name}},
				{"POST", "/api/keys", map[string]any{"name": name}},
				{"POST", "/api/providers", map[string]any{"name": name, "type": "openai-compatible", "base_url": up.URL + "/v1"}},
				{"PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("up")), map[string]any{"name": name}},
			} {
				if msg := fieldOf(t, c.method, c.path, c.body); !strings.Contains(msg, "invisible character U+") {
					t.Errorf("%s %s: fields.name %q", c.method, c.path, msg)
				}
			}
		})
	}
	if msg := fieldOf(t, "POST", "/api/keys", map[string]any{"name": strings.Repeat("k", 101)}); msg == "" {
		t.Error("a 101-character key name was not refused")
	}
	// Allowed: spaces inside, umlauts, emoji, quotes; surrounding spaces are trimmed.
	e.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"name": ` Büro "Köln" 🚀 `}, 200)
	if got := e.MustAPI("GET", "/api/connections/"+itoa(id), nil, 200)["name"]; got != `Büro "Köln" 🚀` {
		t.Fatalf("name %q", got)
	}
	if n := len(e.MustAPI("GET", "/api/keys", nil, 200)["items"].([]any)); n != 0 {
		t.Fatalf("%d keys saved", n)
	}
	if n := len(e.MustAPI("GET", "/api/providers", nil, 200)["items"].([]any)); n != 3 {
		t.Fatalf("%d providers", n)
	}

	// The dashboard forms: 422 with the field's message in the operator's language.
	admin := e.Login()
	for _, lang := range []i18n.Lang{i18n.EN, i18n.DE} {
		want := html.EscapeString(i18n.TL(lang, "err.name_invisible", "U+202E"))
		for _, c := range []struct {
			path string
			form url.Values
		}{
			{"/connections", url.Values{"provider": {"up"}, "name": {"prod\u202eved"}, "api_key": {"sk-c"}}},
			{"/connections/" + itoa(id) + "/edit", url.Values{"name": {"prod\u202eved"}, "priority": {"0"}, "enabled": {"true"}}},
			{"/keys", url.Values{"name": {"prod\u202eved"}}},
			{"/providers", url.Values{"name": {"prod\u202eved"}, "type": {"openai-compatible"}, "base_url": {up.URL + "/v1"}}},
		} {
			if st, page := postForm(t, admin, e.Base+c.path, c.form, lang); st != http.StatusUnprocessableEntity || !strings.Contains(page, want) {
				t.Errorf("%s (%s): %d, want 422 with %q", c.path, lang, st, want)
			}
		}
	}
}

// A name that is allowed but unusual (quotes, a backslash, braces, an equals sign, a hash,
// umlauts, an emoji) is escaped in the Prometheus exposition: /metrics still parses, and the label
// comes back as the name.
func TestMetricsStayParseableWithUnusualNames(t *testing.T) {
	up := testenv.NewFakeUpstream(t, nil)
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	const name = `we"ird\ {x="1"} # ünï 🚀`
	e.AddConnection("up", name, "sk-a", 0)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(e.Metrics()))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	fam, ok := fams["switchyard_connection_state"]
	if !ok {
		t.Fatal("no switchyard_connection_state")
	}
	found := false
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "connection" && l.GetValue() == name {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no connection label %q in %v", name, fam)
	}
}

// A base_url with user-info is refused: credentials belong in a connection.
func TestBaseURLWithUserInfoIsRefused(t *testing.T) {
	e := testenv.New(t)
	want := i18n.TL(i18n.EN, "err.base_url_userinfo")
	for _, u := range []string{"https://user:secret@api.example.com/v1", "https://token@api.example.com/v1", "http://@127.0.0.1:8000/v1"} {
		if fields := apiFields(t, e, "POST", "/api/providers", map[string]any{"name": "p", "type": "openai-compatible", "base_url": u}); fields["base_url"] != want {
			t.Fatalf("create with %s: %v", u, fields)
		}
		if fields := apiFields(t, e, "PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("openai")), map[string]any{"base_url": u}); fields["base_url"] != want {
			t.Fatalf("update with %s: %v", u, fields)
		}
	}
	if got := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", e.ProviderID("openai")), nil, 200)["base_url"]; got != "https://api.openai.com/v1" {
		t.Fatalf("base_url %v", got)
	}
	admin := e.Login()
	for _, lang := range []i18n.Lang{i18n.EN, i18n.DE} {
		st, page := postForm(t, admin, e.Base+"/providers", url.Values{"name": {"p"}, "type": {"openai-compatible"},
			"base_url": {"https://user:secret@api.example.com/v1"}}, lang)
		if st != 422 || !strings.Contains(page, html.EscapeString(i18n.TL(lang, "err.base_url_userinfo"))) {
			t.Fatalf("form (%s): %d", lang, st)
		}
	}
}

// An API key with control characters (NUL, other C0 controls, DEL) is refused on create and on
// update, with its own message; an empty key is "required", a key with spaces says so; a key
// pasted with a trailing line break is trimmed and accepted.
func TestConnectionKeysRefuseControlCharacters(t *testing.T) {
	e := testenv.New(t)
	e.AddProvider("up", "http://127.0.0.1:9/v1")
	control, required, spaces := i18n.TL(i18n.EN, "err.api_key_control"), i18n.TL(i18n.EN, "err.required"), i18n.TL(i18n.EN, "err.api_key")
	cases := []struct {
		name, key, want string
	}{
		{"NUL", "sk-abc\x00def", control},
		{"leading NUL", "\x00sk-abcdef", control},
		{"SOH", "sk-\x01abcdef", control},
		{"escape", "sk-abc\x1b[0mdef", control},
		{"DEL", "sk-abc\x7fdef", control},
		{"line break inside", "sk-abc\r\nX-Injected: 1", control},
		{"tab inside", "sk-abc\tdef", control},
		{"C1 control", "sk-abc\u0085def", control},
		{"empty", "", required},
		{"only spaces", "   ", required},
		{"space inside", "sk-abc def", spaces},
	}
	id := e.AddConnection("up", "good", "sk-good-key", 0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if fields := apiFields(t, e, "POST", "/api/connections", map[string]any{"provider": "up", "name": "c", "auth_type": "api_key", "api_key": c.key}); fields["api_key"] != c.want {
				t.Fatalf("create: %v, want %q", fields, c.want)
			}
			if fields := apiFields(t, e, "PATCH", "/api/connections/"+itoa(id), map[string]any{"api_key": c.key}); fields["api_key"] != c.want {
				t.Fatalf("update: %v, want %q", fields, c.want)
			}
		})
	}
	if items := e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any); len(items) != 1 {
		t.Fatalf("connections: %v", items)
	}
	e.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"api_key": "sk-new-key\n"}, 200)

	// The dashboard form says the same, in the operator's language.
	st, page := postForm(t, e.Login(), e.Base+"/connections", url.Values{"provider": {"up"}, "name": {"d"}, "api_key": {"sk-abc\x00def"}}, i18n.DE)
	if st != http.StatusUnprocessableEntity || !strings.Contains(page, html.EscapeString(i18n.TL(i18n.DE, "err.api_key_control"))) {
		t.Fatalf("dashboard form: %d", st)
	}
}
