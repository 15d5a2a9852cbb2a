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

// TestPinnedSessionsInBrowser: a client session pinned to a connection appears on the
// connection's row of the providers page with the live state's next poll, and the row still fits
// a phone.
func TestPinnedSessionsInBrowser(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	a := strconv.FormatInt(e.AddConnection("up", "a", "sk-a", 0), 10)
	e.AddConnection("up", "b", "sk-b", 1)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"session_affinity_ttl_ms": 600_000}, 200)

	b := newStateBrowser(t)
	pinned := "#cqueue-" + a + " .q-pinned"
	b.do(
		chromedp.Navigate(e.Base+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#password"), e.Vars["SWITCHYARD_ADMIN_PASSWORD"]),
		b.clickLoad(`.login button[type="submit"]`),
		chromedp.WaitVisible(chromedp.CSS("#nav-cooldowns")),
		chromedp.Navigate(e.Base+"/providers"),
		chromedp.WaitVisible(chromedp.CSS("#cqueue-"+a)),
	)
	if b.eval(`String(document.querySelector('`+pinned+`') === null)`) != "true" {
		t.Fatal("pinned sessions are shown before any session was pinned")
	}
	for _, s := range []string{"one", "two"} {
		r := e.Post(context.Background(), "/v1/chat/completions", key, testenv.ChatBody, map[string]string{"X-Switchyard-Session": s})
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("chat: %d %s", r.StatusCode, body)
		}
	}
	b.do(chromedp.WaitVisible(chromedp.CSS(pinned)))
	if got := b.text(pinned); got != "2" {
		t.Fatalf("pinned count %q", got)
	}
	if got := b.text("#cqueue-" + a + " .q-main"); !strings.Contains(got, i18n.TL(i18n.EN, "state.queue.pinned")) {
		t.Fatalf("queue cell %q", got)
	}
	b.do(chromedp.EmulateViewport(390, 800))
	defer b.do(chromedp.EmulateViewport(1280, 900))
	b.do(chromedp.Navigate(e.Base+"/providers"), chromedp.WaitVisible(chromedp.CSS(pinned)))
	if over := b.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
		t.Errorf("the providers page overflows a 390 px screen by %s px", over)
	}
	b.shot("providers-pinned-390")
}
