package browser

import (
	"context"
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
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-test")
	e := testenv.New(t)
	pid := e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
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

	b := newStateBrowser(t)
	step := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) {
			t.FailNow()
		}
	}
	const box = "#provider-listed-models-only"

	step("tick the box on the edit page", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/login"),
			chromedp.WaitVisible(chromedp.CSS("#password")),
			chromedp.SendKeys(chromedp.CSS("#password"), e.Vars["SWITCHYARD_ADMIN_PASSWORD"]),
			b.clickLoad(`.login button[type="submit"]`),
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
			b.clickLoad("#save-provider"),
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
			if over := b.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
				t.Errorf("%s overflows a 390 px screen by %s px", path, over)
			}
			b.shot("provider-listed-only-390" + strings.ReplaceAll(path, "/", "-"))
		}
	})

	step("clear the box", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/providers/"+id+"/edit"),
			chromedp.WaitVisible(chromedp.CSS(box)),
			chromedp.Click(chromedp.CSS(box)),
			b.clickLoad("#save-provider"),
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
