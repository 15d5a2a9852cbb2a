package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Session is one row of sessions: a dashboard login, found by the SHA-256 of its cookie's id.
type Session struct {
	IDHash     string `db:"id_hash"`
	CreatedAt  int64  `db:"created_at"`
	LastSeenAt int64  `db:"last_seen_at"`
	Flashes    string `db:"flashes"` // JSON array
}

// InsertSession stores a new session.
func InsertSession(ctx context.Context, q Querier, s Session) error {
	if s.Flashes == "" {
		s.Flashes = "[]"
	}
	_, err := q.ExecContext(ctx, `INSERT INTO sessions (id_hash, created_at, last_seen_at, flashes) VALUES (?, ?, ?, ?)`,
		s.IDHash, s.CreatedAt, s.LastSeenAt, s.Flashes)
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// GetSession reads one session; ErrNotFound when there is none.
func GetSession(ctx context.Context, q Querier, idHash string) (Session, error) {
	return getRow[Session](ctx, q, "get session",
		`SELECT id_hash, created_at, last_seen_at, flashes FROM sessions WHERE id_hash = ?`, idHash)
}

// TouchSession records a use of the session; a time earlier than the stored one is ignored.
func TouchSession(ctx context.Context, q Querier, idHash string, at int64) error {
	_, err := q.ExecContext(ctx, `UPDATE sessions SET last_seen_at = CASE WHEN last_seen_at > ? THEN last_seen_at ELSE ? END WHERE id_hash = ?`,
		at, at, idHash)
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// AppendSessionFlash adds one message ({"kind", "text"} as JSON) to the session's flashes.
func AppendSessionFlash(ctx context.Context, q Querier, idHash, flashJSON string) error {
	_, err := q.ExecContext(ctx, `UPDATE sessions SET flashes = CASE WHEN flashes = '[]' THEN '[' || ? || ']'
		ELSE substr(flashes, 1, length(flashes) - 1) || ',' || ? || ']' END WHERE id_hash = ?`,
		flashJSON, flashJSON, idHash)
	if err != nil {
		return fmt.Errorf("add session flash: %w", err)
	}
	return nil
}

// TakeSessionFlashes returns the session's flashes and empties them; run it in a transaction so
// no message is shown twice or lost.
func TakeSessionFlashes(ctx context.Context, q Querier, idHash string) (string, error) {
	var flashes string
	err := q.GetContext(ctx, &flashes, `SELECT flashes FROM sessions WHERE id_hash = ?`, idHash)
	if errors.Is(err, sql.ErrNoRows) {
		return "[]", nil
	}
	if err != nil {
		return "", fmt.Errorf("take session flashes: %w", err)
	}
	if flashes == "[]" {
		return flashes, nil
	}
	if _, err := q.ExecContext(ctx, `UPDATE sessions SET flashes = '[]' WHERE id_hash = ?`, idHash); err != nil {
		return "", fmt.Errorf("take session flashes: %w", err)
	}
	return flashes, nil
}

// DeleteSession removes one session (logout); removing one that is gone is no error.
func DeleteSession(ctx context.Context, q Querier, idHash string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM sessions WHERE id_hash = ?`, idHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteAllSessions removes every session and returns how many there were.
func DeleteAllSessions(ctx context.Context, q Querier) (int64, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM sessions`)
	if err != nil {
		return 0, fmt.Errorf("delete sessions: %w", err)
	}
	return res.RowsAffected()
}

// DeleteExpiredSessions removes sessions created before createdBefore or last seen before
// seenBefore (unix ms).
func DeleteExpiredSessions(ctx context.Context, q Querier, createdBefore, seenBefore int64) error {
	_, err := q.ExecContext(ctx, `DELETE FROM sessions WHERE created_at < ? OR last_seen_at < ?`, createdBefore, seenBefore)
	if err != nil {
		return fmt.Errorf("delete expired sessions: %w", err)
	}
	return nil
}
