package browser

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"switchyard/e2e/testenv"
)

// TestPricesCardInBrowser: on a phone (390 px) in German, an operator adds a price of their own
// on the Prices card (saved in place, the card swapped without a page load), is refused a time
// zone that does not exist next to its field, looks prices up (Enter looks up, it does not
// save), and rotates the webhook secret, which is shown once with a copy button. The card never
// makes the page wider than the phone.
func TestPricesCardInBrowser(t *testing.T) {
	e := testenv.New(t)
	e.MustAPI("POST", "/api/providers", map[string]any{"name": "rp", "type": "openai-compatible", "base_url": "http://127.0.0.1:9/v1"}, 201)
	b := newDashBrowser(t)
	step := b.step
	models := func(t *testing.T) map[string]map[string]float64 {
		t.Helper()
		var doc struct {
			Models map[string]map[string]float64 `json:"models"`
		}
		if st := e.API("GET", "/api/settings/prices", nil, &doc); st != 200 {
			t.Fatalf("GET /api/settings/prices: %d", st)
		}
		return doc.Models
	}
	const card = "#card-prices"
	step("the card in German on a phone", func(t *testing.T) {
		b.do(
			onPhoneInGerman(e, "/settings"),
			chromedp.WaitVisible(chromedp.CSS(card)),
			chromedp.ScrollIntoView(chromedp.CSS(card)),
		)
		if got := b.text(card + " h2"); got != de("card.prices.title") {
			t.Fatalf("title %q", got)
		}
		if got := b.text(`label[for="s-time_zone"]`); got != de("prices.time_zone") {
			t.Fatalf("time zone label %q", got)
		}
		if got := b.text("#prices-none"); got != de("prices.none") {
			t.Fatalf("empty list %q", got)
		}
		b.fitsPhone("the settings page")
		b.shotOf("prices-390-de", card)
	})

	step("add a price: saved in place", func(t *testing.T) {
		b.do(
			chromedp.Evaluate[chromedp.Void](`window.__stillHere = true`),
			chromedp.SendKeys(chromedp.CSS("#s-models-new-pattern"), "rp/sim-small"),
			chromedp.SendKeys(chromedp.CSS("#s-models-new-input_per_mtok"), "1,5"),
			chromedp.SendKeys(chromedp.CSS("#s-models-new-output_per_mtok"), "3"),
			chromedp.Click(chromedp.CSS("#prices-add")),
			chromedp.WaitVisible(chromedp.CSS(card+" .saved-note")),
			settled,
		)
		if b.eval(`String(window.__stillHere === true)`) != "true" {
			t.Fatal("adding a price reloaded the page instead of swapping the card")
		}
		if got := models(t)["rp/sim-small"]; got["input_per_mtok"] != 1.5 || got["output_per_mtok"] != 3 {
			t.Fatalf("saved %v", got)
		}
		if got := b.eval(`document.querySelector('#s-models-0-pattern').value + ' ' + document.querySelector('#s-models-0-input_per_mtok').value`); got != "rp/sim-small 1.5" {
			t.Fatalf("the saved row shows %q", got)
		}
		if b.eval(`document.querySelector('#s-models-new-pattern').value`) != "" {
			t.Fatal("the new row was not emptied")
		}
		if got := b.text(card + " .saved-note"); got != de("settings.saved") {
			t.Fatalf("saved note %q", got)
		}
		b.fitsPhone("the card with a price")
		b.shotOf("prices-added-390-de", card)
	})

	step("a time zone that does not exist is refused at its field", func(t *testing.T) {
		b.do(
			chromedp.SetValue(chromedp.CSS("#s-time_zone"), "Europa/Berlin"),
			chromedp.Click(chromedp.CSS("#save-prices")),
			chromedp.WaitVisible(chromedp.CSS("#s-time_zone-error")),
			settled,
		)
		if got := b.text("#s-time_zone-error"); !strings.Contains(got, de("prices.err.time_zone", "Europa/Berlin")) {
			t.Fatalf("time zone error %q", got)
		}
		if b.text(card+" .error-note") != de("settings.not_saved") {
			t.Fatal("the card does not say that nothing was saved")
		}
		var doc map[string]any
		e.API("GET", "/api/settings/prices", nil, &doc)
		if doc["time_zone"] != "UTC" {
			t.Fatalf("a refused save changed the time zone: %v", doc["time_zone"])
		}
		b.fitsPhone("the card with an error")
		b.shotOf("prices-error-390-de", card)
		b.do(
			chromedp.SetValue(chromedp.CSS("#s-time_zone"), "Europe/Berlin"),
			chromedp.Click(chromedp.CSS("#save-prices")),
			chromedp.WaitVisible(chromedp.CSS(card+" .saved-note")),
			settled,
		)
		e.API("GET", "/api/settings/prices", nil, &doc)
		if doc["time_zone"] != "Europe/Berlin" {
			t.Fatalf("time zone %v", doc["time_zone"])
		}
	})

	step("look up a price", func(t *testing.T) {
		// Enter in the look-up field looks up; it does not press the card's save button.
		b.do(
			chromedp.SendKeys(chromedp.CSS("#prices-lookup-model"), "rp/sim-small"+kb.Enter),
			chromedp.WaitVisible(chromedp.CSS("#prices-lookup-result")),
			settled,
		)
		got := b.text("#prices-lookup-result")
		if !strings.Contains(got, de("prices.source.override", "rp/sim-small")) || !strings.Contains(got, "Eingabe 1,5") {
			t.Fatalf("look-up %q", got)
		}
		if b.eval(`String(!!document.querySelector('#card-prices .saved-note'))`) != "false" {
			t.Fatal("looking up saved the card")
		}
		b.do(
			chromedp.SetValue(chromedp.CSS("#prices-lookup-model"), "anthropic/claude-sonnet-4-5-20250929"),
			chromedp.Click(chromedp.CSS("#prices-lookup-button")),
			chromedp.Poll[chromedp.Void](`(document.querySelector('#prices-lookup-result')||{}).textContent.includes('claude-sonnet-4-5-20250929')`),
			settled,
		)
		if got := b.text("#prices-lookup-result"); !strings.Contains(got, de("prices.source.built_in", "claude-sonnet-4-5-20250929")) ||
			!strings.Contains(got, "Eingabe 3 ") || !strings.Contains(got, "200.000") {
			t.Fatalf("look-up %q", got)
		}
		b.do(
			chromedp.SetValue(chromedp.CSS("#prices-lookup-model"), "rp/no-such-model"),
			chromedp.Click(chromedp.CSS("#prices-lookup-button")),
			chromedp.Poll[chromedp.Void](`(document.querySelector('#prices-lookup-result')||{}).textContent.includes('no-such-model')`),
			settled,
		)
		if got := b.text("#prices-lookup-result"); !strings.Contains(got, de("prices.lookup.none")) {
			t.Fatalf("look-up %q", got)
		}
		b.fitsPhone("the card with a look-up")
		b.shotOf("prices-lookup-390-de", card)
	})

	step("rotate the webhook secret: asked first, shown once", func(t *testing.T) {
		b.do(
			chromedp.Click(chromedp.CSS("#prices-rotate")),
			chromedp.WaitVisible(chromedp.CSS("#prices-rotate-confirm")),
			settled,
		)
		if got := b.text(".prices-confirm p"); got != de("prices.secret.confirm") {
			t.Fatalf("confirm %q", got)
		}
		b.do(
			chromedp.Click(chromedp.CSS("#prices-rotate-confirm")),
			chromedp.WaitVisible(chromedp.CSS("#prices-secret-value")),
			chromedp.WaitVisible(chromedp.CSS("#prices-copy-secret")),
			settled,
		)
		secret := b.text("#prices-secret-value")
		if !regexp.MustCompile(`^whsec_[0-9a-f]{64}$`).MatchString(secret) {
			t.Fatalf("secret %q", secret)
		}
		if got := b.text("#prices-copy-secret"); got != de("keys.copy") {
			t.Fatalf("copy button %q", got)
		}
		b.fitsPhone("the card with the new secret")
		b.shotOf("prices-secret-390-de", card)
		raw, _ := json.Marshal(models(t))
		b.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(card)))
		if b.eval(`String(document.body.innerHTML.includes('`+secret+`'))`) != "false" {
			t.Fatal("the secret is shown again after a reload")
		}
		if after, _ := json.Marshal(models(t)); string(after) != string(raw) {
			t.Fatal("rotating changed the prices")
		}
	})

	step("on a wide screen the prices are a table with column heads", func(t *testing.T) {
		b.do(
			chromedp.EmulateViewport(1280, 900),
			chromedp.Navigate(e.Base+"/lang/en?next=/settings"),
			chromedp.WaitVisible(chromedp.CSS(card+" .price-head")),
			chromedp.ScrollIntoView(chromedp.CSS(card)),
		)
		// The row's price inputs sit on one line with its pattern.
		if got := b.eval(`String(document.querySelector('#s-models-0-pattern').getBoundingClientRect().top === ` +
			`document.querySelector('#s-models-0-cache_read_per_mtok').getBoundingClientRect().top)`); got != "true" {
			t.Fatal("a price row is not one line on a wide screen")
		}
		b.shotOf("prices-1280-en", card)
	})
}
