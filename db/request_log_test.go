package db

import (
	"context"
	"testing"
)

// TestRequestLogDroppedColumn: a row an older binary wrote reads back, after the migration that
// adds the dropped names, with none; a new row keeps its names.
func TestRequestLogDroppedColumn(t *testing.T) {
	ctx := context.Background()
	d := openTestDB(t, ctx, 18)
	if _, err := d.W.ExecContext(ctx, `INSERT INTO request_log (id, request_id, at, surface, status) VALUES (1, 'old', 1, '/v1/chat/completions', 200)`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	w := newTestLogWriter(t, ctx, d)
	if err := d.WithTx(ctx, func(tx *Tx) error {
		return w.Insert(ctx, tx, []RequestLogRow{{ID: 2, RequestID: "new", At: 2, Surface: "/v1/chat/completions",
			Status: 200, Chain: "[]", Skipped: "[]", Route: "[]", Dropped: `["logprobs"]`}})
	}); err != nil {
		t.Fatal(err)
	}
	old, err := GetRequestLog(ctx, d.R, 1)
	if err != nil || old.Dropped != "[]" {
		t.Fatalf("the older row: %v dropped %q", err, old.Dropped)
	}
	rows, err := ListRequestLog(ctx, d.R, RequestLogFilter{Limit: 10})
	if err != nil || len(rows) != 2 || rows[0].Dropped != `["logprobs"]` || rows[1].Dropped != "[]" {
		t.Fatalf("list: %v %+v", err, rows)
	}
}
