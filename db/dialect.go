package db

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"
)

// Dialect names the engine behind a DB.
type Dialect string

// The engines the store runs on: SQLite is the embedded default, PostgreSQL the shared store of
// several replicas.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// IsPostgresURL reports whether target names a PostgreSQL database rather than a SQLite file.
func IsPostgresURL(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// Pool is a connection pool whose queries are written once, with ? placeholders, for both
// engines: on PostgreSQL each query is rebound to $1, $2, … on its way in, so the table files
// hold one SQL text and every caller (services' transactions, tests) stays dialect-blind.
type Pool struct {
	*sqlx.DB
	dollar bool
}

func (p *Pool) bind(query string) string {
	if p.dollar {
		return sqlx.Rebind(sqlx.DOLLAR, query)
	}
	return query
}

// ExecContext runs a statement.
func (p *Pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.DB.ExecContext(ctx, p.bind(query), args...)
}

// Exec runs a statement without a context.
func (p *Pool) Exec(query string, args ...any) (sql.Result, error) {
	return p.DB.Exec(p.bind(query), args...)
}

// QueryContext runs a query.
func (p *Pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.DB.QueryContext(ctx, p.bind(query), args...)
}

// QueryxContext runs a query whose rows scan into structs.
func (p *Pool) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	return p.DB.QueryxContext(ctx, p.bind(query), args...)
}

// QueryRowxContext runs a query of one row.
func (p *Pool) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	return p.DB.QueryRowxContext(ctx, p.bind(query), args...)
}

// GetContext scans the one row a query selects into dest.
func (p *Pool) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	return p.DB.GetContext(ctx, dest, p.bind(query), args...)
}

// Get is GetContext without a context.
func (p *Pool) Get(dest any, query string, args ...any) error {
	return p.DB.Get(dest, p.bind(query), args...)
}

// SelectContext scans every row a query selects into dest.
func (p *Pool) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	return p.DB.SelectContext(ctx, dest, p.bind(query), args...)
}

// Select is SelectContext without a context.
func (p *Pool) Select(dest any, query string, args ...any) error {
	return p.DB.Select(dest, p.bind(query), args...)
}

// PrepareContext prepares a statement.
func (p *Pool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.DB.PrepareContext(ctx, p.bind(query))
}

// BeginTxx starts a transaction that binds like its pool.
func (p *Pool) BeginTxx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	tx, err := p.DB.BeginTxx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx, dollar: p.dollar}, nil
}

// Tx is a transaction that binds placeholders like the Pool it came from.
type Tx struct {
	*sqlx.Tx
	dollar bool
}

func (t *Tx) bind(query string) string {
	if t.dollar {
		return sqlx.Rebind(sqlx.DOLLAR, query)
	}
	return query
}

// ExecContext runs a statement.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.bind(query), args...)
}

// QueryContext runs a query.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, t.bind(query), args...)
}

// QueryxContext runs a query whose rows scan into structs.
func (t *Tx) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	return t.Tx.QueryxContext(ctx, t.bind(query), args...)
}

// QueryRowxContext runs a query of one row.
func (t *Tx) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	return t.Tx.QueryRowxContext(ctx, t.bind(query), args...)
}

// GetContext scans the one row a query selects into dest.
func (t *Tx) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	return t.Tx.GetContext(ctx, dest, t.bind(query), args...)
}

// SelectContext scans every row a query selects into dest.
func (t *Tx) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	return t.Tx.SelectContext(ctx, dest, t.bind(query), args...)
}

var (
	_ Querier = (*Pool)(nil)
	_ Querier = (*Tx)(nil)
)

// isUniqueViolation recognises a broken UNIQUE or PRIMARY KEY constraint on either engine.
func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505" // unique_violation
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed")
}
