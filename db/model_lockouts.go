package db

import (
	"context"
	"fmt"
)

// ModelLockout is one row of model_lockouts.
type ModelLockout struct {
	Provider     string `db:"provider"`
	ConnectionID int64  `db:"connection_id"`
	Target       string `db:"target"`
	Model        string `db:"model"`
	Scope        string `db:"scope"`
	Reason       string `db:"reason"`
	FailureCount int    `db:"failure_count"`
	ExpiresAtMS  int64  `db:"expires_at"`
	UpdatedAt    int64  `db:"updated_at"`
}

// ListModelLockouts returns every stored lockout, expired ones included.
func ListModelLockouts(ctx context.Context, q Querier) ([]ModelLockout, error) {
	var out []ModelLockout
	err := q.SelectContext(ctx, &out, `SELECT provider, connection_id, target, model, scope, reason, failure_count,
		expires_at, updated_at FROM model_lockouts ORDER BY expires_at, provider, connection_id, target`)
	if err != nil {
		return nil, fmt.Errorf("list model lockouts: %w", err)
	}
	return out, nil
}

// SaveModelLockout upserts one lockout. A lockout of a connection deleted meanwhile is skipped,
// so one stale entry cannot fail a whole batch.
func SaveModelLockout(ctx context.Context, q Querier, l ModelLockout) error {
	_, err := q.ExecContext(ctx, `INSERT INTO model_lockouts (provider, connection_id, target, model, scope, reason,
		failure_count, expires_at, updated_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM provider_connections WHERE id = ?)
		ON CONFLICT (provider, connection_id, target) DO UPDATE SET model = excluded.model, scope = excluded.scope,
		reason = excluded.reason, failure_count = excluded.failure_count, expires_at = excluded.expires_at,
		updated_at = excluded.updated_at`,
		l.Provider, l.ConnectionID, l.Target, l.Model, l.Scope, l.Reason, l.FailureCount, l.ExpiresAtMS, nowMS(),
		l.ConnectionID)
	if err != nil {
		return fmt.Errorf("save model lockout %s/%d/%s: %w", l.Provider, l.ConnectionID, l.Target, err)
	}
	return nil
}

// DeleteModelLockout deletes one lockout; deleting a missing one is not an error.
func DeleteModelLockout(ctx context.Context, q Querier, provider string, connectionID int64, target string) error {
	_, err := q.ExecContext(ctx, `DELETE FROM model_lockouts WHERE provider = ? AND connection_id = ? AND target = ?`,
		provider, connectionID, target)
	if err != nil {
		return fmt.Errorf("delete model lockout %s/%d/%s: %w", provider, connectionID, target, err)
	}
	return nil
}
