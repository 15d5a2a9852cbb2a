package db

import (
	"context"
	"database/sql"
	"fmt"
)

// Connection is one row of provider_connections. Secret is the sealed credential.
type Connection struct {
	ID            int64         `db:"id"`
	ProviderID    int64         `db:"provider_id"`
	Name          string        `db:"name"`
	AuthType      string        `db:"auth_type"`
	Secret        []byte        `db:"secret"`
	Priority      int           `db:"priority"`
	MaxConcurrent sql.NullInt64 `db:"max_concurrent"`
	Overrides     string        `db:"overrides"` // JSON of the per-connection overrides
	Enabled       bool          `db:"enabled"`
	// LowPriorityLane and LimitReset are the Claude subscription toggles (OAuth connections).
	LowPriorityLane bool  `db:"low_priority_lane"`
	LimitReset      bool  `db:"limit_reset"`
	CreatedAt       int64 `db:"created_at"`
	UpdatedAt       int64 `db:"updated_at"`
}

const connectionCols = `id, provider_id, name, auth_type, secret, priority, max_concurrent, overrides, enabled,
	low_priority_lane, limit_reset, created_at, updated_at`

// ListConnections returns every connection ordered by provider, priority and id.
func ListConnections(ctx context.Context, q Querier) ([]Connection, error) {
	return selectRows[Connection](ctx, q, "list connections",
		`SELECT `+connectionCols+` FROM provider_connections ORDER BY provider_id, priority, id`)
}

// GetConnection returns one connection by id.
func GetConnection(ctx context.Context, q Querier, id int64) (Connection, error) {
	return getRow[Connection](ctx, q, fmt.Sprintf("get connection %d", id),
		`SELECT `+connectionCols+` FROM provider_connections WHERE id = ?`, id)
}

// InsertConnection creates a connection and sets its id and timestamps.
func InsertConnection(ctx context.Context, q Querier, c *Connection) error {
	if c.Overrides == "" {
		c.Overrides = "{}"
	}
	return insertStamped(ctx, q, &c.ID, &c.CreatedAt, &c.UpdatedAt, "insert connection",
		`INSERT INTO provider_connections
		(provider_id, name, auth_type, secret, priority, max_concurrent, overrides, enabled, low_priority_lane, limit_reset,
		 created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ProviderID, c.Name, c.AuthType, c.Secret, c.Priority, c.MaxConcurrent, c.Overrides, c.Enabled, c.LowPriorityLane,
		c.LimitReset)
}

// UpdateConnection writes every mutable column of c.
func UpdateConnection(ctx context.Context, q Querier, c *Connection) error {
	c.UpdatedAt = nowMS()
	return execOne(ctx, q, fmt.Sprintf("update connection %d", c.ID), "connection",
		`UPDATE provider_connections SET provider_id = ?, name = ?, auth_type = ?, secret = ?,
		priority = ?, max_concurrent = ?, overrides = ?, enabled = ?, low_priority_lane = ?, limit_reset = ?, updated_at = ?
		WHERE id = ?`,
		c.ProviderID, c.Name, c.AuthType, c.Secret, c.Priority, c.MaxConcurrent, c.Overrides, c.Enabled, c.LowPriorityLane,
		c.LimitReset, c.UpdatedAt, c.ID)
}

// UpdateConnectionSecret replaces only the sealed credential of a connection (a rotated OAuth
// token pair), leaving every other column as it is.
func UpdateConnectionSecret(ctx context.Context, q Querier, id int64, secret []byte) error {
	return execOne(ctx, q, fmt.Sprintf("update connection %d secret", id), "connection",
		`UPDATE provider_connections SET secret = ?, updated_at = ? WHERE id = ?`, secret, nowMS(), id)
}

// DeleteConnection removes one connection.
func DeleteConnection(ctx context.Context, q Querier, id int64) error {
	return execOne(ctx, q, fmt.Sprintf("delete connection %d", id), "connection",
		`DELETE FROM provider_connections WHERE id = ?`, id)
}
