package settings

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"switchyard/db"
	"switchyard/db/dbtest"
	"switchyard/services/servicetest"
)

// resilienceReplica is one resilience settings service on the shared store, with the snapshots
// its listeners got and the topics it announced.
type resilienceReplica struct {
	*Service
	mu        sync.Mutex
	heard     []*Snapshot
	committed []string
}

func newResilienceReplica(t *testing.T, store Store, env map[string]string) *resilienceReplica {
	t.Helper()
	s, err := New(context.Background(), store, envFrom(env), fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	r := &resilienceReplica{Service: s}
	s.OnChange(func(snap *Snapshot) { r.mu.Lock(); r.heard = append(r.heard, snap); r.mu.Unlock() })
	s.OnCommitted(func(topic string) { r.mu.Lock(); r.committed = append(r.committed, topic); r.mu.Unlock() })
	return r
}

func (r *resilienceReplica) take() ([]*Snapshot, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, c := r.heard, r.committed
	r.heard, r.committed = nil, nil
	return h, c
}

// reload reloads r and returns the snapshots its listeners got; a reload announces nothing.
func (r *resilienceReplica) reload(t *testing.T, what string) []*Snapshot {
	t.Helper()
	r.take()
	if err := r.Reload(context.Background()); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	heard, committed := r.take()
	if len(committed) > 0 {
		t.Errorf("%s: the reload announced %v", what, committed)
	}
	return heard
}

// A PATCH saved by one replica reaches another at its reload: the new snapshot is published
// over that replica's own environment and its listeners hear it once; a reload that finds
// nothing new publishes nothing.
func TestReloadFollowsAnotherReplica(t *testing.T) {
	ctx := context.Background()
	store := db.KV{DB: dbtest.Open(t)}
	a := newResilienceReplica(t, store, nil)
	b := newResilienceReplica(t, store, map[string]string{"SWITCHYARD_RETRY_JITTER": "0.25"})

	before := b.Snapshot()
	if heard := b.reload(t, "nothing saved"); len(heard) != 0 || b.Snapshot() != before {
		t.Fatalf("a reload without a save published %d snapshots", len(heard))
	}

	body := `{"retry": {"max_retries": 7, "retry_on_statuses": ["429", "5xx"]},
		"model_lockout": {"enabled": true, "families": {"anthropic": {"opus": ["claude-opus-*"]}}}}`
	saved, err := a.Patch(ctx, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	heard := b.reload(t, "patched elsewhere")
	if len(heard) != 1 || heard[0] != b.Snapshot() {
		t.Fatalf("listeners heard %d snapshots, want the new one once", len(heard))
	}
	got := b.Snapshot()
	if r := got.Resilience(); r.Retry.MaxRetries != 7 || !r.ModelLockout.Enabled || !got.RetryOn().Match(503) ||
		!reflect.DeepEqual(r.ModelLockout.Families, saved.Resilience().ModelLockout.Families) {
		t.Fatalf("after the reload: %+v", r)
	}
	if got.Revision() != saved.Revision() || got.Source("retry.max_retries") != SourcePersisted {
		t.Errorf("revision %d (want %d), source %q", got.Revision(), saved.Revision(), got.Source("retry.max_retries"))
	}
	if got.Resilience().Retry.Jitter != 0.25 || got.Source("retry.jitter") != SourceEnv {
		t.Errorf("the replica's own environment was lost: jitter %v from %s", got.Resilience().Retry.Jitter, got.Source("retry.jitter"))
	}
	if heard := b.reload(t, "nothing new"); len(heard) != 0 || b.Snapshot() != got {
		t.Fatalf("a second reload published %d snapshots", len(heard))
	}
	// The replica that saved reloads its own save as nothing new.
	if heard := a.reload(t, "own save"); len(heard) != 0 {
		t.Fatalf("reloading its own save published %d snapshots", len(heard))
	}

	// A change undone meanwhile is a new revision of the same values: published for the
	// revision, but no listener is told of a change.
	if _, err := a.Patch(ctx, []byte(`{"retry": {"max_retries": 8}}`)); err != nil {
		t.Fatal(err)
	}
	undone, err := a.Patch(ctx, []byte(`{"retry": {"max_retries": 7}}`))
	if err != nil {
		t.Fatal(err)
	}
	if heard := b.reload(t, "change undone"); len(heard) != 0 || b.Snapshot().Revision() != undone.Revision() {
		t.Fatalf("heard %d, revision %d (want none, %d)", len(heard), b.Snapshot().Revision(), undone.Revision())
	}
}

// A replica that saves before it heard of another's save keeps what the other saved: a save
// reads the store first.
func TestSaveKeepsWhatAnotherReplicaSaved(t *testing.T) {
	ctx := context.Background()
	store := db.KV{DB: dbtest.Open(t)}
	a, b := newResilienceReplica(t, store, nil), newResilienceReplica(t, store, nil)
	if _, err := a.Patch(ctx, patchOf("retry.max_retries", "7")); err != nil {
		t.Fatal(err)
	}
	b.take()
	snap, err := b.Patch(ctx, patchOf("circuit_breaker.failure_threshold", "9"))
	if err != nil {
		t.Fatal(err)
	}
	if r := snap.Resilience(); r.Retry.MaxRetries != 7 || r.CircuitBreaker.FailureThreshold != 9 {
		t.Fatalf("the save undid the other replica's: max_retries %d, failure_threshold %d", r.Retry.MaxRetries,
			r.CircuitBreaker.FailureThreshold)
	}
	if heard, _ := b.take(); len(heard) != 2 || heard[1] != snap {
		t.Fatalf("listeners heard %d snapshots, want the other's values, then the save", len(heard))
	}
	if heard := a.reload(t, "the second save"); len(heard) != 1 || a.Snapshot().Resilience().CircuitBreaker.FailureThreshold != 9 {
		t.Fatalf("heard %d; failure threshold %d", len(heard), a.Snapshot().Resilience().CircuitBreaker.FailureThreshold)
	}
}

// The OAuth settings follow another replica's save too.
func TestOAuthReloadFollowsAnotherReplica(t *testing.T) {
	ctx := context.Background()
	store := db.KV{DB: dbtest.Open(t)}
	a, err := NewOAuth(ctx, store, nil, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewOAuth(ctx, store, nil, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	a.OnCommitted(func(topic string) { topics = append(topics, topic) })
	before := b.Snapshot()
	if err := b.Reload(ctx); err != nil || b.Snapshot() != before {
		t.Fatalf("a reload without a save: %v, swapped %v", err, b.Snapshot() != before)
	}
	if _, err := a.Patch(ctx, []byte(`{"claude": {"token_url": "https://auth.example/token"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Patch(ctx, []byte(`{"claude": {"token_url": "not a url"}}`)); err == nil {
		t.Fatal("an invalid address was saved")
	}
	if !slices.Equal(topics, []string{OAuthTopic}) {
		t.Fatalf("announced %v, want one %q", topics, OAuthTopic)
	}
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Snapshot().Claude().TokenURL; got != "https://auth.example/token" {
		t.Fatalf("token_url %q after the reload", got)
	}
}

// Every committed save is announced once, with the topic, after the lock is released; a patch
// that is refused, fails to save or changes nothing is not, and neither is a reload.
func TestCommittedSavesAreAnnounced(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	a := newResilienceReplica(t, store, nil)
	a.OnCommitted(func(string) { _ = a.Reload(ctx) }) // runs outside the lock
	step := servicetest.Announcements(t, Topic, func() []string { _, got := a.take(); return got })
	patch := func(body string) func() error {
		return func() error { _, err := a.Patch(ctx, []byte(body)); return err }
	}
	step("patch", 1, patch(`{"retry": {"max_retries": 7}}`))
	step("same values again", 0, patch(`{"retry": {"max_retries": 7}}`))
	step("invalid patch", 0, patch(`{"retry": {"max_retries": -1}}`))
	store.saveErr = errors.New("disk full")
	step("failed save", 0, patch(`{"retry": {"max_retries": 8}}`))
	store.saveErr = nil
	step("reload", 0, func() error { return a.Reload(ctx) })
	step("revert", 1, patch(`{"retry": {"max_retries": null}}`))
}

// Reloads run beside requests reading the snapshot and beside local saves (run with -race).
func TestReloadBesideSaves(t *testing.T) {
	ctx := context.Background()
	store := db.KV{DB: dbtest.Open(t)}
	a, b := newResilienceReplica(t, store, nil), newResilienceReplica(t, store, nil)
	if _, err := a.Patch(ctx, patchOf("retry.max_retries", "9")); err != nil {
		t.Fatal(err)
	}
	read := func() { _ = b.Snapshot().Resilience().Retry.MaxRetries }
	servicetest.Beside(t, read, 20, func(int) error { return b.Reload(ctx) }, func() {
		for _, jitter := range []string{"0.1", "0.2", "0.3", "0.4", "0.5"} {
			if _, err := b.Patch(ctx, patchOf("retry.jitter", jitter)); err != nil {
				t.Fatal(err)
			}
		}
	})
	if r := b.Snapshot().Resilience(); r.Retry.MaxRetries != 9 || r.Retry.Jitter != 0.5 {
		t.Fatalf("after the saves: retries %d, jitter %v", r.Retry.MaxRetries, r.Retry.Jitter)
	}
}
