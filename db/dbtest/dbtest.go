// Package dbtest opens the real store for the tests of the packages that use it: a SQLite file,
// or a fresh PostgreSQL database when the tests run with SWITCHYARD_TEST_STORE=postgres; and it
// starts private PostgreSQL and Redis servers for the tests that need them.
package dbtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"switchyard/db"
)

// OnPostgres reports whether the tests run against PostgreSQL (SWITCHYARD_TEST_STORE=postgres,
// as make test-postgres sets it) rather than the SQLite default.
func OnPostgres() bool { return os.Getenv("SWITCHYARD_TEST_STORE") == "postgres" }

// Open opens a fresh store, migrated to the newest schema, and closes it when the test ends: a
// database file in the test's temporary directory, or a new PostgreSQL database.
func Open(tb testing.TB) *db.DB {
	tb.Helper()
	target := filepath.Join(tb.TempDir(), "t.db")
	if OnPostgres() {
		target = Postgres(tb)
	}
	d, err := db.Open(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	if _, err := d.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return d
}
