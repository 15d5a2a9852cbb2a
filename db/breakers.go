package db

import (
	"context"
	"fmt"
)

// BreakerState is one row of breaker_state; Model is "" for a provider breaker.
type BreakerState struct {
	Provider            string `db:"provider"`
	Model               string `db:"model"`
	State               string `db:"state"`
	OpenedAt            int64  `db:"opened_at"`
	NextProbeAt         int64  `db:"next_probe_at"`
	ConsecutiveFailures int    `db:"consecutive_failures"`
	LastFailure         string `db:"last_failure"`
	LastFailureAt       int64  `db:"last_failure_at"`
	UpdatedAt           int64  `db:"updated_at"`
}

// ListBreakerStates returns every stored breaker state, by provider and model.
func ListBreakerStates(ctx context.Context, q Querier) ([]BreakerState, error) {
	var out []BreakerState
	err := q.SelectContext(ctx, &out, `SELECT provider, model, state, opened_at, next_probe_at, consecutive_failures,
		last_failure, last_failure_at, updated_at FROM breaker_state ORDER BY provider, model`)
	if err != nil {
		return nil, fmt.Errorf("list breaker states: %w", err)
	}
	return out, nil
}

// SaveBreakerState upserts one state (UpdatedAt is set here); a closed breaker without
// failures has nothing to remember and is deleted. A state of a provider that no longer exists
// (provider is providers.name) is skipped.
func SaveBreakerState(ctx context.Context, q Querier, s BreakerState) error {
	if (s.State == "" || s.State == "closed") && s.ConsecutiveFailures == 0 {
		_, err := q.ExecContext(ctx, `DELETE FROM breaker_state WHERE provider = ? AND model = ?`, s.Provider, s.Model)
		if err != nil {
			return fmt.Errorf("delete breaker state %s/%s: %w", s.Provider, s.Model, err)
		}
		return nil
	}
	_, err := q.ExecContext(ctx, `INSERT INTO breaker_state (provider, model, state, opened_at, next_probe_at,
		consecutive_failures, last_failure, last_failure_at, updated_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM providers WHERE name = ?)
		ON CONFLICT (provider, model) DO UPDATE SET state = excluded.state, opened_at = excluded.opened_at,
		next_probe_at = excluded.next_probe_at, consecutive_failures = excluded.consecutive_failures,
		last_failure = excluded.last_failure, last_failure_at = excluded.last_failure_at,
		updated_at = excluded.updated_at`,
		s.Provider, s.Model, s.State, s.OpenedAt, s.NextProbeAt, s.ConsecutiveFailures, s.LastFailure,
		s.LastFailureAt, nowMS(), s.Provider)
	if err != nil {
		return fmt.Errorf("save breaker state %s/%s: %w", s.Provider, s.Model, err)
	}
	return nil
}
