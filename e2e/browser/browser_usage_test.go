package browser

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"switchyard/db"
	"switchyard/e2e/testenv"
)

// TestUsageAndKeyLimitsInBrowser: on a phone (390 px) in German, an operator reads what the
// keys spent on the Usage page (totals, charts, the tables by key, provider and model with a
// model that has no price saying so, a CSV per table, the 30-day range), then on the keys page
// each key's use against its limits as bars that turn amber from 80 % and red from 100 % with
// the numbers in words, and sets, refuses and clears limits in the key forms.
func TestUsageAndKeyLimitsInBrowser(t *testing.T) {
	e, _ := oneConnection(t)
	mk := func(body map[string]any) (string, string) {
		out := e.MustAPI("POST", "/api/keys", body, 201)
		return out["key"].(string), strconv.FormatInt(int64(out["id"].(float64)), 10)
	}
	agentKey, agent := mk(map[string]any{"name": "agent", "rpm_limit": 60, "tpm_limit": 100000, "daily_budget_usd": 5,
		"monthly_budget_usd": 100, "max_parallel": 4})
	_, tight := mk(map[string]any{"name": "tight", "daily_budget_usd": 1})
	_, free := mk(map[string]any{"name": "free"})

	// Spend so far today, as the request log writes it behind (priced traffic needs the price
	// table, which is not what this test is about): written while the gateway is stopped, so
	// whatever keeps the budgets in memory reads it at start, as after any restart.
	e.Stop()
	d, err := db.Open(e.Store())
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	b := e.Clock.Now().Unix() / db.UsageBucketSeconds
	if err := db.UpsertUsageBuckets(context.Background(), d.W, []db.UsageBucket{
		{Bucket: b, KeyID: id(agent), Provider: "openai", Model: "gpt-5", ConnectionID: 9, Requests: 40, InputTokens: 120000,
			OutputTokens: 30000, CacheReadTokens: 90000, CostUSD: 4.2},
		{Bucket: b, KeyID: id(tight), Provider: "openai", Model: "gpt-5", ConnectionID: 9, Requests: 5, InputTokens: 9000,
			OutputTokens: 1000, CostUSD: 1.5},
	}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	e.Start()
	e.WaitModels(agentKey, "up/gpt-test")
	for range 3 { // real traffic of a model without a price
		testenv.ReadAll(t, e.Chat(context.Background(), agentKey, testenv.ChatBody))
	}

	br := newDashBrowser(t)
	step := br.step
	// clear empties a field (SetValue refuses the empty string).
	clear := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`document.querySelector('` + sel + `').value = ''`)
	}

	step("the usage page in German on a phone", func(t *testing.T) {
		br.do(
			onPhoneInGerman(e, "/usage"),
			chromedp.WaitVisible(chromedp.CSS("#usage-by-key")),
		)
		if got := br.text("#nav-usage.active"); got != de("nav.usage") {
			t.Fatalf("nav entry %q", got)
		}
		if got := br.text("#usage-total-cost .usd"); got != "5,70 USD" {
			t.Fatalf("total spend %q", got)
		}
		var api struct{ Total struct{ Requests int64 } }
		e.API("GET", "/api/usage", nil, &api)
		if got := br.text("#usage-total-requests .total-value"); api.Total.Requests < 48 || got != strconv.FormatInt(api.Total.Requests, 10) {
			t.Fatalf("total requests %q, the API says %d (40 + 5 stored, 3 chats, the model lists)", got, api.Total.Requests)
		}
		if br.eval(`String(document.querySelector('#chart-spend').hasAttribute('data-empty'))`) != "false" ||
			br.eval(`String(document.querySelectorAll('#chart-spend rect.bar').length)`) != "1" {
			t.Fatal("the spend chart does not show today's spend as one bar")
		}
		rows := br.eval(`[...document.querySelectorAll('#usage-by-key tbody tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim()).join(' | ')`)
		if !strings.HasPrefix(rows, "agent ") || !strings.Contains(rows, "4,20 USD") || !strings.Contains(rows, "tight") ||
			strings.Contains(rows, "free") || !strings.Contains(rows, de("usage.plus_no_price_for", "3")) {
			t.Fatalf("by key: %s", rows)
		}
		model := br.eval(`[...document.querySelectorAll('#usage-by-model tbody tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim()).join(' | ')`)
		if !strings.HasPrefix(model, "openai/gpt-5 ") || !strings.Contains(model, "up/gpt-test") ||
			!strings.Contains(model, de("usage.no_price_for", "3")) {
			t.Fatalf("by model: %s", model)
		}
		// Each table's CSV, with the page's session.
		csv := br.eval(`fetch(document.querySelector('#usage-csv-model').href, {credentials: 'same-origin'}).then(r => r.text())`)
		if !strings.HasPrefix(csv, "provider,model,requests,") || !strings.Contains(csv, "\nopenai,gpt-5,45,0,129000,31000,90000,0,0,5.7,0\n") {
			t.Fatalf("CSV by model:\n%s", csv)
		}
		br.fitsPhone("/usage")
		br.shot("usage-390-de")
	})

	step("30 days, a point per day", func(t *testing.T) {
		br.do(clickLoad("#usage-range-month"), chromedp.WaitVisible(chromedp.CSS("#usage-range-month.active")))
		if got := br.eval(`String(document.querySelectorAll('#chart-tokens rect.hit').length)`); got != "30" {
			t.Fatalf("%s steps, want 30 days", got)
		}
		today := e.Clock.Now().UTC().Format("2006-01-02")
		if got := br.eval(`document.querySelector('#chart-spend .chart-axis time:last-child').getAttribute('datetime')`); !strings.HasPrefix(got, today) {
			t.Fatalf("the last day is %s, want %s", got, today)
		}
		if got := br.text("#usage-by-provider tbody tr:first-child .cost"); got != "5,70 USD" {
			t.Fatalf("openai over 30 days %q", got)
		}
		br.fitsPhone("/usage?range=month")
	})

	bar := func(key, kind string) (state, text string) {
		sel := fmt.Sprintf(`#key-%s .limit-bar[data-limit=%q]`, key, kind)
		return br.eval(`(document.querySelector('` + sel + `') || {dataset: {state: 'missing'}}).dataset.state`),
			br.eval(`(document.querySelector('` + sel + `') || {innerText: ''}).innerText.replace(/\s+/g, ' ').trim()`)
	}
	colour := func(key, kind string) string {
		return br.eval(fmt.Sprintf(`getComputedStyle(document.querySelector('#key-%s .limit-bar[data-limit=%q] progress')).accentColor`, key, kind))
	}

	step("each key's use against its limits", func(t *testing.T) {
		br.do(chromedp.Navigate(e.Base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys-table")))
		if st, txt := bar(agent, "daily"); st != "warn" || !strings.Contains(txt, "4,20 / 5,00 USD") || !strings.Contains(txt, "84 %") ||
			!strings.Contains(txt, de("keys.limit.near")) {
			t.Fatalf("agent today: %s %q", st, txt)
		}
		if st, txt := bar(agent, "monthly"); st != "ok" || !strings.Contains(txt, "4,20 / 100,00 USD") || !strings.Contains(txt, "4 %") {
			t.Fatalf("agent this month: %s %q", st, txt)
		}
		if st, txt := bar(tight, "daily"); st != "over" || !strings.Contains(txt, "1,50 / 1,00 USD") || !strings.Contains(txt, "150 %") ||
			!strings.Contains(txt, de("keys.limit.reached")) {
			t.Fatalf("tight today: %s %q", st, txt)
		}
		for _, kind := range []string{"rpm", "tpm", "parallel"} {
			if _, txt := bar(agent, kind); !strings.Contains(txt, de("keys.limit."+kind)) {
				t.Errorf("agent's %s limit is not shown: %q", kind, txt)
			}
		}
		if _, txt := bar(agent, "rpm"); !strings.Contains(txt, "60") {
			t.Errorf("the rpm limit's number: %q", txt)
		}
		if _, txt := bar(tight, "rpm"); txt != "" {
			t.Errorf("tight has no rpm limit, yet: %q", txt)
		}
		if got := br.text("#key-" + free + " .limit-none"); got != de("keys.limit.none") {
			t.Fatalf("free: %q", got)
		}
		// The colour follows the state: amber, red, and the normal one below 80 %.
		warn, over, ok := colour(agent, "daily"), colour(tight, "daily"), colour(agent, "monthly")
		if warn != "rgb(208, 138, 0)" || over != "rgb(198, 47, 47)" || ok == warn || ok == over {
			t.Fatalf("bar colours: warn %s, over %s, ok %s", warn, over, ok)
		}
		if label := br.eval(`document.querySelector('#key-` + tight + ` .limit-bar[data-limit="daily"] progress').getAttribute('aria-label')`); label != de("keys.limit.daily") {
			t.Fatalf("progress label %q", label)
		}
		br.fitsPhone("/keys")
		br.shot("keys-limits-390-de")
	})

	step("limits refused in the edit form keep what was typed", func(t *testing.T) {
		br.do(clickLoad("#edit-key-"+agent), chromedp.WaitVisible(chromedp.CSS("#key-rpm-limit")))
		for sel, want := range map[string]string{"#key-rpm-limit": "60", "#key-tpm-limit": "100000", "#key-daily-budget": "5",
			"#key-monthly-budget": "100", "#key-max-parallel": "4", "#key-budget-webhook": ""} {
			if got := br.eval(`document.querySelector('` + sel + `').value`); got != want {
				t.Errorf("%s shows %q, want %q", sel, got, want)
			}
		}
		if got := br.text(`label[for="key-daily-budget"]`); got != de("keys.field.daily_budget_usd") {
			t.Fatalf("label %q", got)
		}
		br.fitsPhone("the edit page")
		br.do(
			chromedp.SetValue(chromedp.CSS("#key-rpm-limit"), "viele"),
			chromedp.SetValue(chromedp.CSS("#key-daily-budget"), "-1"),
			chromedp.SetValue(chromedp.CSS("#key-budget-webhook"), "ftp://hooks.example.com"),
			clickLoad("#save-key"),
			chromedp.WaitVisible(chromedp.CSS("#key-rpm-limit-error")),
		)
		if got := br.text("#key-rpm-limit-error"); got != de("keys.err.whole_number") {
			t.Fatalf("rpm error %q", got)
		}
		// Refused by the form alone: the service's messages come once the numbers read.
		br.do(chromedp.SetValue(chromedp.CSS("#key-rpm-limit"), "60"), clickLoad("#save-key"),
			chromedp.WaitVisible(chromedp.CSS("#key-daily-budget-error")))
		if got := br.text("#key-daily-budget-error"); got != de("keys.err.budget_range", "10.000.000") {
			t.Fatalf("budget error %q", got)
		}
		if got := br.text("#key-budget-webhook-error"); got != de("keys.err.webhook_url") {
			t.Fatalf("webhook error %q", got)
		}
		if br.eval(`document.querySelector('#key-daily-budget').value`) != "-1" ||
			br.eval(`document.querySelector('#key-budget-webhook').value`) != "ftp://hooks.example.com" {
			t.Fatal("the form lost what was typed")
		}
		br.fitsPhone("the edit page with errors")
		br.shot("key-limits-errors-390-de")
		if k := e.MustAPI("GET", "/api/keys/"+agent, nil, 200); k["daily_budget_usd"] != 5.0 || k["budget_webhook_url"] != nil {
			t.Fatalf("a refused form changed the key: %v", k)
		}
	})

	step("saved limits show on the list; an empty field removes one", func(t *testing.T) {
		br.do(
			clear("#key-rpm-limit"),
			chromedp.SetValue(chromedp.CSS("#key-daily-budget"), "7,50"),
			chromedp.SetValue(chromedp.CSS("#key-budget-webhook"), "https://hooks.example.com/services/T0/SECRET-TOKEN"),
			clickLoad("#save-key"),
			chromedp.WaitVisible(chromedp.CSS("#keys-table")),
		)
		k := e.MustAPI("GET", "/api/keys/"+agent, nil, 200)
		if _, has := k["rpm_limit"]; has || k["daily_budget_usd"] != 7.5 || k["tpm_limit"] != 100000.0 ||
			k["budget_webhook_url"] != "https://hooks.example.com/services/T0/SECRET-TOKEN" {
			t.Fatalf("saved key %v", k)
		}
		if st, txt := bar(agent, "daily"); st != "ok" || !strings.Contains(txt, "4,20 / 7,50 USD") || !strings.Contains(txt, "56 %") {
			t.Fatalf("agent today after raising the budget: %s %q", st, txt)
		}
		if st, _ := bar(agent, "rpm"); st != "missing" {
			t.Fatal("the removed rpm limit is still shown")
		}
		row := br.text("#key-" + agent + " .key-limits")
		if !strings.Contains(row, de("keys.limit.webhook", "hooks.example.com")) || strings.Contains(row, "SECRET-TOKEN") {
			t.Fatalf("webhook on the list: %q", row)
		}
	})

	step("a new key with limits, numbers written the German way", func(t *testing.T) {
		br.do(
			chromedp.WaitVisible(chromedp.CSS("#create-key")),
			chromedp.SendKeys(chromedp.CSS("#key-name"), "batch"),
			chromedp.SetValue(chromedp.CSS("#key-monthly-budget"), "1.000"),
			chromedp.SetValue(chromedp.CSS("#key-max-parallel"), "2"),
			chromedp.SetValue(chromedp.CSS("#key-tpm-limit"), "2.000.000.000"),
			clickLoad("#create-key-submit"),
			chromedp.WaitVisible(chromedp.CSS("#key-tpm-limit-error")),
		)
		if got := br.text("#key-tpm-limit-error"); got != de("keys.err.limit_range", "1.000.000.000") {
			t.Fatalf("tpm error %q", got)
		}
		if br.eval(`document.querySelector('#key-name').value`) != "batch" || br.eval(`document.querySelector('#key-monthly-budget').value`) != "1.000" {
			t.Fatal("the create form lost what was typed")
		}
		br.do(
			clear("#key-tpm-limit"),
			clickLoad("#create-key-submit"),
			chromedp.WaitVisible(chromedp.CSS("#new-key-value")),
		)
		var batch map[string]any
		for _, it := range e.MustAPI("GET", "/api/keys", nil, 200)["items"].([]any) {
			if m := it.(map[string]any); m["name"] == "batch" {
				batch = m
			}
		}
		if batch == nil || batch["monthly_budget_usd"] != 1000.0 || batch["max_parallel"] != 2.0 || batch["tpm_limit"] != nil {
			t.Fatalf("new key %v", batch)
		}
		br.fitsPhone("/keys with the new key")
		br.do(chromedp.EmulateViewport(1440, 900), chromedp.Navigate(e.Base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys-table")))
		if spill := br.spilling(".card, .nav"); spill != "" {
			t.Errorf("at 1440 px, content wider than its box: %s", spill)
		}
		br.shot("keys-limits-1440-de")
		br.do(chromedp.Navigate(e.Base+"/usage"), chromedp.WaitVisible(chromedp.CSS("#usage-by-key")))
		if spill := br.spilling(".card, .nav"); spill != "" {
			t.Errorf("/usage at 1440 px, content wider than its box: %s", spill)
		}
		br.shot("usage-1440-de")
	})
}
