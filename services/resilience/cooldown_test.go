package resilience

import (
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

var apiKeyPolicy = CooldownPolicy{Base: 3 * time.Second, MaxSteps: 5, Max: 30 * time.Minute, UseHints: true}
var oauthPolicy = CooldownPolicy{Base: 5 * time.Second, MaxSteps: 8, Max: 30 * time.Minute, UseHints: false}

func rateLimited(hint time.Duration) Outcome {
	return Outcome{Reason: ReasonRateLimit, Scope: ScopeConnection, Failover: true, Status: 429,
		Cooldown: hint, FromUpstream: hint > 0, Message: "rate limited"}
}

func TestCooldownBackoffEscalatesAndCaps(t *testing.T) {
	clk := clockwork.NewFakeClock()
	c := NewCooldowns(clk, nil)
	want := []time.Duration{3, 6, 12, 24, 48, 96, 96} // seconds: base × 2^level, level stops at 5 steps
	for i, w := range want {
		s := c.RecordFailure(1, rateLimited(0), apiKeyPolicy)
		if got := s.Until.Sub(clk.Now()); got != w*time.Second {
			t.Fatalf("failure %d: cooldown %v want %v", i+1, got, w*time.Second)
		}
		clk.Advance(s.Until.Sub(clk.Now())) // let it expire (lazy recovery)
		if ok, _ := c.Check(1); !ok {
			t.Fatalf("failure %d: not eligible after expiry", i+1)
		}
	}
	capped := CooldownPolicy{Base: time.Minute, MaxSteps: 8, Max: 5 * time.Minute}
	c2 := NewCooldowns(clk, nil)
	var last time.Duration
	for i := 0; i < 6; i++ {
		s := c2.RecordFailure(2, rateLimited(0), capped)
		last = s.Until.Sub(clk.Now())
		clk.Advance(last)
	}
	if last != 5*time.Minute {
		t.Fatalf("cap not applied: %v", last)
	}
}

func TestCooldownHonoursUpstreamHintByAuthType(t *testing.T) {
	clk := clockwork.NewFakeClock()
	c := NewCooldowns(clk, nil)
	s := c.RecordFailure(1, rateLimited(7*time.Second), apiKeyPolicy)
	if got := s.Until.Sub(clk.Now()); got != 7*time.Second || !s.FromUpstream {
		t.Fatalf("API key must honour the 7 s hint exactly: %v", got)
	}
	s = c.RecordFailure(2, rateLimited(7*time.Second), oauthPolicy)
	if got := s.Until.Sub(clk.Now()); got != 5*time.Second || s.FromUpstream {
		t.Fatalf("OAuth ignores hints unless enabled: %v", got)
	}
	// A hint above the max is still honoured exactly (it is the upstream's verified reset).
	s = c.RecordFailure(3, rateLimited(2*time.Hour), apiKeyPolicy)
	if got := s.Until.Sub(clk.Now()); got != 2*time.Hour {
		t.Fatalf("hint above max: %v", got)
	}
}

// A cooldown counts from when its answer was classified: an upstream's absolute reset (a
// Retry-After date) ends the cooldown at that instant, though the clock moved before the record.
func TestCooldownCountsFromTheClassification(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 12, 3, 10, 0, 0, 250_000_000, time.UTC))
	c := NewCooldowns(clk, nil)
	reset := time.Date(2026, 12, 3, 10, 0, 20, 0, time.UTC)
	out := Classify(Input{Status: 429, Header: http.Header{"Retry-After": {reset.Format(http.TimeFormat)}},
		Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, Now: clk.Now()})
	clk.Advance(250 * time.Millisecond)
	if s := c.RecordFailure(1, out, apiKeyPolicy); !s.Until.Equal(reset) {
		t.Fatalf("cooling until %v, want the upstream's reset %v", s.Until, reset)
	}
}

func TestHerdGuard(t *testing.T) {
	clk := clockwork.NewFakeClock()
	c := NewCooldowns(clk, nil)
	first := c.RecordFailure(1, rateLimited(0), apiKeyPolicy)
	clk.Advance(time.Second)
	for i := 0; i < 5; i++ {
		s := c.RecordFailure(1, rateLimited(0), apiKeyPolicy)
		if !s.Until.Equal(first.Until) || s.Level != 1 {
			t.Fatalf("concurrent failure changed the cooldown: until %v level %d", s.Until, s.Level)
		}
	}
}

func TestSuccessClearsEverything(t *testing.T) {
	clk := clockwork.NewFakeClock()
	c := NewCooldowns(clk, nil)
	c.RecordFailure(1, rateLimited(0), apiKeyPolicy)
	c.RecordSuccess(1)
	if s := c.Get(1); s.Level != 0 || s.LastError != "" || !s.Until.IsZero() {
		t.Fatalf("state after success: %+v", s)
	}
}

func TestTerminalStates(t *testing.T) {
	clk := clockwork.NewFakeClock()
	var persisted []ConnState
	c := NewCooldowns(clk, func(s ConnState) { persisted = append(persisted, s) })

	// A single 403 never bans; three in a row do.
	rej := Outcome{Reason: ReasonRequestRejected, Scope: ScopeConnection, Status: 403, Failover: true}
	for i := 1; i <= 3; i++ {
		clk.Advance(time.Hour)
		s := c.RecordFailure(1, rej, apiKeyPolicy)
		if (s.Terminal == TerminalBanned) != (i == 3) {
			t.Fatalf("after %d rejections terminal=%q", i, s.Terminal)
		}
	}
	// A cooldown never overwrites a terminal state.
	s := c.RecordFailure(1, rateLimited(time.Second), apiKeyPolicy)
	if s.Terminal != TerminalBanned || !s.Until.IsZero() {
		t.Fatalf("cooldown overwrote a terminal state: %+v", s)
	}
	if ok, why := c.Check(1); ok || why.Status != StatusBanned {
		t.Fatalf("banned connection eligible: %v %+v", ok, why)
	}

	// expired: probed again with backoff three times, then it sticks.
	expired := Outcome{Reason: ReasonAuthError, Scope: ScopeConnection, Terminal: TerminalExpired, Status: 401}
	c.RecordFailure(2, expired, apiKeyPolicy)
	for probe := 0; probe < ExpiredProbes; probe++ {
		if ok, _ := c.Check(2); ok {
			t.Fatalf("probe %d allowed too early", probe)
		}
		clk.Advance(ExpiredProbeBase << probe)
		if ok, _ := c.Check(2); !ok {
			t.Fatalf("probe %d not allowed when due", probe)
		}
		if ok, _ := c.Check(2); ok {
			t.Fatal("a second concurrent probe was allowed")
		}
		c.RecordFailure(2, expired, apiKeyPolicy)
	}
	clk.Advance(24 * time.Hour)
	if ok, _ := c.Check(2); ok {
		t.Fatal("expired must stick after its probes")
	}

	// credits_exhausted: re-probed every 30 minutes; a successful probe clears it.
	credits := Outcome{Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Terminal: TerminalCreditsExhausted, Status: 402}
	c.RecordFailure(3, credits, apiKeyPolicy)
	clk.Advance(CreditsProbeInterval - time.Second)
	if ok, _ := c.Check(3); ok {
		t.Fatal("credits probe too early")
	}
	clk.Advance(time.Second)
	if ok, _ := c.Check(3); !ok {
		t.Fatal("credits probe not allowed after 30 min")
	}
	c.RecordSuccess(3)
	if c.Get(3).Terminal != TerminalNone {
		t.Fatal("success must clear credits_exhausted")
	}

	// The operator: clear keeps a terminal state, reset with terminal clears it.
	c.Clear(1, false)
	if c.Get(1).Terminal != TerminalBanned {
		t.Fatal("clear cooldown must keep a terminal state")
	}
	c.Clear(1, true)
	if ok, _ := c.Check(1); !ok {
		t.Fatal("reset state must clear the ban")
	}
	if len(persisted) == 0 || persisted[len(persisted)-1].ConnectionID != 1 || persisted[len(persisted)-1].Terminal != "" {
		t.Fatal("changes are not handed to the persist hook")
	}
}

func TestModelScopeDoesNotCoolConnection(t *testing.T) {
	c := NewCooldowns(clockwork.NewFakeClock(), nil)
	c.RecordFailure(1, Outcome{Reason: ReasonNotFound, Scope: ScopeModel, Status: 404}, apiKeyPolicy)
	if ok, _ := c.Check(1); !ok {
		t.Fatal("a model-scope failure cooled the connection")
	}
}

func TestBackoff(t *testing.T) {
	mid := func() float64 { return 0.5 }
	cases := []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 30 * time.Second}, {60, 30 * time.Second}}
	for _, c := range cases {
		if got := Backoff(c.n, time.Second, 30*time.Second, 2, 0.1, mid); got != c.want {
			t.Errorf("n=%d: %v want %v", c.n, got, c.want)
		}
	}
	hi := func() float64 { return 0.999999 }
	if got := Backoff(1, time.Second, 30*time.Second, 2, 0.1, hi); got < 1090*time.Millisecond || got > 1100*time.Millisecond {
		t.Errorf("jitter: %v", got)
	}
}

func TestPeekNeverTakesTheProbe(t *testing.T) {
	clk := clockwork.NewFakeClock()
	c := NewCooldowns(clk, nil)
	c.RecordFailure(1, Outcome{Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Terminal: TerminalCreditsExhausted, Status: 402}, apiKeyPolicy)
	clk.Advance(CreditsProbeInterval)
	for i := 0; i < 3; i++ {
		if ok, why := c.Peek(1); ok || why.Status != StatusCreditsExhausted {
			t.Fatalf("peek %d: %v %+v", i, ok, why)
		}
	}
	if ok, _ := c.Check(1); !ok {
		t.Fatal("peeking must leave the probe to the next request")
	}
	c.RecordFailure(2, rateLimited(4*time.Second), apiKeyPolicy)
	if ok, why := c.Peek(2); ok || why.Remaining != 4*time.Second {
		t.Fatalf("cooling peek: %v %+v", ok, why)
	}
}

func TestCooldownUntilResetIsExactAndNoBackoffStep(t *testing.T) {
	clk := clockwork.NewFakeClock()
	c := NewCooldowns(clk, nil)
	window := Outcome{Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Failover: true, Status: 429,
		Cooldown: 3 * time.Hour, FromUpstream: true, UntilReset: true, Message: "usage window used up"}
	// OAuth policies ignore rate-limit hints by default; the end of a used-up window is no hint.
	s := c.RecordFailure(1, window, oauthPolicy)
	if got := s.Until.Sub(clk.Now()); got != 3*time.Hour || !s.FromUpstream {
		t.Fatalf("rest %v (from upstream %v), want exactly 3h", got, s.FromUpstream)
	}
	if s.Level != 0 || s.LastErrorType != ReasonQuotaExhausted {
		t.Fatalf("level %d reason %s: the window's end is no backoff step", s.Level, s.LastErrorType)
	}
	// Beyond the configured max, too: it is the upstream's announced reset.
	s = c.RecordFailure(2, Outcome{Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 50 * time.Hour,
		FromUpstream: true, UntilReset: true, Message: "m"}, oauthPolicy)
	if got := s.Until.Sub(clk.Now()); got != 50*time.Hour {
		t.Fatalf("rest %v, want 50h", got)
	}
	// A later answer with an earlier reset never shortens the rest; a later reset extends it
	// (the herd guard is for backoff, not for a window's end).
	clk.Advance(time.Minute)
	s = c.RecordFailure(1, Outcome{Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: time.Hour,
		FromUpstream: true, UntilReset: true, Message: "m"}, oauthPolicy)
	if got := s.Until.Sub(clk.Now()); got != 3*time.Hour-time.Minute {
		t.Fatalf("rest shortened to %v", got)
	}
	s = c.RecordFailure(1, Outcome{Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 5 * time.Hour,
		FromUpstream: true, UntilReset: true, Message: "m"}, oauthPolicy)
	if got := s.Until.Sub(clk.Now()); got != 5*time.Hour || s.Level != 0 {
		t.Fatalf("rest %v level %d, want 5h at level 0", got, s.Level)
	}
	// A terminal state is never overwritten by a window's rest.
	c.MarkExpired(3, "dead")
	s = c.RecordFailure(3, window, oauthPolicy)
	if s.Terminal != TerminalExpired || !s.Until.IsZero() {
		t.Fatalf("terminal state overwritten: %+v", s)
	}
}
