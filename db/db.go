// Package db is the store: SQLite (the embedded default) or PostgreSQL (shared by several
// replicas), opened with the right settings, migrations, transactions and one file of literal
// SQL per table, written once for both engines. Nothing outside this package writes SQL.
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

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
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

// insertRow runs an INSERT and sets *id to the new row's (RETURNING, which both engines know;
// PostgreSQL has no last-insert id): ErrConflict when the row would break a unique column, other
// errors wrapped with op.
func insertRow(ctx context.Context, q Querier, id *int64, op, query string, args ...any) error {
	err := survivable(ctx, q, func() error { return q.QueryRowxContext(ctx, query+" RETURNING id", args...).Scan(id) })
	if isUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
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
	var res sql.Result
	err := survivable(ctx, q, func() (err error) {
		res, err = q.ExecContext(ctx, query, args...)
		return err
	})
	if isUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return mustAffect(res, what)
}

// survivable runs one statement so that its failure leaves the transaction usable, as SQLite
// does: callers go on after ErrConflict (a lease tries the next connection), while a PostgreSQL
// transaction refuses every later statement after an error unless it rolls back to a savepoint.
func survivable(ctx context.Context, q Querier, stmt func() error) error {
	tx, ok := q.(*Tx)
	if !ok || !tx.dollar {
		return stmt()
	}
	if _, err := tx.ExecContext(ctx, "SAVEPOINT statement"); err != nil {
		return err
	}
	if err := stmt(); err != nil {
		_, _ = tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT statement")
		return err
	}
	_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT statement")
	return err
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

// DB holds one writer connection (all writes; on SQLite BEGIN IMMEDIATE, so SQLITE_BUSY cannot
// happen inside the process, and on PostgreSQL the same one-writer order the services were
// written for) and a small pool of readers beside it.
type DB struct {
	W, R    *Pool
	Dialect Dialect
	// Path is the SQLite file, or the PostgreSQL URL without its password.
	Path string
}

// Open opens the store target names: a postgres:// URL, or else a SQLite file (created if
// needed) with WAL, a busy timeout, synchronous=NORMAL and foreign keys on every pooled
// connection.
func Open(target string) (*DB, error) {
	if IsPostgresURL(target) {
		return openPostgres(target)
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, fmt.Errorf("db open: %w", err)
	}
	base := "file:" + (&url.URL{Path: abs}).EscapedPath()
	// _mutex=no opens each connection without SQLite's per-connection mutex: database/sql
	// hands a connection to one goroutine at a time, and the mutex cost a lock and an unlock
	// on every call into SQLite (each bound parameter of the request log's inserts), about a
	// tenth of the writer's CPU.
	common := "_busy_timeout=5000&_foreign_keys=on&_synchronous=NORMAL&_mutex=no"
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
	return &DB{W: &Pool{DB: w}, R: &Pool{DB: r}, Dialect: SQLite, Path: abs}, nil
}

// openPostgres opens the writer and the reader pools on a PostgreSQL database and checks that
// it answers.
func openPostgres(target string) (*DB, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("db open: the database URL does not parse: %w", err)
	}
	shown := u.Redacted()
	w, err := sqlx.Open("pgx", target)
	if err != nil {
		return nil, fmt.Errorf("db open %s: %w", shown, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("db open %s: %w", shown, err)
	}
	r, err := sqlx.Open("pgx", target)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("db open %s: %w", shown, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	return &DB{W: &Pool{DB: w, dollar: true}, R: &Pool{DB: r, dollar: true}, Dialect: Postgres, Path: shown}, nil
}

// Close closes both pools, on SQLite after letting it optimize.
func (d *DB) Close() error {
	if d.Dialect == SQLite {
		_, _ = d.W.Exec("PRAGMA optimize")
	}
	return errors.Join(d.R.Close(), d.W.Close())
}

// WithTx runs fn in one write transaction (immediate on SQLite); an error or panic rolls it back.
func (d *DB) WithTx(ctx context.Context, fn func(tx *Tx) error) (err error) {
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

// Migrate applies every embedded migration of the dialect newer than the database's version,
// each in its own transaction together with the version bump. Migrations are forward-only.
func (d *DB) Migrate(ctx context.Context) (applied int, err error) {
	return d.MigrateTo(ctx, -1)
}

// migrationLock is the PostgreSQL advisory lock that lets one replica at a time migrate, so
// replicas started together never apply a migration twice.
const migrationLock = 0x5377_6974_6368 // "Switch"

// MigrateTo is Migrate stopping after migration number version (-1: the newest); tests use it
// to build a database as an older binary left it.
func (d *DB) MigrateTo(ctx context.Context, version int) (applied int, err error) {
	fsys := d.migrations()
	files, err := migrationFiles(fsys)
	if err != nil {
		return 0, err
	}
	if version >= 0 && version < len(files) {
		files = files[:version]
	}
	if d.Dialect == Postgres {
		err := d.WithTx(ctx, func(tx *Tx) error {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", migrationLock); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("migrate: version table: %w", err)
		}
	}
	current, err := d.version(ctx, d.W)
	if err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	if current > len(files) && version < 0 {
		return 0, fmt.Errorf("migrate: database version %d is newer than this binary (%d migrations)", current, len(files))
	}
	for i := current; i < len(files); i++ {
		body, err := fs.ReadFile(fsys, files[i])
		if err != nil {
			return applied, fmt.Errorf("migrate: %w", err)
		}
		done := false
		err = d.WithTx(ctx, func(tx *Tx) error {
			if d.Dialect == Postgres {
				// Another replica may have applied it while this one waited for the lock.
				if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", migrationLock); err != nil {
					return err
				}
				if now, err := d.version(ctx, tx); err != nil || now > i {
					done = err == nil
					return err
				}
			}
			// Straight to the driver: a migration is SQL of its own dialect, not to be rebound.
			if _, err := tx.Tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			return d.setVersion(ctx, tx, i+1)
		})
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", files[i], err)
		}
		if !done {
			applied++
		}
	}
	return applied, nil
}

func (d *DB) migrations() fs.FS {
	if d.Dialect == Postgres {
		return migrations.Postgres
	}
	return migrations.FS
}

// version is the number of migrations applied: SQLite keeps it in PRAGMA user_version,
// PostgreSQL in the one-row table schema_version.
func (d *DB) version(ctx context.Context, q Querier) (int, error) {
	if d.Dialect == Postgres {
		var v sql.NullInt64
		err := q.GetContext(ctx, &v, "SELECT MAX(version) FROM schema_version")
		return int(v.Int64), err
	}
	var v int
	err := q.GetContext(ctx, &v, "PRAGMA user_version")
	return v, err
}

func (d *DB) setVersion(ctx context.Context, q Querier, v int) error {
	if d.Dialect == Postgres {
		if _, err := q.ExecContext(ctx, "DELETE FROM schema_version"); err != nil {
			return err
		}
		_, err := q.ExecContext(ctx, "INSERT INTO schema_version (version) VALUES (?)", v)
		return err
	}
	_, err := q.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(v))
	return err
}

// SchemaVersion reports the applied migration count and how many the binary carries.
func (d *DB) SchemaVersion(ctx context.Context) (current, want int, err error) {
	files, err := migrationFiles(d.migrations())
	if err != nil {
		return 0, 0, err
	}
	current, err = d.version(ctx, d.R)
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
