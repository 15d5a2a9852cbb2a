package traffic

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/db/dbtest"
)

// Replicas sharing a store each add what they counted to a usage bucket: two services on one
// database, each counting requests of the same key, model and quarter hour, leave the sum of
// both in the store, not the last writer's; and request log ids drawn from the shared counter
// never collide.
func TestReplicasAddToTheSameUsageBucket(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClock()
	a := newService(t, d, clk, Options{Retention: 24 * time.Hour, SharedIDs: true})
	b := newService(t, d, clk, Options{Retention: 24 * time.Hour, SharedIDs: true})
	entry := Entry{At: clk.Now(), Surface: "/v1/chat/completions", Provider: "up", Model: "m", ClientKeyID: 1, Status: 200,
		InputTokens: 10, OutputTokens: 5, Priced: true, CostUSD: 0.5}
	for range 3 {
		a.Record(entry)
		b.Record(entry)
	}
	b.Record(entry)
	for _, s := range []*Service{a, b, a} {
		s.take()
		if err := s.flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.ListUsageBuckets(ctx, d.R, 0, bucketOf(clk.Now())+1)
	if err != nil || len(rows) != 1 {
		t.Fatalf("buckets %v %v", rows, err)
	}
	if r := rows[0]; r.Requests != 7 || r.InputTokens != 70 || r.CostUSD != 3.5 {
		t.Fatalf("stored bucket %+v, want the 7 requests of both", r)
	}
	logged, err := db.ListRequestLog(ctx, d.R, db.RequestLogFilter{Limit: 100})
	if err != nil || len(logged) != 7 {
		t.Fatalf("request log has %d rows (%v), want 7 with distinct ids", len(logged), err)
	}
}
