package e2e

import (
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
