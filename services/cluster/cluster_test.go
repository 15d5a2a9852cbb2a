package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/db"
	"switchyard/db/dbtest"
)

// replica is one Bus with what it received.
type replica struct {
	bus     *Bus
	mu      sync.Mutex
	got     []Message
	resyncs atomic.Int32
}

func (r *replica) received() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Message(nil), r.got...)
}

func startReplica(t *testing.T, url, id string) *replica {
	t.Helper()
	r := &replica{}
	r.bus = New(Options{URL: url, Replica: id, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Retry: 50 * time.Millisecond,
		Handle: func(m Message) {
			r.mu.Lock()
			r.got = append(r.got, m)
			r.mu.Unlock()
		},
		Resync: func(context.Context) error { r.resyncs.Add(1); return nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.bus.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-r.bus.Listening():
	case <-time.After(10 * time.Second):
		t.Fatalf("replica %s never listened: %v", id, r.bus.Err())
	}
	return r
}

// waitFor polls until ok holds; the deadline is generous, the propagation target is 100 ms.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestMessagesReachTheOtherReplicasOnly(t *testing.T) {
	url := dbtest.Postgres(t)
	a, b, c := startReplica(t, url, "a"), startReplica(t, url, "b"), startReplica(t, url, "c")
	a.bus.Publish(Message{Topic: TopicState, Kind: "connection", ID: json.RawMessage(`7`), Value: json.RawMessage(`{"until":"x"}`)})
	a.bus.PublishTopic("catalog")
	for _, r := range []*replica{b, c} {
		waitFor(t, "both messages", func() bool { return len(r.received()) == 2 })
		for _, m := range r.received() {
			if m.From != "a" {
				t.Fatalf("message from %q", m.From)
			}
			if m.Topic == TopicState && (m.Kind != "connection" || string(m.ID) != "7" || string(m.Value) != `{"until":"x"}`) {
				t.Fatalf("state message arrived as %+v", m)
			}
		}
	}
	time.Sleep(50 * time.Millisecond) // a message of its own would have arrived by now
	if got := a.received(); len(got) != 0 {
		t.Fatalf("a received its own messages: %v", got)
	}
}

// More changes than one NOTIFY carries arrive all the same, split over several payloads; a
// deleted record arrives as a null value.
func TestLargeBatchesAreSplit(t *testing.T) {
	url := dbtest.Postgres(t)
	a, b := startReplica(t, url, "a"), startReplica(t, url, "b")
	value := json.RawMessage(`"` + strings.Repeat("v", 500) + `"`)
	for i := range 100 {
		a.bus.Publish(Message{Topic: TopicState, Kind: "breaker", ID: json.RawMessage(fmt.Sprint(i)), Value: value})
	}
	a.bus.Publish(Message{Topic: TopicState, Kind: "breaker", ID: json.RawMessage(`"gone"`), Value: json.RawMessage(`null`)})
	waitFor(t, "101 messages", func() bool { return len(b.received()) >= 101 })
	seen := map[string]bool{}
	for _, m := range b.received() {
		seen[string(m.ID)] = true
		if string(m.ID) == `"gone"` && string(m.Value) != "null" {
			t.Fatalf("a delete arrived as %s", m.Value)
		}
	}
	if len(seen) != 101 {
		t.Fatalf("%d distinct records arrived, want 101", len(seen))
	}
	// The packing itself: no payload over the limit.
	batch := map[msgKey]Message{}
	for i := range 100 {
		batch[msgKey{id: fmt.Sprint(i)}] = Message{Topic: TopicState, ID: json.RawMessage(fmt.Sprint(i)), Value: value}
	}
	batch[msgKey{id: "huge"}] = Message{Topic: TopicState, Value: json.RawMessage(`"` + strings.Repeat("x", maxPayload) + `"`)}
	payloads, dropped := pack(batch)
	if len(payloads) < 7 || len(dropped) != 1 {
		t.Fatalf("%d payloads, %d dropped", len(payloads), len(dropped))
	}
	for _, p := range payloads {
		if len(p) > maxPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
	}
}

// When the database goes away and comes back, the listener reconnects and resynchronises from
// the store (NOTIFY does not replay what it missed), and messages flow again; one published
// while the database was down is sent once it is back, not dropped.
func TestReconnectResyncsAndDelivers(t *testing.T) {
	srv := dbtest.PostgresServer(t)
	a, b := startReplica(t, srv.URL(), "a"), startReplica(t, srv.URL(), "b")
	if b.resyncs.Load() != 1 {
		t.Fatalf("resyncs at start: %d", b.resyncs.Load())
	}
	srv.Stop()
	waitFor(t, "b to notice", func() bool { return !b.bus.Healthy() })
	a.bus.PublishTopic("settings") // queued while the database is down
	srv.Start()
	waitFor(t, "b to reconnect and resync", func() bool { return b.bus.Healthy() && b.resyncs.Load() >= 2 })
	// Whether b was listening again when a's queued message went out is a race NOTIFY cannot
	// win; the resync covers it. What a sends from now on arrives.
	a.bus.PublishTopic("combos")
	waitFor(t, "a message after the reconnection", func() bool {
		for _, m := range b.received() {
			if m.Topic == "combos" {
				return true
			}
		}
		return false
	})
	waitFor(t, "a's queue to empty", func() bool { return a.bus.out.Pending() == 0 })
}

// Of three replicas asking for one lease at once, one holds it at a time; a lease whose holder
// died (never released) goes to the next at its expiry.
func TestLeasesAreExclusive(t *testing.T) {
	url := dbtest.Postgres(t)
	d := openDB(t, url)
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &Leases{DB: d, Owner: fmt.Sprint("replica-", i), Poll: 5 * time.Millisecond}
			for range 5 {
				release, err := l.Acquire(context.Background(), "refresh:1", time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				release()
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d replicas held the lease at once", most.Load())
	}
	dead := &Leases{DB: d, Owner: "dead"}
	if _, err := dead.Acquire(context.Background(), "refresh:2", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	next := &Leases{DB: d, Owner: "next", Poll: 10 * time.Millisecond}
	release, err := next.Acquire(context.Background(), "refresh:2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("the dead replica's lease was taken after %v, before it expired", waited)
	}
}

func openDB(t *testing.T, url string) *db.DB {
	t.Helper()
	d, err := db.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}
