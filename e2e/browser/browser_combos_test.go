package browser

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// TestCombosInBrowser: an operator creates a combo with two targets on the Combos page, sees
// each target's live state (the first provider's only connection cooling down, counted down in
// the browser; the second ready), moves the targets in place, watches the state refresh by
// itself when the cooldown is cleared, and reads it all in German on a 390 px phone.
func TestCombosInBrowser(t *testing.T) {
	e, cool := testenv.NewWithCooledProvider(t)

	b := newDashBrowser(t)
	step := b.step
	const card = "#combo-resilient-chat"
	rows := func() string {
		return b.eval(`[...document.querySelectorAll('` + card + ` tr.combo-target')].map(r => r.dataset.target).join(',')`)
	}
	var id string
	// save saves the combo form and waits for the list.
	save := func() { b.do(clickLoad("#save-combo"), chromedp.WaitVisible(chromedp.CSS(card))) }

	step("log in and open the empty Combos page", func(t *testing.T) {
		b.do(
			logInTo(e),
			chromedp.WaitVisible(chromedp.CSS("#nav-combos")),
			clickLoad("#nav-combos"),
			chromedp.WaitVisible(chromedp.CSS("#add-combo")),
		)
		if got := b.text(".card.empty p"); got != i18n.TL(i18n.EN, "combos.empty") {
			t.Fatalf("empty page says %q", got)
		}
	})

	step("create a combo with two targets", func(t *testing.T) {
		b.do(
			clickLoad("#add-combo"),
			chromedp.WaitVisible(chromedp.CSS("#combo-form")),
			chromedp.SendKeys(chromedp.CSS("#combo-name"), "resilient-chat"),
			chromedp.SendKeys(chromedp.CSS("#target-0"), "up/gpt-test"),
			chromedp.SendKeys(chromedp.CSS("#target-1"), "ok/gpt-test"),
		)
		// Every strategy explains itself on the form.
		if got := b.eval(`String(document.querySelectorAll('#combo-strategy-help [data-strategy]').length)`); got != "9" {
			t.Fatalf("%s strategies explained, want 9", got)
		}
		b.shot("combos-form")
		save()
		if got := rows(); got != "up/gpt-test,ok/gpt-test" {
			t.Fatalf("targets %q", got)
		}
		items := e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("combos %v", items)
		}
		id = strings.TrimSuffix(strings.TrimSuffix(
			strings.TrimPrefix(b.eval(`document.querySelector('`+card+` a[id^="edit-combo-"]').getAttribute('href')`), "/combos/"), "/edit"), "/")
		if id == "" {
			t.Fatal("no edit link")
		}
	})

	step("each target shows its live state", func(t *testing.T) {
		first := card + ` tr.combo-target[data-target="up/gpt-test"] .target-live`
		second := card + ` tr.combo-target[data-target="ok/gpt-test"] .target-live`
		b.do(chromedp.WaitVisible(chromedp.CSS(first + `[data-status="waiting"] .countdown`)))
		if got := b.text(first + " .countdown"); !strings.HasPrefix(got, "10:00") && !strings.HasPrefix(got, "9:5") {
			t.Fatalf("countdown %q, want about 10:00", got)
		}
		if got := b.text(first + " .live-conns"); !strings.Contains(got, "0 of 1 connections usable") || !strings.Contains(got, "1 cooling") {
			t.Fatalf("connections %q", got)
		}
		if got := b.text(second + " .live-pill"); got != i18n.TL(i18n.EN, "combos.live.ready") {
			t.Fatalf("second target %q", got)
		}
		// The countdown ticks in the browser between the server's refreshes.
		b.do(chromedp.Poll[chromedp.Void](`document.querySelector('`+first+` .countdown').textContent === '9:59'`,
			chromedp.WithPollingTimeout(10*time.Second)))
		b.shot("combos-live")
	})

	step("move the targets in place", func(t *testing.T) {
		b.do(chromedp.Evaluate[chromedp.Void](`window.__stillHere = true`))
		down := b.eval(`document.querySelector('` + card + ` tr.combo-target[data-target="up/gpt-test"] .move-down').id`)
		b.do(
			chromedp.Click(chromedp.CSS("#"+down)),
			chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('`+card+` tr.combo-target')].map(r => r.dataset.target).join(',') === 'ok/gpt-test,up/gpt-test'`,
				chromedp.WithPollingTimeout(10*time.Second)),
		)
		if b.eval(`String(window.__stillHere === true)`) != "true" {
			t.Fatal("moving reloaded the page instead of swapping the card")
		}
		var got []string
		for _, it := range e.MustAPI("GET", "/api/combos/"+id, nil, 200)["targets"].([]any) {
			m := it.(map[string]any)
			got = append(got, m["provider"].(string)+"/"+m["model"].(string))
		}
		if strings.Join(got, ",") != "ok/gpt-test,up/gpt-test" {
			t.Fatalf("saved order %v", got)
		}
		// The moved target keeps its live state, and the focus stays on the button pressed
		// (now "up", since the target is last).
		b.do(chromedp.WaitVisible(chromedp.CSS(card+` tr.combo-target[data-target="up/gpt-test"] .target-live[data-status="waiting"]`)), settled)
		up := b.eval(`document.querySelector('` + card + ` tr.combo-target[data-target="up/gpt-test"] .move-up').id`)
		b.do(
			chromedp.Click(chromedp.CSS("#"+up)),
			chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('`+card+` tr.combo-target')].map(r => r.dataset.target).join(',') === 'up/gpt-test,ok/gpt-test'`,
				chromedp.WithPollingTimeout(10*time.Second)),
		)
		if got := rows(); got != "up/gpt-test,ok/gpt-test" || b.eval(`String(window.__stillHere === true)`) != "true" {
			t.Fatalf("after moving back: %q", got)
		}
	})

	step("the live state refreshes by itself", func(t *testing.T) {
		e.MustAPI("POST", "/api/connections/"+strconv.FormatInt(cool, 10)+"/reset", nil, 200)
		b.do(chromedp.WaitVisible(chromedp.CSS(card + ` tr.combo-target[data-target="up/gpt-test"] .target-live[data-status="ready"]`)))
		if b.eval(`String(window.__stillHere === true)`) != "true" {
			t.Fatal("the page was reloaded")
		}
	})

	step("the form's row buttons work in place", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/combos/"+id+"/edit"),
			chromedp.WaitVisible(chromedp.CSS("#target-1")),
			chromedp.Evaluate[chromedp.Void](`window.__form = true`),
			chromedp.Click(chromedp.CSS("#add-target")),
			chromedp.WaitVisible(chromedp.CSS("#target-2")),
			settled,
			chromedp.Click(chromedp.CSS("#row-down-0")),
			chromedp.Poll[chromedp.Void](`document.querySelector('#target-0').value === 'ok/gpt-test'`, chromedp.WithPollingTimeout(10*time.Second)),
		)
		if b.eval(`String(window.__form === true)`) != "true" {
			t.Fatal("the row buttons reloaded the page")
		}
		save()
		if got := rows(); got != "ok/gpt-test,up/gpt-test" {
			t.Fatalf("after saving the form: %q", got)
		}
	})

	step("German on a 390 px phone", func(t *testing.T) {
		b.do(chromedp.EmulateViewport(390, 800))
		defer b.do(chromedp.EmulateViewport(1280, 900))
		for _, p := range []struct{ path, ready string }{
			{"/combos", card}, {"/combos/new", "#combo-form"}, {"/combos/" + id + "/edit", "#combo-form"},
		} {
			b.do(
				chromedp.Navigate(e.Base+"/lang/de?next="+p.path),
				chromedp.WaitVisible(chromedp.CSS(p.ready)),
			)
			over := b.eval(`(() => {
				const d = document.documentElement, over = d.scrollWidth - d.clientWidth;
				const wide = [...document.querySelectorAll('.card, .table-wrap')].filter(el => el.scrollWidth > el.clientWidth + 1)
					.map(el => (el.id || el.className) + ' ' + (el.scrollWidth - el.clientWidth) + 'px');
				return over > 0 || wide.length ? over + 'px; ' + wide.join(', ') : '';
			})()`)
			if over != "" {
				t.Errorf("%s overflows a 390 px screen: %s", p.path, over)
			}
			b.shot("combos-390-de" + strings.ReplaceAll(p.path, "/", "-"))
		}
		b.do(chromedp.Navigate(e.Base+"/combos"), chromedp.WaitVisible(chromedp.CSS(card)))
		if got := b.text("h1"); got != i18n.TL(i18n.DE, "combos.title") {
			t.Fatalf("German title %q", got)
		}
		if got := b.text(card + ` tr.combo-target[data-target="up/gpt-test"] .live-pill`); got != i18n.TL(i18n.DE, "combos.live.ready") {
			t.Fatalf("German state %q", got)
		}
		// The move buttons are on screen and usable with a thumb.
		fit := b.eval(`(() => { const r = document.querySelector('` + card + ` .move-down').getBoundingClientRect();
			return String(r.width >= 28 && r.right <= document.documentElement.clientWidth) })()`)
		if fit != "true" {
			t.Fatal("a move button is off screen or too small at 390 px")
		}
	})
}
