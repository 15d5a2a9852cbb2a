package db

import (
	"context"
	"fmt"
)

// ConnectionState is one row of connection_state.
type ConnectionState struct {
	ConnectionID  int64  `db:"connection_id"`
	Terminal      string `db:"terminal"`
	UntilMS       int64  `db:"until_ms"`
	BackoffLevel  int    `db:"backoff_level"`
	LastError     string `db:"last_error"`
	LastErrorType string `db:"last_error_type"`
	ErrorCode     int    `db:"error_code"`
	LastErrorAt   int64  `db:"last_error_at"`
	Rejections    int    `db:"rejections"`
	Probes        int    `db:"probes"`
	NextProbeMS   int64  `db:"next_probe_ms"`
	FromUpstream  bool   `db:"from_upstream"`
}

// ListConnectionStates returns every stored connection state.
func ListConnectionStates(ctx context.Context, q Querier) ([]ConnectionState, error) {
	var out []ConnectionState
	err := q.SelectContext(ctx, &out, `SELECT connection_id, terminal, until_ms, backoff_level, last_error, last_error_type,
		error_code, last_error_at, rejections, probes, next_probe_ms, from_upstream FROM connection_state`)
	if err != nil {
		return nil, fmt.Errorf("list connection states: %w", err)
	}
	return out, nil
}

// SaveConnectionState upserts one state; a state with nothing left to remember is deleted.
// A state of a connection deleted meanwhile is skipped.
func SaveConnectionState(ctx context.Context, q Querier, s ConnectionState) error {
	if s.Terminal == "" && s.UntilMS == 0 && s.BackoffLevel == 0 && s.LastError == "" && s.Rejections == 0 {
		_, err := q.ExecContext(ctx, `DELETE FROM connection_state WHERE connection_id = ?`, s.ConnectionID)
		return err
	}
	_, err := q.ExecContext(ctx, `INSERT INTO connection_state (connection_id, terminal, until_ms, backoff_level, last_error,
		last_error_type, error_code, last_error_at, rejections, probes, next_probe_ms, from_upstream, updated_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM provider_connections WHERE id = ?)
		ON CONFLICT (connection_id) DO UPDATE SET terminal = excluded.terminal, until_ms = excluded.until_ms,
		backoff_level = excluded.backoff_level, last_error = excluded.last_error, last_error_type = excluded.last_error_type,
		error_code = excluded.error_code, last_error_at = excluded.last_error_at, rejections = excluded.rejections,
		probes = excluded.probes, next_probe_ms = excluded.next_probe_ms, from_upstream = excluded.from_upstream,
		updated_at = excluded.updated_at`,
		s.ConnectionID, s.Terminal, s.UntilMS, s.BackoffLevel, s.LastError, s.LastErrorType, s.ErrorCode, s.LastErrorAt,
		s.Rejections, s.Probes, s.NextProbeMS, s.FromUpstream, nowMS(), s.ConnectionID)
	if err != nil {
		return fmt.Errorf("save connection state %d: %w", s.ConnectionID, err)
	}
	return nil
}
