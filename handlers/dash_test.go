package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"switchyard/i18n"
)

func TestTranslateMessage(t *testing.T) {
	en, de := i18n.WithLang(context.Background(), i18n.EN), i18n.WithLang(context.Background(), i18n.DE)
	label := func(path string) func(string) string {
		return func(name string) string { return settingLabel(de, path, name) }
	}
	cases := []struct {
		name    string
		ctx     context.Context
		msg     string
		related func(string) string
		want    string
	}{
		{"range, English separators", en, "must be between 100 and 600000", nil, "Must be between 100 and 600,000."},
		{"range, German separators", de, "must be between 1000 and 86400000", nil, "Muss zwischen 1.000 und 86.400.000 liegen."},
		{"fraction range", de, "must be between 0 and 0.5", nil, "Muss zwischen 0 und 0,5 liegen."},
		{"known catalog message", de, "a provider with this name already exists", nil, "Ein Provider mit diesem Namen existiert bereits."},
		{"cross-field names the sibling setting", de, "must not exceed max_cooldown_ms (1800000)",
			label("connection_cooldown.oauth.base_cooldown_ms"), "Darf „Maximaler Cooldown“ (1.800.000) nicht überschreiten."},
		{"unknown setting name stays", en, "must be at least budget_ms (5)", nil, "Must be at least “budget_ms” (5)."},
		{"our own key", de, "err.required", nil, "Pflichtfeld."},
		{"unknown message passes through", de, "something new", nil, "something new"},
	}
	for _, c := range cases {
		if got := translateMessage(c.ctx, c.msg, c.related); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestNormalizeNumber(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"1800000", "1800000", true},
		{"007", "7", true},
		{"-3", "-3", true},
		{"0,5", "0.5", true},
		{"2.50", "2.5", true},
		{"1e3", "", false},
		{"NaN", "", false},
		{"1 000", "", false},
		{"0x10", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := normalizeNumber(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("normalizeNumber(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
		if ok && !json.Valid([]byte(got)) {
			t.Errorf("normalizeNumber(%q) = %q is not a JSON number", c.in, got)
		}
	}
}

func TestSetPathBuildsNestedPatch(t *testing.T) {
	doc := map[string]any{}
	setPath(doc, "connection_cooldown.max_cooldown_ms", json.Number("1000"))
	setPath(doc, "connection_cooldown.oauth.use_upstream_retry_hints", true)
	setPath(doc, "session_affinity_ttl_ms", json.Number("0"))
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"connection_cooldown":{"max_cooldown_ms":1000,"oauth":{"use_upstream_retry_hints":true}},"session_affinity_ttl_ms":0}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

// Every card field needs a label and a help text in the catalogs, and card ids must be usable
// as element ids and URL segments.
func TestSettingsCardsHaveTexts(t *testing.T) {
	for _, card := range settingsCards {
		if card.id == "" || strings.ContainsAny(card.id, " ./?#") {
			t.Errorf("card id %q is not a plain slug", card.id)
		}
		for _, key := range []string{"card." + card.id + ".title", "card." + card.id + ".lead"} {
			if !i18n.Has(i18n.EN, key) {
				t.Errorf("card %s: missing %s", card.id, key)
			}
		}
		for _, p := range card.paths {
			for _, key := range []string{"setting." + p, "setting." + p + ".help"} {
				if !i18n.Has(i18n.EN, key) {
					t.Errorf("card %s: missing %s", card.id, key)
				}
			}
		}
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{"/providers": "/providers", "//evil.example": "/", "https://evil.example/": "/",
		"/\\evil": "/", "": "/", "/keys?x=1": "/keys?x=1"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
