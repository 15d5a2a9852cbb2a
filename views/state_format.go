package views

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"switchyard/i18n"
)

// FormatCountdown writes a remaining time as a clock: "4:05", "1:02:03", "2 d 03:04:05". Seconds
// are rounded up, so a countdown shows 0:00 only once the time has run out. static/app.js
// writes the same format while it ticks the countdown down in the browser.
func FormatCountdown(ctx context.Context, ms int64) string {
	s := max((ms+999)/1000, 0)
	d, h, m, sec := s/86400, s%86400/3600, s%3600/60, s%60
	switch {
	case d > 0:
		return fmt.Sprintf("%d %s %02d:%02d:%02d", d, i18n.T(ctx, "unit.day"), h, m, sec)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

// formatClock writes a time of day with seconds in the context's language, in UTC.
func formatClock(ctx context.Context, t time.Time) string {
	return t.UTC().Format(i18n.T(ctx, "state.format.time")) + " UTC"
}

// formatStamp writes a date and time with seconds in the context's language, in UTC.
func formatStamp(ctx context.Context, t time.Time) string {
	return t.UTC().Format(i18n.T(ctx, "state.format.datetime")) + " UTC"
}

// textOr returns the catalog text of key, or fallback when the catalog has no such key (a
// reason or status the dashboard does not know yet is shown as it is).
func textOr(ctx context.Context, key, fallback string) string {
	if i18n.Has(i18n.FromContext(ctx), key) {
		return i18n.T(ctx, key)
	}
	return fallback
}

// reasonText names a failure reason (rate_limit, not_found, …) in the context's language.
func reasonText(ctx context.Context, reason string) string {
	return textOr(ctx, "state.reason."+reason, reason)
}

func itoa(n int) string { return strconv.Itoa(n) }

func i64toa(n int64) string { return strconv.FormatInt(n, 10) }

// connCountsText says how a provider's connections stand: "2 usable, 1 cooling down, 1 in a
// terminal state, 0 disabled".
func connCountsText(ctx context.Context, c ConnCounts) string {
	return i18n.T(ctx, "state.conn_counts", c.Usable, c.Cooling, c.Terminal, c.Disabled)
}
