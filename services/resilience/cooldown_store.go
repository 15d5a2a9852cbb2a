package resilience

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"switchyard/db"
)

// LoadConnStates reads every stored connection state (at start).
func LoadConnStates(ctx context.Context, d *db.DB) ([]ConnState, error) {
	rows, err := db.ListConnectionStates(ctx, d.W)
	if err != nil {
		return nil, err
	}
	out := make([]ConnState, len(rows))
	for i, r := range rows {
		out[i] = ConnState{ConnectionID: r.ConnectionID, Terminal: Terminal(r.Terminal), Until: fromMS(r.UntilMS),
			Level: r.BackoffLevel, LastError: r.LastError, LastErrorType: Reason(r.LastErrorType), ErrorCode: r.ErrorCode,
			LastErrorAt: fromMS(r.LastErrorAt), Rejections: r.Rejections, Probes: r.Probes, NextProbe: fromMS(r.NextProbeMS),
			FromUpstream: r.FromUpstream}
	}
	return out, nil
}

// SaveConnStates writes a batch of changed states in one transaction.
func SaveConnStates(ctx context.Context, d *db.DB, batch map[int64]ConnState) error {
	return d.WithTx(ctx, func(tx *sqlx.Tx) error {
		for _, s := range batch {
			row := db.ConnectionState{ConnectionID: s.ConnectionID, Terminal: string(s.Terminal), UntilMS: unixMS(s.Until),
				BackoffLevel: s.Level, LastError: s.LastError, LastErrorType: string(s.LastErrorType), ErrorCode: s.ErrorCode,
				LastErrorAt: unixMS(s.LastErrorAt), Rejections: s.Rejections, Probes: s.Probes, NextProbeMS: unixMS(s.NextProbe),
				FromUpstream: s.FromUpstream}
			if err := db.SaveConnectionState(ctx, tx, row); err != nil {
				return err
			}
		}
		return nil
	})
}

func unixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}
