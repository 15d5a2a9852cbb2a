package resilience

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestTargetCooldowns(t *testing.T) {
	clk := clockwork.NewFakeClock()
	var saved []TargetCooldown
	tc := NewTargetCooldowns(clk, func(c TargetCooldown) { saved = append(saved, c) })
	const base, max = 2 * time.Minute, 30 * time.Minute
	if ok, _ := tc.Check("a", "m", 1); ok {
		t.Fatal("an empty table rests something")
	}
	c := tc.Cool("a", "m", 1, "not_found", 0, base, max)
	if c.Level != 0 || !c.Until.Equal(clk.Now().Add(base)) {
		t.Fatalf("first rest: %+v", c)
	}
	if ok, got := tc.Check("a", "m", 1); !ok || got.Reason != "not_found" {
		t.Fatalf("check: %v %+v", ok, got)
	}
	for _, other := range []struct {
		p, m string
		id   int64
	}{{"a", "m", 2}, {"a", "n", 1}, {"b", "m", 1}} {
		if ok, _ := tc.Check(other.p, other.m, other.id); ok {
			t.Fatalf("%v rests too", other)
		}
	}
	// Each cooling in a row doubles, up to max; a hint wins (and may exceed max).
	clk.Advance(base)
	if c = tc.Cool("a", "m", 1, "not_found", 0, base, max); c.Level != 1 || !c.Until.Equal(clk.Now().Add(2*base)) {
		t.Fatalf("second rest: %+v", c)
	}
	for range 6 {
		c = tc.Cool("a", "m", 1, "not_found", 0, base, max)
	}
	if !c.Until.Equal(clk.Now().Add(max)) {
		t.Fatalf("capped rest ends %v, want %v", c.Until.Sub(clk.Now()), max)
	}
	if c = tc.Cool("a", "m", 3, "quota_exhausted", 5*time.Hour, base, max); !c.Until.Equal(clk.Now().Add(5 * time.Hour)) {
		t.Fatalf("hinted rest: %+v", c)
	}
	// A running rest is never shortened.
	if c = tc.Cool("a", "m", 3, "quota_exhausted", time.Minute, base, max); !c.Until.Equal(clk.Now().Add(5 * time.Hour)) {
		t.Fatalf("shortened: %+v", c)
	}
	// A success ends it; the time passing ends it too.
	tc.Success("a", "m", 1)
	if ok, _ := tc.Check("a", "m", 1); ok {
		t.Fatal("rest survived a success")
	}
	if last := saved[len(saved)-1]; !last.Until.IsZero() || last.ConnectionID != 1 {
		t.Fatalf("the end of a rest was not persisted as a delete: %+v", last)
	}
	clk.Advance(5*time.Hour + time.Second)
	if ok, _ := tc.Check("a", "m", 3); ok || len(tc.List()) != 0 {
		t.Fatal("a rest outlived its time")
	}
	// A rest long over starts the doubling anew.
	clk.Advance(2 * max)
	if c = tc.Cool("a", "m", 3, "quota_exhausted", 0, base, max); c.Level != 0 {
		t.Fatalf("level after a long pause: %+v", c)
	}
	// Load keeps what runs, drops what ended.
	other := NewTargetCooldowns(clk, nil)
	other.Load([]TargetCooldown{c, {Provider: "x", Model: "y", ConnectionID: 9, Until: clk.Now().Add(-time.Second)}})
	if l := other.List(); len(l) != 1 || l[0].Provider != "a" {
		t.Fatalf("loaded %+v", l)
	}
	if n := other.Clear("a", ""); n != 1 || len(other.List()) != 0 {
		t.Fatalf("clear: %d %+v", n, other.List())
	}
}
