// Package db is the SQLite store: opening with the right pragmas, migrations, transactions and
// one file of literal SQL per table. Nothing outside this package writes SQL.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver

	"switchyard/migrations"
)

// ErrNotFound is returned when a row asked for by id or name does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a write violates a uniqueness constraint.
var ErrConflict = errors.New("conflict")

// Querier is what every table function needs: it is satisfied by the pools and by a transaction,
// so the same function works inside or outside a transaction.
type Querier interface {
	sqlx.ExtContext
	GetContext(ctx context.Context, dest any, query string, args ...any) error
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
}

// selectRows reads every row query selects; op names the operation in an error.
func selectRows[T any](ctx context.Context, q Querier, op, query string, args ...any) ([]T, error) {
	var out []T
	if err := q.SelectContext(ctx, &out, query, args...); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// insertRow runs an INSERT and sets *id to the new row's: ErrConflict when the row would break
// a unique column, other errors wrapped with op.
func insertRow(ctx context.Context, q Querier, id *int64, op, query string, args ...any) error {
	res, err := q.ExecContext(ctx, query, args...)
	if isUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	*id, _ = res.LastInsertId()
	return nil
}

// insertStamped is insertRow for a table whose created_at and updated_at are the INSERT's last
// two placeholders: it fills both with the time now and, once the row is in, sets *created and
// *updated to it.
func insertStamped(ctx context.Context, q Querier, id, created, updated *int64, op, query string, args ...any) error {
	now := nowMS()
	if err := insertRow(ctx, q, id, op, query, append(args, now, now)...); err != nil {
		return err
	}
	*created, *updated = now, now
	return nil
}

// execOne runs a statement that must touch one row: ErrNotFound when none matched (what names
// the row's kind), ErrConflict when it would break a unique column, other errors wrapped with op.
func execOne(ctx context.Context, q Querier, op, what, query string, args ...any) error {
	res, err := q.ExecContext(ctx, query, args...)
	if isUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return mustAffect(res, what)
}

// mustAffect is ErrNotFound when a statement touched no row.
func mustAffect(res sql.Result, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// getRow reads the one row query selects: ErrNotFound when there is none; op names the
// operation in any other error.
func getRow[T any](ctx context.Context, q Querier, op, query string, args ...any) (T, error) {
	var v T
	err := q.GetContext(ctx, &v, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return v, ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("%s: %w", op, err)
	}
	return v, nil
}

// DB holds one writer connection (all writes, BEGIN IMMEDIATE, so SQLITE_BUSY cannot happen
// inside the process) and a small pool of read-only connections that WAL lets run beside it.
type DB struct {
	W    *sqlx.DB
	R    *sqlx.DB
	Path string
}

// Open opens (creating if needed) the database file at path with WAL, a busy timeout,
// synchronous=NORMAL and foreign keys on every pooled connection.
func Open(path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("db open: %w", err)
	}
	base := "file:" + (&url.URL{Path: abs}).EscapedPath()
	common := "_busy_timeout=5000&_foreign_keys=on&_synchronous=NORMAL"
	w, err := sqlx.Open("sqlite3", base+"?_journal_mode=WAL&_txlock=immediate&"+common)
	if err != nil {
		return nil, fmt.Errorf("db open writer: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	if err := w.Ping(); err != nil {
		w.Close()
		return nil, fmt.Errorf("db open writer: %w", err)
	}
	r, err := sqlx.Open("sqlite3", base+"?mode=ro&"+common)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("db open reader: %w", err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	return &DB{W: w, R: r, Path: abs}, nil
}

// Close optimizes and closes both pools.
func (d *DB) Close() error {
	_, _ = d.W.Exec("PRAGMA optimize")
	return errors.Join(d.R.Close(), d.W.Close())
}

// WithTx runs fn in one immediate write transaction; an error or panic rolls it back.
func (d *DB) WithTx(ctx context.Context, fn func(tx *sqlx.Tx) error) (err error) {
	tx, err := d.W.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Migrate applies every embedded migration newer than PRAGMA user_version, each in its own
// transaction together with the version bump. Migrations are forward-only.
func (d *DB) Migrate(ctx context.Context) (applied int, err error) {
	return d.MigrateTo(ctx, -1)
}

// MigrateTo is Migrate stopping after migration number version (-1: the newest); tests use it
// to build a database as an older binary left it.
func (d *DB) MigrateTo(ctx context.Context, version int) (applied int, err error) {
	files, err := migrationFiles(migrations.FS)
	if err != nil {
		return 0, err
	}
	if version >= 0 && version < len(files) {
		files = files[:version]
	}
	var current int
	if err := d.W.GetContext(ctx, &current, "PRAGMA user_version"); err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	if current > len(files) && version < 0 {
		return 0, fmt.Errorf("migrate: database version %d is newer than this binary (%d migrations)", current, len(files))
	}
	for i := current; i < len(files); i++ {
		body, err := fs.ReadFile(migrations.FS, files[i])
		if err != nil {
			return applied, fmt.Errorf("migrate: %w", err)
		}
		err = d.WithTx(ctx, func(tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(i+1))
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", files[i], err)
		}
		applied++
	}
	return applied, nil
}

// SchemaVersion reports the applied migration count and how many the binary carries.
func (d *DB) SchemaVersion(ctx context.Context) (current, want int, err error) {
	files, err := migrationFiles(migrations.FS)
	if err != nil {
		return 0, 0, err
	}
	err = d.R.GetContext(ctx, &current, "PRAGMA user_version")
	return current, len(files), err
}

func migrationFiles(fsys fs.FS) ([]string, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("migrate: list: %w", err)
	}
	sort.Strings(names)
	for i, n := range names {
		if !strings.HasPrefix(n, fmt.Sprintf("%04d_", i+1)) {
			return nil, fmt.Errorf("migrate: %s is out of sequence (want prefix %04d_)", n, i+1)
		}
	}
	return names, nil
}

// nowMS is the timestamp format of every table: INTEGER unix milliseconds.
func nowMS() int64 { return time.Now().UnixMilli() }

func isUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}
