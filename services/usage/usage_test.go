package usage

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"switchyard/db"
)

// fakeSource holds buckets and answers UsageBuckets as traffic.Service does: the buckets in
// [from, to) rounded out to quarter hours; it records each range asked for.
type fakeSource struct {
	rows  []db.UsageBucket
	asked [][2]time.Time
	err   error
}

func (f *fakeSource) UsageBuckets(_ context.Context, from, to time.Time) ([]db.UsageBucket, error) {
	f.asked = append(f.asked, [2]time.Time{from, to})
	if f.err != nil {
		return nil, f.err
	}
	first, last := from.Unix()/db.UsageBucketSeconds, (to.Unix()+db.UsageBucketSeconds-1)/db.UsageBucketSeconds
	var out []db.UsageBucket
	for _, r := range f.rows {
		if r.Bucket >= first && r.Bucket < last {
			out = append(out, r)
		}
	}
	return out, nil
}

var t0 = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)

// at is the bucket of t0 plus d.
func at(d time.Duration) int64 { return t0.Add(d).Unix() / db.UsageBucketSeconds }

func bucket(d time.Duration, key int64, provider, model string, conn int64, req, in, out, cache int64, cost float64, unpriced int64) db.UsageBucket {
	return db.UsageBucket{Bucket: at(d), KeyID: key, Provider: provider, Model: model, ConnectionID: conn, Requests: req,
		InputTokens: in, OutputTokens: out, CacheReadTokens: cache, CacheWriteTokens: cache / 2, ReasoningTokens: out / 2,
		CostUSD: cost, Unpriced: unpriced, Errors: req / 3}
}

func TestRowsGroupAndSort(t *testing.T) {
	src := &fakeSource{rows: []db.UsageBucket{
		bucket(0, 1, "openai", "gpt-5", 1, 3, 100, 50, 10, 0.5, 0),
		bucket(15*time.Minute, 1, "openai", "gpt-5", 2, 3, 100, 50, 10, 0.25, 0), // another connection, another bucket
		bucket(time.Hour, 1, "local", "llama", 3, 9, 900, 90, 0, 0, 9),           // unpriced
		bucket(time.Hour, 2, "openai", "gpt-5", 1, 1, 10, 5, 0, 1.5, 0),
		bucket(2*time.Hour, 7, "local", "llama", 3, 2, 20, 2, 0, 0, 2), // key 7 was deleted
		bucket(2*time.Hour, 2, "", "nope", 0, 4, 0, 0, 0, 0, 0),        // never reached a provider
		bucket(3*time.Hour, 0, "openai", "gpt-5", 1, 5, 5, 5, 0, 9, 0), // no key: never shown
	}}
	rep, err := Build(context.Background(), src, Query{From: t0, To: t0.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	names := map[int64]string{1: "laptop", 2: "agent"}

	type row struct {
		Name     string
		KeyID    int64
		Provider string
		Model    string
		Requests int64
		Input    int64
		Cost     float64
		Unpriced int64
	}
	flat := func(rows []Row) []row {
		var out []row
		for _, r := range rows {
			out = append(out, row{r.Name, r.KeyID, r.Provider, r.Model, r.Requests, r.InputTokens, r.CostUSD, r.UnpricedRequests})
		}
		return out
	}
	for _, tc := range []struct {
		by   By
		want []row
	}{
		{ByKey, []row{
			{"agent", 2, "", "", 5, 10, 1.5, 0},
			{"laptop", 1, "", "", 15, 1100, 0.75, 9},
			{"#7", 7, "", "", 2, 20, 0, 2},
		}},
		{ByProvider, []row{
			{"openai", 0, "openai", "", 7, 210, 2.25, 0},
			{"local", 0, "local", "", 11, 920, 0, 11},
			{"", 0, "", "", 4, 0, 0, 0},
		}},
		{ByModel, []row{
			{"openai/gpt-5", 0, "openai", "gpt-5", 7, 210, 2.25, 0},
			{"local/llama", 0, "local", "llama", 11, 920, 0, 11},
			{"nope", 0, "", "nope", 4, 0, 0, 0},
		}},
	} {
		t.Run(string(tc.by), func(t *testing.T) {
			if got := flat(rep.Rows(tc.by, names)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rows\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	want := Sums{Requests: 22, Errors: 1 + 1 + 3 + 0 + 0 + 1, InputTokens: 1130, OutputTokens: 197, CacheReadTokens: 20,
		CacheWriteTokens: 10, ReasoningTokens: 25 + 25 + 45 + 2 + 1, CostUSD: 2.25, UnpricedRequests: 11}
	if rep.Total != want {
		t.Errorf("total\n got %+v\nwant %+v", rep.Total, want)
	}
	// Every grouping sums to the total.
	for _, by := range Groupings {
		var s Sums
		for _, r := range rep.Rows(by, names) {
			s.Add(r.Sums)
		}
		if s != rep.Total {
			t.Errorf("%s: rows sum to %+v, the total is %+v", by, s, rep.Total)
		}
	}
}

// TestSortTies: equal cost and requests sort by name, so the order is stable between calls.
func TestSortTies(t *testing.T) {
	src := &fakeSource{rows: []db.UsageBucket{
		bucket(0, 3, "p", "m", 1, 1, 1, 1, 0, 0, 0),
		bucket(0, 1, "p", "m", 1, 1, 1, 1, 0, 0, 0),
		bucket(0, 2, "p", "m", 1, 1, 1, 1, 0, 0, 0),
		bucket(0, 4, "p", "m", 1, 2, 1, 1, 0, 0, 0),
	}}
	rep, _ := Build(context.Background(), src, Query{From: t0, To: t0.Add(time.Hour)})
	var got []string
	for _, r := range rep.Rows(ByKey, map[int64]string{1: "b", 2: "a", 3: "c", 4: "z"}) {
		got = append(got, r.Name)
	}
	if want := []string{"z", "a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestRangeRoundsOutAndReadsInChunks: the range becomes whole quarter hours, a long range is
// read a month at a time without a bucket read twice or missed, and the buckets outside the
// range stay out.
func TestRangeRoundsOutAndReadsInChunks(t *testing.T) {
	from, to := t0.Add(7*time.Minute), t0.Add(100*24*time.Hour+time.Minute)
	var rows []db.UsageBucket
	for d := -6 * time.Hour; d <= 101*24*time.Hour; d += 6 * time.Hour {
		rows = append(rows, bucket(d, 1, "p", "m", 1, 1, 1, 0, 0, 0.5, 0))
	}
	rows = append(rows, bucket(100*24*time.Hour, 1, "p", "m", 2, 1, 1, 0, 0, 0.5, 0)) // the quarter hour to falls in
	src := &fakeSource{rows: rows}
	rep, err := Build(context.Background(), src, Query{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.From.Equal(t0) || !rep.To.Equal(t0.Add(100*24*time.Hour+15*time.Minute)) {
		t.Fatalf("range %v – %v, want whole quarter hours around %v – %v", rep.From, rep.To, from, to)
	}
	// Buckets at t0 + 6 h × n for n = 0 … 400, and the extra one: 402.
	if rep.Total.Requests != 402 {
		t.Fatalf("%d requests counted, want 402", rep.Total.Requests)
	}
	if len(src.asked) != 4 {
		t.Fatalf("read in %d parts, want 4 of at most 31 days: %v", len(src.asked), src.asked)
	}
	for i, a := range src.asked {
		if a[1].Sub(a[0]) > 31*24*time.Hour || (i > 0 && !a[0].Equal(src.asked[i-1][1])) {
			t.Fatalf("part %d: %v – %v", i, a[0], a[1])
		}
	}
}

func TestSeries(t *testing.T) {
	src := &fakeSource{rows: []db.UsageBucket{
		bucket(0, 1, "p", "m", 1, 1, 10, 1, 0, 0.5, 0),
		bucket(45*time.Minute, 1, "p", "m", 1, 2, 20, 2, 0, 0.25, 0),
		bucket(2*time.Hour+30*time.Minute, 2, "p", "m", 1, 3, 30, 3, 0, 0, 3),
		bucket(5*time.Hour, 2, "p", "m", 1, 9, 9, 9, 0, 9, 0), // after the range
	}}
	rep, err := Build(context.Background(), src, Query{From: t0, To: t0.Add(3 * time.Hour), Every: time.Hour, Points: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Series) != 3 {
		t.Fatalf("%d points", len(rep.Series))
	}
	for i, want := range []Sums{
		{Requests: 3, Errors: 0, InputTokens: 30, OutputTokens: 3, ReasoningTokens: 1, CostUSD: 0.75},
		{},
		{Requests: 3, Errors: 1, InputTokens: 30, OutputTokens: 3, ReasoningTokens: 1, UnpricedRequests: 3},
	} {
		p := rep.Series[i]
		if !p.Start.Equal(t0.Add(time.Duration(i)*time.Hour)) || p.Sums != want {
			t.Errorf("point %d: %v %+v, want %+v", i, p.Start, p.Sums, want)
		}
	}
	if rep.Total.Requests != 6 || rep.Empty() {
		t.Fatalf("total %+v", rep.Total)
	}
}

func TestEmptyAndErrors(t *testing.T) {
	rep, err := Build(context.Background(), &fakeSource{}, Query{From: t0, To: t0.Add(time.Hour)})
	if err != nil || !rep.Empty() || len(rep.Rows(ByKey, nil)) != 0 {
		t.Fatalf("empty range: %+v %v", rep, err)
	}
	boom := errors.New("disk on fire")
	if _, err := Build(context.Background(), &fakeSource{err: boom}, Query{From: t0, To: t0.Add(time.Hour)}); !errors.Is(err, boom) {
		t.Fatalf("a failed read: %v", err)
	}
}

func TestParseByAndRounding(t *testing.T) {
	for in, ok := range map[string]bool{"key": true, "provider": true, "model": true, "": false, "Key": false, "connection": false} {
		if _, got := ParseBy(in); got != ok {
			t.Errorf("ParseBy(%q) = %v", in, got)
		}
	}
	x := time.Date(2026, 3, 10, 10, 7, 3, 0, time.UTC)
	if !Floor(x).Equal(time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC)) || !Ceil(x).Equal(time.Date(2026, 3, 10, 10, 15, 0, 0, time.UTC)) ||
		!Ceil(Floor(x)).Equal(Floor(x)) {
		t.Fatalf("Floor %v Ceil %v", Floor(x), Ceil(x))
	}
}
