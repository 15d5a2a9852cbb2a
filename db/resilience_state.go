package db

import (
	"context"
	"database/sql"
	"fmt"
)

// StateRow is one row of resilience_state: one piece of resilience state of some kind, its
// value as JSON. Provider and ConnectionID (when set) scope it: the row goes when they go.
type StateRow struct {
	Kind         string         `db:"kind"`
	Key          string         `db:"key"`
	Provider     sql.NullString `db:"provider"`
	ConnectionID sql.NullInt64  `db:"connection_id"`
	Value        string         `db:"value"`
	UpdatedAt    int64          `db:"updated_at"`
}

// ListState returns every stored record of a kind, by key.
func ListState(ctx context.Context, q Querier, kind string) ([]StateRow, error) {
	return selectRows[StateRow](ctx, q, fmt.Sprintf("list %s state", kind), `SELECT kind, key, provider,
		connection_id, value, updated_at FROM resilience_state WHERE kind = ? ORDER BY key`, kind)
}

// SaveState upserts one record (UpdatedAt is set here). A record whose provider or connection
// no longer exists is skipped: it was deleted while the change waited to be written.
func SaveState(ctx context.Context, q Querier, r StateRow) error {
	_, err := q.ExecContext(ctx, `INSERT INTO resilience_state (kind, key, provider, connection_id, value, updated_at)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BIGINT)
		WHERE (CAST(? AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM providers WHERE name = ?))
		  AND (CAST(? AS BIGINT) IS NULL OR EXISTS (SELECT 1 FROM provider_connections WHERE id = ?))
		ON CONFLICT (kind, key) DO UPDATE SET provider = excluded.provider, connection_id = excluded.connection_id,
		value = excluded.value, updated_at = excluded.updated_at`,
		r.Kind, r.Key, r.Provider, r.ConnectionID, r.Value, nowMS(), r.Provider, r.Provider, r.ConnectionID, r.ConnectionID)
	if err != nil {
		return fmt.Errorf("save %s state %q: %w", r.Kind, r.Key, err)
	}
	return nil
}

// DeleteState removes one record; a missing one is not an error.
func DeleteState(ctx context.Context, q Querier, kind, key string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM resilience_state WHERE kind = ? AND key = ?`, kind, key); err != nil {
		return fmt.Errorf("delete %s state %q: %w", kind, key, err)
	}
	return nil
}
