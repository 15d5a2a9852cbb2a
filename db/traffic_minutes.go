package db

import (
	"context"
	"fmt"
)

// TrafficMinute is one row of traffic_minutes: the aggregate of one minute, provider and key.
type TrafficMinute struct {
	Minute   int64  `db:"minute"`
	Provider string `db:"provider"`
	KeyID    int64  `db:"key_id"`
	Data     string `db:"data"`
}

// UpsertTrafficMinutes writes aggregates, replacing the stored ones of the same minute,
// provider and key.
func UpsertTrafficMinutes(ctx context.Context, q Querier, rows []TrafficMinute) error {
	for _, r := range rows {
		if _, err := q.ExecContext(ctx, `INSERT INTO traffic_minutes (minute, provider, key_id, data) VALUES (?, ?, ?, ?)
			ON CONFLICT (minute, provider, key_id) DO UPDATE SET data = excluded.data`,
			r.Minute, r.Provider, r.KeyID, r.Data); err != nil {
			return fmt.Errorf("upsert traffic minute %d: %w", r.Minute, err)
		}
	}
	return nil
}

// ListTrafficMinutes returns the aggregates from minute since on.
func ListTrafficMinutes(ctx context.Context, q Querier, since int64) ([]TrafficMinute, error) {
	return selectRows[TrafficMinute](ctx, q, "list traffic minutes",
		`SELECT minute, provider, key_id, data FROM traffic_minutes
		WHERE minute >= ? ORDER BY minute`, since)
}

// PruneTrafficMinutes deletes the aggregates before minute.
func PruneTrafficMinutes(ctx context.Context, q Querier, before int64) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM traffic_minutes WHERE minute < ?`, before); err != nil {
		return fmt.Errorf("prune traffic minutes: %w", err)
	}
	return nil
}
