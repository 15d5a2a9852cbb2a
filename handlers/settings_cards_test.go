package handlers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"switchyard/i18n"
	"switchyard/services/errs"
	"switchyard/services/settings"
)

// Every setting of the registry has a label and a help text in both catalogs (and every option
// of a select its label), so that adding a setting to a card needs no more than its path.
func TestSettingsRegistryHasTexts(t *testing.T) {
	for _, st := range append(settings.All(), settings.OAuthSettings()...) {
		keys := []string{st.LabelKey(), st.HelpKey()}
		for _, o := range st.Options() {
			keys = append(keys, st.OptionKey(o))
		}
		for _, key := range keys {
			for _, l := range i18n.Langs {
				if !i18n.Has(l, key) {
					t.Errorf("%s: %s lacks %s", st.Path(), l, key)
				}
			}
		}
	}
}

// Every card field is a registry entry, on one card only; plain cards hold only settings a
// form can edit; card ids work as element ids and URL segments, and cards have their texts.
func TestSettingsCardsUseTheRegistry(t *testing.T) {
	onCard := map[string]string{}
	for _, card := range settingsCards {
		if card.id == "" || strings.ContainsAny(card.id, " ./?#") {
			t.Errorf("card id %q is not a plain slug", card.id)
		}
		keys := []string{"card." + card.id + ".title", "card." + card.id + ".lead"}
		if card.link != "" {
			keys = append(keys, "card."+card.id+".explain", "card."+card.id+".link")
		}
		for _, key := range keys {
			for _, l := range i18n.Langs {
				if !i18n.Has(l, key) {
					t.Errorf("card %s: %s lacks %s", card.id, l, key)
				}
			}
		}
		for _, p := range card.paths {
			st, ok := settings.Lookup(p)
			if !ok {
				t.Errorf("card %s: %s is not a setting of the registry", card.id, p)
				continue
			}
			if other, dup := onCard[p]; dup {
				t.Errorf("%s is on the cards %s and %s", p, other, card.id)
			}
			onCard[p] = card.id
			if card.custom == nil && st.Kind() == settings.KindRules {
				t.Errorf("card %s: %s needs a card of its own", card.id, p)
			}
			if g := groupKey(p); g != "" && !i18n.Has(i18n.EN, g) {
				t.Errorf("card %s: the group of %s has no title %s", card.id, p, g)
			}
		}
	}
	// Every setting a form can edit is on a card (its section's), and no card is empty.
	for _, list := range [][]*settings.Setting{settings.All(), settings.OAuthSettings()} {
		for _, st := range list {
			if _, ok := onCard[st.Path()]; !ok && st.Kind() != settings.KindRules {
				t.Errorf("%s is on no card: name a card for its section", st.Path())
			}
		}
	}
	for _, card := range settingsCards {
		if card.custom == nil && len(card.paths) == 0 {
			t.Errorf("card %s (section %q) holds no setting", card.id, card.section)
		}
	}
	if len(settings.ProviderOverridable()) == 0 {
		t.Error("no setting can be overridden per provider: the overrides card would be empty")
	}
}

func TestFieldOf(t *testing.T) {
	paths := []string{"model_lockout.families", "error_rules", "model_lockout.max_cooldown_ms"}
	for key, want := range map[string][3]string{
		"model_lockout.max_cooldown_ms":         {"model_lockout.max_cooldown_ms", "", "ok"},
		"model_lockout.families.anthropic.opus": {"model_lockout.families", "anthropic.opus", "ok"},
		"error_rules[2].reason":                 {"error_rules", "[2].reason", "ok"},
		"model_lockout.max_cooldown":            {"", "", ""},
	} {
		p, inner, ok := fieldOf(key, paths)
		if p != want[0] || inner != want[1] || ok != (want[2] == "ok") {
			t.Errorf("fieldOf(%q) = %q, %q, %v", key, p, inner, ok)
		}
	}
}

// mapStore is an in-memory settings.Store.
type mapStore struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *mapStore) GetValue(_ context.Context, key string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok, nil
}

func (s *mapStore) SaveRevision(_ context.Context, key, value string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = value
	return 1, nil
}

// The settings service's messages are catalog keys with arguments: the dashboard shows them in
// the request's language with its number format, the admin API in English.
func TestSettingsMessagesInTheRequestLanguage(t *testing.T) {
	svc, err := settings.New(context.Background(), &mapStore{m: map[string]string{}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	en, de := i18n.WithLang(context.Background(), i18n.EN), i18n.WithLang(context.Background(), i18n.DE)
	fieldMsg := func(t *testing.T, patch, key string) errs.Msg {
		t.Helper()
		_, err := svc.Patch(context.Background(), []byte(patch))
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.Invalid {
			t.Fatalf("%s: %v", patch, err)
		}
		m, ok := e.Fields[key]
		if !ok {
			t.Fatalf("%s: no message for %s: %v", patch, key, e.Fields)
		}
		return m
	}
	cases := []struct {
		name, patch, key string
		ctx              context.Context
		want             string
	}{
		{"range, English separators", `{"connection_cooldown":{"oauth":{"base_cooldown_ms":99}}}`, "connection_cooldown.oauth.base_cooldown_ms",
			en, "Must be between 100 and 600,000."},
		{"range, German separators", `{"connection_cooldown":{"max_cooldown_ms":999}}`, "connection_cooldown.max_cooldown_ms",
			de, "Muss zwischen 1.000 und 86.400.000 liegen."},
		{"cross-field names the other setting", `{"connection_cooldown":{"max_cooldown_ms":4000}}`, "connection_cooldown.oauth.base_cooldown_ms",
			de, "Darf „Maximaler Cooldown“ (4.000) nicht überschreiten."},
		{"a list entry", `{"model_lockout":{"error_codes":[429,700]}}`, "model_lockout.error_codes",
			de, "Nur Statuscodes zwischen 100 und 599 (nicht 700)."},
		{"a status", `{"retry":{"retry_on_statuses":["5x"]}}`, "retry.retry_on_statuses",
			de, "„5x“ ist kein Status: einen Code wie 429 (100–599) oder eine Klasse wie 5xx verwenden."},
		{"a rule name", `{"error_rules":[{"name":"quota","statuses":[429],"reason":"unknown","scope":"none"},{"name":"quota","statuses":[429],"reason":"unknown","scope":"none"}]}`,
			"error_rules[1].name", de, "„quota“ ist bereits der Name einer anderen Regel."},
		{"a rule without a condition", `{"error_rules":[{"name":"r","reason":"unknown","scope":"none"}]}`, "error_rules[0]",
			de, "Mindestens eine Bedingung angeben: Status, Text-Marker oder Header."},
		{"a family pattern", `{"model_lockout":{"families":{"anthropic":{"opus":["claude-*-x"]}}}}`, "model_lockout.families.anthropic.opus",
			de, "„claude-*-x“: „*“ darf nur am Ende eines Musters stehen (ein Präfix wie claude-opus-*)."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Text(c.ctx, fieldMsg(t, c.patch, c.key)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	if got := fieldMsg(t, `{"connection_cooldown":{"max_cooldown_ms":4000}}`, "connection_cooldown.oauth.base_cooldown_ms"); English(got) != "Must not exceed “Maximum cooldown” (4000)." {
		t.Errorf("English text for the API: %q", got)
	}
	if got := Text(de, errs.M("err.between", 0.0, 0.5)); got != "Muss zwischen 0 und 0,5 liegen." {
		t.Errorf("fraction range: %q", got)
	}
}
