package db_test

import (
	"context"
	"errors"
	"testing"

	"switchyard/db"
	"switchyard/db/dbtest"
)

// A heartbeat makes the row and then moves it on without touching started_at; stale rows are
// pruned by their last heartbeat; a replica removes its own row once (then it is not found).
func TestReplicaRows(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	a := db.Replica{ID: "a1", Name: "host-a :8080", Addr: ":8080", Version: "v1", StartedAt: 1000, HeartbeatAt: 1000, CapMode: "share"}
	b := db.Replica{ID: "b1", Name: "host-b :8080", Addr: ":8080", Version: "v1", StartedAt: 2000, HeartbeatAt: 2000, CapMode: "share"}
	for _, r := range []db.Replica{a, b} {
		if err := db.UpsertReplica(ctx, d.W, r); err != nil {
			t.Fatal(err)
		}
	}
	a2 := a
	a2.HeartbeatAt, a2.StartedAt, a2.Version, a2.CapMode = 9000, 8000, "v2", "redis"
	if err := db.UpsertReplica(ctx, d.W, a2); err != nil {
		t.Fatal(err)
	}
	got, err := db.ListReplicas(ctx, d.R)
	if err != nil {
		t.Fatal(err)
	}
	want := a2
	want.StartedAt = 1000 // the first beat's
	if len(got) != 2 || got[0] != want || got[1] != b {
		t.Fatalf("rows %+v, want %+v and %+v", got, want, b)
	}

	n, err := db.DeleteStaleReplicas(ctx, d.W, 2000) // b's heartbeat is at 2000: not older
	if err != nil || n != 0 {
		t.Fatalf("pruned %d at the boundary: %v", n, err)
	}
	n, err = db.DeleteStaleReplicas(ctx, d.W, 2001)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, want b: %v", n, err)
	}
	if got, _ := db.ListReplicas(ctx, d.R); len(got) != 1 || got[0].ID != "a1" {
		t.Fatalf("after pruning %+v", got)
	}

	if err := db.DeleteReplica(ctx, d.W, "a1"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteReplica(ctx, d.W, "a1"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("deleting a missing row: %v, want ErrNotFound", err)
	}
	if got, err := db.ListReplicas(ctx, d.R); err != nil || len(got) != 0 {
		t.Fatalf("rows left %+v %v", got, err)
	}
}
