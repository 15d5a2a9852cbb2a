package db

import (
	"context"
	"testing"
)

// A lease is one owner's until it expires or is released; an expired one goes to the next.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	d := openTestDB(t, ctx, -1)
	try := func(owner string, now int64) bool {
		t.Helper()
		ok, err := TryLease(ctx, d.W, "refresh:1", owner, now, now+1000)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !try("a", 0) || try("b", 500) || !try("a", 600) {
		t.Fatal("a fresh lease must be a's, refused to b, renewable by a")
	}
	if try("b", 1500) || !try("b", 1600) {
		t.Fatal("a's renewed lease runs to 1600 and then goes to b")
	}
	if err := ReleaseLease(ctx, d.W, "refresh:1", "a"); err != nil || try("a", 1700) {
		t.Fatal("a release by a former owner must not end b's lease")
	}
	if err := ReleaseLease(ctx, d.W, "refresh:1", "b"); err != nil || !try("a", 1700) {
		t.Fatal("a released lease is free at once")
	}
}

// Pruning deletes the leases that ended and keeps the running ones; a pruned name is free.
func TestPruneLeases(t *testing.T) {
	ctx := context.Background()
	d := openTestDB(t, ctx, -1)
	for name, expires := range map[string]int64{"ended": 1000, "ends-now": 2000, "running": 3000} {
		if ok, err := TryLease(ctx, d.W, name, "a", 0, expires); err != nil || !ok {
			t.Fatalf("take %s: %v %v", name, ok, err)
		}
	}
	if err := PruneLeases(ctx, d.W, 2000); err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := d.R.SelectContext(ctx, &names, `SELECT name FROM leases ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "running" {
		t.Fatalf("left %v, want only the running lease", names)
	}
	if ok, err := TryLease(ctx, d.W, "running", "b", 2000, 4000); err != nil || ok {
		t.Fatalf("the running lease must stay a's: %v %v", ok, err)
	}
	if ok, err := TryLease(ctx, d.W, "ended", "b", 2000, 4000); err != nil || !ok {
		t.Fatalf("a pruned lease is free: %v %v", ok, err)
	}
}

// Ranges of ids never overlap and start after the table's newest id.
func TestReserveIDs(t *testing.T) {
	ctx := context.Background()
	d := openTestDB(t, ctx, -1)
	w := newTestLogWriter(t, ctx, d)
	if err := d.WithTx(ctx, func(tx *Tx) error { return w.Insert(ctx, tx, benchRows(3, 40)) }); err != nil {
		t.Fatal(err)
	}
	first, err := ReserveIDs(ctx, d.W, "request_log", "request_log", 10)
	if err != nil || first != 43 {
		t.Fatalf("first range starts at %d (%v), want 43", first, err)
	}
	if next, err := ReserveIDs(ctx, d.W, "request_log", "request_log", 5); err != nil || next != 53 {
		t.Fatalf("second range starts at %d (%v), want 53", next, err)
	}
}
