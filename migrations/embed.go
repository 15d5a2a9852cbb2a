// Package migrations holds the forward-only SQL migrations, embedded into the binary: one set
// for SQLite (this directory) and one for PostgreSQL (postgres/). The two sets differ in
// history but not in result: a test migrates both and compares every table, column and index.
package migrations

import (
	"embed"
	"io/fs"
)

// FS holds every NNNN_verb_noun.sql file for SQLite; db.Migrate applies them in name order.
//
//go:embed *.sql
var FS embed.FS

//go:embed postgres/*.sql
var postgresFS embed.FS

// Postgres holds every NNNN_verb_noun.sql file for PostgreSQL.
var Postgres = mustSub(postgresFS, "postgres")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // dir is a literal embedded above
	}
	return sub
}
