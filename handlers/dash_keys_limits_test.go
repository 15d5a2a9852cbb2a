package handlers

import (
	"context"
	"reflect"
	"testing"

	"switchyard/i18n"
	"switchyard/services/errs"
	"switchyard/services/spend"
	"switchyard/views"
)

func TestParseLimitNumbers(t *testing.T) {
	checkParse(t, "parseAmount", parseAmount, []parseCase[float64]{
		{i18n.EN, "", 0, true},
		{i18n.EN, "5", 5, true},
		{i18n.EN, "12.50", 12.5, true},
		{i18n.EN, "1,000.50", 1000.5, true},
		{i18n.EN, "1,000", 1000, true},
		{i18n.EN, "5,50", 5.5, true}, // the German habit on an English page
		{i18n.DE, "12,50", 12.5, true},
		{i18n.DE, "1.000,50", 1000.5, true},
		{i18n.DE, "1.000", 1000, true}, // a thousand on a German page, not one
		{i18n.DE, "5.50", 5.5, true},   // the English habit on a German page
		{i18n.DE, "10 000", 10000, true},
		{i18n.EN, "five", 0, false},
		{i18n.EN, "1.2.3", 0, false},
		{i18n.EN, "NaN", 0, false},
		{i18n.EN, "Inf", 0, false},
		{i18n.EN, "1e400", 0, false},
	})
	checkParse(t, "parseCount", parseCount, []parseCase[int64]{
		{i18n.EN, "", 0, true},
		{i18n.EN, "60", 60, true},
		{i18n.EN, "100,000", 100000, true},
		{i18n.DE, "100.000", 100000, true},
		{i18n.EN, "1.5", 0, false},
		{i18n.DE, "1,5", 0, false},
		{i18n.EN, "-3", -3, true}, // read; the service refuses it with its range
		{i18n.EN, "lots", 0, false},
	})
}

// parseCase is a number as typed on a page in lang, and how it reads.
type parseCase[N int64 | float64] struct {
	lang i18n.Lang
	in   string
	want N
	ok   bool
}

func checkParse[N int64 | float64](t *testing.T, name string, parse func(i18n.Lang, string) (N, bool), cases []parseCase[N]) {
	t.Helper()
	for _, tc := range cases {
		got, ok := parse(tc.lang, tc.in)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%s(%s, %q) = %v %v, want %v %v", name, tc.lang, tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLimitBars(t *testing.T) {
	l := spend.Limits{RPM: 60, DailyUSD: 5, MaxParallel: 2}
	u := spend.KeyUse{Requests: 48, Tokens: 999, DaySpend: 5.2, MonthSpend: 80, Parallel: 1}
	want := []views.LimitBar{{Kind: "rpm", Used: 48, Limit: 60, Known: true}, {Kind: "daily", Used: 5.2, Limit: 5, Known: true},
		{Kind: "parallel", Used: 1, Limit: 2, Known: true}}
	if got := limitBars(l, u, true); !reflect.DeepEqual(got, want) {
		t.Fatalf("bars\n got %+v\nwant %+v", got, want)
	}
	// Without a limiter only the budgets' use is known.
	got := limitBars(l, spend.KeyUse{DaySpend: 1}, false)
	if len(got) != 3 || got[0].Known || !got[1].Known || got[2].Known || got[1].Used != 1 {
		t.Fatalf("bars without a limiter: %+v", got)
	}
	if limitBars(spend.Limits{WebhookURL: "https://x.example"}, u, true) != nil {
		t.Fatal("a webhook alone is no limit")
	}
	for _, tc := range []struct {
		used, limit float64
		state       string
	}{{0, 60, "ok"}, {47.9, 60, "ok"}, {48, 60, "warn"}, {59, 60, "warn"}, {60, 60, "over"}, {7, 5, "over"}, {3.99, 5, "ok"}, {4, 5, "warn"}} {
		if got := (views.LimitBar{Kind: "rpm", Used: tc.used, Limit: tc.limit, Known: true}).State(); got != tc.state {
			t.Errorf("%v of %v: %s, want %s", tc.used, tc.limit, got, tc.state)
		}
	}
}

// TestKeyFormErrorsPlaceLimitFields: the service's refusal of a limit lands under its field.
func TestKeyFormErrorsPlaceLimitFields(t *testing.T) {
	err := errs.Fields(map[string]errs.Msg{"rpm_limit": errs.M("keys.err.limit_range", 1_000_000),
		"budget_webhook_url": errs.M("keys.err.webhook_url"), "daily_budget_usd": errs.M("keys.err.budget_range", 10_000_000)})
	fields, rest, ok := keyFormErrors(context.Background(), err, nil)
	if !ok || rest != "" || fields["rpm_limit"] == "" || fields["budget_webhook_url"] == "" || fields["daily_budget_usd"] == "" {
		t.Fatalf("fields %v, rest %q", fields, rest)
	}
}
