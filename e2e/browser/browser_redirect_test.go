package browser

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// TestRedirectInAttemptChainInBrowser: a request whose first connection answered a redirect
// shows, in its attempt chain, the reason in the reader's language and where the redirect
// pointed (scrubbed), wrapping a long target so the page never scrolls sideways, at 390 and 1440
// px in both languages.
func TestRedirectInAttemptChainInBrowser(t *testing.T) {
	target := "http://user:pw@internal.example.test/" + strings.Repeat("segment/", 30) + "v1/chat/completions?token=SECRETQUERY"
	up := testenv.NewFakeUpstream(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-a": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", target)
			w.WriteHeader(http.StatusTemporaryRedirect)
		},
		"sk-b": testenv.JSONAnswer(testenv.CompletionJSON),
	}))
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "a", "sk-a", 0)
	e.AddConnection("up", "b", "sk-b", 1)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	if r := e.Chat(context.Background(), key, testenv.ChatBody); r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, testenv.ReadAll(t, r))
	} else {
		testenv.ReadAll(t, r)
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
				chromedp.WaitVisible(chromedp.CSS("#attempts-table")))
			got := ck.eval(`(() => {
				const d = document.documentElement, x = document.querySelector('#attempts-table .excerpt');
				const out = [];
				if (!x) return 'no target shown';
				if (!x.textContent.includes('internal.example.test/segment/') || !x.textContent.endsWith('?token=[redacted]')) out.push('target ' + x.textContent);
				if (document.body.textContent.includes('SECRETQUERY') || document.body.textContent.includes('user:pw')) out.push('a secret of the target is shown');
				if (d.scrollWidth > d.clientWidth) out.push('page overflows by ' + (d.scrollWidth - d.clientWidth) + 'px');
				const r = x.getBoundingClientRect();
				if (r.left < 0 || r.right > d.clientWidth) out.push('the target leaves the screen');
				return out.join('; ');
			})()`)
			if got != "" {
				t.Errorf("%s %d px: %s", l, w, got)
			}
			reason := ck.eval(`document.querySelector('#attempts-table tr.attempt').textContent`)
			if !strings.Contains(reason, i18n.TL(l, "requests.reason.upstream_redirect")) {
				t.Errorf("%s: the first attempt does not say it was redirected: %s", l, reason)
			}
			if w == 390 {
				ck.shot("request-redirect-390-" + string(l))
			}
		}
	}
}
