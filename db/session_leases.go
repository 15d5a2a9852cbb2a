package db

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// SessionLease is one row of session_leases: an owner's exclusive hold on a connection until
// ExpiresAt. Only the SHA-256 of the owner token is stored.
type SessionLease struct {
	ID           int64  `db:"id"`
	ConnectionID int64  `db:"connection_id"`
	OwnerHash    string `db:"owner_hash"`
	ClientKeyID  int64  `db:"client_key_id"`
	Generation   int64  `db:"generation"`
	AcquiredAt   int64  `db:"acquired_at"`
	ExpiresAt    int64  `db:"expires_at"`
}

const sessionLeaseCols = `id, connection_id, owner_hash, client_key_id, generation, acquired_at, expires_at`

// ListSessionLeases returns every lease row, expired ones included.
func ListSessionLeases(ctx context.Context, q Querier) ([]SessionLease, error) {
	return selectRows[SessionLease](ctx, q, "list session leases",
		`SELECT `+sessionLeaseCols+` FROM session_leases ORDER BY id`)
}

// SessionLeaseByOwner returns the lease of an owner token's hash, expired or not.
func SessionLeaseByOwner(ctx context.Context, q Querier, ownerHash string) (SessionLease, error) {
	return getRow[SessionLease](ctx, q, "get session lease",
		`SELECT `+sessionLeaseCols+` FROM session_leases WHERE owner_hash = ?`, ownerHash)
}

// DeleteExpiredSessionLease removes the lease on a connection when its time ran out by now (unix
// ms), so the connection can be leased again.
func DeleteExpiredSessionLease(ctx context.Context, q Querier, connectionID, now int64) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM session_leases WHERE connection_id = ? AND expires_at <= ?`, connectionID, now); err != nil {
		return fmt.Errorf("delete expired lease of connection %d: %w", connectionID, err)
	}
	return nil
}

// InsertSessionLease stores a lease and sets its id. ErrConflict when the connection (or the
// owner) already has a lease: the UNIQUE constraints decide, inside the caller's transaction.
func InsertSessionLease(ctx context.Context, q Querier, l *SessionLease) error {
	return insertRow(ctx, q, &l.ID, "insert session lease",
		`INSERT INTO session_leases (connection_id, owner_hash, client_key_id, generation, acquired_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?)`, l.ConnectionID, l.OwnerHash, l.ClientKeyID, l.Generation, l.AcquiredAt, l.ExpiresAt)
}

// RenewSessionLease sets a lease's expiry.
func RenewSessionLease(ctx context.Context, q Querier, id, expiresAt int64) error {
	return execOne(ctx, q, fmt.Sprintf("renew session lease %d", id), "session lease",
		`UPDATE session_leases SET expires_at = ? WHERE id = ?`, expiresAt, id)
}

// DeleteSessionLease removes one lease by id.
func DeleteSessionLease(ctx context.Context, q Querier, id int64) error {
	return execOne(ctx, q, fmt.Sprintf("delete session lease %d", id), "session lease",
		`DELETE FROM session_leases WHERE id = ?`, id)
}

// EarliestSessionLeaseExpiry is the earliest expiry (unix ms) of the unexpired leases on the
// given connections; ok is false when none of them is leased.
func EarliestSessionLeaseExpiry(ctx context.Context, q Querier, connectionIDs []int64, now int64) (at int64, ok bool, err error) {
	if len(connectionIDs) == 0 {
		return 0, false, nil
	}
	args := make([]any, 0, len(connectionIDs)+1)
	args = append(args, now)
	for _, id := range connectionIDs {
		args = append(args, id)
	}
	var v sql.NullInt64
	err = q.GetContext(ctx, &v, `SELECT MIN(expires_at) FROM session_leases WHERE expires_at > ? AND connection_id IN (`+
		placeholders(len(connectionIDs))+`)`, args...)
	if err != nil {
		return 0, false, fmt.Errorf("earliest lease expiry: %w", err)
	}
	return v.Int64, v.Valid, nil
}

// DeleteSessionLeasesOfKey removes a client key's leases, except those on the connections in
// keep; it returns how many went.
func DeleteSessionLeasesOfKey(ctx context.Context, q Querier, clientKeyID int64, keep []int64) (int64, error) {
	query := `DELETE FROM session_leases WHERE client_key_id = ?`
	args := []any{clientKeyID}
	if len(keep) > 0 {
		query += ` AND connection_id NOT IN (` + placeholders(len(keep)) + `)`
		for _, id := range keep {
			args = append(args, id)
		}
	}
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("delete leases of client key %d: %w", clientKeyID, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// placeholders is "?, ?, …" for n arguments.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
