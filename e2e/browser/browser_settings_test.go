package browser

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// settingsBrowser is a browser logged in to a fresh gateway, at its settings page.
type settingsBrowser struct {
	*dashBrowser
	base string
}

func newSettingsBrowser(t *testing.T) *settingsBrowser {
	t.Helper()
	browser := newDashBrowser(t)
	app := startDashApp(t)
	b := &settingsBrowser{dashBrowser: browser, base: "http://" + app.Addr}
	b.do(
		logIn(b.base+"/settings", dashPassword),
		chromedp.WaitVisible(chromedp.CSS("#card-model-lockout")),
	)
	return b
}

// lockoutDoc is model_lockout of GET /api/settings/resilience.
type lockoutDoc struct {
	Values struct {
		ModelLockout struct {
			Enabled        bool  `json:"enabled"`
			ErrorCodes     []int `json:"error_codes"`
			BaseCooldownMS int64 `json:"base_cooldown_ms"`
			MaxCooldownMS  int64 `json:"max_cooldown_ms"`
		} `json:"model_lockout"`
	} `json:"values"`
	Sources map[string]string `json:"sources"`
}

func (b *settingsBrowser) lockoutNow() lockoutDoc {
	b.t.Helper()
	return evalAs[lockoutDoc](b.dashBrowser, `fetch('/api/settings/resilience', {credentials: 'same-origin'}).then(r => r.json())`)
}

// TestModelLockoutCardInBrowser edits the "Model lockout" card the way an operator does: bad
// values are refused next to their fields and nothing is saved; chips are added and removed;
// good values are saved in place and are still there after a reload.
func TestModelLockoutCardInBrowser(t *testing.T) {
	b := newSettingsBrowser(t)
	const (
		card    = "#card-model-lockout"
		base    = "#s-model_lockout-base_cooldown_ms"
		maxCD   = "#s-model_lockout-max_cooldown_ms"
		chips   = "#s-model_lockout-error_codes-chips"
		addChip = "#s-model_lockout-error_codes-add"
		save    = "#save-model-lockout"
	)
	untouched := func(t *testing.T) {
		t.Helper()
		doc := b.lockoutNow()
		ml := doc.Values.ModelLockout
		if ml.BaseCooldownMS != 120_000 || ml.MaxCooldownMS != 1_800_000 || !slices.Equal(ml.ErrorCodes, []int{403, 404, 429, 502, 503, 504}) ||
			doc.Sources["model_lockout.base_cooldown_ms"] != "default" || doc.Sources["model_lockout.error_codes"] != "default" {
			t.Fatalf("a refused save changed the settings: %+v", doc)
		}
	}

	b.run("base below its range", func(t *testing.T) {
		b.do(
			// A marker that survives only if the card is swapped in place, not by a page load.
			chromedp.Evaluate[chromedp.Void](`window.__stillHere = true`),
			chromedp.SetValue(chromedp.CSS(base), "1000"),
			chromedp.Click(chromedp.CSS(save)),
			chromedp.WaitVisible(chromedp.CSS(base+"-error")),
			settled,
		)
		if got := b.text(base + "-error"); !strings.Contains(got, "5,000") || !strings.Contains(got, "600,000") {
			t.Fatalf("base error %q", got)
		}
		if b.text(card+" .error-note") == "" {
			t.Fatal("the card does not say that nothing was saved")
		}
		untouched(t)
	})

	b.run("max below base", func(t *testing.T) {
		b.do(
			chromedp.SetValue(chromedp.CSS(base), "60000"),
			chromedp.SetValue(chromedp.CSS(maxCD), "30000"),
			chromedp.Click(chromedp.CSS(save)),
			chromedp.WaitVisible(chromedp.CSS(maxCD+"-error")),
			chromedp.WaitNotPresent(chromedp.CSS(base+"-error")),
			settled,
		)
		if got := b.text(maxCD + "-error"); !strings.Contains(got, "Base cooldown") || !strings.Contains(got, "60,000") {
			t.Fatalf("max error %q, want it to name the base cooldown", got)
		}
		b.shotOf("settings-lockout-error", card)
		untouched(t)
	})

	b.run("chips", func(t *testing.T) {
		b.do(
			chromedp.SendKeys(chromedp.CSS(addChip), "700"),
			chromedp.Click(chromedp.CSS(addChip+"-btn")),
			chromedp.WaitVisible(chromedp.CSS("#s-model_lockout-error_codes-client-error")),
		)
		if got := b.text("#s-model_lockout-error_codes-client-error"); !strings.Contains(got, "700") {
			t.Fatalf("client error for 700: %q", got)
		}
		b.do(
			chromedp.Evaluate[chromedp.Void](`document.querySelector('`+addChip+`').value = ''`),
			chromedp.SendKeys(chromedp.CSS(addChip), "418"),
			chromedp.Click(chromedp.CSS(addChip+"-btn")),
			chromedp.WaitVisible(chromedp.CSS(chips+` .code-chip[data-value="418"]`)),
			chromedp.WaitNotVisible(chromedp.CSS("#s-model_lockout-error_codes-client-error")),
			chromedp.Click(chromedp.CSS(chips+` .code-chip[data-value="403"] .chip-x`)),
			chromedp.WaitNotPresent(chromedp.CSS(chips+` .code-chip[data-value="403"]`)),
		)
		if got := b.eval(`[...document.querySelectorAll('` + chips + ` .code-chip')].map(c => c.dataset.value).join(',')`); got != "404,429,502,503,504,418" {
			t.Fatalf("chips %q", got)
		}
	})

	b.run("good values saved in place", func(t *testing.T) {
		b.do(
			chromedp.SetValue(chromedp.CSS(maxCD), "600000"),
			chromedp.Click(chromedp.CSS("#s-model_lockout-enabled + .switch-track")),
			chromedp.Click(chromedp.CSS(save)),
			chromedp.WaitVisible(chromedp.CSS(card+" .saved-note")),
			settled,
		)
		if b.eval(`String(window.__stillHere === true)`) != "true" {
			t.Fatal("the card save reloaded the page instead of swapping the card")
		}
		doc := b.lockoutNow()
		ml := doc.Values.ModelLockout
		if !ml.Enabled || ml.BaseCooldownMS != 60_000 || ml.MaxCooldownMS != 600_000 || !slices.Equal(ml.ErrorCodes, []int{404, 429, 502, 503, 504, 418}) {
			t.Fatalf("saved %+v", ml)
		}
		for _, p := range []string{"enabled", "error_codes", "base_cooldown_ms", "max_cooldown_ms"} {
			if doc.Sources["model_lockout."+p] != "persisted" {
				t.Errorf("%s has source %q", p, doc.Sources["model_lockout."+p])
			}
		}
		if doc.Sources["model_lockout.max_backoff_steps"] != "default" {
			t.Error("an untouched field was saved too")
		}
		b.shotOf("settings-lockout-saved", card)
	})

	b.run("still there after a reload", func(t *testing.T) {
		b.do(
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(card)),
		)
		if got := b.eval(`[...document.querySelectorAll('` + chips + ` .code-chip')].map(c => c.dataset.value).join(',')`); got != "404,429,502,503,504,418" {
			t.Fatalf("chips after reload %q", got)
		}
		if got := b.eval(`document.querySelector('` + base + `').value + ' ' + document.querySelector('` + maxCD + `').value`); got != "60000 600000" {
			t.Fatalf("values after reload %q", got)
		}
		if got := b.text(card + ` .setting:has(` + base + `) .source`); got != "SAVED" && got != "saved" {
			t.Fatalf("base cooldown badge %q", got)
		}
		b.shot("settings")
	})
}

// TestRuleAndOverrideCardsInBrowser checks what only a browser shows: the card's buttons
// (fill in the example, add, delete, pick a provider) post their own value through htmx and
// swap the card in place.
func TestRuleAndOverrideCardsInBrowser(t *testing.T) {
	b := newSettingsBrowser(t)
	count := func(t *testing.T, list string) string {
		t.Helper()
		return b.eval(`fetch('/api/settings/resilience').then(r => r.json()).then(d => String(d.values.` + list + `.length))`)
	}
	b.run("example, add and delete a restatement", func(t *testing.T) {
		b.do(
			chromedp.Evaluate[chromedp.Void](`window.__stillHere = true`),
			chromedp.Click(chromedp.CSS("#rules-use-example")),
			chromedp.WaitVisible(chromedp.CSS(`#s-status_restatements-new details[open] #s-status_restatements-new-name`)),
			settled,
		)
		if v := b.eval(`document.querySelector('#s-status_restatements-new-name').value`); v != "gateway-quota-403" {
			t.Fatalf("the example was not filled in: %q", v)
		}
		if count(t, "status_restatements") != "0" {
			t.Fatal("filling in the example saved it")
		}
		b.shotOf("settings-rules-example", "#card-error-rules")
		b.do(
			chromedp.Click(chromedp.CSS("#rules-add-status_restatements")),
			chromedp.WaitVisible(chromedp.CSS("#card-error-rules .saved-note")),
			chromedp.WaitVisible(chromedp.CSS("#s-status_restatements-0")),
			settled,
		)
		if count(t, "status_restatements") != "1" {
			t.Fatal("the restatement was not saved")
		}
		if got := b.text("#s-status_restatements-0 .rule-summary"); !strings.Contains(got, "403") || !strings.Contains(got, "→ 429") {
			t.Fatalf("summary %q", got)
		}
		// A rule whose name is taken is refused at its name.
		b.do(
			chromedp.Click(chromedp.CSS("#s-error_rules-new summary")),
			chromedp.SendKeys(chromedp.CSS("#s-error_rules-new-name"), "needs-a-condition"),
			chromedp.Click(chromedp.CSS("#rules-add-error_rules")),
			chromedp.WaitVisible(chromedp.CSS("#s-error_rules-new .rule-error")),
			settled,
		)
		b.shotOf("settings-rules-error", "#card-error-rules")
		if count(t, "error_rules") != "0" {
			t.Fatal("an invalid rule was saved")
		}
		b.do(
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#s-error_rules-new-name').value = ''`),
			chromedp.Click(chromedp.CSS("#s-status_restatements-0-delete")),
			chromedp.WaitVisible(chromedp.CSS("#card-error-rules .saved-note")),
			chromedp.WaitNotPresent(chromedp.CSS("#s-status_restatements-0")),
			settled,
		)
		if count(t, "status_restatements") != "0" || b.eval(`String(window.__stillHere === true)`) != "true" {
			t.Fatal("the restatement was not deleted in place")
		}
	})

	b.run("pick a provider and override", func(t *testing.T) {
		// The select's options carry ids; choose by name. Choosing (SetValue sends the change
		// event) loads the provider at once.
		id := b.eval(`[...document.querySelector('#po-provider').options].find(o => o.text === 'openai').value`)
		b.do(
			chromedp.SetValue(chromedp.CSS("#po-provider"), id),
			chromedp.Poll[chromedp.Void](`document.querySelector('#card-provider-overrides input[name="editing"][value="`+id+`"]') && `+
				`document.querySelector('#po-provider').selectedOptions[0].text === 'openai'`, chromedp.WithPollingTimeout(15*time.Second)),
			settled,
		)
		if b.eval(`String(window.__stillHere === true)`) != "true" {
			t.Fatal("picking a provider reloaded the page instead of swapping the card")
		}
		b.do(
			chromedp.SendKeys(chromedp.CSS("#po-s-retry-max_retries"), "6"),
			chromedp.Click(chromedp.CSS("#save-provider-overrides")),
			chromedp.WaitVisible(chromedp.CSS("#card-provider-overrides .saved-note")),
			settled,
		)
		if got := b.text("#po-row-openai"); !strings.Contains(got, "retry.max_retries = 6") {
			t.Fatalf("row %q", got)
		}
		b.shotOf("settings-overrides", "#card-provider-overrides")
	})
}

// scripts turns the page's JavaScript on or off.
func scripts(on bool) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on})
		return chromedp.Void{}, err
	}
}

// TestModelLockoutCardWithoutJavaScript saves the card with scripts off: chips are checkboxes
// (untick to remove), the add input takes a list, and the form posts and redirects.
func TestModelLockoutCardWithoutJavaScript(t *testing.T) {
	b := newSettingsBrowser(t)
	const chips = "#s-model_lockout-error_codes-chips"
	b.do(
		scripts(false),
		chromedp.Navigate(b.base+"/settings?scripts=off"),
		chromedp.WaitVisible(chromedp.CSS(chips+` .code-chip[data-value="403"] input[type="checkbox"]`)),
		chromedp.WaitNotVisible(chromedp.CSS(chips+` .code-chip[data-value="403"] .chip-x`)),
		chromedp.Click(chromedp.CSS(chips+` .code-chip[data-value="403"] label`)),
		chromedp.SendKeys(chromedp.CSS("#s-model_lockout-error_codes-add"), "418, 529"),
	)
	b.shotOf("settings-lockout-nojs", "#card-model-lockout")
	b.do(
		clickLoad("#save-model-lockout"),
		chromedp.WaitVisible(chromedp.CSS("#card-model-lockout .saved-note")),
		scripts(true),
	)
	if got := b.lockoutNow().Values.ModelLockout.ErrorCodes; !slices.Equal(got, []int{404, 429, 502, 503, 504, 418, 529}) {
		t.Fatalf("saved codes %v", got)
	}
}

// TestInvalidSaveWithoutJavaScript refuses a save with scripts off: the answer is the page
// opened at the refused card, with every error of the card, and Tab goes on from the card.
func TestInvalidSaveWithoutJavaScript(t *testing.T) {
	b := newSettingsBrowser(t)
	b.do(
		scripts(false),
		chromedp.Navigate(b.base+"/settings?scripts=off"),
		chromedp.WaitVisible(chromedp.CSS("#s-streams-idle_timeout_ms")),
		chromedp.SetValue(chromedp.CSS("#s-streams-idle_timeout_ms"), "999"),
		chromedp.SetValue(chromedp.CSS("#s-streams-throughput_watchdog-window_ms"), "soon"),
		clickLoad("#save-streams"),
		chromedp.WaitVisible(chromedp.CSS("#card-streams .error-note")),
		scripts(true),
	)
	for _, id := range []string{"#s-streams-idle_timeout_ms-error", "#s-streams-throughput_watchdog-window_ms-error"} {
		if b.text(id) == "" {
			t.Errorf("%s is missing", id)
		}
	}
	if got := b.eval(`location.hash`); got != "#card-streams" {
		t.Errorf("the page opened at %q, want #card-streams", got)
	}
	// The failing field is on screen: the page did not open at its top.
	if got := b.eval(`(() => { const r = document.querySelector('#s-streams-idle_timeout_ms').getBoundingClientRect();
		return String(window.scrollY > 0 && r.top >= 0 && r.bottom <= window.innerHeight) })()`); got != "true" {
		t.Errorf("the failing field is not in view (scrollY %s)", b.eval(`String(window.scrollY)`))
	}
	b.do(chromedp.KeyEvent(kb.Tab))
	if got := b.eval(`String(!!document.activeElement.closest('#card-streams'))`); got != "true" {
		t.Errorf("Tab went to %q, not into the refused card", b.eval(`document.activeElement.id || document.activeElement.tagName`))
	}
	b.shot("settings-nojs-refused")
}

// TestSettingsPageScreenshots saves the German settings page for a look at the design, when
// SWITCHYARD_SCREENSHOTS names a directory.
func TestSettingsPageScreenshots(t *testing.T) {
	if os.Getenv("SWITCHYARD_SCREENSHOTS") == "" {
		t.Skip("SWITCHYARD_SCREENSHOTS is not set")
	}
	b := newSettingsBrowser(t)
	b.do(
		clickLoad("#lang-de"),
		chromedp.WaitReady(chromedp.CSS(`html[lang="de"]`)),
		chromedp.WaitVisible(chromedp.CSS("#card-model-lockout")),
	)
	b.shot("settings-de")
}
