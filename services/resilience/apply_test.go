package resilience

import (
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// The rules of Breakers.Apply that a single round trip does not show.
func TestBreakerApplyRules(t *testing.T) {
	cfg := BreakerConfig{Enabled: true, FailureThreshold: 3, Timeout: 30 * time.Second}
	persisted := 0
	newBreakers := func(clk clockwork.Clock) (*Breakers, *[]string) {
		var hooks []string
		b := NewBreakers(clk, func(BreakerState) { persisted++ })
		b.OnTransition(func(_, model string, from, to CircuitState) {
			hooks = append(hooks, model+":"+string(from)+"→"+string(to))
		})
		return b, &hooks
	}
	// apply is Breakers.Apply, which must never persist.
	apply := func(t *testing.T, b *Breakers, s BreakerState) {
		t.Helper()
		before := persisted
		b.Apply(s)
		if persisted != before {
			t.Fatalf("Apply of %+v persisted", s)
		}
	}
	open := func(now time.Time) BreakerState {
		return BreakerState{Provider: "p", State: CircuitOpen, OpenedAt: now, NextProbeAt: now.Add(time.Minute),
			ConsecutiveFailures: 3, LastFailure: "status 503", LastFailureAt: now}
	}

	t.Run("a count never closes an open breaker", func(t *testing.T) {
		clk := clockwork.NewFakeClock()
		b, _ := newBreakers(clk)
		apply(t, b, open(clk.Now()))
		apply(t, b, BreakerState{Provider: "p", State: CircuitClosed, ConsecutiveFailures: 2})
		if _, oe := b.Allow("p", "", cfg); oe == nil || oe.RetryAfter != time.Minute {
			t.Fatalf("Allow after a count: %+v", oe)
		}
	})
	t.Run("a remote half-open keeps the probe running here", func(t *testing.T) {
		clk := clockwork.NewFakeClock()
		b, _ := newBreakers(clk)
		apply(t, b, open(clk.Now()))
		clk.Advance(time.Minute)
		probe, oe := b.Allow("p", "", cfg)
		if oe != nil || !probe.Probe() {
			t.Fatalf("no probe: %+v", oe)
		}
		half := open(clk.Now().Add(-time.Minute))
		half.State = CircuitHalfOpen
		apply(t, b, half)
		probe.Done(Result{Status: 200})
		if st := b.States(); st[0].State != CircuitClosed {
			t.Fatalf("the probe here was lost: %+v", st)
		}
	})
	t.Run("a remote open replaces a probe here", func(t *testing.T) {
		clk := clockwork.NewFakeClock()
		b, hooks := newBreakers(clk)
		apply(t, b, open(clk.Now()))
		clk.Advance(time.Minute)
		probe, _ := b.Allow("p", "", cfg)
		apply(t, b, open(clk.Now())) // the other replica's probe failed
		probe.Done(Result{Status: 200})
		if _, oe := b.Allow("p", "", cfg); oe == nil || oe.RetryAfter != time.Minute {
			t.Fatalf("Allow after the reopen: %+v", oe)
		}
		want := []string{":→open", ":open→half_open", ":half_open→open"}
		if len(*hooks) != len(want) || (*hooks)[0] != want[0] || (*hooks)[1] != want[1] || (*hooks)[2] != want[2] {
			t.Fatalf("transitions %q, want %q", *hooks, want)
		}
	})
	t.Run("a delete of an unknown breaker creates none", func(t *testing.T) {
		clk := clockwork.NewFakeClock()
		b, hooks := newBreakers(clk)
		apply(t, b, BreakerState{Provider: "p", Model: "m"})
		if len(b.States()) != 0 || len(*hooks) != 0 {
			t.Fatalf("states %+v, transitions %q", b.States(), *hooks)
		}
	})
	t.Run("model breakers past the bound evict without persisting", func(t *testing.T) {
		clk := clockwork.NewFakeClock()
		b, _ := newBreakers(clk)
		mcfg := cfg
		mcfg.ScopeModel = true
		for i := range MaxModelBreakers {
			tk, oe := b.Allow("p", "m"+strconv.Itoa(i), mcfg)
			if oe != nil {
				t.Fatal(oe)
			}
			tk.Done(Result{Transport: true}) // closed with a failure: its eviction would delete a row
		}
		s := open(clk.Now())
		s.Model = "new"
		apply(t, b, s)
		if open, _ := b.Peek("p", "new", mcfg); !open {
			t.Fatal("the applied model breaker is not open")
		}
	})
}

// A pin recorded elsewhere keeps the table in order of last use, so expired pins are still the
// ones a sweep finds first.
func TestPinsApplyKeepsTheOrderOfUse(t *testing.T) {
	clk := clockwork.NewFakeClock()
	persisted := 0
	p := NewPins(clk, 3, func(PinKey, *Pin) { persisted++ })
	p.SetTTL(time.Hour)
	start := clk.Now()
	s := func(n string) Session { return NewSession("k", n) }
	p.UseConnection(s("new"), "a", 1)
	clk.Advance(50 * time.Minute)
	p.UseConnection(s("newer"), "a", 1)
	persisted = 0
	// A failure counted elsewhere carries the pin's last use: older than either pin here.
	old := Pin{Session: s("old"), Scope: ProviderScope("a"), ConnectionID: 2, Failures: 1, UsedAt: start.Add(-time.Minute)}
	p.Apply(old.Key(), &old)
	if id, ok := p.Connection(s("old"), "a"); !ok || id != 2 {
		t.Fatalf("applied pin: %d %v", id, ok)
	}
	clk.Advance(9*time.Minute + 30*time.Second) // "old" expired, "new" not yet
	if n := p.Sweep(); n != 1 || p.Len() != 2 {
		t.Fatalf("swept %d, %d left", n, p.Len())
	}
	if _, ok := p.Connection(s("new"), "a"); !ok {
		t.Fatal("the sweep took a live pin")
	}
	persisted = 0
	// Past the bound the least recently used pin leaves memory, and no row is deleted.
	a := Pin{Session: s("x"), Scope: ProviderScope("a"), ConnectionID: 3, UsedAt: clk.Now()}
	b := Pin{Session: s("y"), Scope: ProviderScope("a"), ConnectionID: 3, UsedAt: clk.Now()}
	p.Apply(a.Key(), &a)
	p.Apply(b.Key(), &b)
	if p.Len() != 3 || persisted != 0 || p.OnConnection(3) != 2 {
		t.Fatalf("%d pins, %d persisted, %d on connection 3", p.Len(), persisted, p.OnConnection(3))
	}
	if _, ok := p.Connection(s("new"), "a"); ok {
		t.Fatal("the least recently used pin stayed")
	}
	// Affinity off here: nothing is installed.
	p.SetTTL(0)
	c := Pin{Session: s("z"), Scope: ProviderScope("a"), ConnectionID: 4, UsedAt: clk.Now()}
	p.Apply(c.Key(), &c)
	if p.OnConnection(4) != 0 || p.Len() != 3 {
		t.Fatal("a pin installed while affinity is off")
	}
}

func TestLockoutsApplyBound(t *testing.T) {
	clk := clockwork.NewFakeClock()
	persisted := 0
	l := NewLockouts(clk, LockoutConfig{Enabled: true, ErrorCodes: []int{404}, Base: time.Minute, Max: time.Hour, MaxSteps: 3},
		func(LockoutKey, *Lockout) { persisted++ })
	l.limit = 2
	now := clk.Now()
	lock := func(model string, d time.Duration) (LockoutKey, *Lockout) {
		e := &Lockout{Provider: "p", ConnectionID: 1, Model: model, Target: model, Scope: LockoutModel, ExpiresAt: now.Add(d)}
		return e.Key(), e
	}
	l.Apply(lock("a", time.Minute))
	l.Apply(lock("b", 3*time.Minute))
	l.Apply(lock("c", 2*time.Minute)) // evicts "a", the soonest to end
	l.Apply(lock("d", time.Second))   // ends before every one held: refused
	var got []string
	for _, e := range l.List(now) {
		got = append(got, e.Model)
		if e.FailureCount != 1 {
			t.Fatalf("failure count %d", e.FailureCount)
		}
	}
	if len(got) != 2 || got[0] != "c" || got[1] != "b" || persisted != 0 || l.Evicted() != 2 {
		t.Fatalf("held %q, persisted %d, evicted %d", got, persisted, l.Evicted())
	}
}
