package resilience

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/services/settings"
)

func openTestDB(t *testing.T) *db.DB {
	t.Helper()
	d, err := db.Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBreakerStoreRoundTrip persists breakers through the real table (the built-in providers
// openai and anthropic exist after migration) and restarts from it.
func TestBreakerStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	d := openTestDB(t)
	clk := clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_000))
	batch := map[BreakerKey]BreakerState{}
	b := NewBreakers(clk, func(s BreakerState) { batch[s.Key()] = s })
	cfg := breakerCfg(t, nil)
	model := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Scope = "model" })
	openBreaker(t, b, "openai", "", cfg)
	call(t, b, "anthropic", "claude-x", model, Result{Transport: true})
	call(t, b, "anthropic", "claude-y", model, err503)
	call(t, b, "anthropic", "claude-y", model, ok200) // back to nothing: the row goes
	call(t, b, "deleted-provider", "", cfg, err503)   // no such provider: skipped
	if err := SaveBreakerStates(ctx, d, batch); err != nil {
		t.Fatal(err)
	}

	rows, err := LoadBreakerStates(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows: %+v", rows)
	}
	open, counting := rows[1], rows[0] // ordered by provider, model
	if open.Provider != "openai" || open.State != CircuitOpen || !open.OpenedAt.Equal(clk.Now()) ||
		!open.NextProbeAt.Equal(clk.Now().Add(30*time.Second)) || open.ConsecutiveFailures != 5 ||
		open.LastFailure != "status 503" || !open.LastFailureAt.Equal(clk.Now()) {
		t.Fatalf("open row: %+v", open)
	}
	if counting.Provider != "anthropic" || counting.Model != "claude-x" || counting.State != CircuitClosed ||
		counting.ConsecutiveFailures != 1 || counting.LastFailure != "transport error" || !counting.OpenedAt.IsZero() {
		t.Fatalf("counting row: %+v", counting)
	}

	clk.Advance(10 * time.Second)
	b2 := NewBreakers(clk, nil)
	b2.Load(rows)
	if _, oe := b2.Allow("openai", "", cfg); oe == nil || oe.RetryAfter != 20*time.Second {
		t.Fatalf("open breaker after restart: %+v", oe)
	}

	// Reset deletes the row; deleting the provider removes its rows.
	clear(batch)
	b.Reset("openai", "")
	if err := SaveBreakerStates(ctx, d, batch); err != nil {
		t.Fatal(err)
	}
	if rows, _ := LoadBreakerStates(ctx, d); len(rows) != 1 || rows[0].Provider != "anthropic" {
		t.Fatalf("after reset: %+v", rows)
	}
	p, err := db.GetProviderByName(ctx, d.W, "anthropic")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteProvider(ctx, d.W, p.ID); err != nil {
		t.Fatal(err)
	}
	if rows, _ := LoadBreakerStates(ctx, d); len(rows) != 0 {
		t.Fatalf("rows of a deleted provider: %+v", rows)
	}
}
