package db_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"switchyard/db"
	"switchyard/db/dbtest"
)

// column is what the two schemas must agree on for each column.
type column struct {
	Table, Name, Kind string
	NotNull           bool
}

func (c column) String() string {
	return fmt.Sprintf("%s.%s %s notnull=%v", c.Table, c.Name, c.Kind, c.NotNull)
}

// kinds maps each engine's declared types to one vocabulary: SQLite keeps flags as INTEGER
// where PostgreSQL has BOOLEAN, so both are "integer" here (the Go types decide the rest).
var kinds = map[string]string{
	"INTEGER": "integer", "TEXT": "text", "REAL": "real", "BLOB": "blob",
	"bigint": "integer", "boolean": "integer", "text": "text", "double precision": "real", "bytea": "blob",
}

func schemaOf(t *testing.T, d *db.DB) (cols []string, indexes []string) {
	t.Helper()
	ctx := context.Background()
	var rows []struct {
		Table   string `db:"tbl"`
		Name    string `db:"col"`
		Type    string `db:"typ"`
		NotNull bool   `db:"required"`
	}
	var idx []string
	var err error
	if d.Dialect == db.Postgres {
		err = d.R.SelectContext(ctx, &rows, `SELECT table_name AS tbl, column_name AS col, data_type AS typ,
			is_nullable = 'NO' AS required FROM information_schema.columns
			WHERE table_schema = 'public' AND table_name <> 'schema_version'`)
		if err == nil {
			// Indexes made for PRIMARY KEY and UNIQUE constraints are named by the engine.
			err = d.R.SelectContext(ctx, &idx, `SELECT indexname FROM pg_indexes WHERE schemaname = 'public'
				AND indexname NOT IN (SELECT conname FROM pg_constraint)`)
		}
	} else {
		err = d.R.SelectContext(ctx, &rows, `SELECT m.name AS tbl, p.name AS col, p.type AS typ,
			(p."notnull" OR p.pk > 0) AS required FROM sqlite_master m JOIN pragma_table_info(m.name) p
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
		if err == nil {
			err = d.R.SelectContext(ctx, &idx, `SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL`)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		k, ok := kinds[r.Type]
		if !ok {
			t.Fatalf("%s: column %s.%s has type %q, which the other engine has no counterpart for here", d.Dialect, r.Table, r.Name, r.Type)
		}
		cols = append(cols, column{Table: r.Table, Name: r.Name, Kind: k, NotNull: r.NotNull}.String())
	}
	slices.Sort(cols)
	slices.Sort(idx)
	return cols, idx
}

// The SQLite and the PostgreSQL migrations are two histories of one schema: after both, every
// table has the same columns, of the same kind and nullability, and the same indexes. A
// migration added to one set without its counterpart in the other fails here.
func TestMigrationSetsAgree(t *testing.T) {
	ctx := context.Background()
	lite, err := db.Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg, err := db.Open(dbtest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for _, d := range []*db.DB{lite, pg} {
		if _, err := d.Migrate(ctx); err != nil {
			t.Fatalf("%s: %v", d.Dialect, err)
		}
		if n, err := d.Migrate(ctx); err != nil || n != 0 {
			t.Fatalf("%s: a second Migrate applied %d: %v", d.Dialect, n, err)
		}
		if cur, want, err := d.SchemaVersion(ctx); err != nil || cur != want {
			t.Fatalf("%s: version %d of %d: %v", d.Dialect, cur, want, err)
		}
	}
	liteCols, liteIdx := schemaOf(t, lite)
	pgCols, pgIdx := schemaOf(t, pg)
	if len(liteCols) < 50 {
		t.Fatalf("only %d columns read from SQLite: the query is wrong", len(liteCols))
	}
	if d := diff(liteCols, pgCols); d != "" {
		t.Errorf("columns differ (- SQLite only, + PostgreSQL only):\n%s", d)
	}
	if d := diff(liteIdx, pgIdx); d != "" {
		t.Errorf("indexes differ (- SQLite only, + PostgreSQL only):\n%s", d)
	}
	// The seeded rows agree too.
	for _, d := range []*db.DB{lite, pg} {
		provs, err := db.ListProviders(ctx, d.R)
		if err != nil || len(provs) != 2 {
			t.Fatalf("%s: built-in providers %v %v", d.Dialect, provs, err)
		}
		for _, p := range provs {
			if p.Name == "openai" && p.ResponsesModels != `["*codex*","o1-pro*","o3-pro*"]` {
				t.Errorf("%s: openai responses_models %s", d.Dialect, p.ResponsesModels)
			}
		}
	}
}

func diff(a, b []string) string {
	var out strings.Builder
	for _, s := range a {
		if !slices.Contains(b, s) {
			out.WriteString("- " + s + "\n")
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			out.WriteString("+ " + s + "\n")
		}
	}
	return out.String()
}

// Two replicas started together against one empty database migrate it once between them.
func TestConcurrentMigrateOnPostgres(t *testing.T) {
	ctx := context.Background()
	url := dbtest.Postgres(t)
	applied := make(chan int, 3)
	for range 3 {
		go func() {
			d, err := db.Open(url)
			if err != nil {
				t.Error(err)
				applied <- -1
				return
			}
			defer d.Close()
			n, err := d.Migrate(ctx)
			if err != nil {
				t.Error(err)
			}
			applied <- n
		}()
	}
	total := 0
	for range 3 {
		total += <-applied
	}
	d, err := db.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, want, _ := d.SchemaVersion(ctx)
	if total != want {
		t.Fatalf("three replicas applied %d migrations in all, want %d (each once)", total, want)
	}
	if provs, err := db.ListProviders(ctx, d.R); err != nil || len(provs) != 2 {
		t.Fatalf("built-in providers seeded more than once? %d %v", len(provs), err)
	}
}
