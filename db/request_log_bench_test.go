package db

import (
	"context"
	"database/sql"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func benchRows(n int, first int64) []RequestLogRow {
	rows := make([]RequestLogRow, n)
	for i := range rows {
		id := first + int64(i)
		rows[i] = RequestLogRow{ID: id, RequestID: "req-" + strconv.FormatInt(id, 10), At: 1_700_000_000_000 + id, ClientKeyID: 1,
			Surface: "/v1/chat/completions", Model: "json-small-0ms", Provider: "bench", ConnectionID: 1, Connection: "c1",
			Status: 200, Attempts: 1, LatencyUS: 400, InputTokens: 12, OutputTokens: 34, CostUSD: sql.NullFloat64{},
			Chain: `[{"connection_id":1,"connection":"c1","kind":"first","status":200,"duration":123456}]`, Skipped: "[]", Route: "[]"}
	}
	return rows
}

// BenchmarkInsertRequestLog writes the request log as the runner does, 256 or 1,024 rows a
// transaction, on a cancellable context or not, and reports the process's CPU time per row
// beside the wall time.
func BenchmarkInsertRequestLog(b *testing.B) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		{"uncancellable", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
	} {
		for _, batch := range []int{256, 1024} {
			b.Run(tc.name+"/"+strconv.Itoa(batch), func(b *testing.B) {
				ctx, cancel := tc.ctx()
				defer cancel()
				d := openTestDB(b, ctx, -1)
				w := newTestLogWriter(b, ctx, d)
				next := int64(1)
				b.ResetTimer()
				cpu0 := cpuTime()
				for i := 0; i < b.N; i += batch {
					rows := benchRows(batch, next)
					next += int64(batch)
					if err := d.WithTx(ctx, func(tx *Tx) error { return w.Insert(ctx, tx, rows) }); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/row")
			})
		}
	}
}

// cpuTime is the CPU time the process used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
