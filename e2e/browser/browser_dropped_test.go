package browser

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// TestDroppedLineInBrowser: a chat completions request to an Anthropic provider with fields the
// messages format cannot carry (one with a long name) shows "Dropped in translation: …" on its
// page, naming them, in both languages; the line wraps, so neither its page nor the list (which
// marks the request) scrolls sideways at 390 px.
//
// The engine names the dropped fields in Trace.Dropped; until it does, the line is missing and
// this test fails.
func TestDroppedLineInBrowser(t *testing.T) {
	ant := testenv.NewFakeAnthropic(t, testenv.MessagesAnswer())
	e := testenv.New(t)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	e.AddConnection("anthropic", "main", "sk-ant", 0)
	key := e.NewKey()
	e.WaitModels(key, "anthropic/claude-test")
	long := "x_vendor_extension_" + strings.Repeat("long", 18)
	r := e.Chat(context.Background(), key, `{"model":"anthropic/claude-test","logprobs":true,"presence_penalty":0.5,"`+long+
		`":1,"messages":[{"role":"user","content":"hi"}]}`)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, got)
	}
	var list struct{ Items []struct{ ID int64 } }
	if e.API("GET", "/api/requests?surface=/v1/chat/completions", nil, &list); len(list.Items) != 1 {
		t.Fatalf("logged: %+v", list.Items)
	}
	id := list.Items[0].ID
	ck := &cockpit{stateBrowser: newStateBrowser(t), e: e}
	ck.login(t)
	for _, l := range i18n.Langs {
		ck.lang(l)
		for _, w := range []int64{390, 1440} {
			ck.do(chromedp.EmulateViewport(w, 900), chromedp.Navigate(fmt.Sprintf("%s/requests/%d", e.Base, id)),
				chromedp.WaitReady(chromedp.CSS("#request-summary")))
			line := ck.eval(`(() => { const p = document.querySelector('#request-dropped p'); return p ? p.textContent.replace(/\s+/g, ' ').trim() : '' })()`)
			want := i18n.TL(l, "requests.dropped") + " logprobs, presence_penalty, " + long
			if line != want {
				t.Errorf("%s %d px: the line reads %q, want %q", l, w, line, want)
			}
			if got := ck.eval(fits("#request-dropped")); got != "" {
				t.Errorf("%s %d px, request page: %s", l, w, got)
			}
			if w == 390 {
				ck.shot("request-dropped-390-" + string(l))
			}
			ck.do(chromedp.Navigate(e.Base+"/requests"), chromedp.WaitReady(chromedp.CSS("#requests-table")))
			if got := ck.eval(fmt.Sprintf(`(() => { const m = document.querySelector('#req-%d .req-dropped'); return m ? m.textContent.trim() : '' })()`, id)); got != i18n.TL(l, "requests.dropped_count", 3) {
				t.Errorf("%s %d px: the list marks the request %q", l, w, got)
			}
			if got := ck.eval(fits(fmt.Sprintf("#req-%d", id))); got != "" {
				t.Errorf("%s %d px, request list: %s", l, w, got)
			}
			if w == 390 {
				ck.shot("request-list-dropped-390-" + string(l))
			}
		}
	}
}

// fits is a script saying what of the page and of the element sel leaves the screen ("" when
// nothing does).
func fits(sel string) string {
	return `(() => {
		const d = document.documentElement, el = document.querySelector('` + sel + `'), out = [];
		if (d.scrollWidth > d.clientWidth) out.push('page overflows by ' + (d.scrollWidth - d.clientWidth) + 'px');
		if (!el) return 'no ` + sel + `';
		const r = el.getBoundingClientRect();
		if (r.left < 0 || r.right > d.clientWidth) out.push('` + sel + ` leaves the screen');
		return out.join('; ');
	})()`
}
