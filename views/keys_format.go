package views

import "context"

// isBudget reports whether a limit kind is an amount of USD.
func isBudget(kind string) bool { return kind == "daily" || kind == "monthly" }

// limitNumber writes a limit: a count, or USD for the budgets.
func limitNumber(ctx context.Context, kind string, v float64) string {
	if isBudget(kind) {
		return budgetNumber(ctx, v) + " USD"
	}
	return FormatInt(ctx, int64(v))
}

// limitUse writes a use against its limit: "12 / 60", "4.50 / 5.00 USD".
func limitUse(ctx context.Context, b LimitBar) string {
	if isBudget(b.Kind) {
		return spendNumber(ctx, b.Used) + " / " + budgetNumber(ctx, b.Limit) + " USD"
	}
	return FormatInt(ctx, int64(b.Used)) + " / " + FormatInt(ctx, int64(b.Limit))
}
