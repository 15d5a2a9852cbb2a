package traffic

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"switchyard/db/dbtest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/servicetest"
)

func newService(t testing.TB, d *db.DB, clk clockwork.Clock, opt Options) *Service {
	t.Helper()
	opt.DB, opt.Clock, opt.Log = d, clk, slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHistogramQuantiles(t *testing.T) {
	var h hist
	if h.quantile(0.5) != 0 {
		t.Fatal("empty histogram must give 0")
	}
	for i := 0; i < 90; i++ {
		h.add(40 * time.Millisecond) // bucket (30, 50]
	}
	for i := 0; i < 10; i++ {
		h.add(4 * time.Second) // bucket (3000, 5000]
	}
	if p50 := h.quantile(0.5); p50 <= 30*time.Millisecond || p50 > 50*time.Millisecond {
		t.Errorf("p50 %v, want within (30 ms, 50 ms]", p50)
	}
	if p95 := h.quantile(0.95); p95 <= 3*time.Second || p95 > 5*time.Second {
		t.Errorf("p95 %v, want within (3 s, 5 s]", p95)
	}
	var slow hist
	slow.add(time.Hour)
	if q := slow.quantile(1); q < 10*time.Minute {
		t.Errorf("beyond the last bound: %v", q)
	}
}

func TestClassOf(t *testing.T) {
	cases := []struct {
		name   string
		status int
		code   string
		want   Class
		bad    bool
	}{
		{"ok", 200, "", 0, false},
		{"refused", 404, "model_not_found", ClassClient, true},
		{"rate limited", 429, "all_connections_cooling", ClassRateLimited, true},
		{"upstream", 502, "upstream_error", ClassServer, true},
		{"client gone", 499, "client_closed", ClassAborted, true},
		{"stream broke after 200", 200, "client_closed", ClassAborted, true},
	}
	for _, c := range cases {
		got, bad := ClassOf(c.status, c.code)
		if bad != c.bad || bad && got != c.want {
			t.Errorf("%s: %v %v", c.name, got, bad)
		}
	}
}

// TestRecordAggregatesAndPersists: entries land in the series of their minute, per provider and
// key, and the aggregates and the log are loaded again by a new service on the same database.
func TestRecordAggregatesAndPersists(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClockAt(time.Date(2025, 3, 4, 10, 30, 20, 0, time.UTC))
	s := newService(t, d, clk, Options{Retention: 24 * time.Hour})
	_, stop := servicetest.Start(t, s.Run)
	at := clk.Now()
	s.Record(Entry{At: at.Add(-10 * time.Minute), Surface: "/v1/chat/completions", Provider: "a", ClientKeyID: 1, Status: 200,
		Latency: 100 * time.Millisecond, InputTokens: 10, OutputTokens: 5})
	s.Record(Entry{At: at, Surface: "/v1/chat/completions", Provider: "a", ClientKeyID: 2, Status: 502, ErrorCode: "upstream_error",
		Latency: 2 * time.Second, Error: errs.M("proxy.upstream_status", "a", 502, "boom sk-SECRET")})
	s.Record(Entry{At: at, Surface: "/v1/chat/completions", Provider: "b", ClientKeyID: 1, Status: 429, Stream: true,
		TTFT: 300 * time.Millisecond, Latency: time.Second})
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}

	pts := s.Series(LastHour, nil)
	if len(pts) != 60 {
		t.Fatalf("%d points", len(pts))
	}
	last, tenAgo := pts[59], pts[49]
	if last.Requests != 2 || last.Errors[ClassServer] != 1 || last.Errors[ClassRateLimited] != 1 || last.Streams != 1 ||
		tenAgo.Requests != 1 || tenAgo.In != 10 || tenAgo.Out != 5 {
		t.Fatalf("last %+v, ten minutes ago %+v", last, tenAgo)
	}
	if !last.Start.Equal(time.Date(2025, 3, 4, 10, 30, 0, 0, time.UTC)) {
		t.Fatalf("the last point starts at %v", last.Start)
	}
	onlyA := s.Series(LastHour, func(p string, _ int64) bool { return p == "a" })
	if onlyA[59].Requests != 1 || onlyA[49].Requests != 1 {
		t.Fatalf("provider a: %+v %+v", onlyA[59], onlyA[49])
	}
	day := s.Series(LastDay, nil)
	var sum int64
	for _, p := range day {
		sum += p.Requests
	}
	if len(day) != 96 || sum != 3 {
		t.Fatalf("day: %d points, %d requests", len(day), sum)
	}
	provs, keys := s.Breakdown(LastHour)
	if len(provs) != 2 || provs[0].Provider != "a" || provs[0].Total.Requests != 2 || len(provs[0].Requests) != 60 ||
		len(keys) != 2 || keys[0].KeyID != 1 || keys[0].Total.Requests != 2 {
		t.Fatalf("breakdown %+v %+v", provs, keys)
	}
	if u := s.KeyUsage(at.Add(-5 * time.Minute)); u[1].Requests != 1 || u[2].Requests != 1 {
		t.Fatalf("usage since five minutes ago: %+v", u)
	}
	stop()

	again := newService(t, d, clk, Options{Retention: 24 * time.Hour, Redact: func(s string) string { return s }})
	if got := again.Series(LastHour, nil); got[59].Requests != 2 || got[49].Requests != 1 {
		t.Fatal("the aggregates did not survive a restart")
	}
	_, stop = servicetest.Start(t, again.Run)
	defer stop()
	list, err := again.List(context.Background(), Filter{})
	if err != nil || len(list) != 3 || list[0].ID != 3 {
		t.Fatalf("list after restart: %v %+v", err, list)
	}
	if m := list[1].Error; m.Key != "proxy.upstream_status" || len(m.Args) != 3 || m.Args[1] != int64(502) {
		t.Fatalf("stored message %+v", m)
	}
	again.Record(Entry{At: at, Surface: "/v1/models", Status: 200})
	if list, _ := again.List(context.Background(), Filter{}); len(list) != 4 || list[0].ID != 4 {
		t.Fatalf("ids do not continue after a restart: %+v", list)
	}
}

// TestRecordNeverBlocks: with the runner stopped, Record returns at once and counts what it had
// to drop.
func TestRecordNeverBlocks(t *testing.T) {
	s := newService(t, dbtest.Open(t), clockwork.NewFakeClock(), Options{Buffer: 2, Retention: time.Hour})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 10; i++ {
			s.Record(Entry{Status: 200})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked")
	}
	if s.Dropped() != 8 {
		t.Fatalf("dropped %d, want 8", s.Dropped())
	}
}

// TestCountOnlyEntries: requests refused before a client key authenticated are counted in the
// aggregates (at once, even with the runner stopped and its buffer full) and persisted with them,
// but never become request-log rows, and they take no id from the logged requests.
func TestCountOnlyEntries(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClock()
	s := newService(t, d, clk, Options{Retention: time.Hour, Buffer: 1})
	s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", ClientKeyID: 1, Status: 200}) // fills the buffer
	for i := 0; i < 50; i++ {
		s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", Status: 401, ErrorCode: "invalid_api_key", CountOnly: true})
	}
	if s.Dropped() != 0 {
		t.Fatalf("refused requests took %d places of logged ones", s.Dropped())
	}
	// A reader takes what waits for the runner itself: the logged request counts too.
	if tot := s.Total(LastHour); tot.Requests != 51 || tot.Errors[ClassClient] != 50 {
		t.Fatalf("aggregates %+v, want the 50 refused requests and the queued one counted before the runner ran", tot)
	}
	_, stop := servicetest.Start(t, s.Run)
	list, err := s.List(context.Background(), Filter{})
	if err != nil || len(list) != 1 || list[0].ID != 1 || list[0].Status != 200 {
		t.Fatalf("the log has %d rows, want only the authenticated one: %v %+v", len(list), err, list)
	}
	if tot := s.Total(LastHour); tot.Requests != 51 || tot.Errors[ClassClient] != 50 {
		t.Fatalf("aggregates %+v, want 51 requests and 50 refused", tot)
	}
	stop()
	again := newService(t, d, clk, Options{Retention: time.Hour})
	if tot := again.Total(LastHour); tot.Requests != 51 || tot.Errors[ClassClient] != 50 {
		t.Fatalf("after a restart the aggregates are %+v", tot)
	}
}

func TestRedactsStoredMessages(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClock()
	s := newService(t, d, clk, Options{Retention: time.Hour,
		Redact: func(s string) string {
			if s == "key sk-SECRET" {
				return "key [redacted]"
			}
			return s
		}})
	_, stop := servicetest.Start(t, s.Run)
	defer stop()
	s.Record(Entry{At: clk.Now(), Status: 502, Error: errs.M("proxy.unreachable", "p", errs.M("proxy.transport_op", "dial", "key sk-SECRET"))})
	list, err := s.List(context.Background(), Filter{})
	if err != nil || len(list) != 1 {
		t.Fatal(err)
	}
	if got := list[0].Error.String(); got != `proxy.unreachable("p", proxy.transport_op("dial", "key [redacted]"))` {
		t.Fatalf("stored message %q", got)
	}
}

// TestDroppedRoundTrip: the names of what a translation dropped go through the write-behind and
// come back from the list and the single read, also after a restart; a request that dropped
// nothing reads back with none. A client's field names are bounded and redacted like its body.
func TestDroppedRoundTrip(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClock()
	s := newService(t, d, clk, Options{Retention: time.Hour})
	_, stop := servicetest.Start(t, s.Run)
	many := []string{"sk-ant-api03-" + strings.Repeat("A", 40), strings.Repeat("é", 80)}
	for i := range 40 {
		many = append(many, "field"+strconv.Itoa(i))
	}
	s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", Status: 200, Dropped: []string{"tools.web_search", "logprobs"}})
	s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", Status: 200})
	s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", Status: 200, Dropped: many})
	check := func(s *Service) {
		t.Helper()
		list, err := s.List(context.Background(), Filter{})
		if err != nil || len(list) != 3 {
			t.Fatalf("list: %v %d rows", err, len(list))
		}
		bounded, none, two := list[0], list[1], list[2]
		if !slices.Equal(two.Dropped, []string{"tools.web_search", "logprobs"}) {
			t.Errorf("listed dropped %q", two.Dropped)
		}
		if len(none.Dropped) != 0 {
			t.Errorf("a request that dropped nothing reads back %q", none.Dropped)
		}
		got, err := s.Get(context.Background(), two.ID)
		if err != nil || !slices.Equal(got.Dropped, []string{"tools.web_search", "logprobs"}) {
			t.Errorf("single read: %v %q", err, got.Dropped)
		}
		b := bounded.Dropped
		if len(b) != maxDropped+1 || b[maxDropped] != "…+10" || b[maxDropped-1] != "field29" {
			t.Fatalf("kept %q; want %d names, the last a count of the rest", b, maxDropped+1)
		}
		if DroppedCount(b) != 42 || DroppedCount(two.Dropped) != 2 || DroppedCount(nil) != 0 {
			t.Errorf("counted %d, %d, %d dropped names; want 42, 2, 0", DroppedCount(b), DroppedCount(two.Dropped), DroppedCount(nil))
		}
		if strings.Contains(b[0], "AAAA") {
			t.Errorf("a key-shaped field name is kept: %q", b[0])
		}
		if !utf8.ValidString(b[1]) || !strings.HasSuffix(b[1], "…") || len(b[1]) > maxDroppedName+len("…") {
			t.Errorf("a long name is kept as %q (%d bytes)", b[1], len(b[1]))
		}
	}
	check(s)
	stop()
	again := newService(t, d, clk, Options{Retention: time.Hour})
	_, stop = servicetest.Start(t, again.Run)
	defer stop()
	check(again)
}

// The request log's periodic prune also sweeps the store's ended leases (db.PruneLeases): on the
// wall clock, which the replicas share, whatever the engine's clock says.
func TestPruneSweepsEndedLeases(t *testing.T) {
	d := dbtest.Open(t)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	for name, expires := range map[string]int64{"budget:1:daily:80:0": now - 1000, "refresh:7": now + time.Hour.Milliseconds()} {
		if ok, err := db.TryLease(ctx, d.W, name, "replica-a", now-2000, expires); err != nil || !ok {
			t.Fatalf("take %s: %v %v", name, ok, err)
		}
	}
	clk := clockwork.NewFakeClockAt(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) // far from the wall clock
	s := newService(t, d, clk, Options{Retention: time.Hour})
	_, stop := servicetest.Start(t, s.Run)
	s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", Status: 200})
	stop()
	var names []string
	if err := d.R.SelectContext(ctx, &names, `SELECT name FROM leases ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "refresh:7" {
		t.Fatalf("leases left %v, want only the running one", names)
	}
}

// TestRunnerTakesABatchBeforeItsTick: the runner is not woken for each request; a batch of
// takeBatch wakes it before its tick (FlushInterval, an hour here), and a reader of the
// aggregates takes what waits itself.
func TestRunnerTakesABatchBeforeItsTick(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClock()
	s := newService(t, d, clk, Options{Retention: time.Hour, FlushInterval: time.Hour})
	_, stop := servicetest.Start(t, s.Run)
	defer stop()
	queued := func() int { s.qmu.Lock(); defer s.qmu.Unlock(); return len(s.queue) }
	s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", ClientKeyID: 1, Status: 200})
	if tot := s.Total(LastHour); tot.Requests != 1 {
		t.Fatalf("the reader saw %d requests, want the one recorded", tot.Requests)
	}
	for range takeBatch {
		s.Record(Entry{At: clk.Now(), Surface: "/v1/chat/completions", ClientKeyID: 1, Status: 200})
	}
	for bound := time.Now().Add(5 * time.Second); queued() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(bound) {
			t.Fatalf("%d entries still queued: a full batch did not wake the runner", queued())
		}
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := db.MaxRequestLogID(context.Background(), d.R); err != nil || n != takeBatch+1 {
		t.Fatalf("the log's last id is %d, want %d: %v", n, takeBatch+1, err)
	}
}
