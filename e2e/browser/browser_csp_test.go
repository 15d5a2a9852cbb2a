package browser

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
)

// cspRecorder runs in every document before the page's own scripts and collects every
// Content-Security-Policy violation the page causes.
const cspRecorder = `window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.effectiveDirective + " blocked " + (e.blockedURI || "inline") + " at " + (e.sourceFile || "?") + ":" + e.lineNumber);
});`

// cspViolations returns the violations recorded on the current page once the events queued
// during loading have been delivered.
const cspViolations = `new Promise(function (resolve) {
  requestAnimationFrame(function () { setTimeout(function () { resolve(JSON.stringify(window.__csp)); }, 0); });
})`

// Every dashboard page works under the Content-Security-Policy (no inline script, no inline
// style, no eval): Chromium reports no violation, htmx is loaded and the dashboard's own script
// runs. A deliberate inline script proves the recorder sees violations.
func TestDashboardPagesCauseNoCSPViolation(t *testing.T) {
	upstream := dashUpstream(t)
	app := startDashApp(t)
	base := "http://" + app.Addr
	c := dashClient(t, base)

	// Something on every page: a provider with a connection and a client key.
	if code, _ := testenv.Fetch(t, c, http.MethodPost, base+"/providers", map[string][]string{"name": {"csp"},
		"type": {"openai-compatible"}, "base_url": {upstream.URL + "/v1"}}, nil); code != http.StatusOK {
		t.Fatalf("add provider: %d", code)
	}
	if code, _ := testenv.Fetch(t, c, http.MethodPost, base+"/connections", map[string][]string{"provider": {"csp"},
		"name": {"main"}, "api_key": {dashSecret}}, nil); code != http.StatusOK {
		t.Fatalf("add connection: %d", code)
	}
	code, body := testenv.Fetch(t, c, http.MethodPost, base+"/keys", map[string][]string{"name": {"csp"}}, nil)
	box := testenv.Between(body, `id="new-key-value"`, `</output>`)
	key := box[strings.LastIndex(box, ">")+1:]
	if code != http.StatusOK || !strings.HasPrefix(key, "sk-sy-") {
		t.Fatalf("add key: %d %q", code, key)
	}
	// One proxied request (the fake upstream answers chat with 404) for the request log pages.
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"csp/fake-small","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	var logged string
	for deadline := time.Now().Add(10 * time.Second); logged == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, list := testenv.Fetch(t, c, http.MethodGet, base+"/api/requests?limit=1", nil, nil)
		logged = testenv.Between(list, `"id":"`, `"`)
		if logged == "" {
			logged = testenv.Between(list, `"id":`, `,`)
		}
	}
	if code, _ := testenv.Fetch(t, c, http.MethodGet, base+"/requests/"+logged, nil, nil); logged == "" || code != http.StatusOK {
		t.Fatalf("the proxied request never reached the request log (%q: %d)", logged, code)
	}
	// Provider 3 is the one added here (openai and anthropic exist from the start).
	pages := []string{"/", "/providers", "/providers/3/edit", "/connections/1/edit", "/keys", "/model-cooldowns",
		"/settings", "/requests", "/requests/" + logged, "/no-such-page"}

	b := newDashBrowser(t)
	b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder})
		return err
	}))
	check := func(where string) {
		t.Helper()
		if v := b.eval(cspViolations); v != "[]" {
			t.Errorf("%s: CSP violations %s", where, v)
		}
		if got := b.eval(`typeof htmx === "object" ? "htmx" : "no htmx"`); got != "htmx" {
			t.Errorf("%s: htmx did not load", where)
		}
	}

	b.do(chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS("#password")))
	check("/login")
	b.do(
		chromedp.SendKeys(chromedp.CSS("#password"), dashPassword),
		clickLoad(`.login button[type="submit"]`),
	)
	if got := b.eval("location.pathname"); got != "/" {
		t.Fatalf("after logging in the browser is at %s", got)
	}
	for _, p := range pages {
		b.do(chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("body")))
		check(p)
	}
	// The live state page loads the dashboard's own script from static/.
	b.do(chromedp.Navigate(base+"/providers"), chromedp.WaitReady(chromedp.CSS("#state-poll")))
	if got := b.eval(`document.querySelector('script[src^="/static/app.js"]') ? "app.js" : "none"`); got != "app.js" {
		t.Errorf("/providers does not load app.js: %s", got)
	}
	// htmx works under the policy: the providers page polls its live state with it.
	if got := b.eval(`new Promise(function (resolve) {
		document.body.addEventListener("htmx:afterRequest", function (e) { resolve(String(e.detail.xhr.status)); }, {once: true});
	})`); got != "200" && got != "204" { // 204: nothing changed since the page was drawn
		t.Errorf("htmx poll: %s", got)
	}
	check("/providers after an htmx poll")

	// The session menu in the top bar logs out everywhere: this browser lands on the login
	// page, and a page asked for afterwards asks for the password again.
	b.do(chromedp.Navigate(base+"/keys"), chromedp.Click(chromedp.CSS("#session-menu")), chromedp.WaitVisible(chromedp.CSS("#logout-everywhere")))
	b.shot("session-menu")
	b.do(clickLoad("#logout-everywhere"))
	check("/login after logging out everywhere")
	b.do(chromedp.Navigate(base + "/keys"))
	if got := b.eval("location.pathname"); got != "/login" {
		t.Fatalf("after logging out everywhere /keys opened at %s", got)
	}

	// The recorder sees a violation when there is one, so an empty list means something.
	b.eval(`(function () { var s = document.createElement("script"); s.textContent = "window.__ran = 1"; document.head.appendChild(s); return "ok"; })()`)
	if v := b.eval(cspViolations); !strings.Contains(v, "script-src") {
		t.Fatalf("an inline script was not reported as a violation: %s", v)
	}
	if ran := b.eval(`String(window.__ran)`); ran != "undefined" {
		t.Fatalf("an inline script ran: %s", ran)
	}
}
