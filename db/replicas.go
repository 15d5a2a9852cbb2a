package db

import (
	"context"
	"fmt"
)

// Replica is one row of replicas: a running process of the gateway on this database and its
// latest heartbeat. Times are unix milliseconds.
type Replica struct {
	ID          string `db:"id"`
	Name        string `db:"name"`
	Addr        string `db:"addr"`
	Version     string `db:"version"`
	StartedAt   int64  `db:"started_at"`
	HeartbeatAt int64  `db:"heartbeat_at"`
	CapMode     string `db:"cap_mode"`
}

const replicaCols = `id, name, addr, version, started_at, heartbeat_at, cap_mode`

// UpsertReplica writes a replica's heartbeat: its row is made at the first beat and made again
// after another replica pruned it (the process was paused, or cut off from the store, for
// longer than the others wait); started_at keeps the value of the first beat.
func UpsertReplica(ctx context.Context, q Querier, r Replica) error {
	_, err := q.ExecContext(ctx, `INSERT INTO replicas (`+replicaCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, addr = excluded.addr, version = excluded.version,
			heartbeat_at = excluded.heartbeat_at, cap_mode = excluded.cap_mode`,
		r.ID, r.Name, r.Addr, r.Version, r.StartedAt, r.HeartbeatAt, r.CapMode)
	if err != nil {
		return fmt.Errorf("write heartbeat of replica %s: %w", r.ID, err)
	}
	return nil
}

// ListReplicas returns every replica row, by name.
func ListReplicas(ctx context.Context, q Querier) ([]Replica, error) {
	return selectRows[Replica](ctx, q, "list replicas", `SELECT `+replicaCols+` FROM replicas ORDER BY name, id`)
}

// DeleteReplica removes one replica's row (a process that stops); ErrNotFound when it has none.
func DeleteReplica(ctx context.Context, q Querier, id string) error {
	return execOne(ctx, q, "delete replica "+id, "replica", `DELETE FROM replicas WHERE id = ?`, id)
}

// DeleteStaleReplicas removes the rows whose last heartbeat is older than before (unix ms): the
// processes that ended without removing their own. It returns how many went.
func DeleteStaleReplicas(ctx context.Context, q Querier, before int64) (int64, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM replicas WHERE heartbeat_at < ?`, before)
	if err != nil {
		return 0, fmt.Errorf("prune replicas: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune replicas: %w", err)
	}
	return n, nil
}
