package db

import (
	"context"
	"database/sql"
	"fmt"
)

// ClientKey is one row of client_keys; only the hash of the key is stored.
type ClientKey struct {
	ID         int64         `db:"id"`
	Name       string        `db:"name"`
	Prefix     string        `db:"prefix"`
	KeyHash    string        `db:"key_hash"`
	CreatedAt  int64         `db:"created_at"`
	LastUsedAt sql.NullInt64 `db:"last_used_at"`
	RevokedAt  sql.NullInt64 `db:"revoked_at"`
	// AllowedModels, Scopes and AllowedConnections are JSON arrays (see migration 0013).
	AllowedModels      string `db:"allowed_models"`
	Scopes             string `db:"scopes"`
	AllowedConnections string `db:"allowed_connections"`
	// Limits is a JSON object of the key's limits (see migration 0017); {} = none.
	Limits string `db:"limits"`
}

const clientKeyCols = `id, name, prefix, key_hash, created_at, last_used_at, revoked_at, allowed_models, scopes, allowed_connections, limits`

// ListClientKeys returns every key, newest first.
func ListClientKeys(ctx context.Context, q Querier) ([]ClientKey, error) {
	return selectRows[ClientKey](ctx, q, "list client keys",
		`SELECT `+clientKeyCols+` FROM client_keys ORDER BY id DESC`)
}

// GetClientKey returns one key by id.
func GetClientKey(ctx context.Context, q Querier, id int64) (ClientKey, error) {
	return getRow[ClientKey](ctx, q, fmt.Sprintf("get client key %d", id),
		`SELECT `+clientKeyCols+` FROM client_keys WHERE id = ?`, id)
}

// InsertClientKey stores a new key hash with its access lists and sets its id.
func InsertClientKey(ctx context.Context, q Querier, k *ClientKey) error {
	k.CreatedAt = nowMS()
	return insertRow(ctx, q, &k.ID, "insert client key",
		`INSERT INTO client_keys (name, prefix, key_hash, created_at, allowed_models, scopes, allowed_connections, limits)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		k.Name, k.Prefix, k.KeyHash, k.CreatedAt, jsonList(k.AllowedModels), jsonList(k.Scopes), jsonList(k.AllowedConnections), jsonObject(k.Limits))
}

// UpdateClientKey writes a key's name, access lists and limits.
func UpdateClientKey(ctx context.Context, q Querier, k ClientKey) error {
	return execOne(ctx, q, fmt.Sprintf("update client key %d", k.ID), "client key",
		`UPDATE client_keys SET name = ?, allowed_models = ?, scopes = ?, allowed_connections = ?, limits = ? WHERE id = ?`,
		k.Name, jsonList(k.AllowedModels), jsonList(k.Scopes), jsonList(k.AllowedConnections), jsonObject(k.Limits), k.ID)
}

// jsonList stores an empty list as [] (the column's default), never as "".
func jsonList(s string) string {
	if s == "" {
		return "[]"
	}
	return s
}

// jsonObject stores an empty object as {} (the column's default), never as "".
func jsonObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

// RevokeClientKey marks a key revoked; revoking twice keeps the first time.
func RevokeClientKey(ctx context.Context, q Querier, id int64) error {
	return execOne(ctx, q, fmt.Sprintf("revoke client key %d", id), "client key",
		`UPDATE client_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, nowMS(), id)
}

// TouchClientKeys records last-used times in one statement per key; callers batch them.
func TouchClientKeys(ctx context.Context, q Querier, lastUsed map[int64]int64) error {
	for id, at := range lastUsed {
		if _, err := q.ExecContext(ctx, `UPDATE client_keys SET last_used_at = CASE WHEN last_used_at > ? THEN last_used_at ELSE ? END
			WHERE id = ?`, at, at, id); err != nil {
			return fmt.Errorf("touch client key %d: %w", id, err)
		}
	}
	return nil
}
