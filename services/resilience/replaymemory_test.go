package resilience

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestReplayMemory(t *testing.T) {
	clock := clockwork.NewFakeClock()
	m := NewReplayMemory(clock, 0)
	if m.Holds(1) || m.Unreadable(1, "gpt-5", "sealed-a") {
		t.Fatal("an empty memory holds something")
	}
	m.Record(1, "gpt-5", []string{"sealed-a", "", "sealed-b"})
	if !m.Holds(1) || m.Holds(2) {
		t.Fatalf("holds 1 %v, 2 %v; want true, false", m.Holds(1), m.Holds(2))
	}
	for _, c := range []struct {
		conn        int64
		model, seal string
		want        bool
	}{
		{1, "gpt-5", "sealed-a", true}, {1, "gpt-5", "sealed-b", true},
		{1, "gpt-5", "sealed-c", false},  // never refused
		{2, "gpt-5", "sealed-a", false},  // another connection may read it
		{1, "gpt-4o", "sealed-a", false}, // and another model (a signature is the model's)
		{1, "gpt-5", "", false},
	} {
		if got := m.Unreadable(c.conn, c.model, c.seal); got != c.want {
			t.Errorf("Unreadable(%d, %s, %q) = %v, want %v", c.conn, c.model, c.seal, got, c.want)
		}
	}
	if m.Len() != 2 {
		t.Errorf("%d seals, want 2 (the empty one is not kept)", m.Len())
	}

	// A seal lasts ReplayMemoryTTL after it was last seen.
	clock.Advance(ReplayMemoryTTL - time.Hour)
	m.Unreadable(1, "gpt-5", "sealed-a")
	clock.Advance(2 * time.Hour)
	if m.Unreadable(1, "gpt-5", "sealed-b") || !m.Unreadable(1, "gpt-5", "sealed-a") {
		t.Error("expiry: sealed-b should have gone, sealed-a (seen since) stayed")
	}
	clock.Advance(ReplayMemoryTTL)
	if n := m.Sweep(); n != 1 || m.Holds(1) {
		t.Errorf("swept %d, holds %v; want 1 and nothing left", n, m.Holds(1))
	}

	// New credentials: what the connection could not read is forgotten, another's stays.
	m.Record(1, "gpt-5", []string{"x", "y"})
	m.Record(2, "gpt-5", []string{"x"})
	m.ForgetConnection(1)
	if m.Holds(1) || !m.Unreadable(2, "gpt-5", "x") || m.Len() != 1 {
		t.Errorf("after forgetting 1: holds %v, len %d", m.Holds(1), m.Len())
	}
}

func TestReplayMemoryLimit(t *testing.T) {
	clock := clockwork.NewFakeClock()
	m := NewReplayMemory(clock, 2)
	for i := range 4 {
		clock.Advance(time.Second)
		m.Record(int64(i%2+1), "m", []string{fmt.Sprint("seal-", i)})
	}
	// seal-0 (connection 1) and seal-1 (connection 2) went; seal-2 (1) and seal-3 (2) stay.
	if m.Len() != 2 || !m.Holds(1) || !m.Holds(2) || m.Unreadable(1, "m", "seal-0") || !m.Unreadable(1, "m", "seal-2") {
		t.Fatalf("len %d, holds %v %v", m.Len(), m.Holds(1), m.Holds(2))
	}
	m.Record(1, "m", []string{"seal-4", "seal-5"})
	if m.Holds(2) {
		t.Error("connection 2's last seal was evicted but it still holds some")
	}
}
