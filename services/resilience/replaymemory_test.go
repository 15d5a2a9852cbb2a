package resilience

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestReplayMemory(t *testing.T) {
	clock := clockwork.NewFakeClock()
	m := NewReplayMemory(clock, 0, nil)
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
	m := NewReplayMemory(clock, 2, nil)
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

// A seal remembered is persisted, a use is not, a forgotten one is deleted; what is loaded at
// start and applied from another replica answers as if it was learned here, without a write.
func TestReplayMemoryPersist(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var saved []string
	persist := func(k ReplayKey, s *ReplaySeal) {
		if s == nil {
			saved = append(saved, fmt.Sprint("-", k.ConnectionID))
			return
		}
		if s.ReplayKey != k || !s.SeenAt.Equal(clock.Now()) {
			t.Errorf("persisted %+v under %+v", s, k)
		}
		saved = append(saved, fmt.Sprint("+", k.ConnectionID))
	}
	m := NewReplayMemory(clock, 0, persist)
	m.Record(1, "gpt-5", []string{"a", "b"})
	m.Record(1, "gpt-5", []string{"a"}) // known: only marked seen
	m.Unreadable(1, "gpt-5", "b")
	m.Record(2, "gpt-5", []string{"a"})
	m.ForgetConnection(1)
	if got := fmt.Sprint(saved); got != "[+1 +1 +2 -1 -1]" {
		t.Errorf("persisted %s", got)
	}

	// The digest round-trips as hex.
	k := ReplayKey{ConnectionID: 3, Model: "claude-opus-4-5", Seal: sealDigest("sig")}
	text, _ := k.Seal.MarshalText()
	var back SealDigest
	if err := back.UnmarshalText(text); err != nil || back != k.Seal || len(text) != 32 {
		t.Fatalf("digest %s → %x, %v", text, back, err)
	}
	if err := back.UnmarshalText([]byte("abc")); err == nil {
		t.Error("a short digest was read")
	}

	saved = nil
	n := NewReplayMemory(clock, 0, persist)
	now := clock.Now()
	n.Load([]ReplaySeal{
		{ReplayKey: k, SeenAt: now.Add(-time.Hour)},
		{ReplayKey: ReplayKey{ConnectionID: 4, Model: "m", Seal: sealDigest("old")}, SeenAt: now.Add(-ReplayMemoryTTL)},
	})
	if !n.Holds(3) || n.Holds(4) || !n.Unreadable(3, "claude-opus-4-5", "sig") || n.Len() != 1 || fmt.Sprint(saved) != "[-4]" {
		t.Fatalf("loaded: holds %v %v, len %d, persisted %s", n.Holds(3), n.Holds(4), n.Len(), saved)
	}
	saved = nil
	other := ReplayKey{ConnectionID: 5, Model: "gpt-5", Seal: sealDigest("x")}
	n.Apply(other, &ReplaySeal{SeenAt: now})
	if !n.Holds(5) || !n.Unreadable(5, "gpt-5", "x") {
		t.Fatal("an applied seal is not known")
	}
	n.Apply(other, nil)
	if n.Holds(5) || len(saved) != 0 {
		t.Fatalf("after the applied delete: holds %v, persisted %s", n.Holds(5), saved)
	}
}
