package resilience

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestStoredPins(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	p := NewStoredPins(clock, 0, nil)

	if _, ok := p.Connection(1, "openai", []string{"resp_1"}); ok {
		t.Fatal("an empty table found a pin")
	}
	p.Record(1, "openai", 7, []string{"resp_1", "rs_1", "msg_1"})
	if id, ok := p.Connection(1, "openai", []string{"resp_x", "rs_1"}); !ok || id != 7 {
		t.Errorf("rs_1: %d %v, want connection 7", id, ok)
	}
	// The first id known decides; the order is the caller's.
	p.Record(1, "openai", 9, []string{"resp_2"})
	if id, _ := p.Connection(1, "openai", []string{"resp_2", "resp_1"}); id != 9 {
		t.Errorf("resp_2 first: connection %d, want 9", id)
	}
	// Another client key, another provider: nothing.
	if _, ok := p.Connection(2, "openai", []string{"resp_1"}); ok {
		t.Error("another client key's pin was found")
	}
	if _, ok := p.Connection(1, "azure", []string{"resp_1"}); ok {
		t.Error("another provider's pin was found")
	}
	// A later answer on another connection moves the id.
	p.Record(1, "openai", 9, []string{"resp_1"})
	if id, _ := p.Connection(1, "openai", []string{"resp_1"}); id != 9 {
		t.Errorf("moved: connection %d, want 9", id)
	}
	// Empty and overlong ids are not pinned.
	p.Record(1, "openai", 7, []string{"", strings.Repeat("x", MaxStoredID+1)})
	if p.Len() != 4 {
		t.Errorf("%d pins, want 4 (resp_1, rs_1, msg_1, resp_2)", p.Len())
	}

	// A pin lasts StoredPinTTL after its last use.
	clock.Advance(StoredPinTTL - time.Hour)
	if _, ok := p.Connection(1, "openai", []string{"msg_1"}); !ok {
		t.Fatal("msg_1 expired early")
	}
	clock.Advance(2 * time.Hour)
	if _, ok := p.Connection(1, "openai", []string{"rs_1"}); ok {
		t.Error("rs_1 outlived its TTL")
	}
	if _, ok := p.Connection(1, "openai", []string{"msg_1"}); !ok {
		t.Error("msg_1, used since, expired")
	}
	if n := p.Sweep(); n != 2 { // resp_1 and resp_2; rs_1 went at its lookup
		t.Errorf("swept %d, want 2", n)
	}
	if p.Len() != 1 {
		t.Errorf("%d pins after the sweep, want 1", p.Len())
	}
}

func TestStoredPinsLimit(t *testing.T) {
	clock := clockwork.NewFakeClock()
	p := NewStoredPins(clock, 3, nil)
	for i := range 5 {
		clock.Advance(time.Second)
		p.Record(1, "openai", int64(i), []string{fmt.Sprintf("resp_%d", i)})
	}
	if p.Len() != 3 {
		t.Fatalf("%d pins, want the limit 3", p.Len())
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := p.Connection(1, "openai", []string{fmt.Sprintf("resp_%d", i)}); ok != want {
			t.Errorf("resp_%d held %v, want %v (the least recently used go first)", i, ok, want)
		}
	}
}

func TestStoredPinsSweeperEnds(t *testing.T) {
	clock := clockwork.NewFakeClock()
	p := NewStoredPins(clock, 0, nil)
	p.Record(1, "openai", 1, []string{"resp_1"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.RunSweeper(ctx, time.Minute); close(done) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(StoredPinTTL + time.Minute)
	deadline := time.After(5 * time.Second)
	for p.Len() != 0 {
		select {
		case <-deadline:
			t.Fatal("the sweeper did not drop the expired pin")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	<-done
}

// What is persisted: a pin made or moved, and a pin dropped; not a use. Load installs the live
// pins and deletes the expired ones.
func TestStoredPinsPersist(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var saved []string
	p := NewStoredPins(clock, 2, func(k StoredKey, pin *StoredPin) {
		if pin == nil {
			saved = append(saved, "-"+k.ID)
		} else {
			saved = append(saved, fmt.Sprintf("%s@%d", k.ID, pin.ConnectionID))
		}
	})
	p.Record(1, "openai", 7, []string{"resp_1"})
	p.Record(1, "openai", 7, []string{"resp_1"}) // a use
	p.Record(1, "openai", 8, []string{"resp_1"}) // a move
	clock.Advance(time.Second)
	p.Record(1, "openai", 8, []string{"resp_2", "resp_3"}) // resp_1 is evicted past the bound
	if want := "resp_1@7 resp_1@8 resp_2@8 -resp_1 resp_3@8"; strings.Join(saved, " ") != want {
		t.Errorf("persisted %q, want %q", strings.Join(saved, " "), want)
	}

	saved = nil
	q := NewStoredPins(clock, 0, func(k StoredKey, pin *StoredPin) {
		if pin == nil {
			saved = append(saved, "-"+k.ID)
		}
	})
	now := clock.Now()
	q.Load([]StoredPin{
		{StoredKey: StoredKey{1, "old"}, Provider: "openai", ConnectionID: 7, UsedAt: now.Add(-StoredPinTTL)},
		{StoredKey: StoredKey{1, "live"}, Provider: "openai", ConnectionID: 9, UsedAt: now.Add(-time.Hour)},
	})
	if id, ok := q.Connection(1, "openai", []string{"live"}); !ok || id != 9 || q.Len() != 1 || strings.Join(saved, " ") != "-old" {
		t.Errorf("loaded: %d %v, %d held, deleted %q", id, ok, q.Len(), saved)
	}
	// Another replica's records are installed and forgotten without a write.
	saved = nil
	q.Apply(StoredKey{1, "other"}, &StoredPin{Provider: "openai", ConnectionID: 4, UsedAt: now})
	if id, _ := q.Connection(1, "openai", []string{"other"}); id != 4 {
		t.Errorf("applied pin: %d", id)
	}
	q.Apply(StoredKey{1, "other"}, nil)
	if _, ok := q.Connection(1, "openai", []string{"other"}); ok || len(saved) != 0 {
		t.Errorf("after the applied delete: found %v, persisted %q", ok, saved)
	}
}
