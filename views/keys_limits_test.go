package views

import (
	"context"
	"strings"
	"testing"

	"switchyard/i18n"
)

// TestKeyLimitsRender: with the limiter's numbers every limit is a bar with its use in words,
// its share and, from 80 %, a word for its state; without them a per-minute limit is shown
// alone; a key without limits says so.
func TestKeyLimitsRender(t *testing.T) {
	render := func(lang i18n.Lang, row KeyRow) string {
		var b strings.Builder
		if err := keyLimits(row).Render(i18n.WithLang(context.Background(), lang), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	row := KeyRow{Limits: []LimitBar{
		{Kind: "rpm", Used: 12, Limit: 60, Known: true},
		{Kind: "tpm", Used: 85_000, Limit: 100_000, Known: true},
		{Kind: "daily", Used: 5.25, Limit: 5, Known: true},
		{Kind: "monthly", Used: 0.0042, Limit: 1000, Known: true},
		{Kind: "parallel", Used: 4, Limit: 4, Known: true},
	}, WebhookHost: "hooks.example.com"}
	got := render(i18n.DE, row)
	for _, want := range []string{
		`data-limit="rpm" data-state="ok"`, `value="20"`, "12 / 60", "20 %",
		`data-limit="tpm" data-state="warn"`, "85.000 / 100.000", "85 %", i18n.TL(i18n.DE, "keys.limit.near"),
		`data-limit="daily" data-state="over"`, "5,25 / 5,00 USD", "105 %", `value="100"`, i18n.TL(i18n.DE, "keys.limit.reached"),
		`data-limit="monthly" data-state="ok"`, "0,0042 / 1.000,00 USD", "0 %",
		`data-limit="parallel" data-state="over"`, "4 / 4",
		i18n.TL(i18n.DE, "keys.limit.webhook", "hooks.example.com"),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if n := strings.Count(got, "<progress"); n != 5 {
		t.Errorf("%d bars, want 5", n)
	}

	got = render(i18n.EN, KeyRow{Limits: []LimitBar{{Kind: "rpm", Limit: 60}, {Kind: "daily", Used: 1, Limit: 5, Known: true}}})
	if strings.Count(got, "<progress") != 1 || !strings.Contains(got, i18n.TL(i18n.EN, "keys.limit.max", "60")) ||
		!strings.Contains(got, `data-limit="rpm" data-state="unknown"`) {
		t.Errorf("a limit without its use:\n%s", got)
	}
	if got := render(i18n.EN, KeyRow{}); !strings.Contains(got, i18n.TL(i18n.EN, "keys.limit.none")) || strings.Contains(got, "<progress") {
		t.Errorf("no limits:\n%s", got)
	}
}

func TestFormatSpend(t *testing.T) {
	ctx := i18n.WithLang(context.Background(), i18n.DE)
	for v, want := range map[float64]string{0: "0,00 USD", 0.00001: "< 0,0001 USD", 0.0042: "0,0042 USD", 0.5: "0,5000 USD",
		1: "1,00 USD", 1234.567: "1.234,57 USD"} {
		if got := FormatSpend(ctx, v); got != want {
			t.Errorf("FormatSpend(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{5: "5,00", 1000: "1.000,00", 0.5: "0,50", 0.005: "0,0050"} {
		if got := budgetNumber(ctx, v); got != want {
			t.Errorf("budgetNumber(%v) = %q, want %q", v, got, want)
		}
	}
}
