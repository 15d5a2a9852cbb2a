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

// eachLangAndWidth calls check in each language at 390 and 1440 px.
func (ck *cockpit) eachLangAndWidth(check func(l i18n.Lang, w int64)) {
	for _, l := range i18n.Langs {
		ck.lang(l)
		for _, w := range []int64{390, 1440} {
			ck.do(chromedp.EmulateViewport(w, 900))
			check(l, w)
		}
	}
}

// requestPages is a logged-in browser on e for the pages of a request and of the log.
func requestPages(t *testing.T, e *testenv.Env) *cockpit {
	t.Helper()
	ck := &cockpit{dashBrowser: newDashBrowser(t), e: e}
	ck.login(t)
	return ck
}

// onlyChatRequest is the id of the one chat completions request the log holds, once it holds it
// (a request is handed to the log just after its answer went out).
func onlyChatRequest(t *testing.T, e *testenv.Env) int64 {
	t.Helper()
	var list struct{ Items []struct{ ID int64 } }
	e.Eventually("the chat request is logged", func() bool {
		return e.API("GET", "/api/requests?surface=/v1/chat/completions", nil, &list) == 200 && len(list.Items) > 0
	})
	if len(list.Items) != 1 {
		t.Fatalf("logged: %+v", list.Items)
	}
	return list.Items[0].ID
}

// chatWants sends a chat completions body and fails t unless the answer has the status want.
func chatWants(t *testing.T, e *testenv.Env, key, body string, want int) {
	t.Helper()
	r := e.Chat(context.Background(), key, body)
	if got := testenv.ReadAll(t, r); r.StatusCode != want {
		t.Fatalf("chat: %d %s, want %d", r.StatusCode, got, want)
	}
}

// TestRequestBodiesInBrowser: a request's kept bodies show on its page in blocks that wrap long
// lines and scroll inside themselves, so the page never scrolls sideways, at 390 and 1440 px in
// both languages.
func TestRequestBodiesInBrowser(t *testing.T) {
	e, _ := oneConnection(t, "--request-log-body-kib", "16")
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	content := strings.Repeat("x", 6000) + " " + strings.Repeat(`line\n`, 400)
	chatWants(t, e, key, `{"model":"up/gpt-test","messages":[{"role":"user","content":"`+content+`"}]}`, 200)
	id := onlyChatRequest(t, e)
	ck := requestPages(t, e)
	ck.eachLangAndWidth(func(l i18n.Lang, w int64) {
		ck.do(chromedp.Navigate(fmt.Sprintf("%s/requests/%d", e.Base, id)), chromedp.WaitVisible(chromedp.CSS("#request-body pre")))
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
	})
}

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
	e, key, _ := twoConnections(t, up)
	chatWants(t, e, key, testenv.ChatBody, 200)
	id := onlyChatRequest(t, e)
	ck := requestPages(t, e)
	ck.eachLangAndWidth(func(l i18n.Lang, w int64) {
		ck.do(chromedp.Navigate(fmt.Sprintf("%s/requests/%d", e.Base, id)), chromedp.WaitVisible(chromedp.CSS("#attempts-table")))
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
	})
}

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
	chatWants(t, e, key, `{"model":"anthropic/claude-test","logprobs":true,"presence_penalty":0.5,"`+long+
		`":1,"messages":[{"role":"user","content":"hi"}]}`, 200)
	id := onlyChatRequest(t, e)
	ck := requestPages(t, e)
	ck.eachLangAndWidth(func(l i18n.Lang, w int64) {
		ck.do(chromedp.Navigate(fmt.Sprintf("%s/requests/%d", e.Base, id)), chromedp.WaitReady(chromedp.CSS("#request-summary")))
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
	})
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
