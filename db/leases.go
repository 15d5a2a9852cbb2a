package db

import (
	"context"
	"fmt"
)

// TryLease takes the named lease for owner until expires (unix ms) when it is free, expired or
// already owner's (then it is extended); it reports whether owner holds it now. Replicas sharing
// a database use it for work only one of them may do at a time, such as refreshing an account's
// OAuth token: a lease left by a replica that died ends at its expiry.
func TryLease(ctx context.Context, q Querier, name, owner string, now, expires int64) (bool, error) {
	res, err := q.ExecContext(ctx, `INSERT INTO leases (name, owner, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE leases.owner = excluded.owner OR leases.expires_at <= ?`, name, owner, expires, now)
	if err != nil {
		return false, fmt.Errorf("take lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("take lease %s: %w", name, err)
	}
	return n == 1, nil
}

// ReleaseLease gives the named lease up if owner still holds it.
func ReleaseLease(ctx context.Context, q Querier, name, owner string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND owner = ?`, name, owner); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// PruneLeases deletes the leases that ended at or before now (unix ms). An ended lease is free
// to take anyway (TryLease), so nothing changes for its holders; without the sweep, leases named
// once and never taken again (a budget crossing's, one per key, threshold and period) would
// stay in the table for good.
func PruneLeases(ctx context.Context, q Querier, now int64) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM leases WHERE expires_at <= ?`, now); err != nil {
		return fmt.Errorf("prune leases: %w", err)
	}
	return nil
}

// ReserveIDs hands out n ids of the named counter, which follows column (a table's id) when it
// starts: it returns the first of n ids no other caller of ReserveIDs got. Run it in its own
// transaction (on the writer) so the range is taken at once.
func ReserveIDs(ctx context.Context, q Querier, name, table string, n int64) (first int64, err error) {
	// The counter starts after the table's newest id, once; ON CONFLICT leaves a running one be.
	// (WHERE true: SQLite would read ON CONFLICT after a bare FROM as a join's ON.)
	if _, err := q.ExecContext(ctx, `INSERT INTO counters (name, value) SELECT CAST(? AS TEXT), COALESCE(MAX(id), 0) FROM `+table+`
		WHERE true ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return 0, fmt.Errorf("start counter %s: %w", name, err)
	}
	var last int64
	if err := q.QueryRowxContext(ctx, `UPDATE counters SET value = value + ? WHERE name = ? RETURNING value`, n, name).Scan(&last); err != nil {
		return 0, fmt.Errorf("reserve %d ids of %s: %w", n, name, err)
	}
	return last - n + 1, nil
}
