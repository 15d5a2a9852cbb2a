package resilience

import (
	"context"

	"github.com/jmoiron/sqlx"

	"switchyard/db"
)

// LoadLockouts reads every stored model lockout (at start); Lockouts.Load drops the expired.
func LoadLockouts(ctx context.Context, d *db.DB) ([]Lockout, error) {
	rows, err := db.ListModelLockouts(ctx, d.W)
	if err != nil {
		return nil, err
	}
	out := make([]Lockout, len(rows))
	for i, r := range rows {
		out[i] = Lockout{Provider: r.Provider, ConnectionID: r.ConnectionID, Model: r.Model, Target: r.Target,
			Scope: LockoutScope(r.Scope), Reason: r.Reason, FailureCount: r.FailureCount, ExpiresAt: fromMS(r.ExpiresAtMS)}
	}
	return out, nil
}

// SaveLockouts writes a batch of changed lockouts in one transaction; nil deletes the row.
func SaveLockouts(ctx context.Context, d *db.DB, batch map[LockoutKey]*Lockout) error {
	return d.WithTx(ctx, func(tx *sqlx.Tx) error {
		for k, l := range batch {
			if l == nil {
				if err := db.DeleteModelLockout(ctx, tx, k.Provider, k.ConnectionID, k.Target); err != nil {
					return err
				}
				continue
			}
			row := db.ModelLockout{Provider: k.Provider, ConnectionID: k.ConnectionID, Target: k.Target, Model: l.Model,
				Scope: string(l.Scope), Reason: l.Reason, FailureCount: l.FailureCount, ExpiresAtMS: unixMS(l.ExpiresAt)}
			if err := db.SaveModelLockout(ctx, tx, row); err != nil {
				return err
			}
		}
		return nil
	})
}
