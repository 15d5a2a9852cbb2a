package clientkeys

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"switchyard/db"
	"switchyard/db/dbtest"
	"switchyard/services/servicetest"
)

// heard is one call of the change hooks.
type heard struct {
	id     int64
	active bool
	models bool // the key's access restricts models
}

// replica is one key service on the shared database with what its hooks heard.
type replica struct {
	*Service
	mu        sync.Mutex
	changes   []heard
	committed []string
}

func newReplica(t *testing.T, d *db.DB) *replica {
	t.Helper()
	s, err := New(context.Background(), d, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now, func(int64) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{Service: s}
	s.OnChange(func(_ context.Context, id int64, a *Access, active bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.changes = append(r.changes, heard{id: id, active: active, models: a.RestrictsModels()})
	})
	s.OnCommitted(func(topic string) { r.mu.Lock(); r.committed = append(r.committed, topic); r.mu.Unlock() })
	return r
}

// take returns what the hooks heard since the last take.
func (r *replica) take() ([]heard, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, co := r.changes, r.committed
	r.changes, r.committed = nil, nil
	return ch, co
}

func (r *replica) reload(t *testing.T, what string, want ...heard) {
	t.Helper()
	r.take()
	if err := r.Reload(context.Background()); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	got, committed := r.take()
	if !slices.Equal(got, want) {
		t.Errorf("%s: the reload ran the change hooks with %+v, want %+v", what, got, want)
	}
	if len(committed) > 0 {
		t.Errorf("%s: the reload announced %v", what, committed)
	}
}

// A replica that reloads after another one wrote answers for the keys as the other does: a new
// key works, a changed one has its new lists, a revoked one is refused, and the change hooks
// run as for the local write. Last-used times written elsewhere change nothing.
func TestReloadFollowsAnotherReplica(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	a, b := newReplica(t, d), newReplica(t, d)
	b.reload(t, "nothing changed")

	k, err := a.Create(ctx, Input{Name: ptr("agent")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Authenticate(k.Secret); ok {
		t.Fatal("the replica knew the key before it reloaded")
	}
	b.reload(t, "key created")
	if id, ok := b.Authenticate(k.Secret); !ok || id.KeyID != k.ID || id.Access.RestrictsModels() {
		t.Fatalf("after the reload: %+v, %v", id, ok)
	}

	// Uses recorded and written by the other replica are no change.
	if _, ok := a.Authenticate(k.Secret); !ok {
		t.Fatal("refused where it was made")
	}
	a.Flush(ctx)
	b.reload(t, "last use written")

	if _, err := a.Update(ctx, k.ID, Input{AllowedModels: ptr([]string{"p/*"})}); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "access changed", heard{id: k.ID, active: true, models: true})
	if id, _ := b.Authenticate(k.Secret); id.Access.AllowsModel("q/x") || !id.Access.AllowsModel("p/x") {
		t.Fatal("the new allowed_models did not reach the replica")
	}

	if err := a.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "revoked", heard{id: k.ID, active: false})
	if _, ok := b.Authenticate(k.Secret); ok {
		t.Fatal("the key revoked on the other replica is still accepted")
	}
	b.reload(t, "nothing changed since")
}

// Every committed write is announced once, after the lock is released; refused writes, uses
// and reloads are not.
func TestCommittedWritesAreAnnounced(t *testing.T) {
	ctx := context.Background()
	a := newReplica(t, dbtest.Open(t))
	a.OnCommitted(func(string) { _ = a.NameOf(1); _, _ = a.List(ctx) }) // runs outside the lock
	step := servicetest.Announcements(t, Topic, func() []string { _, got := a.take(); return got })
	var k Created
	step("create", 1, func() (err error) { k, err = a.Create(ctx, Input{Name: ptr("agent")}); return err })
	step("invalid create", 0, func() error { _, err := a.Create(ctx, Input{Name: ptr("")}); return err })
	step("update", 1, func() error { _, err := a.Update(ctx, k.ID, Input{Name: ptr("renamed")}); return err })
	step("invalid update", 0, func() error {
		_, err := a.Update(ctx, k.ID, Input{AllowedModels: ptr([]string{"bad["})})
		return err
	})
	step("update of a missing key", 0, func() error { _, err := a.Update(ctx, k.ID+100, Input{Name: ptr("x")}); return err })
	step("use and flush", 0, func() error { a.Authenticate(k.Secret); a.Flush(ctx); return nil })
	step("reload", 0, func() error { return a.Reload(ctx) })
	step("revoke", 1, func() error { return a.Revoke(ctx, k.ID) })
	step("revoke a missing key", 0, func() error { return a.Revoke(ctx, k.ID+100) })
	step("update of a revoked key", 0, func() error { _, err := a.Update(ctx, k.ID, Input{Name: ptr("x")}); return err })
}

// Reloads run beside requests and local writes (run with -race).
func TestReloadBesideRequestsAndWrites(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	a, b := newReplica(t, d), newReplica(t, d)
	k, err := b.Create(ctx, Input{Name: ptr("local")})
	if err != nil {
		t.Fatal(err)
	}
	var made []Created
	servicetest.Beside(t, func() { b.Authenticate(k.Secret) }, 10, func(int) error {
		if err := b.Reload(ctx); err != nil {
			return err
		}
		if _, err := b.Update(ctx, k.ID, Input{AllowedModels: ptr([]string{"p/*"})}); err != nil {
			return err
		}
		b.Flush(ctx)
		return nil
	}, func() {
		for range 10 {
			c, err := a.Create(ctx, Input{Name: ptr("remote")})
			if err != nil {
				t.Fatal(err)
			}
			made = append(made, c)
		}
	})
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range made {
		if _, ok := b.Authenticate(c.Secret); !ok {
			t.Fatalf("key %d unknown after the last reload", c.ID)
		}
	}
}
