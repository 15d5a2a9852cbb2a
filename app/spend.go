package app

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/clientkeys"
	"switchyard/services/spend"
	"switchyard/services/traffic"
	"switchyard/services/webhooks"
)

// buildLimiter is the per-key limiter, seeded with each key's spend of the current day and month
// (from the stored usage) and the last minute's requests and tokens, so limits hold across a
// restart. A revoked key's counters go.
func buildLimiter(ctx context.Context, clock clockwork.Clock, tr *traffic.Service, keys *clientkeys.Service,
	loc *time.Location, onCross func(spend.Crossing)) (*spend.Limiter, error) {
	l := spend.NewLimiter(clock.Now, loc, onCross)
	if err := seedLimiter(ctx, l, tr, false); err != nil {
		return nil, err
	}
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
	return l, nil
}

// seedLimiter sets every key's day and month spend from the stored usage, in the limiter's zone
// (sync: the request log runner is running, and what it holds counts too).
func seedLimiter(ctx context.Context, l *spend.Limiter, tr *traffic.Service, sync bool) error {
	dayStart, monthStart := l.PeriodStarts()
	day, err := tr.KeySpendSince(ctx, dayStart, sync)
	if err != nil {
		return err
	}
	month, err := tr.KeySpendSince(ctx, monthStart, false)
	if err != nil {
		return err
	}
	l.Seed(day, month)
	return nil
}

// budgetAnnouncer sends each budget threshold a key's spend crosses to the key's webhook and the
// gateway-wide one (global() gives its URL; "" = none), once each, off the request path.
func budgetAnnouncer(sender *webhooks.Sender, keys *clientkeys.Service, global func() string) func(spend.Crossing) {
	return func(c spend.Crossing) {
		loc := c.PeriodStart.Location()
		ev := webhooks.NewBudgetEvent(webhooks.BudgetCrossed{KeyID: c.KeyID, KeyName: keys.NameOf(c.KeyID), Budget: c.Budget,
			Threshold: c.Threshold, SpendUSD: c.SpendUSD, BudgetUSD: c.BudgetUSD, PeriodStart: c.PeriodStart,
			ResetsAt: c.ResetsAt, TimeZone: loc.String()})
		sent := ""
		for _, url := range []string{c.Limits.WebhookURL, global()} {
			if url != "" && url != sent {
				sender.Send(url, ev)
				sent = url
			}
		}
	}
}
