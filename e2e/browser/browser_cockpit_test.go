package browser

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// cockpit is a gateway with every kind of trouble at once, the traffic that caused it, and a
// logged-in headless Chromium:
//
//   - brk: its breaker opens after one failure (the upstream answers 500);
//   - up: connection a cools down (429), dead is expired (401), b serves;
//   - solo: its only connection cools down, so the provider is unavailable;
//   - lk: model lockout on, gpt-a and gpt-b locked on its connection by 404s;
//   - down: its model list fails (503);
//   - claude: an anthropic provider with a connection.
type cockpit struct {
	*dashBrowser
	e        *testenv.Env
	key      string
	ids      map[string]int64 // connection ids by name
	lk       *testenv.FakeUpstream
	lkFixed  *atomic.Bool
	failover int64 // the request log id of the failed-over request
}

func newCockpit(t *testing.T) *cockpit {
	t.Helper()
	ck := &cockpit{ids: map[string]int64{}, lkFixed: &atomic.Bool{}}
	fail500 := testenv.Status(500, nil, `{"error":{"message":"upstream exploded","type":"server_error"}}`)
	brk := testenv.NewFakeUpstream(t, fail500)
	up := testenv.NewFakeUpstream(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-a":    testenv.Status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`),
		"sk-dead": testenv.Status(401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`),
		"sk-b":    testenv.JSONAnswer(testenv.CompletionJSON),
	}))
	solo := testenv.NewFakeUpstream(t, testenv.Status(429, map[string]string{"Retry-After": "900"}, `{"error":{"message":"Rate limit reached"}}`))
	notFound := testenv.Status(404, nil, `{"error":{"message":"The model does not exist","code":"model_not_found"}}`)
	ck.lk = testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if ck.lkFixed.Load() {
			testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
			return
		}
		notFound(w, r)
	}, "gpt-a", "gpt-b", "gpt-c")
	down := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	down.ModelsDown.Store(true)
	claude := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))

	e := testenv.New(t)
	ck.e = e
	brkID := e.AddProvider("brk", brk.URL+"/v1")
	e.AddConnection("brk", "main", "sk-brk", 0)
	e.AddProvider("up", up.URL+"/v1")
	ck.ids["a"] = e.AddConnection("up", "a", "sk-a", 0)
	ck.ids["dead"] = e.AddConnection("up", "dead", "sk-dead", 1)
	ck.ids["b"] = e.AddConnection("up", "b", "sk-b", 2)
	e.AddProvider("solo", solo.URL+"/v1")
	ck.ids["solo"] = e.AddConnection("solo", "only", "sk-solo", 0)
	e.AddProvider("lk", ck.lk.URL+"/v1")
	ck.ids["lk"] = e.AddConnection("lk", "main", "sk-lk", 0)
	e.AddProvider("down", down.URL+"/v1")
	e.AddConnection("down", "main", "sk-down", 0)
	e.MustAPI("POST", "/api/providers", map[string]any{"name": "claude", "type": "anthropic", "base_url": claude.URL}, 201)
	e.AddConnection("claude", "main", "sk-claude", 0)
	ck.key = e.NewKey()
	for _, m := range []string{"brk/gpt-test", "up/gpt-test", "solo/gpt-test", "lk/gpt-a"} {
		e.WaitModels(ck.key, m)
	}
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"model_lockout": map[string]any{"enabled": true}}, 200)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", brkID),
		map[string]any{"resilience": map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 1}}}, 200)

	// Traffic spread over the last hour (the fake clock moves forward between requests), so
	// the charts have something to draw.
	for i := 0; i < 6; i++ {
		ck.chat(t, "up/gpt-test", 0)
		e.Clock.Advance(11 * time.Minute)
	}
	e.MustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", ck.ids["a"]), map[string]any{"terminal": true}, 200)
	e.MustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", ck.ids["dead"]), map[string]any{"terminal": true}, 200)
	ck.chat(t, "up/gpt-test", 200) // a cools (429), dead expires (401), b serves: a failover
	ck.chat(t, "brk/gpt-test", 500)
	ck.chat(t, "solo/gpt-test", 429)
	ck.chat(t, "lk/gpt-a", 404)
	ck.chat(t, "lk/gpt-b", 404)
	var list struct {
		Items []struct {
			ID           int64 `json:"id"`
			Model        string
			Provider     string
			AttemptCount int `json:"attempt_count"`
		}
	}
	// A request is handed to the log just after its answer went out.
	e.Eventually("the failed-over request is logged", func() bool {
		return e.API("GET", "/api/requests?provider=up&status=2xx&limit=1", nil, &list) == 200 && len(list.Items) == 1
	})
	if list.Items[0].AttemptCount != 3 {
		t.Fatalf("the failed-over request is not logged as such: %+v", list.Items)
	}
	ck.failover = list.Items[0].ID
	ck.dashBrowser = newDashBrowser(t)
	return ck
}

// chat sends a request and checks its status (0: any).
func (ck *cockpit) chat(t *testing.T, model string, want int) {
	t.Helper()
	r := ck.e.Chat(context.Background(), ck.key, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
	body := testenv.ReadAll(t, r)
	if want != 0 && r.StatusCode != want {
		t.Fatalf("%s: %d %s, want %d", model, r.StatusCode, body, want)
	}
}

func (ck *cockpit) login(t *testing.T) {
	t.Helper()
	ck.do(logInTo(ck.e), chromedp.WaitVisible(chromedp.CSS("#health")))
}

// confirmClick clicks a button that asks first (hx-confirm) and accepts the question.
func (ck *cockpit) confirmClick(sel string) {
	ck.t.Helper()
	ck.dialogFor(sel)
	ck.do(acceptDialog)
}

// lang switches the session's language (and shows the overview).
func (ck *cockpit) lang(l i18n.Lang) {
	ck.do(chromedp.Navigate(ck.e.Base+"/lang/"+string(l)+"?next=/"), chromedp.WaitReady(chromedp.CSS(`html[lang="`+string(l)+`"]`)))
}

// pages are every dashboard page with something on it, and an element that shows it loaded.
func (ck *cockpit) pages() []struct{ path, ready string } {
	return []struct{ path, ready string }{
		{"/", "#traffic"},
		{"/providers", "#provider-up"},
		{"/model-cooldowns", "#lockouts-table"},
		{"/requests", "#requests-table"},
		{"/requests/" + strconv.FormatInt(ck.failover, 10), "#attempts-table"},
		{"/keys", "#keys-table"},
		{"/settings", "#card-connection-cooldown"},
		{"/connections/" + strconv.FormatInt(ck.ids["a"], 10) + "/edit", "#conn-queue-overrides"},
		{"/providers/1/edit", "#save-provider"},
	}
}

// TestCockpitInBrowser drives the dashboard as an operator who wants to know what is wrong and
// what traffic is doing, in headless Chromium, against a gateway on a fake clock with every kind
// of trouble at once.
func TestCockpitInBrowser(t *testing.T) {
	ck := newCockpit(t)
	e := ck.e
	step := ck.step
	step("log in", ck.login)

	step("the health strip lists each kind of trouble and links to it", func(t *testing.T) {
		kinds := ck.eval(`[...document.querySelectorAll('#health li.trouble')].map(li => li.dataset.kind).join(' ')`)
		for _, k := range []string{"breaker_open", "provider_unavailable", "connection_terminal", "connection_cooling",
			"model_lockout", "discovery_failed"} {
			if !strings.Contains(kinds, k) {
				t.Errorf("the strip lacks %s: %s", k, kinds)
			}
		}
		// 404s locked gpt-a and gpt-b on lk; the 429s locked gpt-test on up/a and solo (429 is one
		// of model lockout's error codes).
		if got := ck.text(`#health`); !strings.Contains(got, "gpt-a") || !strings.Contains(got, "gpt-b") {
			t.Errorf("the lockouts of gpt-a and gpt-b are not listed: %q", got)
		}
		if got := ck.text(`#health li[data-kind="discovery_failed"]`); !strings.Contains(got, "503") || !strings.Contains(got, "down") {
			t.Errorf("the discovery failure does not say why: %q", got)
		}
		ck.shot("cockpit-overview")
		ck.do(chromedp.Navigate(e.Base+"/providers"), chromedp.WaitVisible(chromedp.CSS("#provider-up")))
		ck.shot("cockpit-providers")
		ck.do(chromedp.Navigate(e.Base+"/"), chromedp.WaitVisible(chromedp.CSS("#health")))
		// Each link leads to the failing piece.
		for _, c := range []struct{ kind, target string }{
			{"connection_terminal", "#conn-" + strconv.FormatInt(ck.ids["dead"], 10)},
			{"breaker_open", "#provider-brk"},
			{"model_lockout", "#lockouts tr.lockout"},
		} {
			href := ck.eval(`document.querySelector('#health li[data-kind="` + c.kind + `"] a').getAttribute('href')`)
			ck.do(clickLoad(`#health li[data-kind="`+c.kind+`"] a`), chromedp.WaitVisible(chromedp.CSS(c.target)))
			if loc := ck.eval(`location.pathname + location.hash`); loc != href {
				t.Errorf("%s: landed on %s, want %s", c.kind, loc, href)
			}
			if hash := ck.eval(`location.hash`); ck.eval(`String(document.querySelector(`+strconv.Quote(hash)+`) !== null)`) != "true" {
				t.Errorf("%s: the link's target %s is not on the page", c.kind, hash)
			}
			ck.do(chromedp.Navigate(e.Base+"/"), chromedp.WaitVisible(chromedp.CSS("#health")))
		}
	})

	step("charts render from the aggregates, also after a restart", func(t *testing.T) {
		check := func(rangeName string) {
			t.Helper()
			ck.do(chromedp.Navigate(e.Base+"/?range="+rangeName), chromedp.WaitVisible(chromedp.CSS("#chart-requests")))
			bars := ck.eval(`String(document.querySelectorAll('#chart-requests rect.bar').length)`)
			if n, _ := strconv.Atoi(bars); n < 3 {
				t.Errorf("%s: %s request bars, want the traffic spread over at least 3 steps", rangeName, bars)
			}
			if ck.eval(`String(document.querySelectorAll('#chart-latency polyline.line').length > 0)`) != "true" {
				t.Errorf("%s: no latency line", rangeName)
			}
			if ck.eval(`String(document.querySelectorAll('#chart-errors rect.bar.s-server_error').length > 0)`) != "true" {
				t.Errorf("%s: the 5xx errors are not drawn", rangeName)
			}
			if got := ck.text("#total-requests .total-value"); got == "0" {
				t.Errorf("%s: no requests counted", rangeName)
			}
			if ck.eval(`String(document.querySelector('#by-provider').textContent.includes('up'))`) != "true" ||
				ck.eval(`String(document.querySelector('#by-key').textContent.includes('test'))`) != "true" {
				t.Errorf("%s: the breakdown per provider or per key is missing", rangeName)
			}
		}
		check("hour")
		check("day")
		ck.shot("cockpit-charts-day")
		addr := strings.TrimPrefix(e.Base, "http://")
		e.Args = append(e.Args, "--addr", addr) // the same address, so the browser's session stays
		e.Restart()
		check("hour")
	})

	step("the request log lists a failed-over request with its attempt chain", func(t *testing.T) {
		row := "#req-" + strconv.FormatInt(ck.failover, 10)
		ck.do(chromedp.Navigate(e.Base+"/requests?provider=up&status=2xx"), chromedp.WaitVisible(chromedp.CSS(row)))
		if got := ck.text(row); !strings.Contains(got, "200") || !strings.Contains(got, "up/gpt-test") || !strings.Contains(got, "b") {
			t.Fatalf("row %q", got)
		}
		ck.shot("cockpit-requests")
		ck.do(clickLoad(row+" a"), chromedp.WaitVisible(chromedp.CSS("#attempts-table")))
		rows := ck.eval(`[...document.querySelectorAll('#attempts-table tr.attempt')].map(r => [...r.cells].map(c => c.textContent.trim()).join('|')).join('\n')`)
		lines := strings.Split(rows, "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], "a|first|429|rate limit") ||
			!strings.Contains(lines[1], "dead|failover|401|auth") || !strings.Contains(lines[2], "b|failover|200|–") {
			t.Fatalf("attempt chain:\n%s", rows)
		}
		ck.shot("cockpit-request-detail")
		// A later request skipped the cooling and the expired connection.
		ck.chat(t, "up/gpt-test", 200)
		e.Eventually("the later request is logged", func() bool {
			var later struct{ Items []struct{ ID int64 } }
			return e.API("GET", "/api/requests?provider=up&limit=1", nil, &later) == 200 && len(later.Items) == 1 && later.Items[0].ID > ck.failover
		})
		ck.do(chromedp.Navigate(e.Base+"/requests?provider=up"), chromedp.WaitVisible(chromedp.CSS("#requests-table")),
			clickLoad("#requests-table tbody tr:first-child a"), chromedp.WaitVisible(chromedp.CSS("#skipped")))
		if got := ck.text("#skipped"); !strings.Contains(got, "a") || !strings.Contains(got, "dead") ||
			!strings.Contains(got, i18n.TL(i18n.EN, "state.conn.expired")) {
			t.Fatalf("skipped connections: %q", got)
		}
	})

	step("a Re-enable button keeps the focus across refreshes", func(t *testing.T) {
		ck.do(chromedp.Navigate(e.Base+"/model-cooldowns"), chromedp.WaitVisible(chromedp.CSS("#lockouts-table")),
			chromedp.Evaluate[chromedp.Void](`window.__polls = 0; document.addEventListener('htmx:afterRequest', e => {
				if (e.detail.elt.id === 'lockouts-poll') window.__polls++ })`))
		id := ck.eval(`document.querySelector('#lockouts tr.lockout[data-model="gpt-a"] button.reenable').id`)
		ck.do(chromedp.Focus(chromedp.CSS("#"+id)), chromedp.Evaluate[chromedp.Void](`document.querySelector('#lockouts').dataset.old = 'yes'`))
		// Unchanged lockouts: the polls answer 204 and the card stays.
		ck.do(chromedp.Poll[chromedp.Void](`window.__polls >= 2`, chromedp.WithPollingTimeout(10*time.Second)))
		if ck.eval(`String(document.querySelector('#lockouts').dataset.old)`) != "yes" {
			t.Error("the card was swapped although nothing changed")
		}
		if got := ck.eval(`document.activeElement.id`); got != id {
			t.Fatalf("focus on %q after unchanged polls, want %q", got, id)
		}
		// A new lockout changes the card; the focused button is still the focused one.
		ck.chat(t, "lk/gpt-c", 404)
		ck.do(chromedp.WaitVisible(chromedp.CSS(`#lockouts tr.lockout[data-model="gpt-c"]`)))
		if ck.eval(`String(document.querySelector('#lockouts').dataset.old)`) == "yes" {
			t.Fatal("the card was not refreshed")
		}
		if got := ck.eval(`document.activeElement.id`); got != id {
			t.Fatalf("focus on %q after the refresh, want %q", got, id)
		}
	})

	step("a successful test of an expired connection offers to reset it", func(t *testing.T) {
		dead := strconv.FormatInt(ck.ids["dead"], 10)
		cell := "#cstate-" + dead
		ck.do(chromedp.Navigate(e.Base+"/providers"), chromedp.WaitVisible(chromedp.CSS(cell+`[data-status="expired"]`)))
		// The model list answers whatever the key: the test works, the connection is still expired.
		ck.do(chromedp.Click(chromedp.CSS("#test-"+dead)), chromedp.WaitVisible(chromedp.CSS("#test-reset-"+dead)))
		if got := ck.text("#test-result-" + dead + " .result-ok"); !strings.HasPrefix(got, "Connected") {
			t.Fatalf("test result %q", got)
		}
		// htmx wires the swapped-in form once the swap has settled.
		ck.do(chromedp.Poll[chromedp.Void](`!document.querySelector('.htmx-settling, .htmx-added')`, chromedp.WithPollingTimeout(5*time.Second)))
		ck.confirmClick("#test-reset-" + dead)
		ck.do(chromedp.WaitVisible(chromedp.CSS(cell + `[data-status="active"]`)))
		if st := e.State(ck.ids["dead"]); st.Status != "active" {
			t.Fatalf("after the reset: %+v", st)
		}
	})

	step("no horizontal overflow at 390 and 1440 px in both languages", func(t *testing.T) {
		for _, l := range i18n.Langs {
			ck.lang(l)
			for _, w := range []int64{390, 1440} {
				ck.do(chromedp.EmulateViewport(w, 900))
				for _, p := range ck.pages() {
					ck.do(chromedp.Navigate(e.Base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
					got := ck.eval(`(() => {
						const d = document.documentElement, over = d.scrollWidth - d.clientWidth;
						if (over <= 0) return "";
						const wide = [...document.querySelectorAll('body *')].filter(el => el.getBoundingClientRect().right > d.clientWidth + 1)
							.slice(0, 4).map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + '.' + [...el.classList].join('.'));
						return over + 'px: ' + wide.join(', ');
					})()`)
					if got != "" {
						t.Errorf("%s %d px %s overflows by %s", l, w, p.path, got)
					}
					// Nothing spills out of a card (a button across its border) and no table
					// needs sideways scrolling.
					if spill := ck.spilling(".card, .table-wrap"); spill != "" {
						t.Errorf("%s %d px %s: content wider than its box: %s", l, w, p.path, spill)
					}
					if w == 390 && (p.path == "/" || p.path == "/providers" || p.path == "/model-cooldowns") {
						ck.shot(fmt.Sprintf("cockpit-390-%s-%s", l, strings.Trim(strings.ReplaceAll(p.path, "/", "-"), "-")))
					}
				}
			}
		}
		ck.do(chromedp.EmulateViewport(1280, 900))
		ck.lang(i18n.EN)
	})

	step("the navigation works at 360 px (and is never clipped)", func(t *testing.T) {
		for _, l := range i18n.Langs {
			ck.lang(l)
			for _, w := range []int64{360, 1024, 1280, 1440} {
				ck.do(chromedp.EmulateViewport(w, 740), chromedp.Navigate(e.Base+"/"), chromedp.WaitVisible(chromedp.CSS("#nav-requests")))
				for _, id := range []string{"nav-overview", "nav-providers", "nav-combos", "nav-cooldowns", "nav-requests", "nav-keys", "nav-settings"} {
					in := ck.eval(`(() => { const el = document.getElementById('` + id + `'), r = el.getBoundingClientRect(), nav = el.parentElement.getBoundingClientRect();
						return String(r.width > 0 && r.left >= nav.left && r.right <= nav.right && r.right <= document.documentElement.clientWidth) })()`)
					if in != "true" {
						t.Errorf("%s %d px: %s is not fully visible", l, w, id)
					}
				}
			}
		}
		ck.lang(i18n.EN)
		ck.do(chromedp.EmulateViewport(360, 740))
		ck.do(chromedp.Navigate(e.Base+"/providers"), chromedp.WaitVisible(chromedp.CSS("#provider-up")))
		// The status and action cells of a connection are on screen.
		for _, sel := range []string{"#cstate-" + strconv.FormatInt(ck.ids["a"], 10), "#test-" + strconv.FormatInt(ck.ids["a"], 10)} {
			in := ck.eval(`(() => { const r = document.querySelector('` + sel + `').getBoundingClientRect();
				return String(r.width > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth) })()`)
			if in != "true" {
				t.Errorf("%s is not on screen at 360 px", sel)
			}
		}
		ck.do(chromedp.EmulateViewport(1280, 900))
	})

	step("German pages with live state show no English", func(t *testing.T) {
		ck.lang(i18n.DE)
		for _, p := range ck.pages() {
			ck.do(chromedp.Navigate(e.Base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			text := ck.eval(`(() => {
				const body = document.body.cloneNode(true);
				body.querySelectorAll('code, pre, script, style, [data-verbatim], [hidden]').forEach(el => el.remove());
				body.querySelectorAll('select option:not(:checked)').forEach(el => el.remove());
				return body.innerText + ' ' + [...document.querySelectorAll('option')].map(o => o.textContent).join(' ');
			})()`)
			if words := englishWords(text); len(words) > 0 {
				t.Errorf("%s shows English: %v in %s", p.path, words, englishContext(text, words))
			}
		}
		ck.shot("cockpit-providers-de")
		ck.lang(i18n.EN)
	})

	step("assets are compressed and come from the cache on the next page", func(t *testing.T) {
		ck.do(chromedp.Navigate(e.Base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys-table")))
		first := ck.eval(`JSON.stringify(performance.getEntriesByType('resource').filter(r => r.name.includes('/static/'))
			.map(r => [new URL(r.name).pathname, r.encodedBodySize, r.decodedBodySize, r.transferSize]))`)
		for _, name := range []string{"app.css", "dash.css", "htmx.min.js"} {
			if !strings.Contains(first, name) {
				t.Fatalf("%s not loaded: %s", name, first)
			}
		}
		ck.do(chromedp.Navigate(e.Base+"/model-cooldowns"), chromedp.WaitVisible(chromedp.CSS("#lockouts")))
		again := ck.eval(`JSON.stringify(performance.getEntriesByType('resource').filter(r => r.name.includes('/static/'))
			.map(r => [new URL(r.name).pathname, r.transferSize]))`)
		if !regexp.MustCompile(`^\[(\["/static/[^"]+",0\],?)+\]$`).MatchString(again) {
			t.Fatalf("the next page fetched its assets again (transfer sizes): %s", again)
		}
	})

	step("the stale banner appears when the gateway stops and goes when it returns", func(t *testing.T) {
		ck.do(chromedp.Navigate(e.Base+"/providers"), chromedp.WaitVisible(chromedp.CSS("#provider-up")))
		if ck.eval(`String(document.getElementById('stale-banner').hidden)`) != "true" {
			t.Fatal("the banner shows while the gateway answers")
		}
		e.Stop()
		stopped := time.Now()
		// Two poll intervals (2 s each), and a little for the browser.
		ck.do(chromedp.Poll[chromedp.Void](`!document.getElementById('stale-banner').hidden`, chromedp.WithPollingTimeout(5*time.Second)))
		if took := time.Since(stopped); took > 4500*time.Millisecond {
			t.Errorf("the banner took %v", took)
		}
		if ck.eval(`String(document.documentElement.classList.contains('stale'))`) != "true" {
			t.Error("the page is not marked stale (countdowns keep running)")
		}
		ck.shot("cockpit-stale")
		e.Start()
		ck.do(chromedp.Poll[chromedp.Void](`document.getElementById('stale-banner').hidden`, chromedp.WithPollingTimeout(10*time.Second)))
		if ck.eval(`String(document.documentElement.classList.contains('stale'))`) != "false" {
			t.Error("still marked stale")
		}
	})
}

// englishOnly are words and phrases of the dashboard's English that German pages never use;
// each stands for a text that escaped translation (an engine message, a fallback key, an
// untranslated option).
var englishOnly = []string{
	"the", "and", "with", "answered", "rate limit", "rate limited", "credentials", "rejected", "connected", "failed",
	"available", "unavailable", "cooling", "healthy", "unhealthy", "expired", "banned", "never", "requests", "request",
	"error", "errors", "connection", "connections", "active", "enabled", "disabled", "locked", "lockout", "probing",
	"today", "unknown", "not found", "attempts", "model", "models", "keys", "clear", "reset", "delete", "edit", "save",
	"cancel", "revoke", "copy", "filter", "older", "first", "retry", "failover", "traffic", "latency", "everything",
	"needs attention", "all clear", "configured", "served", "usable", "upstream answered", "list models", "provider answered",
	"could not", "did not", "is open", "circuit breaker is", "last hour", "requests today", "time to first token",
}

// identifierRE matches upper-case error codes and the header names a page may quote.
var identifierRE = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|(?i:\bretry-after\b|\bx-should-retry\b|\bidempotency-key\b)`)

var wordRE = regexp.MustCompile(`[\p{L}]+(?:[ ][\p{L}]+)*`)

// englishWords returns the English-only words and phrases found in a German page's text.
func englishWords(text string) []string {
	// Identifiers are not prose: error codes such as RATE_LIMIT_QUEUE_TIMEOUT and the HTTP
	// header names the texts explain stay as the wire spells them.
	text = identifierRE.ReplaceAllString(text, " ")
	lower := " " + strings.ToLower(regexp.MustCompile(`[^\p{L}]+`).ReplaceAllString(text, " ")) + " "
	var found []string
	for _, w := range englishOnly {
		if strings.Contains(lower, " "+w+" ") {
			found = append(found, w)
		}
	}
	return found
}

// englishContext quotes the text around each English word found, so a failure says where.
func englishContext(text string, words []string) string {
	flat := strings.Join(strings.Fields(regexp.MustCompile(`[^\p{L}\p{N}]+`).ReplaceAllString(text, " ")), " ")
	lower := strings.ToLower(flat)
	var out []string
	for _, w := range words {
		if i := strings.Index(lower, w); i >= 0 {
			out = append(out, "…"+flat[max(0, i-40):min(len(flat), i+len(w)+40)]+"…")
		}
	}
	return strings.Join(out, " | ")
}

// TestEnglishWordsCatchesEngineText: the check above fails on the texts the issue found on
// German pages, and passes on German.
func TestEnglishWordsCatchesEngineText(t *testing.T) {
	for _, s := range []string{`429 rate limited ("rate limit")`, "credentials rejected by the upstream",
		"provider backup answered HTTP 500", "list models: upstream answered HTTP 404", "Status Cooling down"} {
		if len(englishWords(s)) == 0 {
			t.Errorf("%q passes as German", s)
		}
	}
	for _, key := range []string{"state.conn.cooling", "health.cooling", "requests.lead", "traffic.class.server_error",
		"state.provider.unavailable.hint", "providers.unserved_hint", "live.stale_text"} {
		if w := englishWords(i18n.TL(i18n.DE, key, "x", "y", "z", "w")); len(w) > 0 {
			t.Errorf("German %s reads as English: %v", key, w)
		}
	}
}
