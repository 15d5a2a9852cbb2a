package traffic

import (
	"context"
	"time"

	"switchyard/db"
)

// usageKey is what a usage bucket is kept per.
type usageKey struct {
	Bucket       int64
	KeyID        int64
	Provider     string
	Model        string
	ConnectionID int64
}

// usageKeep is how many buckets back the runner keeps in memory: an entry is counted in the
// bucket where it ended (when its cost became known), which is always one of the last few.
const usageKeep = 8

// usageRetention is how long usage buckets are kept: a year and a month, so a month's budget
// and a year's reports are always complete.
const usageRetention = 400 * 24 * time.Hour

// bucketOf is the usage bucket of an instant.
func bucketOf(t time.Time) int64 { return t.Unix() / db.UsageBucketSeconds }

// loadUsage reads the newest buckets, which entries may still be added to.
func (s *Service) loadUsage(ctx context.Context) error {
	now := bucketOf(s.now())
	rows, err := db.ListUsageBuckets(ctx, s.opt.DB.R, now-usageKeep, now+2)
	if err != nil {
		return err
	}
	for i := range rows {
		r := rows[i]
		s.usage[usageKey{r.Bucket, r.KeyID, r.Provider, r.Model, r.ConnectionID}] = &r
	}
	return nil
}

// addUsage counts an entry with a client key in the bucket of its end. The runner calls it.
func (s *Service) addUsage(e *Entry) {
	if e.ClientKeyID == 0 || e.CountOnly {
		return
	}
	k := usageKey{Bucket: bucketOf(e.At.Add(e.Latency)), KeyID: e.ClientKeyID, Provider: e.Provider, Model: e.Model,
		ConnectionID: e.ConnectionID}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range []map[usageKey]*db.UsageBucket{s.usage, s.usageDelta} {
		b := m[k]
		if b == nil {
			b = &db.UsageBucket{Bucket: k.Bucket, KeyID: k.KeyID, Provider: k.Provider, Model: k.Model, ConnectionID: k.ConnectionID}
			m[k] = b
		}
		countUsage(b, e)
	}
}

// countUsage adds an entry to a bucket's sums.
func countUsage(b *db.UsageBucket, e *Entry) {
	b.Requests++
	if _, bad := ClassOf(e.Status, e.ErrorCode); bad {
		b.Errors++
	}
	b.InputTokens += e.InputTokens
	b.OutputTokens += e.OutputTokens
	b.CacheReadTokens += e.CacheReadTokens
	b.CacheWriteTokens += e.CacheWriteTokens
	b.ReasoningTokens += e.ReasoningTokens
	if e.Priced {
		b.CostUSD += e.CostUSD
	} else if e.InputTokens+e.OutputTokens > 0 {
		b.Unpriced++
	}
}

// takeUsage takes what was added to the buckets since the last flush, for the flush to add to
// the stored sums (replicas sharing a store add to the same buckets, so none writes its own
// totals over another's); the caller holds mu. A failed flush gives it back (restoreUsage).
func (s *Service) takeUsage() []db.UsageBucket {
	out := make([]db.UsageBucket, 0, len(s.usageDelta))
	for _, b := range s.usageDelta {
		out = append(out, *b)
	}
	clear(s.usageDelta)
	return out
}

// restoreUsage puts back increments a failed flush did not write, so the next one does.
func (s *Service) restoreUsage(list []db.UsageBucket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range list {
		k := usageKey{d.Bucket, d.KeyID, d.Provider, d.Model, d.ConnectionID}
		b := s.usageDelta[k]
		if b == nil {
			b = &db.UsageBucket{Bucket: d.Bucket, KeyID: d.KeyID, Provider: d.Provider, Model: d.Model, ConnectionID: d.ConnectionID}
			s.usageDelta[k] = b
		}
		b.Requests += d.Requests
		b.Errors += d.Errors
		b.InputTokens += d.InputTokens
		b.OutputTokens += d.OutputTokens
		b.CacheReadTokens += d.CacheReadTokens
		b.CacheWriteTokens += d.CacheWriteTokens
		b.ReasoningTokens += d.ReasoningTokens
		b.CostUSD += d.CostUSD
		b.Unpriced += d.Unpriced
	}
}

// forgetOldUsage drops buckets no entry is added to any more (they are written).
func (s *Service) forgetOldUsage(now time.Time) {
	oldest := bucketOf(now) - usageKeep
	s.mu.Lock()
	for k := range s.usage {
		if k.Bucket < oldest {
			if _, unwritten := s.usageDelta[k]; !unwritten {
				delete(s.usage, k)
			}
		}
	}
	s.mu.Unlock()
}

// UsageBuckets returns the usage buckets that overlap [from, to), everything recorded so far
// included (it waits for the runner to write what it holds). Dashboard and API only: never the
// request path.
func (s *Service) UsageBuckets(ctx context.Context, from, to time.Time) ([]db.UsageBucket, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	last := (to.Unix() + db.UsageBucketSeconds - 1) / db.UsageBucketSeconds
	return db.ListUsageBuckets(ctx, s.opt.DB.R, bucketOf(from), last)
}

// KeySpendSince sums each client key's spend (USD) from since on (rounded down to its bucket).
// With sync, what was recorded and not yet written counts too (it waits for the running runner);
// without it, only what is stored (at start, before the runner runs).
func (s *Service) KeySpendSince(ctx context.Context, since time.Time, sync bool) (map[int64]float64, error) {
	if sync {
		if err := s.Sync(ctx); err != nil {
			return nil, err
		}
	}
	rows, err := db.SumKeySpend(ctx, s.opt.DB.R, bucketOf(since))
	if err != nil {
		return nil, err
	}
	out := make(map[int64]float64, len(rows))
	for _, r := range rows {
		out[r.KeyID] = r.CostUSD
	}
	return out, nil
}
