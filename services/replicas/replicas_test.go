package replicas

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/db/dbtest"
)

var start = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// lockedBuffer is a log destination the Run goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newRegistry(d *db.DB, clk clockwork.Clock, name string, log *slog.Logger) *Registry {
	return New(Options{DB: d, Clock: clk, Log: log, Self: Self{Name: name, Addr: ":8080", Version: "v1", CapMode: ModeShare}})
}

func beat(t *testing.T, rs ...*Registry) {
	t.Helper()
	for _, r := range rs {
		if err := r.Beat(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// names lists replicas as "name" with "*" for self and "~" for not live.
func names(list []Replica) string {
	var out []string
	for _, r := range list {
		s := r.Name
		if r.Self {
			s += "*"
		}
		if !r.Live {
			s += "~"
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

// Two replicas on one database see each other once both have written a heartbeat; before its
// first heartbeat a replica counts itself and lists itself.
func TestTwoReplicasSeeEachOther(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClockAt(start)
	a := newRegistry(d, clk, "host-a :8080", nil)
	clk.Advance(time.Second)
	b := newRegistry(d, clk, "host-b :8080", nil)
	if a.ID() == b.ID() || len(a.ID()) != 16 {
		t.Fatalf("ids %q and %q", a.ID(), b.ID())
	}
	if a.Live() != 1 || names(a.List()) != "host-a :8080*" || a.Mode() != ModeShare {
		t.Fatalf("before any heartbeat: live %d, list %s, mode %s", a.Live(), names(a.List()), a.Mode())
	}
	beat(t, a, b, a)
	if a.Live() != 2 || b.Live() != 2 {
		t.Fatalf("live a %d, b %d; want 2", a.Live(), b.Live())
	}
	list := a.List()
	if names(list) != "host-a :8080*,host-b :8080" {
		t.Fatalf("a lists %s", names(list))
	}
	if got := names(b.List()); got != "host-a :8080,host-b :8080*" {
		t.Fatalf("b lists %s", got)
	}
	other := list[1]
	if other.ID != b.ID() || other.Addr != ":8080" || other.Version != "v1" || other.CapMode != ModeShare ||
		!other.Started.Equal(start.Add(time.Second)) || other.HeartbeatAge != 0 {
		t.Fatalf("b as a sees it: %+v", other)
	}
	if !list[0].Started.Equal(start) {
		t.Fatalf("a started %v, want %v", list[0].Started, start)
	}
}

// A replica that stops heart-beating counts as live for the live window, then drops out of Live
// while its row stays listed; after PruneAfter its row is deleted.
func TestSilentReplicaDropsOutThenIsPruned(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClockAt(start)
	a, b := newRegistry(d, clk, "a", nil), newRegistry(d, clk, "b", nil)
	beat(t, b, a)

	clk.Advance(DefaultLiveWindow)
	beat(t, a)
	if a.Live() != 2 {
		t.Fatalf("live %d with b's heartbeat %v old, want 2", a.Live(), DefaultLiveWindow)
	}
	clk.Advance(time.Second)
	beat(t, a)
	if a.Live() != 1 || names(a.List()) != "a*,b~" {
		t.Fatalf("b silent for 6 s: live %d, list %s", a.Live(), names(a.List()))
	}
	if age := a.List()[1].HeartbeatAge; age != 6*time.Second {
		t.Fatalf("b's heartbeat age %v, want 6s", age)
	}

	clk.Advance(DefaultPruneAfter - 6*time.Second)
	beat(t, a)
	if names(a.List()) != "a*,b~" {
		t.Fatalf("b pruned at exactly %v: %s", DefaultPruneAfter, names(a.List()))
	}
	clk.Advance(time.Second)
	beat(t, a)
	if names(a.List()) != "a*" || a.Live() != 1 {
		t.Fatalf("after %v: live %d, list %s", DefaultPruneAfter+time.Second, a.Live(), names(a.List()))
	}
	if rows, err := db.ListReplicas(context.Background(), d.R); err != nil || len(rows) != 1 || rows[0].ID != a.ID() {
		t.Fatalf("rows %+v %v", rows, err)
	}
}

// When the clock jumps (a paused process, a test's fake clock shared by replicas), a replica
// that beat since the previous beat still counts and keeps its row until it had its turn; one
// that misses a beat after that drops out as usual.
func TestClockJumpKeepsReplicasThatBeatSinceTheLastLook(t *testing.T) {
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClockAt(start)
	a, b := newRegistry(d, clk, "a", nil), newRegistry(d, clk, "b", nil)
	beat(t, a, b)
	clk.Advance(time.Minute)
	beat(t, a)
	if a.Live() != 2 || names(a.List()) != "a*,b" {
		t.Fatalf("after a jump, before b's turn: live %d, list %s", a.Live(), names(a.List()))
	}
	beat(t, b)
	if b.Live() != 2 {
		t.Fatalf("b: live %d", b.Live())
	}
	clk.Advance(DefaultInterval)
	beat(t, a)
	clk.Advance(DefaultLiveWindow)
	beat(t, a)
	if a.Live() != 1 || names(a.List()) != "a*,b~" {
		t.Fatalf("b silent since: live %d, list %s", a.Live(), names(a.List()))
	}
}

// Run beats every interval; a replica that stops removes its row, so the others count it out at
// their next heartbeat instead of after the live window.
func TestRunBeatsAndLeaves(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClockAt(start)
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	a, b := newRegistry(d, clk, "a", log), newRegistry(d, clk, "b", log)
	run := func(r *Registry) (stop func()) {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(rctx)
		}()
		return func() { cancel(); <-done }
	}
	stopA, stopB := run(a), run(b)
	tick := func(waiters int) {
		t.Helper()
		clk.Advance(DefaultInterval)
		if err := clk.BlockUntilContext(ctx, waiters); err != nil {
			t.Fatal(err)
		}
	}
	if err := clk.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	tick(2)
	if a.Live() != 2 || b.Live() != 2 {
		t.Fatalf("live a %d, b %d; want 2", a.Live(), b.Live())
	}
	if !strings.Contains(logs.String(), "replica joined") {
		t.Fatalf("no join logged:\n%s", logs)
	}

	stopB()
	tick(1)
	if a.Live() != 1 || names(a.List()) != "a*" {
		t.Fatalf("after b stopped: live %d, list %s", a.Live(), names(a.List()))
	}
	if !strings.Contains(logs.String(), "replica left") {
		t.Fatalf("no leave logged:\n%s", logs)
	}
	stopA()
	if rows, err := db.ListReplicas(ctx, d.R); err != nil || len(rows) != 0 {
		t.Fatalf("rows left after both stopped: %+v %v", rows, err)
	}
}

// While the database fails, the heartbeat is tried at every interval, Live keeps the last known
// count, and the warnings back off (failures 1, 2, 4, 8 and 16 of 21); once the database answers
// again the count is current.
func TestHeartbeatFailureKeepsLastKnown(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	clk := clockwork.NewFakeClockAt(start)
	logs := &lockedBuffer{}
	a := newRegistry(d, clk, "a", slog.New(slog.NewTextHandler(logs, nil)))
	b := newRegistry(d, clk, "b", nil)
	beat(t, b, a)
	if a.Live() != 2 {
		t.Fatalf("live %d, want 2", a.Live())
	}
	if _, err := d.W.ExecContext(ctx, `ALTER TABLE replicas RENAME TO replicas_away`); err != nil {
		t.Fatal(err)
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(rctx)
	}()
	defer func() { cancel(); <-done }()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		clk.Advance(DefaultInterval)
		if err := clk.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if a.Live() != 2 {
			t.Fatalf("live %d while the database fails, want the last known 2", a.Live())
		}
	}
	if n := strings.Count(logs.String(), "replica heartbeat failed"); n != 5 {
		t.Fatalf("%d warnings for 21 failed heartbeats, want 5:\n%s", n, logs)
	}
	if names(a.List()) != "a*,b" {
		t.Fatalf("list while failing: %s", names(a.List()))
	}

	if _, err := d.W.ExecContext(ctx, `ALTER TABLE replicas_away RENAME TO replicas`); err != nil {
		t.Fatal(err)
	}
	clk.Advance(DefaultInterval)
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if a.Live() != 1 || names(a.List()) != "a*,b~" {
		t.Fatalf("after the database is back (b silent for 21 s): live %d, list %s", a.Live(), names(a.List()))
	}
	if !strings.Contains(logs.String(), "answers again") {
		t.Fatalf("no recovery logged:\n%s", logs)
	}
}

// Defaults fill what Options leave out, PruneAfter is never shorter than LiveWindow, and an id
// given is kept.
func TestOptionsDefaults(t *testing.T) {
	r := New(Options{LiveWindow: 10 * time.Second, PruneAfter: time.Second})
	if r.opt.Interval != DefaultInterval || r.opt.PruneAfter != 10*time.Second || r.Mode() != ModeSingle || r.Live() != 1 {
		t.Fatalf("options %+v", r.opt)
	}
	if got := New(Options{ID: "from-the-bus"}).ID(); got != "from-the-bus" {
		t.Fatalf("id %q, want the one given", got)
	}
}
