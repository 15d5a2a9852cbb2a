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

// TestRequestBodiesInBrowser: a request's kept bodies show on its page in blocks that wrap long
// lines and scroll inside themselves, so the page never scrolls sideways, at 390 and 1440 px in
// both languages.
func TestRequestBodiesInBrowser(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e := testenv.New(t, "--request-log-body-kib", "16")
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-upstream-secret-1", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	content := strings.Repeat("x", 6000) + " " + strings.Repeat(`line\n`, 400)
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-test","messages":[{"role":"user","content":"`+content+`"}]}`)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, got)
	}
	var list struct{ Items []struct{ ID int64 } }
	if e.API("GET", "/api/requests?surface=/v1/chat/completions", nil, &list); len(list.Items) != 1 {
		t.Fatalf("logged: %+v", list.Items)
	}
	ck := &cockpit{stateBrowser: newStateBrowser(t), e: e}
	ck.login(t)
	for _, l := range i18n.Langs {
		ck.lang(l)
		for _, w := range []int64{390, 1440} {
			ck.do(chromedp.EmulateViewport(w, 900), chromedp.Navigate(fmt.Sprintf("%s/requests/%d", e.Base, list.Items[0].ID)),
				chromedp.WaitVisible(chromedp.CSS("#request-body pre")))
			got := ck.eval(`(() => {
				const d = document.documentElement, pre = document.querySelector('#request-body pre'), r = pre.getBoundingClientRect();
				const out = [];
				if (d.scrollWidth > d.clientWidth) out.push('page overflows by ' + (d.scrollWidth - d.clientWidth) + 'px');
				if (r.left < 0 || r.right > d.clientWidth) out.push('the block leaves the screen');
				if (pre.scrollWidth > pre.clientWidth + 1) out.push('the block scrolls sideways');
				if (pre.scrollHeight <= pre.clientHeight) out.push('a long body does not scroll inside its block');
				return out.join('; ');
			})()`)
			if got != "" {
				t.Errorf("%s %d px: %s", l, w, got)
			}
			if w == 390 {
				ck.shot("request-bodies-390-" + string(l))
			}
		}
	}
}
