package resilience

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/servicetest"
)

// pinLog records what the pin table hands to its persist hook: the newest value per key.
type pinLog struct {
	last  map[PinKey]*Pin
	saves int
}

func (l *pinLog) hook(k PinKey, p *Pin) {
	l.last[k] = p
	l.saves++
}

func (l *pinLog) deleted(k PinKey) bool { p, ok := l.last[k]; return ok && p == nil }

func newTestPins(ttl time.Duration, limit int) (*Pins, *clockwork.FakeClock, *pinLog) {
	clk := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	log := &pinLog{last: map[PinKey]*Pin{}}
	p := NewPins(clk, limit, log.hook)
	p.SetTTL(ttl)
	return p, clk, log
}

var (
	sessA = NewSession("key:1", "session-a")
	sessB = NewSession("key:1", "session-b")
)

// The life of a connection pin, step by step: each step is one call and what the table says after.
func TestConnectionPin(t *testing.T) {
	type step struct {
		name    string
		advance time.Duration
		do      func(p *Pins) PinEvent
		want    PinEvent
		pinned  int64 // the connection session A is pinned to on "p" afterwards; 0 = none
	}
	use := func(id int64) func(p *Pins) PinEvent {
		return func(p *Pins) PinEvent { return p.UseConnection(sessA, "p", id) }
	}
	failed := func(id int64) func(p *Pins) PinEvent {
		return func(p *Pins) PinEvent { return p.ConnectionFailed(sessA, "p", id) }
	}
	evict := func(id int64) func(p *Pins) PinEvent {
		return func(p *Pins) PinEvent { return p.EvictConnection(sessA, "p", id) }
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"reuse and TTL extension", []step{
			{"first use pins", 0, use(1), PinMade, 1},
			{"next use extends", 50 * time.Minute, use(1), PinExtended, 1},
			// 100 minutes after the pin was made, but 50 after its last use: still there.
			{"still pinned within the TTL of the last use", 50 * time.Minute, use(1), PinExtended, 1},
		}},
		{"expiry", []step{
			{"pinned", 0, use(1), PinMade, 1},
			{"an hour without use: gone", time.Hour, nil, 0, 0},
			{"the next use pins anew", 0, use(2), PinMade, 2},
		}},
		{"failover evicts; the connection that serves is pinned", []step{
			{"pinned", 0, use(1), PinMade, 1},
			{"evicting another connection does nothing", 0, evict(2), PinUnchanged, 1},
			{"failover away from the pinned one", 0, evict(1), PinCleared, 0},
			{"the one that served is pinned", 0, use(2), PinMade, 2},
		}},
		{"a use elsewhere moves the pin", []step{
			{"pinned", 0, use(1), PinMade, 1},
			{"served elsewhere", time.Minute, use(2), PinMoved, 2},
		}},
		{"three failures in a row clear", []step{
			{"pinned", 0, use(1), PinMade, 1},
			{"failure 1", 0, failed(1), PinCounted, 1},
			{"failure 2", 0, failed(1), PinCounted, 1},
			{"failure 3 clears", 0, failed(1), PinCleared, 0},
			{"a failure without a pin counts nothing", 0, failed(1), PinUnchanged, 0},
		}},
		{"a success in between starts the count again", []step{
			{"pinned", 0, use(1), PinMade, 1},
			{"failure 1", 0, failed(1), PinCounted, 1},
			{"failure 2", 0, failed(1), PinCounted, 1},
			{"success", 0, use(1), PinExtended, 1},
			{"failure 1 again", 0, failed(1), PinCounted, 1},
			{"failure 2 again", 0, failed(1), PinCounted, 1},
			{"failure 3 clears", 0, failed(1), PinCleared, 0},
		}},
		{"failures of another connection do not count", []step{
			{"pinned", 0, use(1), PinMade, 1},
			{"other 1", 0, failed(2), PinUnchanged, 1},
			{"other 2", 0, failed(2), PinUnchanged, 1},
			{"other 3", 0, failed(2), PinUnchanged, 1},
		}},
		{"failures do not extend", []step{
			{"pinned", 0, use(1), PinMade, 1},
			{"failure", 59 * time.Minute, failed(1), PinCounted, 1},
			{"expired an hour after the last use", time.Minute, nil, 0, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, clk, _ := newTestPins(time.Hour, 0)
			for _, s := range tc.steps {
				clk.Advance(s.advance)
				if s.do != nil {
					if got := s.do(p); got != s.want {
						t.Fatalf("%s: event %d, want %d", s.name, got, s.want)
					}
				}
				id, ok := p.Connection(sessA, "p")
				if ok != (s.pinned != 0) || id != s.pinned {
					t.Fatalf("%s: pinned to %d (%v), want %d", s.name, id, ok, s.pinned)
				}
			}
			// Another session and another provider were never touched.
			if _, ok := p.Connection(sessB, "p"); ok {
				t.Fatal("session B is pinned")
			}
			if _, ok := p.Connection(sessA, "q"); ok {
				t.Fatal("session A is pinned on another provider")
			}
		})
	}
}

// Combo target pins follow the same rules; a target is the same one by its key when both have
// one, so a combo edited around it keeps the pin.
func TestComboTargetPin(t *testing.T) {
	p, clk, _ := newTestPins(time.Hour, 0)
	first := ComboTarget{Index: 0, Key: "a/m"}
	second := ComboTarget{Index: 1, Key: "b/m"}
	if ev := p.UseTarget(sessA, "chat", second); ev != PinMade {
		t.Fatalf("first use: %d", ev)
	}
	if got, ok := p.Target(sessA, "chat"); !ok || got != second {
		t.Fatalf("pinned to %+v %v", got, ok)
	}
	if _, ok := p.Connection(sessA, "chat"); ok {
		t.Fatal("a combo pin reads as a provider pin of the same name")
	}
	// The combo was edited: b/m is now the first target; its use under its key is the same pin.
	if ev := p.UseTarget(sessA, "chat", ComboTarget{Index: 0, Key: "b/m"}); ev != PinExtended {
		t.Fatalf("the same target at another index: %d", ev)
	}
	if got, _ := p.Target(sessA, "chat"); got.Index != 0 {
		t.Fatalf("the index did not follow: %+v", got)
	}
	if ev := p.EvictTarget(sessA, "chat", first); ev != PinUnchanged {
		t.Fatal("evicting another target cleared the pin")
	}
	for i, want := range []PinEvent{PinCounted, PinCounted, PinCleared} {
		if ev := p.TargetFailed(sessA, "chat", ComboTarget{Index: 0, Key: "b/m"}); ev != want {
			t.Fatalf("failure %d: %d", i+1, ev)
		}
	}
	p.UseTarget(sessA, "chat", first)
	if ev := p.EvictTarget(sessA, "chat", first); ev != PinCleared {
		t.Fatal("failover did not evict")
	}
	p.UseTarget(sessA, "chat", ComboTarget{Index: 2}) // a pin by index only
	clk.Advance(time.Hour)
	if _, ok := p.Target(sessA, "chat"); ok {
		t.Fatal("the combo pin outlived its TTL")
	}
}

func TestComboTargetFind(t *testing.T) {
	keys := []string{"a/m", "b/m", "c/m"}
	tests := []struct {
		name string
		t    ComboTarget
		want int
		ok   bool
	}{
		{"in place", ComboTarget{1, "b/m"}, 1, true},
		{"moved", ComboTarget{0, "c/m"}, 2, true},
		{"index only", ComboTarget{2, ""}, 2, true},
		{"index only, out of range", ComboTarget{3, ""}, 0, false},
		{"gone", ComboTarget{1, "x/m"}, -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.t.Find(keys)
			if ok != tc.ok || ok && got != tc.want {
				t.Fatalf("Find = %d %v, want %d %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// The table holds at most its limit: the least recently used pin goes first, and its row with it.
func TestPinsLRUBound(t *testing.T) {
	p, clk, log := newTestPins(time.Hour, 3)
	s := func(i int) Session { return NewSession("k", string(rune('a'+i))) }
	for i := range 3 {
		p.UseConnection(s(i), "p", 1)
		clk.Advance(time.Second)
	}
	p.UseConnection(s(0), "p", 1) // s(1) is now the least recently used
	clk.Advance(time.Second)
	p.UseConnection(s(3), "p", 2)
	if n := p.Len(); n != 3 {
		t.Fatalf("%d pins, at most 3", n)
	}
	if _, ok := p.Connection(s(1), "p"); ok || !log.deleted(PinKey{s(1), ProviderScope("p")}) {
		t.Fatal("the least recently used pin was not evicted")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := p.Connection(s(i), "p"); !ok {
			t.Fatalf("pin %d was evicted", i)
		}
	}
	if p.OnConnection(1) != 2 || p.OnConnection(2) != 1 {
		t.Fatalf("counts %d %d", p.OnConnection(1), p.OnConnection(2))
	}
	// Making room drops every expired pin, and no live one while it has room.
	clk.Advance(time.Hour - time.Second) // s(2) and s(0) expired; s(3), used a second after s(0), is live
	p.UseConnection(s(4), "p", 1)
	if _, ok := p.Connection(s(3), "p"); !ok || p.Len() != 2 {
		t.Fatalf("after making room: %d pins, s(3) held: %v", p.Len(), ok)
	}
}

// Persistence: changes are saved at once; an extension at most every pinSaveGap; Load skips and
// deletes expired pins and keeps the most recent past the bound.
func TestPinsPersistAndLoad(t *testing.T) {
	p, clk, log := newTestPins(time.Hour, 0)
	p.UseConnection(sessA, "p", 1)
	k := PinKey{sessA, ProviderScope("p")}
	if got := log.last[k]; got == nil || got.ConnectionID != 1 || !got.UsedAt.Equal(clk.Now()) {
		t.Fatalf("made pin saved as %+v", got)
	}
	saves := log.saves
	clk.Advance(10 * time.Second)
	p.UseConnection(sessA, "p", 1)
	if log.saves != saves {
		t.Fatal("an extension 10 s later was saved")
	}
	clk.Advance(pinSaveGap)
	p.UseConnection(sessA, "p", 1)
	if log.saves != saves+1 || !log.last[k].UsedAt.Equal(clk.Now()) {
		t.Fatal("an extension after the save gap was not saved")
	}
	p.ConnectionFailed(sessA, "p", 1)
	if log.last[k].Failures != 1 {
		t.Fatal("a counted failure was not saved")
	}
	p.UseConnection(sessA, "p", 1)
	if log.last[k].Failures != 0 {
		t.Fatal("the reset failure count was not saved")
	}

	// A round trip through JSON, as the store keeps it.
	raw, err := json.Marshal(log.last[k])
	if err != nil {
		t.Fatal(err)
	}
	var back Pin
	if err := json.Unmarshal(raw, &back); err != nil || back.Session != sessA || back.Scope != "provider:p" || back.ConnectionID != 1 {
		t.Fatalf("round trip %s → %+v %v", raw, back, err)
	}
	if strings.Contains(string(raw), "session-a") {
		t.Fatalf("the stored pin holds the client's session key: %s", raw)
	}

	now := clk.Now()
	stored := []Pin{
		back,
		{Session: sessB, Scope: "provider:p", ConnectionID: 2, UsedAt: now.Add(-2 * time.Hour)}, // expired
		{Session: sessB, Scope: "combo:c", Target: ComboTarget{1, "b/m"}, UsedAt: now.Add(-time.Minute)},
		{Session: NewSession("k", "old"), Scope: "provider:p", ConnectionID: 2, UsedAt: now.Add(-30 * time.Minute)},
	}
	q, qclk, qlog := newTestPins(time.Hour, 2)
	qclk.Advance(now.Sub(qclk.Now()))
	q.Load(stored)
	if _, ok := q.Connection(sessA, "p"); !ok {
		t.Fatal("a live pin was not loaded")
	}
	if _, ok := q.Target(sessB, "c"); !ok {
		t.Fatal("a live combo pin was not loaded")
	}
	if q.Len() != 2 || !qlog.deleted(stored[1].Key()) || !qlog.deleted(stored[3].Key()) {
		t.Fatalf("%d loaded; deleted %v", q.Len(), qlog.last)
	}
	if q.OnConnection(1) != 1 {
		t.Fatal("loaded pins are not counted")
	}

	// With affinity off nothing is loaded, and every stored pin is deleted.
	r, _, rlog := newTestPins(0, 0)
	r.Load(stored)
	if r.Len() != 0 || !rlog.deleted(stored[0].Key()) {
		t.Fatal("pins were loaded while affinity is off")
	}
}

// Turning affinity off makes the table inert; the sweeper then drops what it holds.
func TestPinsOff(t *testing.T) {
	p, _, log := newTestPins(time.Hour, 0)
	p.UseConnection(sessA, "p", 1)
	p.SetTTL(0)
	if _, ok := p.Connection(sessA, "p"); ok {
		t.Fatal("a pin is found while affinity is off")
	}
	if ev := p.UseConnection(sessB, "p", 1); ev != PinUnchanged || p.Len() != 1 {
		t.Fatal("a pin was made while affinity is off")
	}
	if p.OnConnection(1) != 0 {
		t.Fatal("pins are counted while affinity is off")
	}
	if n := p.Sweep(); n != 1 || p.Len() != 0 || !log.deleted(PinKey{sessA, ProviderScope("p")}) {
		t.Fatalf("swept %d, %d left", n, p.Len())
	}
}

func TestPinsSweep(t *testing.T) {
	p, clk, _ := newTestPins(time.Minute, 0)
	for i := range sweepBatch + 5 {
		p.UseConnection(NewSession("k", string(rune(i))), "p", 1)
	}
	clk.Advance(30 * time.Second)
	p.UseConnection(sessA, "p", 2)
	clk.Advance(40 * time.Second)
	if n := p.Sweep(); n != sweepBatch {
		t.Fatalf("first sweep dropped %d, want the batch of %d", n, sweepBatch)
	}
	if n := p.Sweep(); n != 5 || p.Len() != 1 {
		t.Fatalf("second sweep dropped %d, %d left", n, p.Len())
	}
	if p.OnConnection(2) != 1 || p.OnConnection(1) != 0 {
		t.Fatal("counts after the sweep")
	}

	// RunSweeper sweeps on the clock's ticker.
	ctx, stop := servicetest.Start(t, func(ctx context.Context) { p.RunSweeper(ctx, AffinitySweepInterval) })
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	servicetest.WaitUntil(t, "the sweeper has run", func() bool { return p.Len() == 0 })
	stop()
}

func TestForgetConnectionPins(t *testing.T) {
	p, _, log := newTestPins(time.Hour, 0)
	p.UseConnection(sessA, "p", 1)
	p.UseConnection(sessB, "p", 2)
	p.UseTarget(sessA, "c", ComboTarget{Index: 0})
	p.ForgetConnection(1)
	if _, ok := p.Connection(sessA, "p"); ok || !log.deleted(PinKey{sessA, ProviderScope("p")}) {
		t.Fatal("the deleted connection's pin stayed")
	}
	if p.Len() != 2 || p.OnConnection(1) != 0 || p.OnConnection(2) != 1 {
		t.Fatalf("%d left", p.Len())
	}
}

func TestSessionKey(t *testing.T) {
	if got := SessionKey("  abc  "); got != "abc" {
		t.Fatalf("trimmed key %q", got)
	}
	exact := strings.Repeat("x", MaxSessionKey)
	if SessionKey(exact) != exact {
		t.Fatal("a key of the maximum length was changed")
	}
	long := SessionKey(exact + "y")
	if len(long) > MaxSessionKey || !strings.HasPrefix(long, "sha256:") || long == SessionKey(exact+"z") {
		t.Fatalf("long key %q", long)
	}
	if NewSession("key:1", "s") == NewSession("key:2", "s") || NewSession("key:1", "s") != NewSession("key:1", "s") {
		t.Fatal("sessions are not namespaced")
	}
	if len(sessA.Short()) != 8 || !strings.HasPrefix(sessA.String(), sessA.Short()) {
		t.Fatalf("short %q of %q", sessA.Short(), sessA.String())
	}
}

// Claude Code session bindings: the first account keeps the session for the TTL after its last
// request; the table is bounded (least recently used first) and persisted.
func TestSessionBinds(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	saved := map[Session]*SessionBind{}
	s := NewSessionBinds(clk, time.Hour, 3, func(k Session, b *SessionBind) { saved[k] = b })
	id := func(name string) Session { return NewSession("claude-code", name) }
	step := func(d time.Duration) { clk.Advance(d) }
	if got := s.Bind(id("s1"), "ada"); got != "ada" || saved[id("s1")] == nil || saved[id("s1")].Account != "ada" {
		t.Fatalf("first bind: %s %+v", got, saved[id("s1")])
	}
	step(time.Minute)
	if got := s.Bind(id("s1"), "bob"); got != "ada" {
		t.Fatalf("a bound session moved to %s", got)
	}
	// Each request keeps the binding another hour.
	step(59 * time.Minute)
	if got := s.Bind(id("s1"), "bob"); got != "ada" {
		t.Fatalf("the binding did not slide: %s", got)
	}
	// An hour without requests: bound anew.
	step(time.Hour)
	if got := s.Bind(id("s1"), "bob"); got != "bob" || saved[id("s1")].Account != "bob" {
		t.Fatalf("after the TTL: %s", got)
	}
	// Full: the least recently used binding goes first.
	step(time.Millisecond)
	s.Bind(id("s2"), "ada")
	step(time.Millisecond)
	s.Bind(id("s3"), "ada")
	step(time.Millisecond)
	s.Bind(id("s1"), "bob") // s2 is now the least recently used
	step(time.Millisecond)
	s.Bind(id("s4"), "ada")
	if n := s.Len(); n != 3 {
		t.Fatalf("%d bindings, at most 3", n)
	}
	if b, ok := saved[id("s2")]; !ok || b != nil {
		t.Fatal("the evicted binding was not deleted from the store")
	}
	step(time.Millisecond)
	if got := s.Bind(id("s2"), "bob"); got != "bob" {
		t.Fatalf("s2 was not evicted: %s", got)
	}
	step(time.Millisecond)
	if got := s.Bind(id("s1"), "cy"); got != "bob" {
		t.Fatalf("s1 was evicted: %s", got)
	}

	// Loaded at start: live bindings hold, expired ones are deleted.
	var stored []SessionBind
	for _, b := range saved {
		if b != nil {
			stored = append(stored, *b)
		}
	}
	stored = append(stored, SessionBind{Session: id("old"), Account: "ada", SeenAt: clk.Now().Add(-2 * time.Hour)})
	saved2 := map[Session]*SessionBind{}
	s2 := NewSessionBinds(clk, time.Hour, 3, func(k Session, b *SessionBind) { saved2[k] = b })
	s2.Load(stored)
	if got := s2.Bind(id("s1"), "cy"); got != "bob" {
		t.Fatalf("a loaded binding did not hold: %s", got)
	}
	if b, ok := saved2[id("old")]; !ok || b != nil || s2.Len() != 3 {
		t.Fatalf("the expired binding was loaded or kept: %d", s2.Len())
	}
	// Expired bindings are swept.
	step(10 * time.Hour)
	if n := s2.Sweep(); n != 3 || s2.Len() != 0 {
		t.Fatalf("swept %d, %d left", n, s2.Len())
	}
}
