package db

import (
	"context"
	"path/filepath"
	"testing"
)

// openTestDB opens a database in tb's temporary directory, migrated up to migration version
// (-1: the newest), and closes it when tb ends.
func openTestDB(tb testing.TB, ctx context.Context, version int) *DB {
	tb.Helper()
	d, err := Open(filepath.Join(tb.TempDir(), "t.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	if _, err := d.MigrateTo(ctx, version); err != nil {
		tb.Fatal(err)
	}
	return d
}

// newTestLogWriter is a request log writer on d, closed when tb ends.
func newTestLogWriter(tb testing.TB, ctx context.Context, d *DB) *RequestLogWriter {
	tb.Helper()
	w, err := NewRequestLogWriter(ctx, d)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close() })
	return w
}

func TestMigrateFreshAndRerun(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.Migrate(ctx)
	if err != nil || n == 0 {
		t.Fatalf("first migrate: %d %v", n, err)
	}
	cur, want, err := d.SchemaVersion(ctx)
	if err != nil || cur != want {
		t.Fatalf("version %d/%d %v", cur, want, err)
	}
	provs, err := ListProviders(ctx, d.R)
	if err != nil || len(provs) != 2 {
		t.Fatalf("built-in providers: %v %v", provs, err)
	}
	d.Close()
	d, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n, err := d.Migrate(ctx); err != nil || n != 0 {
		t.Fatalf("re-run applied %d, %v", n, err)
	}
	var mode string
	d.W.Get(&mode, "PRAGMA journal_mode")
	var fk int
	d.W.Get(&fk, "PRAGMA foreign_keys")
	if mode != "wal" || fk != 1 {
		t.Fatalf("pragmas: journal_mode=%s foreign_keys=%d", mode, fk)
	}
	if _, err := d.R.Exec(`INSERT INTO key_value (key, value, updated_at) VALUES ('x', 'y', 0)`); err == nil {
		t.Fatal("the reader pool must be read-only")
	}
}

func TestRevisionsIncrement(t *testing.T) {
	ctx := context.Background()
	d := openTestDB(t, ctx, -1)
	kv := KV{DB: d}
	for want := int64(1); want <= 3; want++ {
		rev, err := kv.SaveRevision(ctx, "k", "v")
		if err != nil || rev != want {
			t.Fatalf("revision %d want %d: %v", rev, want, err)
		}
	}
	if rev, _ := kv.Revision(ctx, "k"); rev != 3 {
		t.Fatalf("latest %d", rev)
	}
}
