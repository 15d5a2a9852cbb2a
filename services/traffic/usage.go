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
	b := s.usage[k]
	if b == nil {
		b = &db.UsageBucket{Bucket: k.Bucket, KeyID: k.KeyID, Provider: k.Provider, Model: k.Model, ConnectionID: k.ConnectionID}
		s.usage[k] = b
	}
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
	s.usageDirty[k] = struct{}{}
}

// dirtyUsage takes the changed buckets for a flush; the caller holds mu.
func (s *Service) dirtyUsage() []db.UsageBucket {
	out := make([]db.UsageBucket, 0, len(s.usageDirty))
	for k := range s.usageDirty {
		if b := s.usage[k]; b != nil {
			out = append(out, *b)
		}
	}
	clear(s.usageDirty)
	return out
}

// forgetOldUsage drops buckets no entry is added to any more (they are written).
func (s *Service) forgetOldUsage(now time.Time) {
	oldest := bucketOf(now) - usageKeep
	s.mu.Lock()
	for k := range s.usage {
		if k.Bucket < oldest {
			if _, dirty := s.usageDirty[k]; !dirty {
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
