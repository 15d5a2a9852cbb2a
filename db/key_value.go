package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// GetValue reads one key; ok is false when it is absent.
func GetValue(ctx context.Context, q Querier, key string) (string, bool, error) {
	var v string
	err := q.GetContext(ctx, &v, `SELECT value FROM key_value WHERE key = ?`, key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("get value %s: %w", key, err)
	}
	return v, true, nil
}

// PutValue writes one key, replacing any earlier value.
func PutValue(ctx context.Context, q Querier, key, value string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO key_value (key, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		key, value, nowMS())
	if err != nil {
		return fmt.Errorf("put value %s: %w", key, err)
	}
	return nil
}

// KV adapts the database to the key/value store interfaces services declare.
type KV struct{ DB *DB }

// GetValue reads one key from the reader pool.
func (k KV) GetValue(ctx context.Context, key string) (string, bool, error) {
	return GetValue(ctx, k.DB.W, key)
}

// PutValue writes one key.
func (k KV) PutValue(ctx context.Context, key, value string) error {
	return PutValue(ctx, k.DB.W, key, value)
}

// SaveRevision writes value under key and appends a numbered revision row, in one transaction.
func (k KV) SaveRevision(ctx context.Context, key, value string) (int64, error) {
	var rev int64
	err := k.DB.WithTx(ctx, func(tx *Tx) error {
		if err := tx.GetContext(ctx, &rev,
			`SELECT COALESCE(MAX(revision), 0) + 1 FROM key_value_revisions WHERE key = ?`, key); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO key_value_revisions (key, revision, value, created_at)
			VALUES (?, ?, ?, ?)`, key, rev, value, nowMS()); err != nil {
			return err
		}
		return PutValue(ctx, tx, key, value)
	})
	if err != nil {
		return 0, fmt.Errorf("save revision %s: %w", key, err)
	}
	return rev, nil
}

// Revision returns the latest revision number saved under key, 0 when none.
func (k KV) Revision(ctx context.Context, key string) (int64, error) {
	var rev int64
	err := k.DB.W.GetContext(ctx, &rev, `SELECT COALESCE(MAX(revision), 0) FROM key_value_revisions WHERE key = ?`, key)
	if err != nil {
		return 0, fmt.Errorf("revision %s: %w", key, err)
	}
	return rev, nil
}
