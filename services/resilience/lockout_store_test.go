package resilience

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
)

// lockoutDB opens a migrated database in a temp dir with two anthropic connections.
func lockoutDB(t *testing.T) (*db.DB, []int64) {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	provs, err := db.ListProviders(ctx, d.W)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(provs, func(p db.Provider) bool { return p.Name == "anthropic" })
	var ids []int64
	for _, name := range []string{"a", "b"} {
		c := db.Connection{ProviderID: provs[i].ID, Name: name, AuthType: "api_key", Secret: []byte{1}, Enabled: true}
		if err := db.InsertConnection(ctx, d.W, &c); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	return d, ids
}

func TestLockoutStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	d, ids := lockoutDB(t)
	clk := clockwork.NewFakeClockAt(lockoutEpoch)
	cfg := lockCfg()
	cfg.Families = opusFamilies

	// The write-behind queue keeps the newest value per key; a map does the same here.
	batch := map[LockoutKey]*Lockout{}
	l := NewLockouts(clk, cfg, func(k LockoutKey, v *Lockout) { batch[k] = v })
	fail(t, l, "anthropic", ids[0], "claude-opus-4", 429)
	l.RecordFailure("anthropic", ids[0], "claude-opus-4", 503, "server_error", 3*time.Hour, true)
	l.RecordFailure("anthropic", ids[1], "claude-sonnet-4", 404, "not_found", 10*time.Minute, false)
	fail(t, l, "anthropic", 999, "claude-opus-4", 429) // a connection deleted meanwhile: skipped
	if err := SaveLockouts(ctx, d, batch); err != nil {
		t.Fatal(err)
	}

	// Escalate one, clear another: an update and a delete in the next batch.
	batch = map[LockoutKey]*Lockout{}
	clk.Advance(2 * time.Minute)
	fail(t, l, "anthropic", ids[0], "claude-opus-4-1", 429)
	l.Clear("anthropic", ids[1], "claude-sonnet-4")
	if err := SaveLockouts(ctx, d, batch); err != nil {
		t.Fatal(err)
	}

	stored, err := LoadLockouts(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	want := []Lockout{
		{Provider: "anthropic", ConnectionID: ids[0], Model: "claude-opus-4-1", Target: "family:opus", Scope: LockoutFamily,
			Reason: "rate_limit", FailureCount: 2, ExpiresAt: clk.Now().Add(4 * time.Minute)},
		{Provider: "anthropic", ConnectionID: ids[0], Model: "claude-opus-4", Target: "exact:claude-opus-4", Scope: LockoutExact,
			Reason: "server_error", FailureCount: 1, ExpiresAt: lockoutEpoch.Add(3 * time.Hour)},
	}
	if !slices.EqualFunc(stored, want, lockoutEqual) {
		t.Fatalf("stored\n got %+v\nwant %+v", stored, want)
	}

	// A restart after the family lockout ran out brings back only the running one.
	clk.Advance(5 * time.Minute)
	l2 := NewLockouts(clk, cfg, nil)
	l2.Load(stored)
	if got := l2.List(clk.Now()); len(got) != 1 || !lockoutEqual(got[0], want[1]) {
		t.Fatalf("after restart: %+v", got)
	}
	if locked, _, _ := l2.Check("anthropic", ids[0], "claude-opus-4"); !locked {
		t.Fatal("the loaded lockout does not lock")
	}

	// Deleting the connection deletes its lockouts.
	if err := db.DeleteConnection(ctx, d.W, ids[0]); err != nil {
		t.Fatal(err)
	}
	if rows, err := db.ListModelLockouts(ctx, d.W); err != nil || len(rows) != 0 {
		t.Fatalf("rows after the connection was deleted: %v %v", rows, err)
	}
}

func lockoutEqual(a, b Lockout) bool {
	eq := a.ExpiresAt.Equal(b.ExpiresAt)
	a.ExpiresAt, b.ExpiresAt = time.Time{}, time.Time{}
	return eq && a == b
}
