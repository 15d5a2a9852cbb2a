package i18n

import (
	"context"
	"testing"
)

// Every key must exist, non-empty, in every language, and no language may have extra keys.
func TestCatalogsComplete(t *testing.T) {
	all := map[string]bool{}
	for _, l := range Langs {
		for _, k := range Keys(l) {
			all[k] = true
		}
	}
	if len(all) == 0 {
		t.Fatal("catalogs are empty")
	}
	for _, l := range Langs {
		for k := range all {
			if !Has(l, k) {
				t.Errorf("%s: key %q missing or empty", l, k)
			}
		}
	}
}

func TestCatalogsLoadWithoutDuplicates(t *testing.T) {
	if _, err := load(); err != nil {
		t.Fatal(err)
	}
}

func TestNegotiate(t *testing.T) {
	cases := []struct {
		name, cookie, accept string
		want                 Lang
	}{
		{"cookie wins", "de", "en-US,en", DE},
		{"accept language", "", "de-DE,de;q=0.9,en;q=0.8", DE},
		{"first supported", "", "fr-FR, de;q=0.5", DE},
		{"fallback", "", "fr-FR", EN},
		{"bad cookie ignored", "xx", "de", DE},
	}
	for _, c := range cases {
		if got := Negotiate(c.cookie, c.accept); got != c.want {
			t.Errorf("%s: got %s want %s", c.name, got, c.want)
		}
	}
}

func TestTFallsBackAndFormats(t *testing.T) {
	ctx := WithLang(context.Background(), DE)
	if got := T(ctx, "no.such.key"); got != "no.such.key" {
		t.Errorf("missing key: got %q", got)
	}
	if FromContext(context.Background()) != EN {
		t.Error("default language must be English")
	}
}
