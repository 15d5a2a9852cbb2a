package handlers

import (
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
