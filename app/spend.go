package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/clientkeys"
	"switchyard/services/spend"
	"switchyard/services/traffic"
	"switchyard/services/webhooks"
)

// buildLimiter is the per-key limiter, seeded with each key's spend of the current day and month
// (from the stored usage) and the last minute's requests and tokens, so limits hold across a
// restart. Its days and months follow the prices settings' time zone (a change seeds the spend
// again in the new zone). A revoked key's counters go.
func buildLimiter(ctx context.Context, clock clockwork.Clock, tr *traffic.Service, keys *clientkeys.Service,
	prices *spend.PriceService, onCross func(spend.Crossing), log *slog.Logger) (*spend.Limiter, error) {
	l := spend.NewLimiter(clock.Now, prices.Location(), onCross)
	day, month, err := spendSince(ctx, l, tr, nil, false)
	if err != nil {
		return nil, err
	}
	l.Seed(day, month)
	minute := tr.KeyUsage(clock.Now().Add(-time.Minute))
	requests, tokens := make(map[int64]int64, len(minute)), make(map[int64]int64, len(minute))
	for id, u := range minute {
		if id != 0 {
			requests[id], tokens[id] = u.Requests, u.In+u.Out
		}
	}
	l.SeedWindows(requests, tokens)
	keys.OnChange(func(_ context.Context, id int64, _ *clientkeys.Access, active bool) {
		if !active {
			l.Forget(id)
		}
	})
	prices.OnChange(func() {
		loc := prices.Location()
		if loc.String() == l.Location().String() {
			return
		}
		// Runs after the settings were saved, on the admin's request: the runner is running.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		day, month, err := spendSince(sctx, l, tr, loc, true)
		if err != nil {
			log.Warn("budget spend in the new time zone unknown; counting from 0", "error", err)
		}
		l.SetLocation(loc, day, month)
	})
	return l, nil
}

// spendSince is each key's spend of the current day and month in loc (nil: the limiter's), from
// the stored usage (sync: what the running request-log runner holds counts too).
func spendSince(ctx context.Context, l *spend.Limiter, tr *traffic.Service, loc *time.Location, sync bool) (day, month map[int64]float64, err error) {
	dayStart, monthStart := l.PeriodStarts(loc)
	if day, err = tr.KeySpendSince(ctx, dayStart, sync); err != nil {
		return nil, nil, err
	}
	month, err = tr.KeySpendSince(ctx, monthStart, false)
	return day, month, err
}

// budgetAnnouncer sends each budget threshold a key's spend crosses to the key's webhook and the
// gateway-wide one of the prices settings, once each, off the request path. With several
// replicas, once (nil on one) tells which of them announces a crossing each counted.
func budgetAnnouncer(sender *webhooks.Sender, keys *clientkeys.Service, prices *spend.PriceService, once func(spend.Crossing) bool) func(spend.Crossing) {
	return func(c spend.Crossing) {
		if once != nil && !once(c) {
			return
		}
		loc := c.PeriodStart.Location()
		ev := webhooks.NewBudgetEvent(webhooks.BudgetCrossed{KeyID: c.KeyID, KeyName: keys.NameOf(c.KeyID), Budget: c.Budget,
			Threshold: c.Threshold, SpendUSD: c.SpendUSD, BudgetUSD: c.BudgetUSD, PeriodStart: c.PeriodStart,
			ResetsAt: c.ResetsAt, TimeZone: loc.String()})
		sent := ""
		global, _ := prices.Webhook()
		for _, url := range []string{c.Limits.WebhookURL, global} {
			if url != "" && url != sent {
				sender.Send(url, ev)
				sent = url
			}
		}
	}
}
