package statestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"

	"switchyard/db"
	"switchyard/services/writebehind"
)

// SQLite is the Store on the gateway's own database: changes are coalesced by record and
// written in batches, one transaction each, by Run.
type SQLite struct {
	db    *db.DB
	queue *writebehind.Queue[recordKey, Record]
	// written hears every record once its batch committed (OnWritten).
	written func(Record)
}

type recordKey struct {
	kind Kind
	key  string
}

var _ Store = (*SQLite)(nil)

// NewSQLite builds the store; Run must be started for changes to be written without Sync.
func NewSQLite(d *db.DB, log *slog.Logger) *SQLite {
	s := &SQLite{db: d}
	s.queue = writebehind.New("resilience_state", log, s.write)
	return s
}

// OnWritten sets fn to hear every record once it is committed: replicas broadcast what they
// wrote, so a replica that (re)connects and reads the store never misses a record whose message
// went out before it listened. Set it before Run starts.
func (s *SQLite) OnWritten(fn func(Record)) { s.written = fn }

// Put queues the record's newest value.
func (s *SQLite) Put(r Record) { s.queue.Put(recordKey{r.Kind, r.Key}, r) }

// Sync writes everything pending now.
func (s *SQLite) Sync(ctx context.Context) error { return s.queue.Flush(ctx) }

// Run writes batches as changes arrive until ctx ends, then writes what is left.
func (s *SQLite) Run(ctx context.Context) { s.queue.Run(ctx) }

// Load reads every record of a kind.
func (s *SQLite) Load(ctx context.Context, kind Kind, each func(raw []byte) error) error {
	rows, err := db.ListState(ctx, s.db.W, string(kind))
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := each([]byte(r.Value)); err != nil {
			return err
		}
	}
	return nil
}

func (s *SQLite) write(ctx context.Context, batch map[recordKey]Record) error {
	err := s.db.WithTx(ctx, func(tx *db.Tx) error {
		for k, r := range batch {
			if r.Value == nil {
				if err := db.DeleteState(ctx, tx, string(k.kind), k.key); err != nil {
					return err
				}
				continue
			}
			v, err := json.Marshal(r.Value)
			if err != nil {
				return fmt.Errorf("encode %s state %q: %w", k.kind, k.key, err)
			}
			row := db.StateRow{Kind: string(k.kind), Key: k.key, Value: string(v),
				Provider:     sql.NullString{String: r.Provider, Valid: r.Provider != ""},
				ConnectionID: sql.NullInt64{Int64: r.ConnectionID, Valid: r.ConnectionID != 0}}
			if err := db.SaveState(ctx, tx, row); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && s.written != nil {
		for _, r := range batch {
			s.written(r)
		}
	}
	return err
}
