package db

import (
	"context"
	"database/sql"
	"reflect"
	"strconv"
	"testing"
)

// TestRequestLogWriter: batches of every size around the multi-row statement's are stored row
// for row as given, NULLs and all, in transactions that reuse the statements; a failed insert
// (an id taken) rolls its transaction back.
func TestRequestLogWriter(t *testing.T) {
	ctx := context.Background()
	d := openTestDB(t, ctx, -1)
	w := newTestLogWriter(t, ctx, d)
	next := int64(1)
	var all []RequestLogRow
	for _, n := range []int{0, 1, requestLogBatch - 1, requestLogBatch, requestLogBatch + 1, 3*requestLogBatch + 5} {
		rows := make([]RequestLogRow, n)
		for i := range rows {
			id := next
			next++
			r := RequestLogRow{ID: id, RequestID: "req-" + strconv.FormatInt(id, 10), At: 1_700_000_000_000 + id, ClientKeyID: id % 3,
				Surface: "/v1/messages", Model: "m" + strconv.Itoa(i), Provider: "p", ConnectionID: id % 5, Connection: "c",
				Status: 200 + int(id%4)*100, ErrorCode: "e", ErrorMsg: `{"key":"k"}`, Attempts: 1, Retries: int(id % 2),
				Failovers: int(id % 3), LatencyUS: id * 7, TTFTUS: id, Stream: id%2 == 0, Complete: id%3 == 0, InputTokens: id,
				OutputTokens: 2 * id, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5, Chain: "[]", Skipped: "[]",
				Combo: "", Route: "[]", Dropped: "[]", RequestBodyTruncated: id%2 == 1}
			if id%2 == 0 {
				r.CostUSD = sql.NullFloat64{Float64: float64(id) / 1000, Valid: true}
				r.RequestBody = sql.NullString{String: "body ü " + strconv.FormatInt(id, 10), Valid: true}
				r.ResponseBody = sql.NullString{String: "", Valid: true}
			}
			rows[i] = r
		}
		if err := d.WithTx(ctx, func(tx *Tx) error { return w.Insert(ctx, tx, rows) }); err != nil {
			t.Fatalf("%d rows: %v", n, err)
		}
		all = append(all, rows...)
	}
	for _, want := range all {
		got, err := GetRequestLog(ctx, d.R, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", want.ID, got, want)
		}
	}
	var count int
	if err := d.R.Get(&count, `SELECT count(*) FROM request_log`); err != nil || count != len(all) {
		t.Fatalf("%d rows stored, want %d (%v)", count, len(all), err)
	}

	dup := append(make([]RequestLogRow, 0, requestLogBatch+1), all[:requestLogBatch]...)
	for i := range dup {
		dup[i].ID += next // new ids …
	}
	dup = append(dup, all[0]) // … but the last one is taken
	if err := d.WithTx(ctx, func(tx *Tx) error { return w.Insert(ctx, tx, dup) }); err == nil {
		t.Fatal("an insert of a taken id succeeded")
	}
	if err := d.R.Get(&count, `SELECT count(*) FROM request_log`); err != nil || count != len(all) {
		t.Fatalf("%d rows after a failed batch, want %d (%v)", count, len(all), err)
	}
	// A taken id within a multi-row statement fails it too, and the writer goes on afterwards.
	dup = dup[:requestLogBatch]
	dup[5] = all[7]
	if err := d.WithTx(ctx, func(tx *Tx) error { return w.Insert(ctx, tx, dup) }); err == nil {
		t.Fatal("a multi-row insert with a taken id succeeded")
	}
	dup[5].ID = next + 10_000
	if err := d.WithTx(ctx, func(tx *Tx) error { return w.Insert(ctx, tx, dup) }); err != nil {
		t.Fatalf("the insert after a failed one: %v", err)
	}
	if err := d.R.Get(&count, `SELECT count(*) FROM request_log`); err != nil || count != len(all)+requestLogBatch {
		t.Fatalf("%d rows, want %d (%v)", count, len(all)+requestLogBatch, err)
	}
}
