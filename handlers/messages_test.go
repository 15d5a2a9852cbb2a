package handlers

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"switchyard/i18n"
	"switchyard/services/errs"
)

// The edge writes a message in a language from the catalog itself, nested messages in the same
// language, whether or not app installed the services' renderer (unit tests do not).
func TestEnglishAndInReadTheCatalog(t *testing.T) {
	m := errs.M("proxy.unreachable", "p", errs.M("proxy.transport_failed"))
	if got := English(m); got != "provider p could not be reached: connection failed" {
		t.Errorf("English: %q", got)
	}
	if got := In(i18n.DE, m); got != "Provider p war nicht erreichbar: Verbindung fehlgeschlagen" {
		t.Errorf("German: %q", got)
	}
	if got := English(errs.M("err.combo_targets", 16)); got != "Give between 1 and 16 targets." {
		t.Errorf("English with a number: %q", got)
	}
}

// Numbers in a message keep the verb their catalog text gives them: a count under %d gets the
// language's thousands separator, an amount under %.2f two decimals with its decimal mark.
func TestTextWritesNumbersUnderEveryVerb(t *testing.T) {
	en, de := i18n.WithLang(context.Background(), i18n.EN), i18n.WithLang(context.Background(), i18n.DE)
	cases := []struct {
		name string
		ctx  context.Context
		m    errs.Msg
		want string
	}{
		{"count under %d", de, errs.M("keys.err.too_many_patterns", 100), "Höchstens 100 Muster."},
		{"large count under %d", de, errs.M("keys.err.too_many_patterns", 12_345), "Höchstens 12.345 Muster."},
		{"English count under %d", en, errs.M("keys.err.too_many_connections", int64(1_000)), "At most 1,000 connections."},
		{"amount under %.2f", de, errs.M("proxy.key_budget_exceeded_daily", 5.0, 30),
			"Dieser Schlüssel hat sein Tagesbudget von 5,00 USD ausgeschöpft. Es beginnt um Mitternacht neu, in 30 s."},
		{"English amount under %.2f", en, errs.M("proxy.key_budget_exceeded_monthly", 1234.5, 86_400),
			"This key has spent its monthly budget of 1234.50 USD. It resets at the start of next month, in 86,400 s."},
		{"fraction under %v", de, errs.M("err.between", 0.0, 0.5), "Muss zwischen 0 und 0,5 liegen."},
		{"nested message", de, errs.M("proxy.unreachable", "p", errs.M("proxy.transport_failed")),
			"Provider p war nicht erreichbar: Verbindung fehlgeschlagen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Text(c.ctx, c.m); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// catalogVerb is a formatting verb of a catalog text.
var catalogVerb = regexp.MustCompile(`%[-+# 0]*[0-9]*(?:\.[0-9]+)?[bcdeEfFgGoOqstTvxX]`)

// Every catalog text with verbs renders through Text without a formatting error in either
// language, given arguments of the kinds its verbs name (counts for %d, amounts for %f).
func TestTextRendersEveryCatalogText(t *testing.T) {
	for _, l := range i18n.Langs {
		ctx := i18n.WithLang(context.Background(), l)
		for _, key := range i18n.Keys(l) {
			text := strings.ReplaceAll(i18n.TL(l, key), "%%", "")
			verbs := catalogVerb.FindAllString(text, -1)
			if len(verbs) == 0 || strings.Count(text, "%") != len(verbs) {
				continue // no verbs, or a percent sign in plain text ("80 %"): shown without arguments
			}
			args := make([]any, len(verbs))
			for i, v := range verbs {
				switch v[len(v)-1] {
				case 'd':
					args[i] = 12_345
				case 'e', 'E', 'f', 'F', 'g', 'G':
					args[i] = 1234.5
				case 'v':
					args[i] = 0.5
				default:
					args[i] = "x"
				}
			}
			if got := Text(ctx, errs.Msg{Key: key, Args: args}); strings.Contains(got, "%!") {
				t.Errorf("%s %s: %q", l, key, got)
			}
		}
	}
}
