package cluster

import (
	"context"
	"time"

	"switchyard/db"
)

// Leases are named leases in the shared store (db.TryLease): work only one replica may do at a
// time waits for its lease, and a replica that dies holding one frees it at the lease's expiry.
type Leases struct {
	DB *db.DB
	// Owner is this replica's id.
	Owner string
	// Poll is how often a waiting replica tries again (default 50 ms).
	Poll time.Duration
}

// Acquire waits until Owner holds the named lease, for at most ttl, or ctx ends.
func (l *Leases) Acquire(ctx context.Context, name string, ttl time.Duration) (release func(), err error) {
	poll := l.Poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		now := time.Now()
		ok, err := db.TryLease(ctx, l.DB.W, name, l.Owner, now.UnixMilli(), now.Add(ttl).UnixMilli())
		if err != nil {
			return nil, err
		}
		if ok {
			return func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = db.ReleaseLease(ctx, l.DB.W, name, l.Owner) // on failure it ends at its expiry
			}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
