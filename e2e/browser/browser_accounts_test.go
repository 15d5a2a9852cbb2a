package browser

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// TestAccountCardsInBrowser adds ChatGPT/Codex and GitHub Copilot accounts the way a person
// does: a codex provider from the provider form without a base URL (its upstream format shown
// fixed), then a ChatGPT account with a device code — the card shows the code, polls while the
// fake waits for the approval and lands on the providers page once it is given, with the new
// chatgpt-1 row showing the account's plan, its token and its two usage windows, filled in from
// the Codex backend's answer to a request. When that
// account's refresh token dies the row offers "Sign in again", which updates the same
// connection. A Copilot account signs in likewise (a refused sign-in first: the card says why and
// starts again), and its row shows the GitHub login and the token without usage windows. The
// cards read in German too.
func TestAccountCardsInBrowser(t *testing.T) {
	e := testenv.New(t)
	openai := testenv.NewFakeOpenAIAuth(t)
	openai.DeviceInterval.Store("1")
	e.UseFakeOpenAIAuth(openai)
	backend := testenv.NewFakeCodex(t, openai.AccountOf)
	e.MustAPI("PATCH", "/api/settings/oauth", map[string]any{"codex": map[string]any{"api_base_url": backend.BaseURL()}}, 200)

	b := newDashBrowser(t)
	// approvedLoad runs approve (the person approving at the upstream, and the time the
	// sign-in's next poll waits for) and waits for the page the card then sends the browser to.
	approvedLoad := func(approve func()) chromedp.Action[chromedp.Void] {
		return loads(func(context.Context, *chromedp.Target) (chromedp.Void, error) {
			approve()
			return chromedp.Void{}, nil
		})
	}
	noTokens := func(t *testing.T, tokens []string) {
		t.Helper()
		html := b.eval(`document.documentElement.outerHTML`)
		for _, tok := range tokens {
			if tok != "" && strings.Contains(html, tok) {
				t.Fatalf("the page shows a token (%.12s…)", tok)
			}
		}
	}
	// liveText reads an element's text in one step: the providers page's poll swaps the status
	// cells whenever the state changes, so a read in several steps could straddle a swap.
	liveText := func(sel string) string {
		return strings.Join(strings.Fields(b.eval(fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, sel))), " ")
	}
	var codexID string
	cell := func() string { return "#cstate-" + codexID }

	b.step("add a codex provider without a base URL", func(t *testing.T) {
		b.do(
			logInTo(e),
			chromedp.Navigate(e.Base+"/providers#add-provider"),
			chromedp.WaitVisible(chromedp.CSS("#provider-name")),
		)
		for _, c := range []struct {
			typ                  string
			accounts, codex, fmt bool
		}{
			{"openai", false, false, true},
			{"copilot", true, false, true},
			{"anthropic", false, false, false},
			{"codex", true, true, false},
		} {
			b.do(chromedp.SetValue(chromedp.CSS("#provider-type"), c.typ))
			if b.shown("#provider-base-url-accounts") != c.accounts || b.shown("#provider-upstream-format-codex-field") != c.codex ||
				b.shown("#provider-upstream-format-field") != c.fmt {
				t.Fatalf("type %s: base URL note %v, fixed responses %v, format select %v", c.typ,
					b.shown("#provider-base-url-accounts"), b.shown("#provider-upstream-format-codex-field"), b.shown("#provider-upstream-format-field"))
			}
		}
		if got := b.text("#provider-base-url-accounts"); got != i18n.TL(i18n.EN, "accounts.base_url_hint") {
			t.Fatalf("base URL note %q", got)
		}
		if b.eval(`String(document.querySelector('#provider-upstream-format-codex').disabled)`) != "true" ||
			b.eval(`document.querySelector('#provider-upstream-format-codex').value`) != "responses" {
			t.Fatal("codex's upstream format is not shown fixed at responses")
		}
		b.shot("accounts-codex-provider-form")
		b.do(
			chromedp.SendKeys(chromedp.CSS("#provider-name"), "codex"),
			clickLoad("#add-provider-submit"),
			chromedp.WaitVisible(chromedp.CSS("#provider-codex")),
			chromedp.WaitVisible(chromedp.CSS(".flash-success")),
		)
		p := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", e.ProviderID("codex")), nil, 200)
		if p["type"] != "codex" || p["base_url"] != "" || p["upstream_format"] != "responses" {
			t.Fatalf("provider %v", p)
		}
		if got := b.text("#provider-codex .url-default"); got != i18n.TL(i18n.EN, "accounts.base_url_default") {
			t.Fatalf("base URL shown as %q", got)
		}
		if b.eval(`String(document.querySelector('#conn-provider option[value="codex"]') === null)`) != "true" {
			t.Fatal("the API key form offers the codex provider")
		}
		if href := b.eval(`document.querySelector('#provider-codex .empty-inline a').getAttribute('href')`); href != "/providers?provider=codex#add-codex" {
			t.Fatalf("the empty provider links to %q", href)
		}
	})

	b.step("sign in a ChatGPT account with a device code", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/providers#add-codex"),
			chromedp.WaitVisible(chromedp.CSS("#codex-device-start")),
			clickLoad("#codex-device-start"),
			chromedp.WaitVisible(chromedp.CSS("#codex-user-code")),
		)
		code := b.text("#codex-user-code")
		if !strings.HasPrefix(code, "CDX") {
			t.Fatalf("user code %q", code)
		}
		if href := b.eval(`document.querySelector('#codex-verification-link').href`); href != openai.URL+"/codex/device" {
			t.Fatalf("device page %q", href)
		}
		if got := b.eval(`document.querySelector('#codex-device-status').getAttribute('hx-trigger')`); got != "every 1s, submit" {
			t.Fatalf("the status region polls with %q", got)
		}
		b.shot("accounts-codex-device")
		// The page polls every second; the sign-in asks OpenAI once its interval has passed.
		e.Clock.Advance(time.Second)
		e.Eventually("the page's poll reaches the device token endpoint", func() bool { return openai.DevicePolls.Load() > 0 })
		// The region is swapped anew on every poll: read it between two swaps (checked on a timer,
		// not on animation frames, which a loaded machine's headless renderer may hold back).
		b.do(chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('#codex-device-status[data-state="pending"] .device-waiting')?.textContent.trim() === %q`,
			i18n.TL(i18n.EN, "accounts.device_waiting")), chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(10*time.Second)))
		b.do(
			approvedLoad(func() {
				openai.Approve(code, "acct-ada", "ada@example.com", "plus")
				e.Clock.Advance(time.Second)
			}),
			chromedp.WaitVisible(chromedp.CSS(".flash-success")),
		)
		if got := b.text(".flash-success"); got != i18n.TL(i18n.EN, "codex.added", "chatgpt-1", "codex") {
			t.Fatalf("flash %q", got)
		}
		if got := b.eval(`location.pathname`); got != "/providers" {
			t.Fatalf("landed on %q", got)
		}
		codexID = strconv.FormatInt(e.ConnectionID("chatgpt-1"), 10)
		row := "#conn-" + codexID
		if got := b.text(row + " .conn-plan"); got != "plus" {
			t.Fatalf("plan %q", got)
		}
		if got := b.text(row + " .conn-account"); got != "ada@example.com" {
			t.Fatalf("account %q", got)
		}
		for sel, key := range map[string]string{
			cell() + " .usage-five_hour .usage-label": "claude.window.five_hour",
			cell() + " .usage-seven_day .usage-label": "claude.window.seven_day",
		} {
			if got := liveText(sel); got != i18n.TL(i18n.EN, key) {
				t.Fatalf("%s: %q", sel, got)
			}
		}
		// The windows are read off the Codex backend's answers: one request fills them in.
		backend.SetUsage("acct-ada", testenv.CodexUsage{
			Primary:   &testenv.CodexWindow{UsedPercent: 63, WindowMinutes: 300, ResetAfter: 2 * time.Hour},
			Secondary: &testenv.CodexWindow{UsedPercent: 20, WindowMinutes: 10080, ResetAfter: 90 * time.Hour}})
		resp := e.Chat(context.Background(), e.NewKey(), `{"model":"codex/gpt-5-codex","messages":[{"role":"user","content":"hi"}]}`)
		if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("chat on the account: %d %s", resp.StatusCode, body)
		}
		b.do(chromedp.Poll[chromedp.Void](`document.querySelector('`+cell()+` .usage-five_hour .usage-pct')?.textContent.trim() === '63 %'`,
			chromedp.WithPollingTimeout(10*time.Second)))
		if got := liveText(cell() + " .usage-seven_day .usage-pct"); got != "20 %" {
			t.Fatalf("weekly %q", got)
		}
		if got := liveText(cell() + " .usage-five_hour .usage-reset .countdown"); !strings.HasPrefix(got, "2:00:00") && !strings.HasPrefix(got, "1:59:") {
			t.Fatalf("the five-hour window resets in %q", got)
		}
		if got := liveText(cell() + " .codex-token"); !strings.Contains(got, i18n.TL(i18n.EN, "claude.token_expires")) ||
			!strings.Contains(got, i18n.TL(i18n.EN, "claude.strikes", 0)) {
			t.Fatalf("token %q", got)
		}
		if b.eval(`String(document.querySelector('`+cell()+` .claude-lane') === null)`) != "true" {
			t.Fatal("a ChatGPT account shows a Claude lane")
		}
		noTokens(t, openai.Tokens())
		b.shot("accounts-codex-row")
	})

	b.step("an expired ChatGPT account is signed in again on its own connection", func(t *testing.T) {
		openai.RefreshFail.Store(&testenv.FakeAnswer{Status: 400, Body: `{"error":"invalid_grant","error_description":"refresh token revoked"}`})
		e.Clock.Advance(time.Hour) // past the access token's refresh margin: the refresh finds the token dead
		b.do(chromedp.WaitVisible(chromedp.CSS(cell() + `[data-status="expired"] #signin-again-` + codexID)))
		if got := liveText(cell() + " .signin-again-hint"); got != i18n.TL(i18n.EN, "accounts.signin_again_hint") {
			t.Fatalf("hint %q", got)
		}
		if got := b.eval(`document.querySelector('` + cell() + ` form.signin-again input[name=provider]').value`); got != "codex" {
			t.Fatalf("sign in again on provider %q", got)
		}
		b.shot("accounts-codex-expired")
		b.do(
			clickLoad("#signin-again-"+codexID),
			chromedp.WaitVisible(chromedp.CSS("#codex-auth-link")),
		)
		if got := b.text("#codex-again"); got != i18n.TL(i18n.EN, "accounts.again", "chatgpt-1") {
			t.Fatalf("again note %q", got)
		}
		href := b.eval(`document.querySelector('#codex-auth-link').href`)
		if !strings.HasPrefix(href, openai.URL+"/oauth/authorize?") {
			t.Fatalf("sign-in link %q", href)
		}
		// A paste that is no callback address: the card asks again with the server's sign-in.
		b.do(paste("codex", "not an address"), chromedp.WaitVisible(chromedp.CSS("#codex-code-error")))
		if again := b.eval(`document.querySelector('#codex-auth-link').href`); again != href {
			t.Fatalf("after a refused paste the card links to %q, want %q", again, href)
		}
		openai.RefreshFail.Store(nil)
		b.do(paste("codex", openai.Authorize(href, "acct-ada", "ada@example.com", "pro")), chromedp.WaitVisible(chromedp.CSS(".flash-success")))
		if got := b.text(".flash-success"); got != i18n.TL(i18n.EN, "codex.updated", "chatgpt-1", "codex") {
			t.Fatalf("flash %q", got)
		}
		if got := strconv.FormatInt(e.ConnectionID("chatgpt-1"), 10); got != codexID {
			t.Fatalf("signed in again as connection %s, want %s", got, codexID)
		}
		if n := strings.Count(b.eval(`document.querySelector('#provider-codex tbody').innerHTML`), `<tr id="conn-`); n != 1 {
			t.Fatalf("%d rows on the codex provider, want 1", n)
		}
		b.do(chromedp.WaitVisible(chromedp.CSS(cell() + `[data-status="active"]`)))
		if got := b.text("#conn-" + codexID + " .conn-plan"); got != "pro" {
			t.Fatalf("plan after signing in again %q", got)
		}
		noTokens(t, openai.Tokens())
	})

	b.step("sign in a Copilot account with a device code, a refused one first", func(t *testing.T) {
		gh := testenv.NewFakeGitHub(t)
		e.UseFakeGitHub(gh) // adds the provider copilot
		b.do(
			chromedp.Navigate(e.Base+"/providers?provider=copilot#add-copilot"), // a new page: the card now has its provider
			chromedp.WaitVisible(chromedp.CSS("#copilot-device-start")),
			clickLoad("#copilot-device-start"),
			chromedp.WaitVisible(chromedp.CSS("#copilot-user-code")),
		)
		code := b.text("#copilot-user-code")
		if href := b.eval(`document.querySelector('#copilot-verification-link').href`); href != "https://github.com/login/device" {
			t.Fatalf("device page %q", href)
		}
		if got := b.eval(`document.querySelector('#copilot-device-status').getAttribute('hx-trigger')`); got != "every 5s, submit" {
			t.Fatalf("the status region polls with %q", got)
		}
		gh.Deny(code)
		e.Clock.Advance(5 * time.Second)
		b.do(chromedp.WaitVisible(chromedp.CSS(`#copilot-device-status[data-state="ended"] #copilot-device-error`)))
		if got := b.text("#copilot-device-error"); got != i18n.TL(i18n.EN, "oauth.device_denied", "The authorization request was denied.") {
			t.Fatalf("refused sign-in says %q", got)
		}
		if b.eval(`String(document.querySelector('#copilot-device-status').hasAttribute('hx-post'))`) != "false" {
			t.Fatal("an ended sign-in still polls")
		}
		if b.shown("#add-copilot .device-steps") {
			t.Fatal("an ended sign-in still shows its code")
		}
		b.shot("accounts-copilot-denied")
		b.do(
			clickLoad("#copilot-device-restart"),
			chromedp.WaitVisible(chromedp.CSS("#copilot-user-code")),
		)
		again := b.text("#copilot-user-code")
		if again == code {
			t.Fatalf("started again with the refused code %q", code)
		}
		b.do(
			approvedLoad(func() {
				gh.Approve(again, "octocat", 583231)
				e.Clock.Advance(5 * time.Second)
			}),
			chromedp.WaitVisible(chromedp.CSS(".flash-success")),
		)
		if got := b.text(".flash-success"); got != i18n.TL(i18n.EN, "copilot.added", "copilot-1", "copilot") {
			t.Fatalf("flash %q", got)
		}
		id := strconv.FormatInt(e.ConnectionID("copilot-1"), 10)
		if got := b.text("#conn-" + id + " .conn-account"); got != "octocat" {
			t.Fatalf("login %q", got)
		}
		if got := liveText("#cstate-" + id + " .copilot-token"); got != i18n.TL(i18n.EN, "copilot.token_long_lived") {
			t.Fatalf("token %q", got)
		}
		if b.eval(`String(document.querySelectorAll('#cstate-`+id+` .usage-bar, #cstate-`+id+` .claude-lane').length)`) != "0" {
			t.Fatal("a Copilot account shows usage windows or a lane")
		}
		noTokens(t, gh.Tokens())
		b.shot("accounts-copilot-row")
	})

	b.step("the cards in German", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/lang/de?next=/providers"),
			chromedp.WaitVisible(chromedp.CSS("#add-codex")),
		)
		for sel, key := range map[string]string{
			"#add-codex h2":                           "codex.add",
			"#codex-start":                            "codex.start",
			"#codex-device-start":                     "codex.device_start",
			"#add-copilot h2":                         "copilot.add",
			"#copilot-device-start":                   "copilot.device_start",
			cell() + " .usage-five_hour .usage-label": "claude.window.five_hour",
		} {
			if got := liveText(sel); got != i18n.TL(i18n.DE, key) {
				t.Errorf("%s: %q, want %q", sel, got, i18n.TL(i18n.DE, key))
			}
		}
		b.shot("accounts-cards-de")
		b.do(chromedp.Navigate(e.Base + "/lang/en?next=/providers"))
	})
}

// paste sends what a person pastes into the sign-in card of kind (claude, codex) from the
// provider's page.
func paste(kind, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.SendKeys(chromedp.CSS("#"+kind+"-code"), text), clickLoad("#"+kind+"-complete"))
}

// TestDeviceSignInWithoutJavaScript: a device sign-in works with plain forms too. The start shows
// the code; "Check now" shows it again, from the sign-in kept on the server, while it waits, and
// sends the browser to the account's row once approved. The sign-in belongs to the session that
// started it: another operator's session polling its id learns nothing and ends nothing.
func TestDeviceSignInWithoutJavaScript(t *testing.T) {
	e := testenv.New(t)
	gh := testenv.NewFakeGitHub(t)
	e.UseFakeGitHub(gh)
	admin, other := e.Login(), e.Login()
	parse := func(t *testing.T, body string) *goquery.Document {
		t.Helper()
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}

	st, body := testenv.Fetch(t, admin, "POST", e.Base+"/oauth/copilot/device", url.Values{"provider": {"copilot"}, "name": {"octo"}}, nil)
	doc := parse(t, body)
	code := doc.Find("#copilot-user-code").Text()
	flow, _ := doc.Find(`#copilot-device-status input[name=flow]`).Attr("value")
	if st != 200 || code == "" || flow == "" {
		t.Fatalf("start: %d, code %q, flow %q", st, code, flow)
	}
	poll := url.Values{"flow": {flow}, "provider": {"copilot"}, "name": {"octo"}}

	st, body = testenv.Fetch(t, other, "POST", e.Base+"/oauth/copilot/device/poll", poll, nil)
	if st != 422 || !strings.Contains(body, testenv.Esc(i18n.EN, "oauth.flow_unknown")) || strings.Contains(body, code) {
		t.Fatalf("another session's poll: %d", st)
	}

	st, body = testenv.Fetch(t, admin, "POST", e.Base+"/oauth/copilot/device/poll", poll, nil)
	if got := parse(t, body).Find("#copilot-user-code").Text(); st != 200 || got != code {
		t.Fatalf("check while waiting: %d, code %q, want %q", st, got, code)
	}

	gh.Approve(code, "octocat", 583231)
	e.Clock.Advance(5 * time.Second)
	req, _ := http.NewRequest("POST", e.Base+"/oauth/copilot/device/poll", strings.NewReader(poll.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	noFollow := *admin
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := "/providers#conn-" + strconv.FormatInt(e.ConnectionID("octo"), 10)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
		t.Fatalf("approved: %d to %q, want 303 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	if _, body := testenv.Fetch(t, admin, "GET", e.Base+"/providers", nil, nil); !strings.Contains(body,
		html.EscapeString(i18n.TL(i18n.EN, "copilot.added", "octo", "copilot"))) {
		t.Fatal("no message about the new account")
	}
	// The account's edit page: no Claude switches, no setup token field (a GitHub token without
	// expiry is no setup token), and the way to sign in again.
	_, body = testenv.Fetch(t, admin, "GET", e.Base+"/connections/"+strconv.FormatInt(e.ConnectionID("octo"), 10)+"/edit", nil, nil)
	if strings.Contains(body, `id="conn-setup-token"`) || strings.Contains(body, `id="conn-claude"`) ||
		!strings.Contains(body, `href="/providers?provider=copilot#add-copilot"`) {
		t.Fatal("the Copilot account's edit page offers Claude's fields or no way to sign in again")
	}
}

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

	b := newDashBrowser(t)
	step := b.step
	var id string
	cell := func() string { return "#cstate-" + id }

	step("sign in with Claude by pasting the code", func(t *testing.T) {
		b.do(
			logInTo(e),
			chromedp.Navigate(e.Base+"/providers#add-claude"),
			chromedp.WaitVisible(chromedp.CSS("#claude-start")),
			clickLoad("#claude-start"),
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
		b.do(paste("claude", "not a code"), chromedp.WaitVisible(chromedp.CSS("#claude-auth-link")))
		if again := b.eval(`document.querySelector('#claude-auth-link').href`); again != href {
			t.Fatalf("after a refused paste the card links to %q, want the server's %q", again, href)
		}
		if html := b.eval(`document.documentElement.outerHTML`); strings.Contains(html, "javascript:alert") {
			t.Fatal("the page renders the forged address")
		}
		pasted := f.Authorize(href, "ada@example.com") // what Claude's page shows after signing in
		b.do(paste("claude", pasted), chromedp.WaitVisible(chromedp.CSS(".flash-success")))
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
			clickLoad("#save-connection"),
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
