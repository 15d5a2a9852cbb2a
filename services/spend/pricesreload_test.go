package spend

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"sync"
	"testing"

	"switchyard/db"
	"switchyard/db/dbtest"
	"switchyard/services/servicetest"
)

// priceReplica is one price service on the shared store with what its hooks heard.
type priceReplica struct {
	*PriceService
	mu        sync.Mutex
	changes   int
	committed []string
}

func newPriceReplica(t *testing.T, store PriceStore, box SecretBox) *priceReplica {
	t.Helper()
	s, _, err := NewPriceService(context.Background(), store, box)
	if err != nil {
		t.Fatal(err)
	}
	r := &priceReplica{PriceService: s}
	s.OnChange(func() { r.mu.Lock(); r.changes++; r.mu.Unlock() })
	s.OnCommitted(func(topic string) { r.mu.Lock(); r.committed = append(r.committed, topic); r.mu.Unlock() })
	return r
}

func (r *priceReplica) take() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, c := r.changes, r.committed
	r.changes, r.committed = 0, nil
	return n, c
}

// reload reloads r and checks how often its OnChange functions ran; a reload announces nothing.
func (r *priceReplica) reload(t *testing.T, what string, changes int) {
	t.Helper()
	r.take()
	if err := r.Reload(context.Background()); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	n, committed := r.take()
	if n != changes {
		t.Errorf("%s: OnChange ran %d times, want %d", what, n, changes)
	}
	if len(committed) > 0 {
		t.Errorf("%s: the reload announced %v", what, committed)
	}
}

// Prices, the time zone and the webhook secret saved by one replica are used by another after
// its reload, with its OnChange functions run for a new document (not for a rotated secret);
// a reload that finds nothing new runs nothing.
func TestPricesReloadFollowsAnotherReplica(t *testing.T) {
	ctx := context.Background()
	store, box := db.KV{DB: dbtest.Open(t)}, newBox(t, "k")
	a := newPriceReplica(t, store, box)
	if _, committed := a.take(); !slices.Equal(committed, []string{Topic}) {
		t.Fatalf("the first start saved a webhook secret and announced %v", committed)
	}
	b := newPriceReplica(t, store, box)
	if _, committed := b.take(); len(committed) != 0 {
		t.Fatalf("a start that found the secret announced %v", committed)
	}
	before := b.Snapshot()
	b.reload(t, "nothing saved", 0)
	if b.Snapshot() != before {
		t.Fatal("a reload without a change swapped the snapshot")
	}

	if _, err := a.Patch(ctx, []byte(`{"models": {"p/m": {"input_per_mtok": 1, "output_per_mtok": 2}},
		"time_zone": "Europe/Berlin", "budget_webhook_url": "https://hooks.example/b"}`)); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "saved elsewhere", 1)
	if p, src, ok := b.Lookup("p", "openai", "m"); !ok || p.InputPerMTok != 1 || src.Kind != SourceOverride {
		t.Fatalf("price after the reload: %+v from %v", p, src)
	}
	if b.Location().String() != "Europe/Berlin" {
		t.Fatalf("time zone %s", b.Location())
	}
	if url, _ := b.Webhook(); url != "https://hooks.example/b" {
		t.Fatalf("webhook %q", url)
	}
	b.reload(t, "nothing new", 0)
	a.reload(t, "its own save", 0)

	secret, err := a.RotateWebhookSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.reload(t, "secret rotated", 0)
	if _, got := b.Webhook(); got != secret {
		t.Fatal("the rotated secret did not reach the replica")
	}
	b.reload(t, "nothing new since", 0)

	// A secret this replica cannot open is refused; the one in use stays.
	other := newBox(t, "z")
	sealed := base64.StdEncoding.EncodeToString(other.Seal([]byte("whsec_x"), webhookSecretAAD))
	if err := store.PutValue(ctx, webhookSecretKey, sealed); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(ctx); err == nil {
		t.Fatal("a secret that does not open was taken")
	}
	if _, got := b.Webhook(); got != secret {
		t.Fatal("the secret in use changed")
	}
}

// A replica that saves before it heard of another's save keeps what the other saved.
func TestPricesSaveKeepsWhatAnotherReplicaSaved(t *testing.T) {
	ctx := context.Background()
	store, box := db.KV{DB: dbtest.Open(t)}, newBox(t, "k")
	a, b := newPriceReplica(t, store, box), newPriceReplica(t, store, box)
	if _, err := a.Patch(ctx, []byte(`{"models": {"p/m": {"input_per_mtok": 1, "output_per_mtok": 2}}}`)); err != nil {
		t.Fatal(err)
	}
	b.take()
	view, err := b.Patch(ctx, []byte(`{"time_zone": "Asia/Tokyo"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := view.Models["p/m"]; !ok || view.TimeZone != "Asia/Tokyo" {
		t.Fatalf("the save undid the other replica's: %+v", view.PricesDoc)
	}
	if n, committed := b.take(); n != 1 || !slices.Equal(committed, []string{Topic}) {
		t.Fatalf("OnChange ran %d times, announced %v", n, committed)
	}
	a.reload(t, "the second save", 1)
	if a.Location().String() != "Asia/Tokyo" || len(a.Snapshot().Models) != 1 {
		t.Fatalf("after the reload: %+v", a.Snapshot())
	}
}

// Every committed write is announced once, after the lock is released; a refused, failed or
// empty save is not, and neither is a reload.
func TestPricesCommittedWritesAreAnnounced(t *testing.T) {
	ctx := context.Background()
	kv := newMemKV()
	a := newPriceReplica(t, kv, newBox(t, "k"))
	a.OnCommitted(func(string) { _ = a.Reload(ctx) }) // runs outside the lock
	step := servicetest.Announcements(t, Topic, func() []string { _, got := a.take(); return got })
	patch := func(body string) func() error {
		return func() error { _, err := a.Patch(ctx, []byte(body)); return err }
	}
	step("save", 1, patch(`{"time_zone": "Europe/Berlin"}`))
	step("same document", 0, patch(`{"time_zone": "Europe/Berlin"}`))
	step("invalid", 0, patch(`{"time_zone": "Mars/Olympus"}`))
	kv.fail = errors.New("disk full")
	step("failed save", 0, patch(`{"time_zone": "UTC"}`))
	step("failed rotation", 0, func() error { _, err := a.RotateWebhookSecret(ctx); return err })
	kv.fail = nil
	step("rotation", 1, func() error { _, err := a.RotateWebhookSecret(ctx); return err })
	step("reload", 0, func() error { return a.Reload(ctx) })
}

// Reloads run beside requests and local saves (run with -race).
func TestPricesReloadBesideSaves(t *testing.T) {
	ctx := context.Background()
	store, box := db.KV{DB: dbtest.Open(t)}, newBox(t, "k")
	a, b := newPriceReplica(t, store, box), newPriceReplica(t, store, box)
	if _, err := a.Patch(ctx, []byte(`{"models": {"p/m": {"input_per_mtok": 1, "output_per_mtok": 2}}}`)); err != nil {
		t.Fatal(err)
	}
	read := func() {
		b.Lookup("p", "openai", "m")
		b.Webhook()
	}
	servicetest.Beside(t, read, 20, func(int) error { return b.Reload(ctx) }, func() {
		for _, zone := range []string{"Asia/Tokyo", "Europe/Berlin", "America/New_York"} {
			if _, err := b.Patch(ctx, []byte(`{"time_zone": "`+zone+`"}`)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.RotateWebhookSecret(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if p, _, ok := b.Lookup("p", "openai", "m"); !ok || p.InputPerMTok != 1 || b.Location().String() != "America/New_York" {
		t.Fatalf("after the saves: %+v, %s", p, b.Location())
	}
}
