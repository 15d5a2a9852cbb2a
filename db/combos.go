package db

import (
	"context"
	"fmt"
)

// Combo is one row of combos. Targets is the JSON array of the combo's targets, in order.
type Combo struct {
	ID                  int64  `db:"id"`
	Name                string `db:"name"`
	Strategy            string `db:"strategy"`
	Targets             string `db:"targets"`
	MaxAttempts         int    `db:"max_attempts"`
	TargetTimeoutMS     int64  `db:"target_timeout_ms"`
	WaitUntilReset      bool   `db:"wait_until_reset"`
	WaitUntilResetMaxMS int64  `db:"wait_until_reset_max_ms"`
	CreatedAt           int64  `db:"created_at"`
	UpdatedAt           int64  `db:"updated_at"`
}

const comboCols = `id, name, strategy, targets, max_attempts, target_timeout_ms, wait_until_reset,
	wait_until_reset_max_ms, created_at, updated_at`

// ListCombos returns every combo ordered by name.
func ListCombos(ctx context.Context, q Querier) ([]Combo, error) {
	return selectRows[Combo](ctx, q, "list combos", `SELECT `+comboCols+` FROM combos ORDER BY name`)
}

// GetCombo returns one combo by id.
func GetCombo(ctx context.Context, q Querier, id int64) (Combo, error) {
	return getRow[Combo](ctx, q, fmt.Sprintf("get combo %d", id),
		`SELECT `+comboCols+` FROM combos WHERE id = ?`, id)
}

// InsertCombo creates a combo and sets its id and timestamps.
func InsertCombo(ctx context.Context, q Querier, c *Combo) error {
	return insertStamped(ctx, q, &c.ID, &c.CreatedAt, &c.UpdatedAt, "insert combo",
		`INSERT INTO combos (name, strategy, targets, max_attempts, target_timeout_ms,
		wait_until_reset, wait_until_reset_max_ms, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.Name, c.Strategy, c.Targets, c.MaxAttempts, c.TargetTimeoutMS, c.WaitUntilReset, c.WaitUntilResetMaxMS)
}

// UpdateCombo writes every mutable column of c.
func UpdateCombo(ctx context.Context, q Querier, c *Combo) error {
	c.UpdatedAt = nowMS()
	return execOne(ctx, q, fmt.Sprintf("update combo %d", c.ID), "combo",
		`UPDATE combos SET name = ?, strategy = ?, targets = ?, max_attempts = ?,
		target_timeout_ms = ?, wait_until_reset = ?, wait_until_reset_max_ms = ?, updated_at = ? WHERE id = ?`,
		c.Name, c.Strategy, c.Targets, c.MaxAttempts, c.TargetTimeoutMS, c.WaitUntilReset, c.WaitUntilResetMaxMS,
		c.UpdatedAt, c.ID)
}

// DeleteCombo removes one combo.
func DeleteCombo(ctx context.Context, q Querier, id int64) error {
	return execOne(ctx, q, fmt.Sprintf("delete combo %d", id), "combo",
		`DELETE FROM combos WHERE id = ?`, id)
}
