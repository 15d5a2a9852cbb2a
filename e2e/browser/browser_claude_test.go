package browser

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// TestClaudeAccountInBrowser adds a Claude account the way a person does: "Sign in with Claude",
// open the sign-in page (played here by the fake), paste the code Claude shows (a wrong paste
// first: the card keeps linking to the server's sign-in); the account becomes claude-1, its row
// shows the account's e-mail to the operator; then the
// account's row shows its 5-hour and weekly use and, once it hits its wall with the lane on, the
// lane — in English and in German.
func TestClaudeAccountInBrowser(t *testing.T) {
	var wall atomic.Bool
	var now atomic.Int64
	f := testenv.NewFakeClaude(t, nil)
	f.Messages = func(w http.ResponseWriter, r *http.Request) {
		reset := strconv.FormatInt(time.Unix(now.Load(), 0).Add(time.Hour).Unix(), 10)
		h := w.Header()
		h.Set("anthropic-ratelimit-unified-5h-reset", reset)
		if wall.Load() && r.Header.Get("anthropic-usage-limit") != "slow" {
			h.Set("anthropic-ratelimit-unified-status", "rejected")
			h.Set("anthropic-ratelimit-unified-reset", reset)
			h.Set("anthropic-ratelimit-unified-representative-claim", "five_hour")
			h.Set("anthropic-ratelimit-unified-slow-offer", "treatment")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"usage limit"}}`)
			return
		}
		h.Set("anthropic-ratelimit-unified-status", "allowed")
		h.Set("anthropic-ratelimit-unified-slow-status", "active")
		testenv.MessagesAnswer()(w, r)
	}
	e := testenv.New(t)
	now.Store(e.Clock.Now().Unix())
	e.UseFakeClaude(f)
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{"authorize_url": f.URL + "/oauth/authorize"}}, 200)
	f.SetUsage("ada@example.com", testenv.UsageJSON(63, e.Clock.Now().Add(2*time.Hour), 20, e.Clock.Now().Add(90*time.Hour)))
	key := e.NewKey()

	b := newStateBrowser(t)
	step := b.step
	var id string
	cell := func() string { return "#cstate-" + id }

	step("sign in with Claude by pasting the code", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/login"),
			chromedp.WaitVisible(chromedp.CSS("#password")),
			chromedp.SendKeys(chromedp.CSS("#password"), e.Vars["SWITCHYARD_ADMIN_PASSWORD"]),
			b.clickLoad(`.login button[type="submit"]`),
			chromedp.Navigate(e.Base+"/providers#add-claude"),
			chromedp.WaitVisible(chromedp.CSS("#claude-start")),
			b.clickLoad("#claude-start"),
			chromedp.WaitVisible(chromedp.CSS("#claude-auth-link")),
		)
		href := b.eval(`document.querySelector('#claude-auth-link').href`)
		if !strings.HasPrefix(href, f.URL+"/oauth/authorize?") || b.eval(`document.querySelector('#claude-auth-link').target`) != "_blank" {
			t.Fatalf("sign-in link %q", href)
		}
		b.shot("claude-paste")
		// A paste that is no code, sent with a forged address in the form: the card asks again
		// and links to the sign-in the server keeps, never to what the form carried.
		b.eval(`(() => { const form = document.querySelector('#claude-complete-form');
			let i = form.querySelector('input[name=auth_url]');
			if (!i) { i = document.createElement('input'); i.type = 'hidden'; i.name = 'auth_url'; form.appendChild(i); }
			i.value = 'javascript:alert(1)'; return 'ok'; })()`)
		b.do(
			chromedp.SendKeys(chromedp.CSS("#claude-code"), "not a code"),
			b.clickLoad("#claude-complete"),
			chromedp.WaitVisible(chromedp.CSS("#claude-auth-link")),
		)
		if again := b.eval(`document.querySelector('#claude-auth-link').href`); again != href {
			t.Fatalf("after a refused paste the card links to %q, want the server's %q", again, href)
		}
		if html := b.eval(`document.documentElement.outerHTML`); strings.Contains(html, "javascript:alert") {
			t.Fatal("the page renders the forged address")
		}
		pasted := f.Authorize(href, "ada@example.com") // what Claude's page shows after signing in
		b.do(
			chromedp.SendKeys(chromedp.CSS("#claude-code"), pasted),
			b.clickLoad("#claude-complete"),
			chromedp.WaitVisible(chromedp.CSS(".flash-success")),
		)
		if got := b.text(".flash-success"); !strings.Contains(got, "claude-1") || strings.Contains(got, "@") {
			t.Fatalf("flash %q", got)
		}
		id = strconv.FormatInt(e.ConnectionID("claude-1"), 10)
		if got := b.text("#conn-" + id + " .conn-account"); got != "ada@example.com" {
			t.Fatalf("the row shows the account as %q", got)
		}
		if html := b.eval(`document.documentElement.outerHTML`); strings.Contains(html, "sk-ant-oat01-ada") || strings.Contains(html, "sk-ant-ort01") {
			t.Fatal("the page shows a token")
		}
	})

	step("the row shows the usage windows", func(t *testing.T) {
		b.do(chromedp.WaitVisible(chromedp.CSS(cell() + ` .usage-five_hour .usage-pct`)))
		b.do(chromedp.Poll[chromedp.Void](`document.querySelector('`+cell()+` .usage-five_hour .usage-pct').textContent.trim() === '63 %'`,
			chromedp.WithPollingTimeout(10*time.Second)))
		if got := b.text(cell() + " .usage-seven_day .usage-pct"); got != "20 %" {
			t.Fatalf("weekly %q", got)
		}
		if got := b.text(cell() + " .usage-five_hour .usage-label"); got != i18n.TL(i18n.EN, "claude.window.five_hour") {
			t.Fatalf("label %q", got)
		}
		if got := b.text(cell() + " .claude-lane .chip"); got != i18n.TL(i18n.EN, "claude.lane.off") {
			t.Fatalf("lane %q", got)
		}
		b.shot("claude-row")
	})

	step("turn the lane on; at the wall the row shows it accepted", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/connections/"+id+"/edit"),
			chromedp.WaitVisible(chromedp.CSS("#conn-lane")),
			chromedp.Click(chromedp.CSS("#conn-lane")),
			b.clickLoad("#save-connection"),
			chromedp.WaitVisible(chromedp.CSS(cell())),
		)
		if got := e.MustAPI("GET", "/api/connections/"+id, nil, 200); got["low_priority_lane"] != true {
			t.Fatalf("connection %v", got)
		}
		wall.Store(true)
		resp := e.PostAnthropic("/v1/messages", key, `{"model":"anthropic/claude-test","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, nil)
		if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("in the lane: %d %s", resp.StatusCode, body)
		}
		b.do(chromedp.WaitVisible(chromedp.CSS(cell() + ` .claude-lane[data-lane="accepted"]`)))
		if got := b.text(cell() + " .claude-lane .chip"); got != i18n.TL(i18n.EN, "claude.lane.accepted") {
			t.Fatalf("lane %q", got)
		}
		if got := b.text(cell() + " .usage-five_hour .usage-pct"); got != "100 %" {
			t.Fatalf("five hour at the wall %q", got)
		}
		if !clockText.MatchString(b.text(cell()+" .lane-until .countdown")) && !strings.Contains(b.text(cell()+" .lane-until .countdown"), ":") {
			t.Fatalf("lane countdown %q", b.text(cell()+" .lane-until .countdown"))
		}
		b.shot("claude-lane")
	})

	step("the same in German", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/lang/de?next=/providers"),
			chromedp.WaitVisible(chromedp.CSS(cell()+` .claude-lane[data-lane="accepted"]`)),
		)
		for sel, key := range map[string]string{
			cell() + " .claude-lane .chip":            "claude.lane.accepted",
			cell() + " .usage-five_hour .usage-label": "claude.window.five_hour",
			cell() + " .usage-seven_day .usage-label": "claude.window.seven_day",
			cell() + " .claude-skipped .badge":        "claude.deferred",
			"#add-claude h2":                          "claude.add",
		} {
			if got := b.text(sel); got != i18n.TL(i18n.DE, key) {
				t.Errorf("%s: %q, want %q", sel, got, i18n.TL(i18n.DE, key))
			}
		}
		if got := b.text(cell() + " .claude-token"); !strings.Contains(got, i18n.TL(i18n.DE, "claude.token_expires")) {
			t.Errorf("token %q", got)
		}
		b.shot("claude-lane-de")
	})
}
