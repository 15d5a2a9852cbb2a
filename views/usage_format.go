package views

import (
	"context"
	"math"
	"strconv"
	"strings"

	"switchyard/i18n"
)

// FormatSpend writes an amount of US dollars in the context's language: two decimals from one
// dollar up (with thousands separators), four below it, "< 0.0001" for less; "USD" after it
// ("1,234.56 USD", "0.0042 USD", "0.00 USD").
func FormatSpend(ctx context.Context, usd float64) string { return spendNumber(ctx, usd) + " USD" }

// spendNumber is FormatSpend without the currency.
func spendNumber(ctx context.Context, usd float64) string {
	switch {
	case usd <= 0 || math.IsNaN(usd):
		return FormatDecimal(ctx, 0, 2)
	case usd < 0.00005:
		return "< " + FormatDecimal(ctx, 0.0001, 4)
	case usd < 1:
		return FormatDecimal(ctx, usd, 4)
	}
	return cents(ctx, usd)
}

// budgetNumber writes a budget: in cents, as budgets are set ("5.00", "1,000.00"); a budget
// finer than a cent as a spend is written.
func budgetNumber(ctx context.Context, usd float64) string {
	if c := usd * 100; c != math.Trunc(c) {
		return spendNumber(ctx, usd)
	}
	return cents(ctx, usd)
}

// cents writes an amount with two decimals and thousands separators.
func cents(ctx context.Context, usd float64) string {
	whole, frac, _ := strings.Cut(strconv.FormatFloat(usd, 'f', 2, 64), ".")
	n, _ := strconv.ParseInt(whole, 10, 64)
	return FormatInt(ctx, n) + i18n.T(ctx, "format.decimal") + frac
}
