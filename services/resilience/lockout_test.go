package resilience

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/servicetest"
)

var lockoutEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lockCfg is the PRODUCT.md default, switched on.
func lockCfg() LockoutConfig {
	return LockoutConfig{Enabled: true, ErrorCodes: []int{403, 404, 429, 502, 503, 504},
		Base: 2 * time.Minute, Max: 30 * time.Minute, MaxSteps: 10, Exponential: true}
}

var opusFamilies = map[string]map[string][]string{
	"anthropic": {"opus": {"claude-opus-*", "claude-3-opus-20240229"}, "sonnet": {"claude-sonnet-*"}},
}

// persistLog records what the persist hook was told, by key.
type persistLog struct {
	mu    sync.Mutex
	last  map[LockoutKey]*Lockout
	calls int
}

func newPersistLog() *persistLog { return &persistLog{last: map[LockoutKey]*Lockout{}} }

func (p *persistLog) hook(k LockoutKey, l *Lockout) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[k] = l
	p.calls++
}

// rows returns the lockouts the hook was last told about (deleted ones left out).
func (p *persistLog) rows() []Lockout {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Lockout
	for _, l := range p.last {
		if l != nil {
			out = append(out, *l)
		}
	}
	return out
}

func (p *persistLog) deleted(k LockoutKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.last[k]
	return ok && l == nil
}

func newTestLockouts(cfg LockoutConfig) (*Lockouts, *clockwork.FakeClock, *persistLog) {
	clk := clockwork.NewFakeClockAt(lockoutEpoch)
	p := newPersistLog()
	return NewLockouts(clk, cfg, p.hook), clk, p
}

// fail records a failure without a hint.
func fail(t *testing.T, l *Lockouts, provider string, conn int64, model string, status int) Lockout {
	t.Helper()
	e, ok := l.RecordFailure(provider, conn, model, status, "rate_limit", 0, false)
	if !ok {
		t.Fatalf("%s/%d/%s %d: not recorded", provider, conn, model, status)
	}
	return e
}

func TestLockoutScopeByStatus(t *testing.T) {
	type probe struct {
		provider string
		conn     int64
		model    string
		locked   bool
	}
	tests := []struct {
		name       string
		families   map[string]map[string][]string
		model      string
		status     int
		wantTarget string
		wantScope  LockoutScope
		probes     []probe
	}{
		{"429 locks the quota family", opusFamilies, "claude-opus-4", 429, "family:opus", LockoutFamily, []probe{
			{"anthropic", 1, "claude-opus-4", true},
			{"anthropic", 1, "claude-opus-4-1", true},        // prefix sibling
			{"anthropic", 1, "claude-3-opus-20240229", true}, // exact-name sibling
			{"anthropic", 1, "claude-sonnet-4", false},       // another family
			{"anthropic", 1, "claude-haiku-3", false},        // no family
			{"anthropic", 2, "claude-opus-4", false},         // another connection
			{"openai", 1, "claude-opus-4", false},            // another provider
		}},
		{"402 locks the quota family", opusFamilies, "claude-3-opus-20240229", 402, "family:opus", LockoutFamily, []probe{
			{"anthropic", 1, "claude-opus-4-1", true},
		}},
		{"403 locks the quota family", opusFamilies, "claude-sonnet-4", 403, "family:sonnet", LockoutFamily, []probe{
			{"anthropic", 1, "claude-sonnet-4-5", true},
			{"anthropic", 1, "claude-opus-4", false},
		}},
		{"429 outside any family locks the model", opusFamilies, "claude-haiku-3", 429, "claude-haiku-3", LockoutFamily, []probe{
			{"anthropic", 1, "claude-haiku-3", true},
			{"anthropic", 1, "claude-haiku-3-5", false},
		}},
		{"429 without a family map locks the model", nil, "claude-opus-4", 429, "claude-opus-4", LockoutFamily, []probe{
			{"anthropic", 1, "claude-opus-4", true},
			{"anthropic", 1, "claude-opus-4-1", false},
		}},
		{"404 locks the model, not its family", opusFamilies, "claude-opus-4", 404, "claude-opus-4", LockoutModel, []probe{
			{"anthropic", 1, "claude-opus-4", true},
			{"anthropic", 1, "claude-opus-4-1", false},
		}},
		{"502 locks the exact tuple", opusFamilies, "claude-opus-4", 502, "exact:claude-opus-4", LockoutExact, []probe{
			{"anthropic", 1, "claude-opus-4", true},
			{"anthropic", 1, "claude-opus-4-1", false},
			{"anthropic", 2, "claude-opus-4", false},
		}},
		{"503 locks the exact tuple", nil, "gpt-4o", 503, "exact:gpt-4o", LockoutExact, []probe{
			{"anthropic", 1, "gpt-4o", true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := lockCfg()
			cfg.ErrorCodes = append(cfg.ErrorCodes, 402)
			cfg.Families = tt.families
			l, clk, _ := newTestLockouts(cfg)
			e, ok := l.RecordFailure("anthropic", 1, tt.model, tt.status, "quota_exhausted", 0, false)
			if !ok {
				t.Fatal("not recorded")
			}
			want := Lockout{Provider: "anthropic", ConnectionID: 1, Model: tt.model, Target: tt.wantTarget,
				Scope: tt.wantScope, Reason: "quota_exhausted", FailureCount: 1, ExpiresAt: clk.Now().Add(2 * time.Minute)}
			if e != want {
				t.Errorf("lockout\n got %+v\nwant %+v", e, want)
			}
			for _, p := range tt.probes {
				locked, until, entry := l.Check(p.provider, p.conn, p.model)
				if locked != p.locked {
					t.Errorf("Check(%s, %d, %s) = %v, want %v", p.provider, p.conn, p.model, locked, p.locked)
				}
				if locked && (entry != want || !until.Equal(want.ExpiresAt)) {
					t.Errorf("Check(%s) entry %+v until %v", p.model, entry, until)
				}
			}
		})
	}
}

// escalate records a failure, checks the lockout, lets it run out and returns it.
func escalate(t *testing.T, l *Lockouts, clk *clockwork.FakeClock, wants []time.Duration) {
	t.Helper()
	for i, w := range wants {
		e := fail(t, l, "openai", 1, "gpt-4o", 429)
		if got := e.Remaining(clk.Now()); got != w || e.FailureCount != i+1 {
			t.Fatalf("failure %d: lockout %v count %d, want %v count %d", i+1, got, e.FailureCount, w, i+1)
		}
		clk.Advance(w) // the lockout runs out; the next failure is within the escalation tail
		if locked, _, _ := l.Check("openai", 1, "gpt-4o"); locked {
			t.Fatalf("failure %d: still locked after expiry", i+1)
		}
	}
}

func TestLockoutEscalation(t *testing.T) {
	m := time.Minute
	tests := []struct {
		name  string
		tweak func(*LockoutConfig)
		want  []time.Duration
	}{
		{"doubles up to the max", func(*LockoutConfig) {}, []time.Duration{2 * m, 4 * m, 8 * m, 16 * m, 30 * m, 30 * m}},
		{"steps cap the exponent", func(c *LockoutConfig) { c.MaxSteps, c.Max = 2, time.Hour }, []time.Duration{2 * m, 4 * m, 8 * m, 8 * m, 8 * m}},
		{"zero steps", func(c *LockoutConfig) { c.MaxSteps = 0 }, []time.Duration{2 * m, 2 * m, 2 * m}},
		{"not exponential", func(c *LockoutConfig) { c.Exponential = false }, []time.Duration{2 * m, 2 * m, 2 * m, 2 * m}},
		{"base above max is capped", func(c *LockoutConfig) { c.Base, c.Max = 10*m, 5*m }, []time.Duration{5 * m, 5 * m}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := lockCfg()
			tt.tweak(&cfg)
			l, clk, _ := newTestLockouts(cfg)
			escalate(t, l, clk, tt.want)
		})
	}
}

func TestLockoutEscalationWindow(t *testing.T) {
	l, clk, _ := newTestLockouts(lockCfg())
	escalate(t, l, clk, []time.Duration{2 * time.Minute, 4 * time.Minute})
	// Within max_cooldown (30 min) after the last lockout ended: still escalating.
	clk.Advance(30*time.Minute - time.Second)
	if e := fail(t, l, "openai", 1, "gpt-4o", 429); e.FailureCount != 3 || e.Remaining(clk.Now()) != 8*time.Minute {
		t.Fatalf("inside the window: %+v", e)
	}
	// A full max_cooldown after it ended, the history is forgotten.
	clk.Advance(8*time.Minute + 30*time.Minute)
	if e := fail(t, l, "openai", 1, "gpt-4o", 429); e.FailureCount != 1 || e.Remaining(clk.Now()) != 2*time.Minute {
		t.Fatalf("after the window: %+v", e)
	}
}

func TestLockoutHerdGuard(t *testing.T) {
	cfg := lockCfg()
	cfg.Families = opusFamilies
	l, clk, p := newTestLockouts(cfg)
	first := fail(t, l, "anthropic", 1, "claude-opus-4", 429)
	calls := p.calls
	clk.Advance(time.Second)
	// In-flight requests of the same burst, on the model and on a family sibling.
	for _, model := range []string{"claude-opus-4", "claude-opus-4-1", "claude-opus-4"} {
		e := fail(t, l, "anthropic", 1, model, 429)
		if e != first {
			t.Fatalf("a failure during the lockout changed it: %+v, want %+v", e, first)
		}
	}
	if p.calls != calls {
		t.Errorf("unchanged lockout persisted %d more times", p.calls-calls)
	}
	// A longer upstream reset still lengthens the running lockout, without escalating.
	e, _ := l.RecordFailure("anthropic", 1, "claude-opus-4-1", 429, "quota_exhausted", time.Hour, true)
	if e.FailureCount != 1 || e.Remaining(clk.Now()) != time.Hour || e.Model != "claude-opus-4-1" || e.Reason != "quota_exhausted" {
		t.Fatalf("longer hint during the lockout: %+v", e)
	}
}

func TestLockoutUpstreamReset(t *testing.T) {
	tests := []struct {
		name     string
		hint     time.Duration
		verified bool
		want     time.Duration
	}{
		{"verified above the max is exact", 2 * time.Hour, true, 2 * time.Hour},
		{"verified far out is capped at 30 days", 90 * 24 * time.Hour, true, MaxResetHint},
		{"verified below the base is exact", 30 * time.Second, true, 30 * time.Second},
		{"unverified above the max is capped", 2 * time.Hour, false, 30 * time.Minute},
		{"unverified above the base wins", 5 * time.Minute, false, 5 * time.Minute},
		{"unverified below the base loses", 30 * time.Second, false, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk, _ := newTestLockouts(lockCfg())
			e, ok := l.RecordFailure("openai", 1, "gpt-4o", 429, "quota_exhausted", tt.hint, tt.verified)
			if !ok || e.Remaining(clk.Now()) != tt.want {
				t.Fatalf("lockout %v (%v), want %v", e.Remaining(clk.Now()), ok, tt.want)
			}
			if locked, until, _ := l.Check("openai", 1, "gpt-4o"); !locked || !until.Equal(clk.Now().Add(tt.want)) {
				t.Fatalf("Check: %v until %v", locked, until)
			}
		})
	}
}

func TestLockoutNeverShortened(t *testing.T) {
	l, clk, _ := newTestLockouts(lockCfg())
	long, _ := l.RecordFailure("openai", 1, "gpt-4o", 429, "quota_exhausted", 3*time.Hour, true)
	clk.Advance(time.Minute)
	for _, hint := range []time.Duration{0, 10 * time.Minute, time.Hour} {
		for _, verified := range []bool{true, false} {
			e, ok := l.RecordFailure("openai", 1, "gpt-4o", 429, "rate_limit", hint, verified)
			if !ok || !e.ExpiresAt.Equal(long.ExpiresAt) {
				t.Fatalf("hint %v verified %v shortened the lockout to %v (was %v)", hint, verified, e.ExpiresAt, long.ExpiresAt)
			}
		}
	}
}

func TestLockoutSuccessDecay(t *testing.T) {
	cfg := lockCfg()
	cfg.Families = opusFamilies
	l, clk, p := newTestLockouts(cfg)
	// Four escalating failures: count 4, 16 min.
	for range 3 {
		e := fail(t, l, "anthropic", 1, "claude-opus-4", 429)
		clk.Advance(e.Remaining(clk.Now()))
	}
	e := fail(t, l, "anthropic", 1, "claude-opus-4", 429)
	if e.FailureCount != 4 {
		t.Fatalf("count %d", e.FailureCount)
	}
	// A success of a family sibling decays the family lockout: 4 → 2 → 1 → 0.
	for _, want := range []int{2, 1} {
		l.RecordSuccess("anthropic", 1, "claude-opus-4-1")
		locked, _, entry := l.Check("anthropic", 1, "claude-opus-4")
		if !locked || entry.FailureCount != want {
			t.Fatalf("after a success: locked %v count %d, want count %d", locked, entry.FailureCount, want)
		}
		if rows := p.rows(); len(rows) != 1 || rows[0].FailureCount != want {
			t.Fatalf("persisted %+v", rows)
		}
	}
	l.RecordSuccess("anthropic", 1, "claude-opus-4")
	if locked, _, _ := l.Check("anthropic", 1, "claude-opus-4"); locked {
		t.Fatal("count 0 must lift the lockout before its timer ends")
	}
	if !p.deleted(e.Key()) {
		t.Error("the deleted lockout was not persisted as deleted")
	}
	// The escalation history is gone too: the next failure starts at the base.
	if e := fail(t, l, "anthropic", 1, "claude-opus-4", 429); e.FailureCount != 1 || e.Remaining(clk.Now()) != 2*time.Minute {
		t.Fatalf("after decay to 0: %+v", e)
	}
	// Successes elsewhere leave it alone.
	l.RecordSuccess("anthropic", 1, "claude-sonnet-4")
	l.RecordSuccess("anthropic", 2, "claude-opus-4")
	if locked, _, _ := l.Check("anthropic", 1, "claude-opus-4"); !locked {
		t.Fatal("an unrelated success lifted the lockout")
	}
}

func TestLockoutSuccessDecaysTheEscalationTail(t *testing.T) {
	l, clk, _ := newTestLockouts(lockCfg())
	escalate(t, l, clk, []time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute}) // count 3, expired
	l.RecordSuccess("openai", 1, "gpt-4o")                                                  // 3 → 1
	if e := fail(t, l, "openai", 1, "gpt-4o", 429); e.FailureCount != 2 || e.Remaining(clk.Now()) != 4*time.Minute {
		t.Fatalf("after decay of the tail: %+v", e)
	}
}

func TestLockoutSwitchedOff(t *testing.T) {
	cfg := lockCfg()
	cfg.Enabled = false
	l, clk, p := newTestLockouts(cfg)
	for _, status := range []int{403, 404, 429, 502, 503, 504} {
		if _, ok := l.RecordFailure("openai", 1, "gpt-4o", status, "rate_limit", time.Hour, true); ok {
			t.Fatalf("status %d recorded while off", status)
		}
	}
	if locked, _, _ := l.Check("openai", 1, "gpt-4o"); locked || len(l.List(clk.Now())) != 0 || p.calls != 0 {
		t.Fatal("lockouts recorded while off")
	}

	// Switching off makes running lockouts inert; switching on again restores them.
	l.SetConfig(lockCfg())
	fail(t, l, "openai", 1, "gpt-4o", 429)
	l.SetConfig(cfg)
	if locked, _, _ := l.Check("openai", 1, "gpt-4o"); locked {
		t.Fatal("Check must pass while lockouts are off")
	}
	l.RecordSuccess("openai", 1, "gpt-4o") // no decay while off
	l.SetConfig(lockCfg())
	if locked, _, e := l.Check("openai", 1, "gpt-4o"); !locked || e.FailureCount != 1 {
		t.Fatal("switching back on lost the lockout")
	}
}

func TestLockoutErrorCodeFilter(t *testing.T) {
	tests := []struct {
		name   string
		codes  []int
		status int
		want   bool
	}{
		{"default 429", nil, 429, true},
		{"default 404", nil, 404, true},
		{"default 500 is not listed", nil, 500, false},
		{"default 402 is not listed", nil, 402, false},
		{"default 400", nil, 400, false},
		{"transport error", nil, 0, false},
		{"custom list drops 503", []int{429}, 503, false},
		{"custom list keeps 429", []int{429}, 429, true},
		{"custom list adds 500", []int{500}, 500, true},
		{"empty list locks nothing", []int{}, 429, false},
		{"529 (Anthropic's overloaded) locks as 503 does", nil, 529, true},
		{"529 without 503 listed", []int{429}, 529, false},
		{"529 listed by itself", []int{529}, 529, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := lockCfg()
			if tt.codes != nil {
				cfg.ErrorCodes = tt.codes
			}
			l, _, _ := newTestLockouts(cfg)
			_, ok := l.RecordFailure("openai", 1, "gpt-4o", tt.status, "x", 0, false)
			locked, _, _ := l.Check("openai", 1, "gpt-4o")
			if ok != tt.want || locked != tt.want {
				t.Errorf("recorded %v locked %v, want %v", ok, locked, tt.want)
			}
		})
	}
}

func TestSetConfigCopiesTheCallersSlices(t *testing.T) {
	cfg := lockCfg()
	l, _, _ := newTestLockouts(cfg)
	cfg.ErrorCodes[2] = 999 // was 429
	cfg.Families = map[string]map[string][]string{"openai": {"gpt": {"gpt-*"}}}
	if _, ok := l.RecordFailure("openai", 1, "gpt-4o", 429, "x", 0, false); !ok {
		t.Fatal("a change to the caller's config reached the table")
	}
	if e, _ := l.RecordFailure("openai", 1, "gpt-4.1", 429, "x", 0, false); e.Target != "gpt-4.1" {
		t.Fatalf("target %q: families must only change through SetConfig", e.Target)
	}
}

func TestFamilyMatching(t *testing.T) {
	fams := map[string]map[string][]string{"p": {
		"broad":  {"gpt-*"},
		"narrow": {"gpt-5*"},
		"pinned": {"gpt-5-mini"},
		"all":    {"*"},
		"b":      {"o1-*"},
		"a":      {"o1-*"},
	}}
	c := &lockoutConf{families: compileFamilies(fams)}
	tests := []struct{ model, want string }{
		{"gpt-5-mini", "pinned"}, // an exact name beats any prefix
		{"gpt-5.1", "narrow"},    // the longest prefix wins
		{"gpt-4o", "broad"},
		{"o1-pro", "a"}, // equal prefixes: the first family by name
		{"claude", "all"},
		{"", "all"},
	}
	for _, tt := range tests {
		if got, ok := c.familyOf("p", tt.model); !ok || got != tt.want {
			t.Errorf("familyOf(%q) = %q %v, want %q", tt.model, got, ok, tt.want)
		}
	}
	if _, ok := c.familyOf("other", "gpt-4o"); ok {
		t.Error("families of one provider applied to another")
	}
}

func TestLockoutClear(t *testing.T) {
	cfg := lockCfg()
	cfg.Families = opusFamilies
	setup := func(t *testing.T) (*Lockouts, *clockwork.FakeClock, *persistLog) {
		l, clk, p := newTestLockouts(cfg)
		fail(t, l, "anthropic", 1, "claude-opus-4", 429)   // family:opus on 1
		fail(t, l, "anthropic", 1, "claude-opus-4", 502)   // exact:claude-opus-4 on 1
		fail(t, l, "anthropic", 2, "claude-opus-4-1", 429) // family:opus on 2
		fail(t, l, "anthropic", 1, "claude-sonnet-4", 404) // claude-sonnet-4 on 1
		fail(t, l, "openai", 1, "gpt-4o", 429)             // gpt-4o on openai 1
		return l, clk, p
	}
	type lock struct {
		provider string
		conn     int64
		model    string
	}
	all := []lock{{"anthropic", 1, "claude-opus-4"}, {"anthropic", 2, "claude-opus-4"}, {"anthropic", 1, "claude-sonnet-4"}, {"openai", 1, "gpt-4o"}}
	tests := []struct {
		name     string
		clear    func(*Lockouts) int
		want     int
		unlocked []lock
	}{
		{"one model on one connection, with its family and exact locks", func(l *Lockouts) int { return l.Clear("anthropic", 1, "claude-opus-4") }, 2,
			[]lock{{"anthropic", 1, "claude-opus-4"}}},
		{"a family sibling clears the family lock", func(l *Lockouts) int { return l.Clear("anthropic", 2, "claude-opus-4") }, 1,
			[]lock{{"anthropic", 2, "claude-opus-4"}}},
		{"by listed target", func(l *Lockouts) int { return l.Clear("anthropic", 1, "family:opus") }, 1, nil},
		{"unknown model", func(l *Lockouts) int { return l.Clear("anthropic", 1, "claude-haiku") }, 0, nil},
		{"model on every connection", func(l *Lockouts) int { return l.ClearModel("anthropic", "claude-opus-4") }, 3,
			[]lock{{"anthropic", 1, "claude-opus-4"}, {"anthropic", 2, "claude-opus-4"}}},
		{"model of another provider", func(l *Lockouts) int { return l.ClearModel("openai", "claude-opus-4") }, 0, nil},
		{"all", func(l *Lockouts) int { return l.ClearAll() }, 5, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk, p := setup(t)
			if got := tt.clear(l); got != tt.want {
				t.Errorf("cleared %d, want %d", got, tt.want)
			}
			if got := len(l.List(clk.Now())); got != 5-tt.want {
				t.Errorf("%d lockouts left, want %d", got, 5-tt.want)
			}
			for _, k := range all {
				locked, _, _ := l.Check(k.provider, k.conn, k.model)
				if want := !slices.Contains(tt.unlocked, k); locked != want {
					t.Errorf("Check(%v) = %v, want %v", k, locked, want)
				}
			}
			if got := len(p.rows()); got != 5-tt.want {
				t.Errorf("%d persisted rows left, want %d", got, 5-tt.want)
			}
			checkIndex(t, l)
		})
	}

	// An operator clear resets the failure count, escalation tail included.
	l, clk, _ := setup(t)
	clk.Advance(2 * time.Minute) // every lockout ran out; the tails remain
	if n := l.Clear("openai", 1, "gpt-4o"); n != 0 {
		t.Errorf("an expired lockout counted as cleared: %d", n)
	}
	if e := fail(t, l, "openai", 1, "gpt-4o", 429); e.FailureCount != 1 {
		t.Errorf("count after clear = %d, want 1", e.FailureCount)
	}
	if e := fail(t, l, "anthropic", 1, "claude-sonnet-4", 404); e.FailureCount != 2 {
		t.Errorf("an uncleared tail was lost: count %d", e.FailureCount)
	}
}

func TestLockoutPersistenceRoundTrip(t *testing.T) {
	cfg := lockCfg()
	cfg.Families = opusFamilies
	l, clk, p := newTestLockouts(cfg)
	fail(t, l, "anthropic", 1, "claude-opus-4", 429)                                         // 2 min
	l.RecordFailure("anthropic", 1, "claude-sonnet-4", 503, "server_error", time.Hour, true) // 1 h
	l.RecordFailure("openai", 7, "gpt-4o", 404, "not_found", 10*time.Minute, false)          // 10 min
	rows := p.rows()
	if len(rows) != 3 {
		t.Fatalf("persisted %d rows", len(rows))
	}

	// A restart 5 minutes later: the 2-minute lockout is gone, the others come back as they were.
	clk.Advance(5 * time.Minute)
	l2 := NewLockouts(clk, cfg, nil)
	l2.Load(rows)
	got := l2.List(clk.Now())
	want := []Lockout{
		{Provider: "openai", ConnectionID: 7, Model: "gpt-4o", Target: "gpt-4o", Scope: LockoutModel, Reason: "not_found",
			FailureCount: 1, ExpiresAt: lockoutEpoch.Add(10 * time.Minute)},
		{Provider: "anthropic", ConnectionID: 1, Model: "claude-sonnet-4", Target: "exact:claude-sonnet-4", Scope: LockoutExact,
			Reason: "server_error", FailureCount: 1, ExpiresAt: lockoutEpoch.Add(time.Hour)},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after Load\n got %+v\nwant %+v", got, want)
	}
	if locked, _, _ := l2.Check("anthropic", 1, "claude-opus-4"); locked {
		t.Error("an expired lockout was loaded")
	}
	// A loaded lockout keeps escalating from its stored count.
	l2.RecordFailure("anthropic", 1, "claude-opus-4", 429, "", 0, false) // fresh family lock, count 1
	clk.Advance(time.Hour)
	if e, _ := l2.RecordFailure("anthropic", 1, "claude-sonnet-4", 503, "", 0, false); e.FailureCount != 2 {
		t.Errorf("escalation after Load: count %d", e.FailureCount)
	}

	// A loaded family lockout covers the family's siblings.
	l3 := NewLockouts(clk, cfg, nil)
	l3.Load([]Lockout{{Provider: "anthropic", ConnectionID: 1, Model: "claude-opus-4", Target: "family:opus",
		Scope: LockoutFamily, FailureCount: 3, ExpiresAt: clk.Now().Add(time.Minute)}})
	if locked, _, e := l3.Check("anthropic", 1, "claude-opus-4-1"); !locked || e.FailureCount != 3 {
		t.Errorf("loaded family lockout: locked %v %+v", locked, e)
	}
}

func TestLockoutListSortedByRemaining(t *testing.T) {
	l, clk, _ := newTestLockouts(lockCfg())
	for i, d := range []time.Duration{20 * time.Minute, 5 * time.Minute, time.Hour, 10 * time.Minute} {
		l.RecordFailure("openai", int64(i+1), "gpt-4o", 429, "", d, true)
	}
	l.RecordFailure("openai", 9, "gpt-4o", 429, "", time.Minute, true) // runs out before List
	clk.Advance(2 * time.Minute)
	var got []time.Duration
	for _, e := range l.List(clk.Now()) {
		got = append(got, e.Remaining(clk.Now()))
	}
	want := []time.Duration{3 * time.Minute, 8 * time.Minute, 18 * time.Minute, 58 * time.Minute}
	if !slices.Equal(got, want) {
		t.Fatalf("remaining %v, want %v", got, want)
	}
	if r := (Lockout{ExpiresAt: clk.Now().Add(-time.Second)}).Remaining(clk.Now()); r != 0 {
		t.Errorf("Remaining of an expired lockout = %v", r)
	}
}

func TestLockoutBound(t *testing.T) {
	l, clk, p := newTestLockouts(lockCfg())
	l.limit = 3
	for i, d := range []time.Duration{10 * time.Minute, 5 * time.Minute, 20 * time.Minute} {
		if _, ok := l.RecordFailure("openai", 1, fmt.Sprint("m", i), 429, "", d, true); !ok {
			t.Fatal("not recorded below the bound")
		}
	}
	// Full: a lockout running longer than the soonest one evicts it.
	if _, ok := l.RecordFailure("openai", 1, "m3", 429, "", 15*time.Minute, true); !ok {
		t.Fatal("a longer lockout was refused")
	}
	if locked, _, _ := l.Check("openai", 1, "m1"); locked {
		t.Error("the soonest-expiring lockout (m1, 5 min) was not evicted")
	}
	if !p.deleted(LockoutKey{"openai", 1, "m1"}) {
		t.Error("the eviction was not persisted")
	}
	// A newcomer that would expire soonest of all is refused.
	if _, ok := l.RecordFailure("openai", 1, "m4", 429, "", time.Minute, true); ok {
		t.Error("a lockout shorter than every kept one was recorded past the bound")
	}
	if got := l.Evicted(); got != 2 {
		t.Errorf("Evicted() = %d, want 2", got)
	}
	// Updating an existing key needs no room.
	clk.Advance(10 * time.Minute)
	if e, ok := l.RecordFailure("openai", 1, "m0", 429, "", 0, false); !ok || e.FailureCount != 2 {
		t.Errorf("an existing key was refused at the bound: %+v %v", e, ok)
	}
	// Entries that no longer lock make room before anything running is evicted.
	clk.Advance(time.Hour)
	if _, ok := l.RecordFailure("openai", 1, "m5", 429, "", 0, false); !ok {
		t.Fatal("expired entries did not make room")
	}
	if got := l.Evicted(); got != 2 {
		t.Errorf("dropping expired entries counted as eviction: %d", got)
	}
	if n := len(l.entries); n != 1 {
		t.Errorf("%d entries after making room, want 1", n)
	}
	checkIndex(t, l)

	// Load respects the bound and keeps the longest-running.
	l2 := NewLockouts(clk, lockCfg(), nil)
	l2.limit = 2
	var rows []Lockout
	for i := range 4 {
		rows = append(rows, Lockout{Provider: "openai", ConnectionID: 1, Model: fmt.Sprint("m", i), Target: fmt.Sprint("m", i),
			Scope: LockoutFamily, FailureCount: 1, ExpiresAt: clk.Now().Add(time.Duration(i+1) * time.Minute)})
	}
	l2.Load(rows)
	var kept []string
	for _, e := range l2.List(clk.Now()) {
		kept = append(kept, e.Target)
	}
	if !slices.Equal(kept, []string{"m2", "m3"}) {
		t.Errorf("Load kept %v, want [m2 m3]", kept)
	}
}

func TestLockoutBoundDefault(t *testing.T) {
	l, _, _ := newTestLockouts(lockCfg())
	for i := range MaxLockouts + 5 {
		l.RecordFailure("openai", 1, fmt.Sprint("made-up-", i), 404, "not_found", 0, false)
	}
	if n := len(l.entries); n != MaxLockouts {
		t.Fatalf("%d entries, want the bound %d", n, MaxLockouts)
	}
	if l.Evicted() != 5 {
		t.Fatalf("Evicted() = %d, want 5", l.Evicted())
	}
}

func TestLockoutSweep(t *testing.T) {
	l, clk, p := newTestLockouts(lockCfg())
	e := fail(t, l, "openai", 1, "gpt-4o", 429)
	clk.Advance(2 * time.Minute)
	if n := l.Sweep(); n != 0 {
		t.Fatalf("swept %d inside the escalation tail", n)
	}
	clk.Advance(30 * time.Minute)
	if n := l.Sweep(); n != 1 || len(l.entries) != 0 || !p.deleted(e.Key()) {
		t.Fatalf("sweep after the tail: %d, %d left", n, len(l.entries))
	}

	// RunSweeper sweeps on the clock's ticker.
	deleted := make(chan LockoutKey, 1)
	l2 := NewLockouts(clk, lockCfg(), func(k LockoutKey, v *Lockout) {
		if v == nil {
			deleted <- k
		}
	})
	fail(t, l2, "openai", 1, "gpt-4o", 429)
	ctx, stop := servicetest.Start(t, func(ctx context.Context) { l2.RunSweeper(ctx, LockoutSweepInterval) })
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	select {
	case k := <-deleted:
		if k != e.Key() {
			t.Errorf("swept %v", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sweeper did not run")
	}
	stop()
}

func TestForgetConnection(t *testing.T) {
	l, clk, _ := newTestLockouts(lockCfg())
	fail(t, l, "openai", 1, "gpt-4o", 429)
	fail(t, l, "openai", 2, "gpt-4o", 429)
	l.ForgetConnection(1)
	if got := l.List(clk.Now()); len(got) != 1 || got[0].ConnectionID != 2 {
		t.Fatalf("after ForgetConnection: %+v", got)
	}
	checkIndex(t, l)
}

func TestLockoutCheckDoesNotAllocate(t *testing.T) {
	cfg := lockCfg()
	cfg.Families = opusFamilies
	l := NewLockouts(clockwork.NewRealClock(), cfg, nil)
	l.RecordFailure("anthropic", 1, "claude-opus-4", 429, "", 0, false)
	l.RecordFailure("anthropic", 1, "gpt-4o", 502, "", 0, false)
	for _, model := range []string{"claude-sonnet-4", "claude-haiku", "claude-opus-4"} {
		if n := testing.AllocsPerRun(100, func() { l.Check("anthropic", 1, model) }); n != 0 {
			t.Errorf("Check(%s) allocates %.0f times", model, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { l.RecordSuccess("anthropic", 2, "claude-opus-4") }); n != 0 {
		t.Errorf("RecordSuccess with nothing to decay allocates %.0f times", n)
	}
}

func TestLockoutConcurrentUse(t *testing.T) {
	cfg := lockCfg()
	cfg.Families = opusFamilies
	l, clk, _ := newTestLockouts(cfg)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				model := fmt.Sprint("claude-opus-", i%5)
				conn := int64(g % 3)
				switch i % 4 {
				case 0:
					l.RecordFailure("anthropic", conn, model, []int{429, 404, 502}[i%3], "x", 0, false)
				case 1:
					l.Check("anthropic", conn, model)
				case 2:
					l.RecordSuccess("anthropic", conn, model)
				default:
					l.List(clk.Now())
					if i%40 == 3 {
						l.Clear("anthropic", conn, model)
						l.Sweep()
					}
				}
			}
		})
	}
	wg.Wait()
	checkIndex(t, l)
}

func BenchmarkLockoutCheck(b *testing.B) {
	cfg := lockCfg()
	cfg.Families = opusFamilies
	l := NewLockouts(clockwork.NewRealClock(), cfg, nil)
	for i := range 1000 {
		l.RecordFailure("anthropic", int64(i%10), fmt.Sprint("model-", i), 404, "", 0, false)
	}
	l.RecordFailure("anthropic", 3, "claude-opus-4", 429, "", 0, false)
	for _, bb := range []struct {
		name  string
		conn  int64
		model string
	}{
		{"connection without lockouts", 42, "claude-opus-4-1"},
		{"model not locked", 4, "claude-opus-4-1"},
		{"family locked", 3, "claude-opus-4-1"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l.Check("anthropic", bb.conn, bb.model)
			}
		})
	}
}

// checkIndex fails when the per-connection index disagrees with the entries.
func checkIndex(t *testing.T, l *Lockouts) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	want := map[connKey]int{}
	for k := range l.entries {
		want[k.connection()]++
	}
	if !maps.Equal(want, l.perConn) {
		t.Errorf("per-connection index %v, entries say %v", l.perConn, want)
	}
}
