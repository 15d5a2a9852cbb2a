package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// RequestLogRow is one row of request_log.
type RequestLogRow struct {
	ID           int64  `db:"id"`
	RequestID    string `db:"request_id"`
	At           int64  `db:"at"`
	ClientKeyID  int64  `db:"client_key_id"`
	Surface      string `db:"surface"`
	Model        string `db:"model"`
	Provider     string `db:"provider"`
	ConnectionID int64  `db:"connection_id"`
	Connection   string `db:"connection"`
	Status       int    `db:"status"`
	ErrorCode    string `db:"error_code"`
	ErrorMsg     string `db:"error_msg"`
	Attempts     int    `db:"attempts"`
	Retries      int    `db:"retries"`
	Failovers    int    `db:"failovers"`
	LatencyUS    int64  `db:"latency_us"` // microseconds
	TTFTUS       int64  `db:"ttft_us"`
	Stream       bool   `db:"stream"`
	Complete     bool   `db:"complete"`
	InputTokens  int64  `db:"input_tokens"`
	OutputTokens int64  `db:"output_tokens"`
	// CacheReadTokens, CacheWriteTokens (parts of InputTokens) and ReasoningTokens (part of
	// OutputTokens); CostUSD is NULL when the model had no price.
	CacheReadTokens  int64           `db:"cache_read_tokens"`
	CacheWriteTokens int64           `db:"cache_write_tokens"`
	ReasoningTokens  int64           `db:"reasoning_tokens"`
	CostUSD          sql.NullFloat64 `db:"cost_usd"`
	Chain            string          `db:"chain"`
	Skipped          string          `db:"skipped"`
	// Combo is the combo the client named ("" for none); Route its decision trace (JSON).
	Combo string `db:"combo"`
	Route string `db:"route"`
	// Dropped names the request's fields and tools a translation could not carry (JSON array).
	Dropped string `db:"dropped"`
	// RequestBody and ResponseBody are NULL unless the log keeps bodies; GetRequestLog reads
	// them, ListRequestLog does not.
	RequestBody           sql.NullString `db:"request_body"`
	ResponseBody          sql.NullString `db:"response_body"`
	RequestBodyTruncated  bool           `db:"request_body_truncated"`
	ResponseBodyTruncated bool           `db:"response_body_truncated"`
}

// requestLogCols are the columns a list reads: everything but the bodies, which may be large.
const requestLogCols = `id, request_id, at, client_key_id, surface, model, provider, connection_id, connection, status,
	error_code, error_msg, attempts, retries, failovers, latency_us, ttft_us, stream, complete, input_tokens,
	output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, chain, skipped, combo, route, dropped`

// requestLogBodyCols are the body columns, read for one row.
const requestLogBodyCols = `request_body, response_body, request_body_truncated, response_body_truncated`

// requestLogParams are the parameters of one row of an insert: one per column.
const requestLogParams = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// requestLogBatch is how many rows one multi-row insert writes (34 parameters each, far below
// SQLite's limit of 32,766).
const requestLogBatch = 32

// insertRequestLogSQL inserts n rows.
func insertRequestLogSQL(n int) string {
	return `INSERT INTO request_log (` + requestLogCols + `, ` + requestLogBodyCols + `) VALUES ` +
		strings.TrimSuffix(strings.Repeat(requestLogParams+", ", n), ", ")
}

// RequestLogWriter stores finished requests, the ids given by the caller. Its two statements,
// one row and requestLogBatch rows, are compiled once on the writer for its lifetime: SQLite
// compiles a statement's text again on every Exec of the text, and one statement per row pays
// database/sql's and SQLite's per-statement costs for each. It is not safe for concurrent use
// (the request log's runner owns it).
type RequestLogWriter struct {
	one, batch *sql.Stmt
	args       []any
	// query runs the insert as a query (SQLite): go-sqlite3 binds a query's parameters and takes
	// its first step in one call into C, where an Exec crosses into C once per parameter, 34 a
	// row (BenchmarkInsertRequestLog: about a quarter less CPU a row).
	query bool
}

// NewRequestLogWriter prepares the request log's insert statements on d's writer.
func NewRequestLogWriter(ctx context.Context, d *DB) (*RequestLogWriter, error) {
	one, err := d.W.PrepareContext(ctx, insertRequestLogSQL(1))
	if err != nil {
		return nil, fmt.Errorf("prepare request log insert: %w", err)
	}
	batch, err := d.W.PrepareContext(ctx, insertRequestLogSQL(requestLogBatch))
	if err != nil {
		one.Close()
		return nil, fmt.Errorf("prepare request log insert: %w", err)
	}
	return &RequestLogWriter{one: one, batch: batch, args: make([]any, 0, 34*requestLogBatch), query: d.Dialect == SQLite}, nil
}

// Close releases the statements.
func (w *RequestLogWriter) Close() error { return errors.Join(w.one.Close(), w.batch.Close()) }

// Insert stores rows within tx: requestLogBatch rows a statement, the rest one by one.
func (w *RequestLogWriter) Insert(ctx context.Context, tx *Tx, rows []RequestLogRow) error {
	var batch, one *sql.Stmt // the statements within tx, made at first use
	for len(rows) > 0 {
		n := 1
		var stmt *sql.Stmt
		if len(rows) >= requestLogBatch {
			if batch == nil {
				batch = tx.StmtContext(ctx, w.batch)
			}
			n, stmt = requestLogBatch, batch
		} else {
			if one == nil {
				one = tx.StmtContext(ctx, w.one)
			}
			stmt = one
		}
		args := w.args[:0]
		for i := range rows[:n] {
			r := &rows[i]
			// Every value is one the driver takes as it is (int64, not int): database/sql converts
			// anything else through reflection, each time.
			args = append(args, r.ID, r.RequestID, r.At, r.ClientKeyID, r.Surface, r.Model, r.Provider, r.ConnectionID,
				r.Connection, int64(r.Status), r.ErrorCode, r.ErrorMsg, int64(r.Attempts), int64(r.Retries), int64(r.Failovers),
				r.LatencyUS, r.TTFTUS,
				r.Stream, r.Complete, r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheWriteTokens, r.ReasoningTokens,
				nullFloat(r.CostUSD), r.Chain, r.Skipped, r.Combo, r.Route, r.Dropped, nullString(r.RequestBody), nullString(r.ResponseBody),
				r.RequestBodyTruncated, r.ResponseBodyTruncated)
		}
		err := exec(ctx, stmt, w.query, args)
		clear(args) // the strings go with the rows
		if err != nil {
			return fmt.Errorf("insert request log %d: %w", rows[0].ID, err)
		}
		rows = rows[n:]
	}
	return nil
}

// exec runs stmt with args, as a query when asked (the statement is done once the query is
// made; closing it ends it) or else as an Exec.
func exec(ctx context.Context, stmt *sql.Stmt, query bool, args []any) error {
	if !query {
		_, err := stmt.ExecContext(ctx, args...)
		return err
	}
	rs, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	return errors.Join(rs.Err(), rs.Close())
}

// nullFloat and nullString are a nullable column's value as the driver takes it: nil for NULL.
// Passing the value itself spares database/sql boxing the Null type and calling its Value.
func nullFloat(v sql.NullFloat64) any {
	if !v.Valid {
		return nil
	}
	return v.Float64
}

func nullString(v sql.NullString) any {
	if !v.Valid {
		return nil
	}
	return v.String
}

// RequestLogFilter selects rows of the request log; zero fields match everything.
type RequestLogFilter struct {
	StatusMin, StatusMax int  // inclusive status range; 0 = no bound
	Errors               bool // only requests answered with an error (status ≥ 400 or an error code)
	Provider             string
	Model                string
	Surface              string
	ClientKeyID          int64
	Since, Until         int64 // unix ms, Since inclusive, Until exclusive; 0 = no bound
	Before               int64 // only ids below this (the next page); 0 = from the newest
	Limit                int
}

// ListRequestLog returns the rows the filter selects, newest first.
func ListRequestLog(ctx context.Context, q Querier, f RequestLogFilter) ([]RequestLogRow, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	if f.StatusMin > 0 {
		add("status >= ?", f.StatusMin)
	}
	if f.StatusMax > 0 {
		add("status <= ?", f.StatusMax)
	}
	if f.Errors {
		where = append(where, "(status >= 400 OR error_code <> '')")
	}
	if f.Provider != "" {
		add("provider = ?", f.Provider)
	}
	if f.Model != "" {
		add("model = ?", f.Model)
	}
	if f.Surface != "" {
		add("surface = ?", f.Surface)
	}
	if f.ClientKeyID != 0 {
		add("client_key_id = ?", f.ClientKeyID)
	}
	if f.Since > 0 {
		add("at >= ?", f.Since)
	}
	if f.Until > 0 {
		add("at < ?", f.Until)
	}
	if f.Before > 0 {
		add("id < ?", f.Before)
	}
	query := `SELECT ` + requestLogCols + ` FROM request_log`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, f.Limit)
	return selectRows[RequestLogRow](ctx, q, "list request log", query, args...)
}

// GetRequestLog returns one row by id, with its bodies.
func GetRequestLog(ctx context.Context, q Querier, id int64) (RequestLogRow, error) {
	return getRow[RequestLogRow](ctx, q, fmt.Sprintf("get request log %d", id),
		`SELECT `+requestLogCols+`, `+requestLogBodyCols+` FROM request_log WHERE id = ?`, id)
}

// MaxRequestLogID is the newest id, 0 when the log is empty.
func MaxRequestLogID(ctx context.Context, q Querier) (int64, error) {
	var id sql.NullInt64
	if err := q.GetContext(ctx, &id, `SELECT MAX(id) FROM request_log`); err != nil {
		return 0, fmt.Errorf("max request log id: %w", err)
	}
	return id.Int64, nil
}

// PruneRequestLog deletes rows older than before (unix ms) and all but the newest keep rows.
func PruneRequestLog(ctx context.Context, q Querier, before int64, keep int64) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM request_log WHERE at < ?`, before); err != nil {
		return fmt.Errorf("prune request log by age: %w", err)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM request_log WHERE id <= (SELECT MAX(id) FROM request_log) - ?`, keep); err != nil {
		return fmt.Errorf("prune request log by count: %w", err)
	}
	return nil
}
