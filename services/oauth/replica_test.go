package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/services/servicetest"
	"switchyard/services/statestore"
)

// recordStore is a statestore.Store that keeps what is Put.
type recordStore struct {
	mu   sync.Mutex
	recs []statestore.Record
}

func (s *recordStore) Put(r statestore.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
}

func (s *recordStore) Load(context.Context, statestore.Kind, func([]byte) error) error { return nil }
func (s *recordStore) Sync(context.Context) error                                      { return nil }

// take returns the records Put since the last take.
func (s *recordStore) take() []statestore.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.recs
	s.recs = nil
	return out
}

// replica is a second token holder on the harness's catalog, as another gateway on the same
// database runs one, with its own store.
func (h *harness) replica() (*Service, *recordStore) {
	h.t.Helper()
	store := &recordStore{}
	svc, err := New(context.Background(), Options{Catalog: h.cat, Settings: h.opts, Client: h.fake.Client(), Clock: h.clock,
		Store: store, Expire: &expirer{}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.cat.OnChange(svc.Sync)
	return svc, store
}

// ship applies the records of one replica's store to another's service as the broadcast does:
// kind, ID and Value as JSON through statestore.Tables.
func ship(t *testing.T, from *recordStore, to *Service) int {
	t.Helper()
	recs := from.take()
	for _, r := range recs {
		id, err := statestore.EncodeID(r)
		if err != nil {
			t.Fatal(err)
		}
		value, err := json.Marshal(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if err := (statestore.Tables{OAuth: to.ApplyRefreshRecord}).Apply(r.Kind, id, value); err != nil {
			t.Fatal(err)
		}
	}
	return len(recs)
}

func TestApplyRefreshStateFromAnotherReplica(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	a, storeA := h.replica()
	b, storeB := h.replica()
	conn, _ := h.signIn("ada@example.com")
	storeA.take()
	storeB.take()
	tok := h.stored(conn.ID).AccessToken.Reveal()

	// A's refresh meets a 429: B waits out the same Retry-After without calling.
	h.fake.failNext = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(429)
	}}
	if _, err := a.TokenRejected(ctx, h.entry(conn.ID), tok); err == nil {
		t.Fatal("A's refresh did not fail")
	}
	if n := ship(t, storeA, b); n != 1 {
		t.Fatalf("%d records from A", n)
	}
	stA, _ := a.State(conn.ID)
	stB, _ := b.State(conn.ID)
	if !stB.RetryAt.Equal(h.clock.Now().Add(120*time.Second)) || !stB.RetryAt.Equal(stA.RetryAt) || stB.LastError != stA.LastError {
		t.Fatalf("A %+v, B %+v", stA, stB)
	}
	calls := h.fake.refreshes.Load()
	if _, err := b.TokenRejected(ctx, h.entry(conn.ID), tok); !errors.Is(err, ErrNoToken) || h.fake.refreshes.Load() != calls {
		t.Fatalf("B refreshed during A's back-off: %v", err)
	}

	// A's refresh token turns out dead: B holds the account expired as well.
	h.clock.Advance(120 * time.Second)
	h.fake.failNext = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_grant"}`)
	}}
	if _, err := a.TokenRejected(ctx, h.entry(conn.ID), tok); err == nil {
		t.Fatal("A's refresh did not fail")
	}
	ship(t, storeA, b)
	if st, _ := b.State(conn.ID); !st.Expired {
		t.Fatalf("B %+v", st)
	}
	calls = h.fake.refreshes.Load()
	if _, err := b.TokenRejected(ctx, h.entry(conn.ID), tok); !errors.Is(err, ErrNoToken) || h.fake.refreshes.Load() != calls {
		t.Fatalf("B refreshed an expired account: %v", err)
	}
	if recs := storeB.take(); len(recs) != 0 {
		t.Fatalf("B persisted %+v", recs)
	}
}

// A state belongs to a credential revision: an older one is stale, a newer one waits for its
// credential, and a cleared state clears only a state ahead of the credential held.
func TestApplyRefreshStateFollowsTheCredential(t *testing.T) {
	h := newHarness(t)
	b, storeB := h.replica()
	conn, _ := h.signIn("ada@example.com")
	rev := h.stored(conn.ID).Rev
	state := func() RefreshState {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.accounts[conn.ID].state
	}
	retry := h.clock.Now().Add(time.Hour)

	b.ApplyRefresh(conn.ID, &RefreshState{ConnectionID: conn.ID, Rev: rev - 1, Strikes: 2, LastError: "old", RetryAt: retry})
	if st := state(); st.Strikes != 0 {
		t.Fatalf("a stale state was installed: %+v", st)
	}
	b.ApplyRefresh(conn.ID, &RefreshState{ConnectionID: conn.ID, Rev: rev + 1, Strikes: 1, LastError: "ahead", RetryAt: retry})
	if st := state(); st.Strikes != 1 || st.Rev != rev+1 {
		t.Fatalf("the state ahead was not installed: %+v", st)
	}
	// The credential of that revision arrives (a sign-in again stores rev+1): the state stays.
	h.signIn("ada@example.com")
	if h.stored(conn.ID).Rev != rev+1 {
		t.Fatalf("stored rev %d", h.stored(conn.ID).Rev)
	}
	if st := state(); st.Strikes != 1 || st.LastError != "ahead" {
		t.Fatalf("Sync dropped the applied state: %+v", st)
	}
	// A clear elsewhere is of a newer credential than the one held here: its back-off stays
	// until that credential arrives, so no refresh goes out with a pair rotated away.
	b.ApplyRefresh(conn.ID, nil)
	if st := state(); st.Strikes != 1 {
		t.Fatalf("a clear reset the state of the credential held: %+v", st)
	}
	// The other replica moves on again and clears its state: the one ahead goes, back to clean.
	b.ApplyRefresh(conn.ID, &RefreshState{ConnectionID: conn.ID, Rev: rev + 2, Strikes: 2, RetryAt: retry})
	if err := b.ApplyRefreshRecord([]byte("7"), []byte("not json")); err == nil {
		t.Fatal("a malformed state was accepted")
	}
	id, _ := json.Marshal(conn.ID)
	if err := b.ApplyRefreshRecord(id, []byte("null")); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Strikes != 0 || st.Rev != rev+1 || !st.RetryAt.IsZero() {
		t.Fatalf("after the clear: %+v", st)
	}
	// An account this replica does not hold is left to Sync.
	b.ApplyRefresh(999, &RefreshState{ConnectionID: 999, Strikes: 1})
	b.mu.Lock()
	_, held := b.accounts[999]
	b.mu.Unlock()
	if held {
		t.Fatal("an unknown account was created")
	}
	if recs := storeB.take(); len(recs) != 0 {
		t.Fatalf("B persisted %+v", recs)
	}
}

// memLeases are leases among services in one process: one holder per name at a time.
type memLeases struct {
	mu    sync.Mutex
	names map[string]*sync.Mutex
}

func (l *memLeases) Acquire(_ context.Context, name string, _ time.Duration) (func(), error) {
	l.mu.Lock()
	if l.names == nil {
		l.names = map[string]*sync.Mutex{}
	}
	m := l.names[name]
	if m == nil {
		m = &sync.Mutex{}
		l.names[name] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock, nil
}

// Two replicas of one Copilot account exchange its GitHub token once: the second takes the
// token the first left in the shared store. A token one replica saw refused is exchanged anew
// once, and the other replica, refused the same token, takes the new one.
func TestCopilotExchangeOnceAcrossReplicas(t *testing.T) {
	h := newCopilotHarness(t)
	ctx := context.Background()
	conn := h.mustSignIn("octo", 42)
	entry := h.entry(conn.ID)
	leases, shared := &memLeases{}, &memStore{m: map[string]string{}}
	replica := func() *Service {
		svc, err := New(ctx, Options{Catalog: h.cat, Settings: h.opts, Client: h.fake.Client(), Clock: h.clock,
			Store: &recordStore{}, Expire: &expirer{}, Leases: leases, Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		h.cat.OnChange(svc.Sync)
		return svc
	}
	a, b := replica(), replica()
	before := h.gh.exchanges.Load()
	tokA, _, err := a.CopilotToken(ctx, entry)
	if err != nil || h.gh.exchanges.Load() != before+1 {
		t.Fatalf("first replica: %v, %d exchanges, want 1", err, h.gh.exchanges.Load()-before)
	}
	tokB, _, err := b.CopilotToken(ctx, entry)
	if err != nil || tokB != tokA || h.gh.exchanges.Load() != before+1 {
		t.Fatalf("second replica: same token %v, %v, %d exchanges, want the first's token and no exchange",
			tokB == tokA, err, h.gh.exchanges.Load()-before)
	}
	next, _, err := b.CopilotRejected(ctx, entry, tokB)
	if err != nil || next == tokB || h.gh.exchanges.Load() != before+2 {
		t.Fatalf("refused on B: %v, new %v, %d exchanges, want a new token from one exchange", err, next != tokB, h.gh.exchanges.Load()-before)
	}
	again, _, err := a.CopilotRejected(ctx, entry, tokA)
	if err != nil || again != next || h.gh.exchanges.Load() != before+2 {
		t.Fatalf("refused on A: got B's new token %v, %v, %d exchanges, want B's token and no exchange",
			again == next, err, h.gh.exchanges.Load()-before)
	}
	h.clock.Advance(1500 * time.Second) // past refresh_in: the shared token is not taken any more
	servicetest.Eventually(func() bool { tok, _, _ := a.CopilotToken(ctx, entry); return tok != next })
	if n := h.gh.exchanges.Load(); n != before+3 {
		t.Fatalf("%d exchanges after refresh_in, want 3", n-before)
	}
}

// gatedLeases holds every Acquire until open is closed, then takes the lease from inner.
type gatedLeases struct {
	inner   *memLeases
	open    chan struct{}
	waiting atomic.Int32
}

func (g *gatedLeases) Acquire(ctx context.Context, name string, ttl time.Duration) (func(), error) {
	g.waiting.Add(1)
	<-g.open
	return g.inner.Acquire(ctx, name, ttl)
}

// A replica whose refresh waits for the lease while another replica refreshes takes the pair
// that reaches it meanwhile through the registry: one refresh across the two, not one each
// (the second would spend the new refresh token and need no refresh at all).
func TestRefreshTakesThePairAnotherReplicaMadeMeanwhile(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	leases := &memLeases{}
	gate := &gatedLeases{inner: leases, open: make(chan struct{})}
	replica := func(l Leaser) *Service {
		svc, err := New(ctx, Options{Catalog: h.cat, Settings: h.opts, Client: h.fake.Client(), Clock: h.clock,
			Store: &recordStore{}, Expire: &expirer{}, Leases: l, Shared: &memStore{m: map[string]string{}}})
		if err != nil {
			t.Fatal(err)
		}
		h.cat.OnChange(svc.Sync)
		return svc
	}
	a, b := replica(leases), replica(gate)
	conn, _ := h.signIn("ada@example.com")
	tok := h.stored(conn.ID).AccessToken.Reveal()
	before := h.fake.refreshes.Load()

	got := make(chan string, 1)
	go func() {
		next, _ := b.TokenRejected(ctx, h.entry(conn.ID), tok)
		got <- next
	}()
	servicetest.WaitUntil(t, "B's refresh waits for the lease", func() bool { return gate.waiting.Load() == 1 })
	fresh, err := a.TokenRejected(ctx, h.entry(conn.ID), tok)
	if err != nil || fresh == tok {
		t.Fatalf("A's refresh: %v", err)
	}
	// A's pair reaches B through the registry, as another replica's catalog reload brings it.
	if err := h.cat.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if cred, _, _, _ := b.held(conn.ID); cred.AccessToken.Reveal() != fresh {
		t.Fatal("A's pair did not reach B")
	}
	close(gate.open)
	if next := <-got; next != fresh || h.fake.refreshes.Load() != before+1 {
		t.Fatalf("B got A's token: %v; %d refreshes, want 1", next == fresh, h.fake.refreshes.Load()-before)
	}
}
