package views

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

	"switchyard/i18n"
)

func renderDoc(t *testing.T, lang i18n.Lang, c templ.Component) (*goquery.Document, string) {
	t.Helper()
	var b strings.Builder
	if err := c.Render(i18n.WithLang(context.Background(), lang), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return doc, b.String()
}

// catalogKey is how a text that is missing from the catalogs shows: its key.
var catalogKey = regexp.MustCompile(`\b(accounts|codex|copilot|claude)\.[a-z_.]+\b`)

// TestAccountCardSteps draws the ChatGPT and Copilot cards in each of their steps, in both
// languages: every text comes from the catalogs, the first step offers the kind's ways in, the
// sign-in address and the device page are links only when they are https (or http is allowed),
// and the status region polls only while the sign-in waits.
func TestAccountCardSteps(t *testing.T) {
	expires := time.Date(2026, 12, 2, 12, 15, 0, 0, time.UTC)
	device := func(kind, url string, httpLinks bool) AccountCard {
		return AccountCard{Kind: kind, Providers: []string{kind}, Provider: kind, Device: &DeviceCode{UserCode: "WDJB-MJHT",
			VerificationURL: url, HTTPLinks: httpLinks, ExpiresAt: expires, ExpiresInMS: 900_000,
			Status: DeviceStatus{Kind: kind, Flow: "flow-id-1", IntervalS: 5, Provider: kind, Name: "team"}}}
	}
	for _, lang := range i18n.Langs {
		for name, tc := range map[string]struct {
			card  AccountCard
			check func(t *testing.T, doc *goquery.Document)
		}{
			"codex first step with two providers": {
				card: AccountCard{Kind: "codex", Providers: []string{"codex", "codex-team"}, Provider: "codex-team", RedirectURI: "http://localhost:1455/auth/callback"},
				check: func(t *testing.T, doc *goquery.Document) {
					if v, _ := doc.Find(`#codex-provider option[selected]`).Attr("value"); v != "codex-team" {
						t.Errorf("selected provider %q", v)
					}
					if a, _ := doc.Find("#codex-start-form").Attr("action"); a != "/oauth/codex/start#add-codex" {
						t.Errorf("form posts to %q", a)
					}
					if a, _ := doc.Find("#codex-device-start").Attr("formaction"); a != "/oauth/codex/device#add-codex" {
						t.Errorf("device button posts to %q", a)
					}
					if doc.Find("#codex-start").Length() != 1 {
						t.Error("no ChatGPT sign-in button")
					}
				}},
			"copilot first step with one provider": {
				card: AccountCard{Kind: "copilot", Providers: []string{"copilot"}},
				check: func(t *testing.T, doc *goquery.Document) {
					if v, _ := doc.Find(`#copilot-start-form input[type=hidden][name=provider]`).Attr("value"); v != "copilot" {
						t.Errorf("hidden provider %q", v)
					}
					if doc.Find("#copilot-device-start").Length() != 1 || doc.Find("#copilot-start").Length() != 0 {
						t.Error("copilot signs in with a device code only")
					}
				}},
			"no provider of the kind": {
				card: AccountCard{Kind: "copilot"},
				check: func(t *testing.T, doc *goquery.Document) {
					if doc.Find("form").Length() != 0 || !strings.Contains(doc.Text(), i18n.TL(lang, "copilot.no_provider")) {
						t.Error("a card without providers offers a sign-in")
					}
				}},
			"codex paste-back over https": {
				card: AccountCard{Kind: "codex", Providers: []string{"codex"}, AuthURL: "https://auth.example/oauth/authorize?state=s1", State: "s1",
					RedirectURI: "http://localhost:1455/auth/callback", Again: "chatgpt-1"},
				check: func(t *testing.T, doc *goquery.Document) {
					if h, _ := doc.Find("#codex-auth-link").Attr("href"); h != "https://auth.example/oauth/authorize?state=s1" {
						t.Errorf("sign-in link %q", h)
					}
					if v, _ := doc.Find(`#codex-complete-form input[name=state]`).Attr("value"); v != "s1" {
						t.Errorf("state %q", v)
					}
					if !strings.Contains(doc.Text(), "http://localhost:1455/auth/callback?code=") {
						t.Error("the step does not name the address the browser ends on")
					}
					if got := doc.Find("#codex-again").Text(); got != i18n.TL(lang, "accounts.again", "chatgpt-1") {
						t.Errorf("again note %q", got)
					}
				}},
			"codex paste-back over http is text": {
				card: AccountCard{Kind: "codex", Providers: []string{"codex"}, AuthURL: "http://auth.example/authorize", State: "s1"},
				check: func(t *testing.T, doc *goquery.Document) {
					if doc.Find("#codex-auth-link").Length() != 0 || doc.Find("#codex-auth-text").Text() != "http://auth.example/authorize" {
						t.Error("an http sign-in address is a link")
					}
				}},
			"device code waiting": {
				card: device("copilot", "https://github.example/login/device", false),
				check: func(t *testing.T, doc *goquery.Document) {
					if got := doc.Find("#copilot-user-code").Text(); got != "WDJB-MJHT" {
						t.Errorf("user code %q", got)
					}
					if c, _ := doc.Find("#copilot-copy-code").Attr("data-copy"); c != "copilot-user-code" {
						t.Errorf("copy button copies %q", c)
					}
					if h, _ := doc.Find("#copilot-verification-link").Attr("href"); h != "https://github.example/login/device" {
						t.Errorf("device page link %q", h)
					}
					region := doc.Find("#copilot-device-status")
					if v, _ := region.Attr("hx-post"); v != "/oauth/copilot/device/poll" {
						t.Errorf("region polls %q", v)
					}
					if v, _ := region.Attr("hx-trigger"); v != "every 5s, submit" {
						t.Errorf("region trigger %q", v)
					}
					if v, _ := region.Find(`input[name=flow]`).Attr("value"); v != "flow-id-1" {
						t.Errorf("flow %q", v)
					}
					if v, _ := region.Find(`input[name=name]`).Attr("value"); v != "team" {
						t.Errorf("name %q", v)
					}
					if doc.Find(".countdown").Length() != 1 {
						t.Error("no countdown to the code's expiry")
					}
				}},
			"device page over http is text": {
				card: device("codex", "http://auth.example/codex/device", false),
				check: func(t *testing.T, doc *goquery.Document) {
					if doc.Find("#codex-verification-link").Length() != 0 || doc.Find("#codex-verification-text").Length() != 1 {
						t.Error("an http device page is a link")
					}
				}},
			"device page over http is a link when allowed": {
				card: device("codex", "http://127.0.0.1:9/codex/device", true),
				check: func(t *testing.T, doc *goquery.Document) {
					if doc.Find("#codex-verification-link").Length() != 1 {
						t.Error("no link to the configured http device page")
					}
				}},
			"device page of another scheme is text": {
				card: device("codex", "javascript:alert(1)", true),
				check: func(t *testing.T, doc *goquery.Document) {
					if doc.Find("#codex-verification-link").Length() != 0 {
						t.Error("a javascript: address is a link")
					}
				}},
		} {
			t.Run(string(lang)+"/"+name, func(t *testing.T) {
				doc, html := renderDoc(t, lang, accountCard(tc.card))
				tc.check(t, doc)
				if m := catalogKey.FindString(doc.Text()); m != "" {
					t.Errorf("a catalog key is shown: %q", m)
				}
				if !strings.Contains(html, `id="add-`+tc.card.Kind+`"`) {
					t.Error("the card has no anchor")
				}
			})
		}
	}
}

// TestDeviceStatusEnded: a sign-in that ended says why, stops polling and offers to start again
// with the same provider and name.
func TestDeviceStatusEnded(t *testing.T) {
	doc, _ := renderDoc(t, i18n.EN, DeviceStatusRegion(DeviceStatus{Kind: "codex", Provider: "codex", Name: "team", Error: "The code expired."}))
	region := doc.Find("#codex-device-status")
	if _, polls := region.Attr("hx-post"); polls {
		t.Error("an ended sign-in still polls")
	}
	if region.Find(`input[name=flow]`).Length() != 0 {
		t.Error("an ended sign-in still carries its flow")
	}
	if got := region.Find("#codex-device-error").Text(); got != "The code expired." {
		t.Errorf("error %q", got)
	}
	if a, _ := region.Find("#codex-device-restart").Attr("formaction"); a != "/oauth/codex/device#add-codex" {
		t.Errorf("start again posts to %q", a)
	}
	if v, _ := region.Find(`input[name=provider]`).Attr("value"); v != "codex" {
		t.Errorf("provider %q", v)
	}
}

// TestAccountRows: a row shows what its kind has — Claude its windows, lane and token, ChatGPT
// its windows and token without a lane, Copilot its token only (a GitHub token without expiry
// said so, not called a setup token) — and an expired account, of any kind, offers "Sign in
// again" on its provider, which names the connection; an expired API key does not.
func TestAccountRows(t *testing.T) {
	reset := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	usage := &AccountUsage{FiveHour: &UsageBar{Percent: 42, ResetsAt: reset, ResetsInMS: 3_600_000}, SevenDay: &UsageBar{Percent: 7}}
	token := &AccountToken{ExpiresAt: reset, ExpiresInMS: 60_000, LastRefresh: reset.Add(-time.Hour), Strikes: 1}
	for name, tc := range map[string]struct {
		state      ConnectionState
		usage      bool
		lane       bool
		text       string
		again      string
		notPresent string
	}{
		"claude": {state: ConnectionState{ID: 1, Status: "active", Enabled: true,
			Account: &AccountState{Kind: "anthropic", Provider: "anthropic", Usage: usage, Token: token, Lane: &LaneBadge{State: "off"}}},
			usage: true, lane: true, text: i18n.TL(i18n.EN, "claude.strikes", 1)},
		"codex": {state: ConnectionState{ID: 2, Status: "active", Enabled: true,
			Account: &AccountState{Kind: "codex", Provider: "codex", Usage: usage, Token: token}},
			usage: true, text: i18n.TL(i18n.EN, "claude.token_expires")},
		"copilot": {state: ConnectionState{ID: 3, Status: "active", Enabled: true,
			Account: &AccountState{Kind: "copilot", Provider: "copilot", Token: &AccountToken{LongLived: true}}},
			text: i18n.TL(i18n.EN, "copilot.token_long_lived"), notPresent: i18n.TL(i18n.EN, "claude.setup_token_used")},
		"expired codex": {state: ConnectionState{ID: 4, Status: "expired", Enabled: true,
			Account: &AccountState{Kind: "codex", Provider: "codex-team", Token: token}},
			again: "/oauth/codex/start#add-codex"},
		"expired copilot": {state: ConnectionState{ID: 5, Status: "expired", Enabled: true,
			Account: &AccountState{Kind: "copilot", Provider: "copilot"}},
			again: "/oauth/copilot/device#add-copilot"},
		"expired claude": {state: ConnectionState{ID: 6, Status: "expired", Enabled: true,
			Account: &AccountState{Kind: "anthropic", Provider: "anthropic"}},
			again: "/oauth/claude/start#add-claude"},
		"expired api key": {state: ConnectionState{ID: 7, Status: "expired", Enabled: true}},
	} {
		t.Run(name, func(t *testing.T) {
			doc, _ := renderDoc(t, i18n.EN, connState(tc.state, false))
			if got := doc.Find(".usage-bar").Length() > 0; got != tc.usage {
				t.Errorf("usage windows shown: %v", got)
			}
			if got := doc.Find(".claude-lane").Length() > 0; got != tc.lane {
				t.Errorf("lane shown: %v", got)
			}
			if tc.usage && doc.Find(".usage-five_hour .usage-pct").Text() != "42 %" {
				t.Errorf("five hour %q", doc.Find(".usage-five_hour .usage-pct").Text())
			}
			if tc.text != "" && !strings.Contains(doc.Text(), tc.text) {
				t.Errorf("missing %q in %q", tc.text, doc.Text())
			}
			if tc.notPresent != "" && strings.Contains(doc.Text(), tc.notPresent) {
				t.Errorf("shows %q", tc.notPresent)
			}
			form := doc.Find("form.signin-again")
			if tc.again == "" {
				if form.Length() != 0 {
					t.Error("offers to sign in again")
				}
				return
			}
			if a, _ := form.Attr("action"); a != tc.again {
				t.Errorf("sign in again posts to %q, want %q", a, tc.again)
			}
			if v, _ := form.Find(`input[name=provider]`).Attr("value"); v != tc.state.Account.Provider {
				t.Errorf("provider %q", v)
			}
			if v, _ := form.Find(`input[name=again]`).Attr("value"); v != i64toa(tc.state.ID) {
				t.Errorf("again %q", v)
			}
			if doc.Find(".signin-again-hint").Length() != 1 {
				t.Error("no word on what signing in again does")
			}
		})
	}
}
