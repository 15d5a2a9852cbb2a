package routing

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"switchyard/db/dbtest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/db"
	"switchyard/services/errs"
)

// leaseFixture is a database with one provider, n connections and two client keys, and a lease
// service on a clock the test moves.
type leaseFixture struct {
	l      *Leases
	d      *db.DB
	conns  []int64
	keyA   int64
	keyB   int64
	now    atomic.Pointer[time.Time]
	usable map[int64]bool
}

func newLeaseFixture(t *testing.T, n int) *leaseFixture {
	t.Helper()
	ctx := context.Background()
	d := dbtest.Open(t)
	f := &leaseFixture{d: d, usable: map[int64]bool{}}
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f.now.Store(&start)
	p := db.Provider{Name: "up", Type: "openai-compatible", BaseURL: "http://up/v1"}
	if err := db.InsertProvider(ctx, d.W, &p); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		c := db.Connection{ProviderID: p.ID, Name: fmt.Sprintf("c%d", i), AuthType: "api_key", Secret: []byte("x"), Enabled: true}
		if err := db.InsertConnection(ctx, d.W, &c); err != nil {
			t.Fatal(err)
		}
		f.conns = append(f.conns, c.ID)
		f.usable[c.ID] = true
	}
	for i, name := range []string{"a", "b"} {
		k := db.ClientKey{Name: name, Prefix: "sk-sy-" + name, KeyHash: name}
		if err := db.InsertClientKey(ctx, d.W, &k); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			f.keyA = k.ID
		} else {
			f.keyB = k.ID
		}
	}
	source := func(id int64) (LeaseConnection, bool) {
		for i, c := range f.conns {
			if c == id {
				return LeaseConnection{ID: id, Name: fmt.Sprintf("c%d", i), Provider: "up", Usable: f.usable[id], Healthy: true}, true
			}
		}
		return LeaseConnection{}, false
	}
	var err error
	f.l, err = NewLeases(ctx, d, source, func() time.Time { return *f.now.Load() }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *leaseFixture) advance(d time.Duration) {
	t := f.now.Load().Add(d)
	f.now.Store(&t)
}

func (f *leaseFixture) holder(key int64) Holder {
	return Holder{KeyID: key, Exclusive: true, Connections: f.conns}
}

func reasonOf(err error) string {
	if e, ok := err.(*errs.Error); ok {
		return e.ReasonCode()
	}
	return fmt.Sprint(err)
}

func TestLeaseLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newLeaseFixture(t, 2)
	a := f.holder(f.keyA)

	g, err := f.l.Acquire(ctx, a, AcquireInput{})
	if err != nil {
		t.Fatal(err)
	}
	if !ValidOwner(g.Owner) || len(g.Owner) != 47 || g.Generation != 1 || g.Connection.ID != f.conns[0] || g.TTLMS != DefaultLeaseTTL.Milliseconds() {
		t.Fatalf("granted %+v", g)
	}
	var stored string
	if err := f.d.R.Get(&stored, `SELECT owner_hash FROM session_leases`); err != nil || stored == g.Owner || len(stored) != 64 {
		t.Fatalf("the database keeps the token's SHA-256 only: %q %v", stored, err)
	}
	held, ok := f.l.Held(f.conns[0])
	if !ok || held.Generation != 1 || !held.Active(*f.now.Load()) {
		t.Fatalf("the table does not show the lease: %+v", held)
	}
	if byOwner, ok := f.l.ByOwner(g.Owner); !ok || byOwner.ConnectionID != f.conns[0] {
		t.Fatal("the table does not find the owner")
	}

	// Another owner gets the other connection; a third finds none free.
	g2, err := f.l.Acquire(ctx, a, AcquireInput{TTL: time.Minute})
	if err != nil || g2.Connection.ID != f.conns[1] || g2.TTLMS != time.Minute.Milliseconds() {
		t.Fatalf("second acquire %+v %v", g2, err)
	}
	f.advance(20 * time.Second)
	_, err = f.l.Acquire(ctx, f.holder(f.keyB), AcquireInput{})
	e, _ := err.(*errs.Error)
	if reasonOf(err) != "lease_capacity" || e.RetryAfter != 40*time.Second {
		t.Fatalf("capacity: %v (retry after %v), want 40 s until the earliest expiry", err, e.RetryAfter)
	}

	// Renew keeps the generation and moves the expiry; TTLs are clamped.
	owner := g.Owner
	g, err = f.l.Renew(ctx, a, owner, time.Hour*48)
	if g.Owner != "" {
		t.Fatal("renew shows the token again")
	}
	g.Owner = owner
	if err != nil || g.Generation != 1 || !g.ExpiresAt.Equal(f.now.Load().Add(MaxLeaseTTL)) || g.TTLMS != MaxLeaseTTL.Milliseconds() {
		t.Fatalf("renew %+v %v", g, err)
	}
	if _, err := f.l.Renew(ctx, f.holder(f.keyB), g.Owner, 0); reasonOf(err) != "lease_not_found" {
		t.Fatalf("another key renewing: %v", err)
	}

	// The minute lease expires: renew says so; a new acquire takes its connection, and then its
	// old owner is unknown.
	f.advance(time.Minute)
	if _, err := f.l.Renew(ctx, a, g2.Owner, 0); reasonOf(err) != "lease_expired" {
		t.Fatalf("renewing an expired lease: %v", err)
	}
	if held, _ := f.l.Held(f.conns[1]); held.Active(*f.now.Load()) {
		t.Fatal("an expired lease still holds its connection")
	}
	g3, err := f.l.Acquire(ctx, f.holder(f.keyB), AcquireInput{})
	if err != nil || g3.Connection.ID != f.conns[1] {
		t.Fatalf("acquire after expiry %+v %v", g3, err)
	}
	if _, err := f.l.Release(ctx, a, g2.Owner); reasonOf(err) != "lease_not_found" {
		t.Fatalf("the expired owner after a takeover: %v", err)
	}

	// Release frees the connection at once.
	if r, err := f.l.Release(ctx, a, g.Owner); err != nil || !r.Released || r.Connection.ID != f.conns[0] {
		t.Fatalf("release %+v %v", r, err)
	}
	if _, ok := f.l.Held(f.conns[0]); ok {
		t.Fatal("a released lease is still in the table")
	}
	if _, err := f.l.Release(ctx, a, g.Owner); reasonOf(err) != "lease_not_found" {
		t.Fatalf("releasing twice: %v", err)
	}
	if _, err := f.l.Renew(ctx, a, "swl_short", 0); reasonOf(err) != "invalid_request" {
		t.Fatalf("a malformed token: %v", err)
	}
}

// Re-acquiring with the owner token moves the lease on under the next generation; older
// generations are then stale. Asked for a connection that is taken, the owner keeps what it had.
func TestLeaseReacquireBumpsTheGeneration(t *testing.T) {
	ctx := context.Background()
	f := newLeaseFixture(t, 2)
	a := f.holder(f.keyA)
	g, err := f.l.Acquire(ctx, a, AcquireInput{Connection: f.conns[1]})
	if err != nil || g.Connection.ID != f.conns[1] {
		t.Fatal(g, err)
	}
	again, err := f.l.Acquire(ctx, a, AcquireInput{Owner: g.Owner})
	if err != nil || again.Generation != 2 || again.Connection.ID != f.conns[1] || again.Owner != g.Owner {
		t.Fatalf("re-acquire %+v %v: want the same connection, generation 2", again, err)
	}
	other, err := f.l.Acquire(ctx, f.holder(f.keyB), AcquireInput{})
	if err != nil || other.Connection.ID != f.conns[0] {
		t.Fatal(other, err)
	}
	if _, err := f.l.Acquire(ctx, a, AcquireInput{Owner: g.Owner, Connection: f.conns[0]}); reasonOf(err) != "lease_capacity" {
		t.Fatalf("moving to a held connection: %v", err)
	}
	if held, ok := f.l.ByOwner(g.Owner); !ok || held.Generation != 2 || held.ConnectionID != f.conns[1] {
		t.Fatalf("a refused move must keep the lease: %+v %v", held, ok)
	}
	if _, err := f.l.Acquire(ctx, f.holder(f.keyB), AcquireInput{Owner: g.Owner}); reasonOf(err) != "lease_not_found" {
		t.Fatalf("another key re-acquiring a token: %v", err)
	}
	if _, err := f.l.Acquire(ctx, a, AcquireInput{Owner: OwnerPrefix + "0123456789012345678901234567890123456789abc"}); reasonOf(err) != "lease_not_found" {
		t.Fatalf("an unknown token: %v", err)
	}
}

func TestLeaseAcquireRefusals(t *testing.T) {
	ctx := context.Background()
	f := newLeaseFixture(t, 2)
	cases := []struct {
		name   string
		h      Holder
		in     AcquireInput
		reason string
	}{
		{"no scope", Holder{KeyID: f.keyA, Connections: f.conns}, AcquireInput{}, "lease_not_allowed"},
		{"a connection the key may not lease", Holder{KeyID: f.keyA, Exclusive: true, Connections: f.conns[:1]},
			AcquireInput{Connection: f.conns[1]}, "lease_connection_not_allowed"},
		{"a connection that is gone", Holder{KeyID: f.keyA, Exclusive: true, Connections: []int64{999}},
			AcquireInput{Connection: 999}, "lease_connection_unavailable"},
		{"nothing usable", Holder{KeyID: f.keyA, Exclusive: true, Connections: []int64{999}}, AcquireInput{}, "lease_connection_unavailable"},
		{"a malformed owner", f.holder(f.keyA), AcquireInput{Owner: "swl_x"}, "invalid_request"},
	}
	for _, c := range cases {
		if _, err := f.l.Acquire(ctx, c.h, c.in); reasonOf(err) != c.reason {
			t.Errorf("%s: %v, want %s", c.name, err, c.reason)
		}
	}
	f.usable[f.conns[0]] = false
	if g, err := f.l.Acquire(ctx, f.holder(f.keyA), AcquireInput{}); err != nil || g.Connection.ID != f.conns[1] {
		t.Fatalf("a switched-off connection is never leased: %+v %v", g, err)
	}
}

// Fifty owners race for three connections: three win, each connection goes to exactly one owner
// (the UNIQUE constraints decide inside each transaction), the rest get lease_capacity, and the
// table agrees with the database.
func TestConcurrentAcquiresNeverShareAConnection(t *testing.T) {
	ctx := context.Background()
	f := newLeaseFixture(t, 3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[int64][]string{}
	capacityN := 0
	start := make(chan struct{})
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(key int64) {
			defer wg.Done()
			<-start
			g, err := f.l.Acquire(ctx, f.holder(key), AcquireInput{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won[g.Connection.ID] = append(won[g.Connection.ID], g.Owner)
			case reasonOf(err) == "lease_capacity":
				capacityN++
			default:
				t.Errorf("acquire: %v", err)
			}
		}([]int64{f.keyA, f.keyB}[i%2])
	}
	close(start)
	wg.Wait()
	if len(won) != 3 || capacityN != 47 {
		t.Fatalf("winners %v, %d refused: want 3 connections with one owner each", won, capacityN)
	}
	for conn, owners := range won {
		if len(owners) != 1 {
			t.Errorf("connection %d went to %d owners", conn, len(owners))
		}
		if held, ok := f.l.Held(conn); !ok || held.Owner != [32]byte(sha(owners[0])) {
			t.Errorf("the table disagrees for connection %d", conn)
		}
	}
	var rows int
	if err := f.d.R.Get(&rows, `SELECT COUNT(*) FROM session_leases`); err != nil || rows != 3 {
		t.Fatalf("%d rows, %v", rows, err)
	}
}

// A key that loses the scope, a connection or its life loses the leases it may no longer hold.
func TestKeyChangeReleasesLeases(t *testing.T) {
	ctx := context.Background()
	f := newLeaseFixture(t, 3)
	a := f.holder(f.keyA)
	var owners []string
	for range 3 {
		g, err := f.l.Acquire(ctx, a, AcquireInput{})
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, g.Owner)
	}
	f.l.KeyChanged(ctx, f.keyA, true, true, f.conns[:2])
	if _, ok := f.l.Held(f.conns[2]); ok {
		t.Fatal("a lease on a connection the key may no longer lease survived")
	}
	if _, ok := f.l.Held(f.conns[0]); !ok {
		t.Fatal("a lease the key may still hold went")
	}
	f.l.KeyChanged(ctx, f.keyA, true, false, f.conns)
	for _, c := range f.conns {
		if _, ok := f.l.Held(c); ok {
			t.Fatalf("connection %d still leased after the scope went", c)
		}
	}
	g, _ := f.l.Acquire(ctx, a, AcquireInput{})
	f.l.KeyChanged(ctx, f.keyA, false, false, nil)
	if _, ok := f.l.ByOwner(g.Owner); ok {
		t.Fatal("a revoked key's lease survived")
	}
}

func sha(token string) [32]byte {
	var out [32]byte
	b := ownerHash(token)
	for i := range out {
		fmt.Sscanf(b[2*i:2*i+2], "%02x", &out[i])
	}
	return out
}

func TestLeaseRetryAfterBounds(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{0: time.Second, -time.Minute: time.Second, 90 * time.Second: 90 * time.Second,
		time.Hour: MaxLeaseRetryAfter} {
		if got := LeaseRetryAfter(in); got != want {
			t.Errorf("%v: %v, want %v", in, got, want)
		}
	}
	for in, want := range map[time.Duration]time.Duration{0: DefaultLeaseTTL, time.Second: MinLeaseTTL, time.Hour: time.Hour,
		100 * time.Hour: MaxLeaseTTL} {
		if got := clampTTL(in); got != want {
			t.Errorf("ttl %v: %v, want %v", in, got, want)
		}
	}
}
