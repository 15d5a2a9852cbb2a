// Package dbtest opens the real SQLite store for the tests of the packages that use it.
package dbtest

import (
	"context"
	"path/filepath"
	"testing"

	"switchyard/db"
)

// Open opens a fresh database file in the test's temporary directory, migrated to the newest
// schema, and closes it when the test ends.
func Open(tb testing.TB) *db.DB {
	tb.Helper()
	d, err := db.Open(filepath.Join(tb.TempDir(), "t.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	if _, err := d.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return d
}
