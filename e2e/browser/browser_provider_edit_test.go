package browser

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// TestListedModelsOnlyOnTheProviderEditPage: an operator ticks "Only models the provider lists"
// on a provider's edit page; the provider list marks it, the API reports it, and a model the
// provider does not list is refused from then on (forwarded again once the box is cleared). The
// box explains itself in English and German.
func TestListedModelsOnlyOnTheProviderEditPage(t *testing.T) {
	e, pid := oneConnection(t)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	id := strconv.FormatInt(pid, 10)
	unlisted := func() int {
		r := e.Chat(context.Background(), key, `{"model":"up/gpt-unlisted","messages":[]}`)
		testenv.ReadAll(t, r)
		return r.StatusCode
	}
	if code := unlisted(); code != 200 {
		t.Fatalf("an unlisted model before the box is ticked: %d, want it forwarded", code)
	}

	b := newDashBrowser(t)
	step := b.step
	const box = "#provider-listed-models-only"

	step("tick the box on the edit page", func(t *testing.T) {
		b.do(
			logInTo(e),
			chromedp.Navigate(e.Base+"/providers/"+id+"/edit"),
			chromedp.WaitVisible(chromedp.CSS(box)),
		)
		if b.eval(`String(document.querySelector('`+box+`').checked)`) != "false" {
			t.Fatal("the box is ticked on a provider that forwards unlisted models")
		}
		if got := b.text(`.field-check:has(` + box + `) .check span`); got != i18n.TL(i18n.EN, "providers.field.listed_models_only") {
			t.Fatalf("label %q", got)
		}
		if got := b.text(box + "-hint"); got != i18n.TL(i18n.EN, "providers.field.listed_models_only_hint") {
			t.Fatalf("hint %q", got)
		}
		if b.eval(`document.querySelector('`+box+`').getAttribute('aria-describedby')`) != "provider-listed-models-only-hint" {
			t.Fatal("the hint is not tied to the box")
		}
		b.shot("provider-edit-listed-only")
		b.do(
			chromedp.Click(chromedp.CSS(box)),
			clickLoad("#save-provider"),
			chromedp.WaitVisible(chromedp.CSS("#provider-up")),
			chromedp.WaitVisible(chromedp.CSS("#listed-only-"+id)),
		)
		if got := b.text("#listed-only-" + id); got != i18n.TL(i18n.EN, "providers.listed_only") {
			t.Fatalf("badge %q", got)
		}
		if p := e.MustAPI("GET", "/api/providers/"+id, nil, 200); p["listed_models_only"] != true {
			t.Fatalf("provider %v", p)
		}
		if code := unlisted(); code != 404 {
			t.Fatalf("an unlisted model with the box ticked: %d, want 404", code)
		}
		// The edit page shows the stored value.
		b.do(
			chromedp.Navigate(e.Base+"/providers/"+id+"/edit"),
			chromedp.WaitVisible(chromedp.CSS(box)),
		)
		if b.eval(`String(document.querySelector('`+box+`').checked)`) != "true" {
			t.Fatal("the edit page does not show the stored value")
		}
	})

	step("the same in German", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/lang/de?next=/providers/"+id+"/edit"),
			chromedp.WaitVisible(chromedp.CSS(box)),
		)
		if got := b.text(box + "-hint"); got != i18n.TL(i18n.DE, "providers.field.listed_models_only_hint") {
			t.Fatalf("German hint %q", got)
		}
		b.shot("provider-edit-listed-only-de")
		b.do(
			chromedp.Navigate(e.Base+"/providers"),
			chromedp.WaitVisible(chromedp.CSS("#listed-only-"+id)),
		)
		if got := b.text("#listed-only-" + id); got != i18n.TL(i18n.DE, "providers.listed_only") {
			t.Fatalf("German badge %q", got)
		}
	})

	step("both pages fit a phone", func(t *testing.T) {
		b.do(chromedp.EmulateViewport(390, 800))
		defer b.do(chromedp.EmulateViewport(1280, 900))
		for _, path := range []string{"/providers/" + id + "/edit", "/providers"} {
			b.do(chromedp.Navigate(e.Base+path), chromedp.WaitVisible(chromedp.CSS(box)))
			b.fitsPhone(path)
			b.shot("provider-listed-only-390" + strings.ReplaceAll(path, "/", "-"))
		}
	})

	step("clear the box", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/providers/"+id+"/edit"),
			chromedp.WaitVisible(chromedp.CSS(box)),
			chromedp.Click(chromedp.CSS(box)),
			clickLoad("#save-provider"),
			chromedp.WaitVisible(chromedp.CSS("#provider-up")),
		)
		if n := b.eval(`String(document.querySelectorAll('#listed-only-` + id + `').length)`); n != "0" {
			t.Fatal("the badge stayed after the box was cleared")
		}
		if code := unlisted(); code != 200 {
			t.Fatalf("an unlisted model after the box was cleared: %d, want it forwarded", code)
		}
	})
}

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
		valueOf     = `document.querySelector('%s').value`
		ownPatterns = "gpt-5-pro*\no4-pro"
	)
	b := newDashBrowser(t)

	b.step("the edit page shows the defaults", func(t *testing.T) {
		b.do(
			logInTo(e),
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
			if b.shown(formatField) != c.format || b.shown(modelsField) != c.model {
				t.Fatalf("type %s: format shown %v, patterns shown %v", c.typ, b.shown(formatField), b.shown(modelsField))
			}
		}
	})

	b.step("a bad pattern is named under the field", func(t *testing.T) {
		b.do(
			chromedp.SetValue(chromedp.CSS(models), "ok*\nbad-[pattern"),
			clickLoad("#save-provider"),
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
			clickLoad("#save-provider"),
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
			b.fitsPhone(path)
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
