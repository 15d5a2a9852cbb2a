package resilience

import (
	"context"

	"github.com/jmoiron/sqlx"

	"switchyard/db"
)

// LoadBreakerStates reads every stored breaker state (at start; hand it to Breakers.Load).
func LoadBreakerStates(ctx context.Context, d *db.DB) ([]BreakerState, error) {
	rows, err := db.ListBreakerStates(ctx, d.W)
	if err != nil {
		return nil, err
	}
	out := make([]BreakerState, len(rows))
	for i, r := range rows {
		out[i] = BreakerState{Provider: r.Provider, Model: r.Model, State: CircuitState(r.State),
			OpenedAt: fromMS(r.OpenedAt), NextProbeAt: fromMS(r.NextProbeAt), ConsecutiveFailures: r.ConsecutiveFailures,
			LastFailure: r.LastFailure, LastFailureAt: fromMS(r.LastFailureAt)}
	}
	return out, nil
}

// SaveBreakerStates writes a batch of changed states in one transaction.
func SaveBreakerStates(ctx context.Context, d *db.DB, batch map[BreakerKey]BreakerState) error {
	return d.WithTx(ctx, func(tx *sqlx.Tx) error {
		for k, s := range batch {
			state := s.State
			if state == CircuitNone {
				state = CircuitClosed
			}
			row := db.BreakerState{Provider: k.Provider, Model: k.Model, State: string(state),
				OpenedAt: unixMS(s.OpenedAt), NextProbeAt: unixMS(s.NextProbeAt), ConsecutiveFailures: s.ConsecutiveFailures,
				LastFailure: s.LastFailure, LastFailureAt: unixMS(s.LastFailureAt)}
			if err := db.SaveBreakerState(ctx, tx, row); err != nil {
				return err
			}
		}
		return nil
	})
}
