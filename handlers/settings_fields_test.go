package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"switchyard/i18n"
)

func TestChipListRead(t *testing.T) {
	codes, statuses := chipLists["model_lockout.error_codes"], chipLists["retry.retry_on_statuses"]
	cases := []struct {
		name          string
		list          chipList
		chips         []string
		adding        string
		want, wantBad []string
	}{
		{"typed codes appended, duplicates dropped", codes, []string{"403", "429"}, "418, 429 529", []string{"403", "429", "418", "529"}, nil},
		{"typed code out of range stays typed", codes, []string{"403"}, "700;abc", []string{"403"}, []string{"700", "abc"}},
		{"a class is no code", codes, nil, "5xx", []string{}, []string{"5xx"}},
		{"classes are statuses, lower-cased", statuses, []string{"429"}, "5XX 4xx", []string{"429", "5xx", "4xx"}, nil},
		{"posted chips are left to the service", statuses, []string{"abc", " 502 "}, "", []string{"abc", "502"}, nil},
		{"nothing left", statuses, nil, "", []string{}, nil},
	}
	for _, c := range cases {
		got, bad := c.list.read(c.chips, c.adding)
		if !slices.Equal(got, c.want) || !slices.Equal(bad, c.wantBad) {
			t.Errorf("%s: got %q bad %q, want %q bad %q", c.name, got, bad, c.want, c.wantBad)
		}
	}
	if b, _ := json.Marshal(codes.value([]string{"403", "x"})); string(b) != `[403,"x"]` {
		t.Errorf("codes value %s", b)
	}
}

func TestFamiliesText(t *testing.T) {
	fams, line := parseFamilies("# quota families\nanthropic: opus = claude-opus-*, claude-3-opus\n\nanthropic: opus = claude-4-opus\nopenai:gpt5=gpt-5*\n")
	if line != 0 {
		t.Fatalf("line %d", line)
	}
	want := "anthropic: opus = claude-opus-*, claude-3-opus, claude-4-opus\nopenai: gpt5 = gpt-5*\n"
	if got := formatFamilies(fams); got != want {
		t.Errorf("round trip:\n%s\nwant\n%s", got, want)
	}
	if again, _ := parseFamilies(want); formatFamilies(again) != want {
		t.Error("formatFamilies does not read back")
	}
	if _, line := parseFamilies("openai: a = b\nopenai a b\n"); line != 2 {
		t.Errorf("bad line reported as %d", line)
	}
	if fams, _ := parseFamilies("openai: empty =\n"); fams["openai"]["empty"] == nil || len(fams["openai"]["empty"]) != 0 {
		t.Errorf("a family without patterns: %v (the settings service refuses it)", fams)
	}
}

func TestSettingsMessage(t *testing.T) {
	de := i18n.WithLang(context.Background(), i18n.DE)
	cases := map[string]string{
		"must contain only status codes between 100 and 599 (got 700)":                      "Nur Statuscodes zwischen 100 und 599 (nicht 700).",
		`"5x" is not a status: use a code such as "429" (100–599) or a class such as "5xx"`: "„5x“ ist kein Status: einen Code wie 429 (100–599) oder eine Klasse wie 5xx verwenden.",
		`"quota" is used by another rule`:                                                   "„quota“ ist bereits der Name einer anderen Regel.",
		"needs at least one of statuses, body_markers or header_matches":                    "Mindestens eine Bedingung angeben: Status, Text-Marker oder Header.",
		`"claude-*-x": "*" may only end a pattern (a prefix such as "claude-opus-*")`:       "„claude-*-x“: „*“ darf nur am Ende eines Musters stehen (ein Präfix wie claude-opus-*).",
		"must be between 5000 and 600000":                                                   "Muss zwischen 5.000 und 600.000 liegen.",
	}
	for msg, want := range cases {
		if got := settingsMessage(de, msg, nil); got != want {
			t.Errorf("%q:\n got %q\nwant %q", msg, got, want)
		}
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
