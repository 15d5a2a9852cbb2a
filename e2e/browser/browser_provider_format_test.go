package browser

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// TestUpstreamFormatOnTheProviderForm: an operator opens the built-in openai provider, sees the
// upstream format (chat) and the Responses-only models (the default patterns), sees both fields
// go away for the types they do not apply to, sets the format to Responses and patterns of their
// own, saves, and finds them on the provider list, in the API and on the reloaded edit page. A
// bad pattern is named under its field. Both fields explain themselves in English and German,
// and the pages fit a phone.
func TestUpstreamFormatOnTheProviderForm(t *testing.T) {
	e := testenv.New(t)
	pid := e.ProviderID("openai")
	id := strconv.FormatInt(pid, 10)
	edit := e.Base + "/providers/" + id + "/edit"
	const (
		format      = "#provider-upstream-format"
		formatField = "#provider-upstream-format-field"
		models      = "#provider-responses-models"
		modelsField = "#provider-responses-models-field"
		typeSelect  = "#provider-type"
		badge       = "#upstream-format-"
		displayOf   = `getComputedStyle(document.querySelector('%s')).display`
		valueOf     = `document.querySelector('%s').value`
		ownPatterns = "gpt-5-pro*\no4-pro"
	)
	b := newStateBrowser(t)
	shown := func(sel string) bool { return b.eval(fmt.Sprintf(displayOf, sel)) != "none" }

	b.step("the edit page shows the defaults", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/login"),
			chromedp.WaitVisible(chromedp.CSS("#password")),
			chromedp.SendKeys(chromedp.CSS("#password"), e.Vars["SWITCHYARD_ADMIN_PASSWORD"]),
			b.clickLoad(`.login button[type="submit"]`),
			chromedp.Navigate(edit),
			chromedp.WaitVisible(chromedp.CSS(format)),
			chromedp.WaitVisible(chromedp.CSS(models)),
		)
		if got := b.eval(fmt.Sprintf(valueOf, format)); got != "chat" {
			t.Fatalf("format %q, want chat", got)
		}
		if got := b.eval(fmt.Sprintf(valueOf, models)); got != "*codex*\no1-pro*\no3-pro*" {
			t.Fatalf("patterns %q, want the default", got)
		}
		if got := b.text(`label[for="provider-upstream-format"]`); got != i18n.TL(i18n.EN, "providers.field.upstream_format") {
			t.Fatalf("label %q", got)
		}
		if got := b.text(format + `-hint`); got != i18n.TL(i18n.EN, "providers.field.upstream_format_hint") {
			t.Fatalf("hint %q", got)
		}
		if got := b.text(models + `-hint`); got != i18n.TL(i18n.EN, "providers.field.responses_models_hint") ||
			!strings.Contains(got, "sent to /v1/responses; chat and messages clients reach them through translation") {
			t.Fatalf("patterns hint %q", got)
		}
		if got := b.eval(`document.querySelector('` + format + ` option[value="responses"]').textContent`); got != i18n.TL(i18n.EN, "providers.upstream_format.responses") {
			t.Fatalf("option %q", got)
		}
		b.shot("provider-edit-upstream-format")
	})

	b.step("the fields follow the type", func(t *testing.T) {
		for _, c := range []struct {
			typ           string
			format, model bool
		}{
			{"anthropic", false, false},
			{"anthropic-compatible", false, false},
			{"openai-compatible", true, false},
			{"openai", true, true},
		} {
			b.do(chromedp.SetValue(chromedp.CSS(typeSelect), c.typ))
			if shown(formatField) != c.format || shown(modelsField) != c.model {
				t.Fatalf("type %s: format shown %v, patterns shown %v", c.typ, shown(formatField), shown(modelsField))
			}
		}
	})

	b.step("a bad pattern is named under the field", func(t *testing.T) {
		b.do(
			chromedp.SetValue(chromedp.CSS(models), "ok*\nbad-[pattern"),
			b.clickLoad("#save-provider"),
			chromedp.WaitVisible(chromedp.CSS(models+"-error")),
		)
		if got := b.text(models + "-error"); !strings.Contains(got, "bad-[pattern") {
			t.Fatalf("error %q", got)
		}
		if b.eval(`document.querySelector('`+models+`').getAttribute('aria-invalid')`) != "true" {
			t.Fatal("the field is not marked invalid")
		}
		if got := b.eval(fmt.Sprintf(valueOf, models)); got != "ok*\nbad-[pattern" {
			t.Fatalf("the form lost what was typed: %q", got)
		}
		if f, _ := formatOf(t, e, pid); f != "chat" {
			t.Fatal("a refused form was saved")
		}
	})

	b.step("set Responses and own patterns, save", func(t *testing.T) {
		b.do(
			chromedp.SetValue(chromedp.CSS(format), "responses"),
			chromedp.SetValue(chromedp.CSS(models), ownPatterns+"\n\n"),
			b.clickLoad("#save-provider"),
			chromedp.WaitVisible(chromedp.CSS("#provider-openai")),
			settled,
			chromedp.WaitVisible(chromedp.CSS(badge+id)),
		)
		if got := b.text(badge + id); got != i18n.TL(i18n.EN, "providers.upstream_badge.responses") {
			t.Fatalf("badge %q", got)
		}
		if n := b.eval(`String(document.querySelectorAll('[id^="upstream-format-"]').length)`); n != "1" {
			t.Fatalf("%s providers marked, want only openai", n)
		}
		f, m := formatOf(t, e, pid)
		if f != "responses" || fmt.Sprint(m) != "[gpt-5-pro* o4-pro]" {
			t.Fatalf("stored %q %v", f, m)
		}
	})

	b.step("the reloaded edit page shows them", func(t *testing.T) {
		b.do(chromedp.Navigate(edit), chromedp.WaitVisible(chromedp.CSS(format)), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(models)))
		if got := b.eval(fmt.Sprintf(valueOf, format)); got != "responses" {
			t.Fatalf("format %q after reload", got)
		}
		if got := b.eval(fmt.Sprintf(valueOf, models)); got != ownPatterns {
			t.Fatalf("patterns %q after reload", got)
		}
	})

	b.step("the same in German", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/lang/de?next=/providers/"+id+"/edit"),
			chromedp.WaitVisible(chromedp.CSS(format)),
		)
		if got := b.text(format + `-hint`); got != i18n.TL(i18n.DE, "providers.field.upstream_format_hint") {
			t.Fatalf("German hint %q", got)
		}
		if got := b.text(models + `-hint`); got != i18n.TL(i18n.DE, "providers.field.responses_models_hint") {
			t.Fatalf("German patterns hint %q", got)
		}
		if got := b.text(`label[for="provider-responses-models"]`); got != i18n.TL(i18n.DE, "providers.field.responses_models") {
			t.Fatalf("German label %q", got)
		}
		b.shot("provider-edit-upstream-format-de")
		b.do(chromedp.Navigate(e.Base+"/providers"), settled, chromedp.WaitVisible(chromedp.CSS(badge+id)))
		if got := b.text(badge + id); got != i18n.TL(i18n.DE, "providers.upstream_badge.responses") {
			t.Fatalf("German badge %q", got)
		}
	})

	b.step("both pages fit a phone", func(t *testing.T) {
		b.do(chromedp.EmulateViewport(390, 800))
		defer b.do(chromedp.EmulateViewport(1280, 900))
		for _, path := range []string{"/providers/" + id + "/edit", "/providers"} {
			b.do(chromedp.Navigate(e.Base+path), chromedp.WaitVisible(chromedp.CSS(format)), settled)
			if over := b.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
				t.Errorf("%s overflows a 390 px screen by %s px", path, over)
			}
			b.shot("provider-upstream-format-390" + strings.ReplaceAll(path, "/", "-"))
		}
	})
}

// formatOf reads a provider's upstream_format and responses_models from the API.
func formatOf(t *testing.T, e *testenv.Env, id int64) (string, []any) {
	t.Helper()
	p := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", id), nil, 200)
	m, _ := p["responses_models"].([]any)
	f, _ := p["upstream_format"].(string)
	return f, m
}
