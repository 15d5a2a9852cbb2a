package resilience

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/settings"
)

// breakerSettings are the documented defaults (PRODUCT.md §3.3).
func breakerSettings() settings.CircuitBreaker {
	return settings.CircuitBreaker{Enabled: true, Scope: "provider", FailureThreshold: 5, SuccessThreshold: 2,
		TimeoutMS: 30_000, FailureOnStatuses: []string{"429", "5xx"}}
}

func breakerCfg(t testing.TB, mut func(*settings.CircuitBreaker)) BreakerConfig {
	t.Helper()
	s := breakerSettings()
	if mut != nil {
		mut(&s)
	}
	c, err := NewBreakerConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// call admits one request and settles it with r; it fails the test when refused.
func call(t testing.TB, b *Breakers, provider, model string, cfg BreakerConfig, r Result) {
	t.Helper()
	tk, oe := b.Allow(provider, model, cfg)
	if oe != nil {
		t.Fatalf("%s/%s refused: %v", provider, model, oe)
	}
	tk.Done(r)
}

func stateOf(b *Breakers, provider, model string) (BreakerState, bool) {
	for _, s := range b.States() {
		if s.Provider == provider && s.Model == model {
			return s, true
		}
	}
	return BreakerState{}, false
}

var (
	ok200    = Result{Status: 200}
	err503   = Result{Status: 503}
	err429   = Result{Status: 429}
	bad400   = Result{Status: 400}
	abort503 = Result{Status: 503, ClientAbort: true}
)

func TestNewBreakerConfig(t *testing.T) {
	c := breakerCfg(t, nil)
	if !c.Enabled || c.FailureThreshold != 5 || c.SuccessThreshold != 2 || c.Timeout != 30*time.Second ||
		c.SlowCall != 0 || c.ScopeModel || !c.FailureOn.Match(429) || !c.FailureOn.Match(599) || c.FailureOn.Match(404) {
		t.Fatalf("defaults: %+v", c)
	}
	if c := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Scope = "model"; s.SlowCallThresholdMS = 1500 }); !c.ScopeModel ||
		c.SlowCall != 1500*time.Millisecond {
		t.Fatalf("model scope: %+v", c)
	}
	for name, mut := range map[string]func(*settings.CircuitBreaker){
		"bad status": func(s *settings.CircuitBreaker) { s.FailureOnStatuses = []string{"6xx"} },
		"bad scope":  func(s *settings.CircuitBreaker) { s.Scope = "global" },
	} {
		s := breakerSettings()
		mut(&s)
		if _, err := NewBreakerConfig(s); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestBreakerOpensAfterThresholdAndFailsFast(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	cfg := breakerCfg(t, nil)
	for i := range 4 {
		call(t, b, "openai", "", cfg, err503)
		if s, _ := stateOf(b, "openai", ""); s.State != CircuitClosed || s.ConsecutiveFailures != i+1 {
			t.Fatalf("after %d failures: %+v", i+1, s)
		}
	}
	call(t, b, "openai", "", cfg, err503)
	s, _ := stateOf(b, "openai", "")
	if s.State != CircuitOpen || !s.OpenedAt.Equal(clk.Now()) || s.NextProbeAt != clk.Now().Add(30*time.Second) ||
		s.LastFailure != "status 503" {
		t.Fatalf("after 5 failures: %+v", s)
	}
	clk.Advance(10 * time.Second)
	tk, oe := b.Allow("openai", "gpt-4o", cfg)
	if oe == nil || tk.Probe() {
		t.Fatal("an open breaker let a request through")
	}
	if got, want := oe.Error(), "circuit breaker is open - provider openai temporarily unavailable"; got != want {
		t.Fatalf("message %q want %q", got, want)
	}
	if oe.RetryAfter != 20*time.Second || oe.StatusCode() != 503 || oe.Provider != "openai" || oe.Model != "" || oe.Saturated {
		t.Fatalf("open error: %+v", oe)
	}
	var target *OpenError
	if !errors.As(error(oe), &target) {
		t.Fatal("OpenError must be usable as an error")
	}
	// Another provider is not affected.
	call(t, b, "anthropic", "", cfg, ok200)
}

// TestBreakerFailureCounting decides, with threshold 1, which results open the breaker.
func TestBreakerFailureCounting(t *testing.T) {
	cases := []struct {
		name     string
		statuses []string
		slowMS   int64
		result   Result
		wantOpen bool
	}{
		{"default 429", []string{"429", "5xx"}, 0, err429, true},
		{"default 500", []string{"429", "5xx"}, 0, Result{Status: 500}, true},
		{"default 529", []string{"429", "5xx"}, 0, Result{Status: 529}, true},
		{"default 400 is a success", []string{"429", "5xx"}, 0, bad400, false},
		{"default 404 is a success", []string{"429", "5xx"}, 0, Result{Status: 404}, false},
		{"default 200", []string{"429", "5xx"}, 0, ok200, false},
		{"transport error", []string{"429", "5xx"}, 0, Result{Transport: true}, true},
		{"local timeout", []string{"429", "5xx"}, 0, Result{LocalTimeout: true}, true},
		{"client abort never counts", []string{"429", "5xx"}, 0, abort503, false},
		{"client abort of a transport error", []string{"429", "5xx"}, 0, Result{Transport: true, ClientAbort: true}, false},
		{"zero result is neutral", []string{"429", "5xx"}, 0, Result{}, false},
		{"empty list: 500 is a success", []string{}, 0, Result{Status: 500}, false},
		{"empty list: 429 is a success", []string{}, 0, err429, false},
		{"empty list: transport still counts", []string{}, 0, Result{Transport: true}, true},
		{"empty list: local timeout still counts", []string{}, 0, Result{LocalTimeout: true}, true},
		{"exact 502 listed", []string{"502"}, 0, Result{Status: 502}, true},
		{"exact 503 not listed", []string{"502"}, 0, err503, false},
		{"5xx only: 429 passes", []string{"5xx"}, 0, err429, false},
		{"slow call counts", []string{"429", "5xx"}, 10_000, Result{Status: 200, Duration: 10*time.Second + 1}, true},
		{"at the threshold is not slow", []string{"429", "5xx"}, 10_000, Result{Status: 200, Duration: 10 * time.Second}, false},
		{"slow threshold off", []string{"429", "5xx"}, 0, Result{Status: 200, Duration: time.Hour}, false},
		{"slow client abort is neutral", []string{"429", "5xx"}, 10_000, Result{Status: 200, Duration: time.Minute, ClientAbort: true}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBreakers(clockwork.NewFakeClock(), nil)
			cfg := breakerCfg(t, func(s *settings.CircuitBreaker) {
				s.FailureThreshold, s.FailureOnStatuses, s.SlowCallThresholdMS = 1, c.statuses, c.slowMS
			})
			call(t, b, "p", "", cfg, c.result)
			_, oe := b.Allow("p", "", cfg)
			if got := oe != nil; got != c.wantOpen {
				t.Fatalf("open = %v, want %v", got, c.wantOpen)
			}
		})
	}
}

func TestBreakerLastFailureDescribesTheCause(t *testing.T) {
	cases := []struct {
		result Result
		want   string
	}{
		{Result{Transport: true}, "transport error"},
		{Result{LocalTimeout: true, Status: 504}, "local timeout"},
		{err429, "status 429"},
		{Result{Status: 200, Duration: 12 * time.Second}, "slow call: 12s over 10s"},
		{Result{Status: 502, Detail: "upstream server error"}, "upstream server error"},
	}
	for _, c := range cases {
		b := NewBreakers(clockwork.NewFakeClock(), nil)
		cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.SlowCallThresholdMS = 10_000 })
		call(t, b, "p", "", cfg, c.result)
		if s, _ := stateOf(b, "p", ""); s.LastFailure != c.want {
			t.Errorf("%+v: last failure %q want %q", c.result, s.LastFailure, c.want)
		}
	}
}

func TestBreakerNonFailureResetsTheStreak(t *testing.T) {
	cases := []struct {
		name     string
		between  Result
		wantOpen bool
	}{
		{"a 200 resets", ok200, false},
		{"a 400 resets", bad400, false},
		{"a client abort does not", abort503, true},
		{"a neutral release does not", Result{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBreakers(clockwork.NewFakeClock(), nil)
			cfg := breakerCfg(t, nil)
			for range 4 {
				call(t, b, "p", "", cfg, err503)
			}
			call(t, b, "p", "", cfg, c.between)
			call(t, b, "p", "", cfg, err503)
			_, oe := b.Allow("p", "", cfg)
			if got := oe != nil; got != c.wantOpen {
				t.Fatalf("open = %v, want %v", got, c.wantOpen)
			}
		})
	}
}

// openBreaker drives provider p to open with cfg's threshold of 503s.
func openBreaker(t testing.TB, b *Breakers, p, model string, cfg BreakerConfig) {
	t.Helper()
	for range cfg.FailureThreshold {
		call(t, b, p, model, cfg, err503)
	}
	if _, oe := b.Allow(p, model, cfg); oe == nil {
		t.Fatal("breaker did not open")
	}
}

// probeDue is provider p's breaker (breakerCfg changed by mutate) opened, its 30 s timeout over:
// the next Allow is the probe.
func probeDue(t testing.TB, mutate func(*settings.CircuitBreaker)) (*clockwork.FakeClock, *Breakers, BreakerConfig) {
	t.Helper()
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	cfg := breakerCfg(t, mutate)
	openBreaker(t, b, "p", "", cfg)
	clk.Advance(30 * time.Second)
	return clk, b, cfg
}

func TestBreakerHalfOpenProbesCloseIt(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	cfg := breakerCfg(t, nil)
	openBreaker(t, b, "p", "", cfg)
	clk.Advance(30*time.Second - time.Millisecond)
	if _, oe := b.Allow("p", "", cfg); oe == nil || oe.RetryAfter != time.Millisecond {
		t.Fatalf("before the timeout: %+v", oe)
	}
	clk.Advance(time.Millisecond)
	for i := range 2 {
		probe, oe := b.Allow("p", "", cfg)
		if oe != nil || !probe.Probe() {
			t.Fatalf("probe %d not admitted: %v", i+1, oe)
		}
		if s, _ := stateOf(b, "p", ""); s.State != CircuitHalfOpen {
			t.Fatalf("probe %d: state %s", i+1, s.State)
		}
		// While the probe runs, everybody else fails fast.
		if _, oe := b.Allow("p", "", cfg); oe == nil || oe.RetryAfter != time.Second {
			t.Fatalf("probe %d: concurrent request not refused: %+v", i+1, oe)
		}
		probe.Done(ok200)
		if i == 0 {
			if s, _ := stateOf(b, "p", ""); s.State != CircuitHalfOpen || s.ProbeSuccesses != 1 {
				t.Fatalf("after one probe success: %+v", s)
			}
		}
	}
	s, _ := stateOf(b, "p", "")
	if s.State != CircuitClosed || s.ConsecutiveFailures != 0 || !s.OpenedAt.IsZero() || !s.NextProbeAt.IsZero() {
		t.Fatalf("after two probe successes: %+v", s)
	}
	tk, oe := b.Allow("p", "", cfg)
	if oe != nil || tk.Probe() {
		t.Fatal("closed breaker must admit plain requests")
	}
	tk.Done(ok200)
}

func TestBreakerFailingProbeReopens(t *testing.T) {
	cases := []struct {
		name   string
		result Result
	}{
		{"503", err503},
		{"429", err429},
		{"transport", Result{Transport: true}},
		{"slow", Result{Status: 200, Duration: 11 * time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk, b, cfg := probeDue(t, func(s *settings.CircuitBreaker) { s.SlowCallThresholdMS = 10_000; s.SuccessThreshold = 3 })
			call(t, b, "p", "", cfg, ok200) // first probe succeeds
			probe, _ := b.Allow("p", "", cfg)
			clk.Advance(5 * time.Second)
			probe.Done(c.result)
			s, _ := stateOf(b, "p", "")
			if s.State != CircuitOpen || !s.OpenedAt.Equal(clk.Now()) || s.NextProbeAt != clk.Now().Add(30*time.Second) ||
				s.ProbeSuccesses != 0 {
				t.Fatalf("after failing probe: %+v", s)
			}
			if _, oe := b.Allow("p", "", cfg); oe == nil || oe.RetryAfter != 30*time.Second {
				t.Fatalf("timer must restart: %+v", oe)
			}
		})
	}
}

func TestBreakerProbeAbortReturnsTheSlot(t *testing.T) {
	_, b, cfg := probeDue(t, nil)
	for _, neutral := range []Result{abort503, {}} {
		probe, oe := b.Allow("p", "", cfg)
		if oe != nil || !probe.Probe() {
			t.Fatalf("probe not admitted: %v", oe)
		}
		probe.Done(neutral)
		if s, _ := stateOf(b, "p", ""); s.State != CircuitHalfOpen || s.ProbeSuccesses != 0 {
			t.Fatalf("a neutral probe must not settle anything: %+v", s)
		}
	}
	probe, oe := b.Allow("p", "", cfg)
	if oe != nil || !probe.Probe() {
		t.Fatal("the slot was not given back")
	}
	probe.Done(ok200)
}

func TestBreakerDoneIsIdempotent(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.FailureThreshold = 2 })
	tk, _ := b.Allow("p", "", cfg)
	func() {
		defer tk.Done(Result{}) // the engine's neutral release
		tk.Done(err503)
		tk.Done(err503)
	}()
	if s, _ := stateOf(b, "p", ""); s.ConsecutiveFailures != 1 || s.State != CircuitClosed {
		t.Fatalf("a ticket counted more than once: %+v", s)
	}
	call(t, b, "p", "", cfg, err503)
	clk.Advance(30 * time.Second)
	probe, _ := b.Allow("p", "", cfg)
	copyOfFirst := probe // a copy does not share the done flag; the breaker still knows it is stale
	func() {
		defer probe.Done(Result{})
		probe.Done(ok200)
	}()
	next, oe := b.Allow("p", "", cfg)
	if oe != nil || !next.Probe() {
		t.Fatal("second probe not admitted after the first succeeded")
	}
	probe.Done(err503) // late repeat of the first probe must not settle the second
	copyOfFirst.Done(err503)
	if s, _ := stateOf(b, "p", ""); s.State != CircuitHalfOpen || s.ProbeSuccesses != 1 {
		t.Fatalf("a repeated Done touched the next probe: %+v", s)
	}
	next.Done(ok200)
	if s, _ := stateOf(b, "p", ""); s.State != CircuitClosed {
		t.Fatalf("state %s", s.State)
	}
	var zero Ticket
	zero.Done(err503) // disabled ticket
	var nilTicket *Ticket
	nilTicket.Done(err503)
}

// Requests admitted before the breaker opened finish afterwards; their verdicts belong to a
// phase that is over and must not reopen, close or count.
func TestBreakerStaleTicketsAreIgnored(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.SuccessThreshold = 1 })
	var inFlight []Ticket
	for range 3 {
		tk, _ := b.Allow("p", "", cfg)
		inFlight = append(inFlight, tk)
	}
	openBreaker(t, b, "p", "", cfg)
	inFlight[0].Done(ok200)
	if s, _ := stateOf(b, "p", ""); s.State != CircuitOpen || s.ConsecutiveFailures != 5 {
		t.Fatalf("a stale success changed an open breaker: %+v", s)
	}
	clk.Advance(30 * time.Second)
	probe, _ := b.Allow("p", "", cfg)
	inFlight[1].Done(ok200)
	if s, _ := stateOf(b, "p", ""); s.State != CircuitHalfOpen {
		t.Fatalf("a stale success acted as a probe: %+v", s)
	}
	probe.Done(ok200)
	inFlight[2].Done(err503)
	if s, _ := stateOf(b, "p", ""); s.State != CircuitClosed || s.ConsecutiveFailures != 0 {
		t.Fatalf("a stale failure counted after closing: %+v", s)
	}
}

func TestBreakerExactlyOneProbeUnderConcurrency(t *testing.T) {
	_, b, cfg := probeDue(t, nil)

	const n = 50
	start := make(chan struct{})
	tickets := make(chan Ticket, n)
	var refused sync.WaitGroup
	var mu sync.Mutex
	var refusals int
	for range n {
		refused.Add(1)
		go func() {
			defer refused.Done()
			<-start
			tk, oe := b.Allow("p", "", cfg)
			if oe != nil {
				mu.Lock()
				refusals++
				mu.Unlock()
				return
			}
			tickets <- tk
		}()
	}
	close(start)
	refused.Wait()
	close(tickets)
	var got []Ticket
	for tk := range tickets {
		got = append(got, tk)
	}
	if len(got) != 1 || !got[0].Probe() || refusals != n-1 {
		t.Fatalf("%d admitted (probe=%v), %d refused; want exactly one probe", len(got), len(got) == 1 && got[0].Probe(), refusals)
	}
	got[0].Done(ok200)
}

func TestBreakerDisabled(t *testing.T) {
	cases := []struct {
		name string
		mut  func(*settings.CircuitBreaker)
	}{
		{"enabled false", func(s *settings.CircuitBreaker) { s.Enabled = false }},
		{"threshold 0", func(s *settings.CircuitBreaker) { s.FailureThreshold = 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var persisted []BreakerState
			b := NewBreakers(clockwork.NewFakeClock(), func(s BreakerState) { persisted = append(persisted, s) })
			off := breakerCfg(t, c.mut)
			for range 100 {
				tk, oe := b.Allow("p", "m", off)
				if oe != nil || tk.Probe() {
					t.Fatal("a disabled breaker refused")
				}
				tk.Done(err503)
			}
			if len(b.States()) != 0 || len(persisted) != 0 {
				t.Fatalf("a disabled breaker tracked state: %v %v", b.States(), persisted)
			}
			// Switching an open breaker off forgets it (and its row).
			on := breakerCfg(t, nil)
			openBreaker(t, b, "p", "", on)
			inFlight, _ := b.Allow("q", "", on)
			if _, oe := b.Allow("p", "", off); oe != nil {
				t.Fatal("disabled must allow")
			}
			if s, ok := stateOf(b, "p", ""); ok {
				t.Fatalf("state kept after disabling: %+v", s)
			}
			if last := persisted[len(persisted)-1]; last.State != CircuitClosed || last.ConsecutiveFailures != 0 {
				t.Fatalf("row not cleared: %+v", last)
			}
			call(t, b, "p", "", on, err503) // enabled again: fresh
			if s, _ := stateOf(b, "p", ""); s.State != CircuitClosed || s.ConsecutiveFailures != 1 {
				t.Fatalf("re-enabled: %+v", s)
			}
			inFlight.Done(err503)
		})
	}
}

func TestBreakerPerProviderConfig(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	strict := breakerCfg(t, func(s *settings.CircuitBreaker) { s.FailureThreshold = 2; s.TimeoutMS = 5_000 })
	lenient := breakerCfg(t, func(s *settings.CircuitBreaker) { s.FailureThreshold = 4; s.TimeoutMS = 60_000 })
	for range 2 {
		call(t, b, "strict", "", strict, err503)
		call(t, b, "lenient", "", lenient, err503)
	}
	if _, oe := b.Allow("strict", "", strict); oe == nil || oe.RetryAfter != 5*time.Second {
		t.Fatalf("strict: %+v", oe)
	}
	for range 2 {
		call(t, b, "lenient", "", lenient, err503)
	}
	if _, oe := b.Allow("lenient", "", lenient); oe == nil || oe.RetryAfter != time.Minute {
		t.Fatalf("lenient: %+v", oe)
	}
	clk.Advance(5 * time.Second)
	call(t, b, "strict", "", strict, ok200) // strict probes after its own timeout
	if _, oe := b.Allow("lenient", "", lenient); oe == nil {
		t.Fatal("lenient must still be open")
	}
}

func TestBreakerModelScope(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	perModel := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Scope = "model"; s.FailureThreshold = 2 })
	openBreaker(t, b, "p", "m1", perModel)
	if _, oe := b.Allow("p", "m1", perModel); oe == nil || oe.Model != "m1" ||
		oe.Error() != "circuit breaker is open - provider p temporarily unavailable" {
		t.Fatalf("m1: %+v", oe)
	}
	call(t, b, "p", "m2", perModel, ok200)
	call(t, b, "p", "", perModel, ok200) // no model: the provider breaker
	if s, ok := stateOf(b, "p", ""); !ok || s.State != CircuitClosed {
		t.Fatalf("provider breaker under model scope: %+v %v", s, ok)
	}
	// Under provider scope the model is ignored: one breaker for all models.
	perProvider := breakerCfg(t, func(s *settings.CircuitBreaker) { s.FailureThreshold = 2 })
	call(t, b, "q", "m1", perProvider, err503)
	call(t, b, "q", "m2", perProvider, err503)
	if _, oe := b.Allow("q", "m3", perProvider); oe == nil || oe.Model != "" {
		t.Fatalf("provider scope: %+v", oe)
	}
	if _, ok := stateOf(b, "q", "m1"); ok {
		t.Fatal("provider scope created a model breaker")
	}
}

func modelName(i int) string { return "model-" + strconv.Itoa(i) }

func TestBreakerModelCapEvictsLeastRecentlyUsedClosed(t *testing.T) {
	clk := clockwork.NewFakeClock()
	var dropped []string
	b := NewBreakers(clk, nil)
	b.OnTransition(func(_, model string, _, to CircuitState) {
		if to == CircuitNone {
			dropped = append(dropped, model)
		}
	})
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Scope = "model" })
	for i := range MaxModelBreakers {
		call(t, b, "p", modelName(i), cfg, ok200)
		clk.Advance(time.Millisecond)
	}
	call(t, b, "p", modelName(0), cfg, ok200) // model 0 is now the most recent
	call(t, b, "p", "new", cfg, ok200)
	if len(dropped) != 1 || dropped[0] != modelName(1) {
		t.Fatalf("evicted %v, want %s", dropped, modelName(1))
	}
	if n := len(b.States()); n != MaxModelBreakers {
		t.Fatalf("%d breakers held", n)
	}
	if _, ok := stateOf(b, "p", modelName(0)); !ok {
		t.Fatal("the recently used model was evicted")
	}
	// The provider breaker is not one of the slots.
	call(t, b, "p", "", cfg, ok200)
	if len(dropped) != 1 {
		t.Fatalf("provider breaker evicted a model: %v", dropped)
	}
}

func TestBreakerModelCapProtectsOpenHalfOpenAndBusy(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Scope = "model"; s.FailureThreshold = 1 })
	// Oldest: one busy closed breaker; then open ones; the most recent is half-open.
	busy, _ := b.Allow("p", "busy", cfg)
	clk.Advance(time.Second)
	for i := range MaxModelBreakers - 2 {
		call(t, b, "p", modelName(i), cfg, err503)
	}
	call(t, b, "p", "probing", cfg, err503)
	clk.Advance(30 * time.Second)
	probe, oe := b.Allow("p", "probing", cfg)
	if oe != nil || !probe.Probe() {
		t.Fatal("no probe")
	}

	_, oe = b.Allow("p", "new", cfg)
	if oe == nil || !oe.Saturated || oe.Model != "new" || oe.StatusCode() != 503 ||
		oe.Error() != "circuit breaker capacity exhausted - provider p temporarily unavailable" {
		t.Fatalf("saturated: %+v", oe)
	}
	// every open breaker's probe is due now, so the shortest wait is the floor
	if oe.RetryAfter != time.Second {
		t.Fatalf("saturated RetryAfter %v", oe.RetryAfter)
	}
	if _, ok := stateOf(b, "p", "busy"); !ok {
		t.Fatal("busy breaker evicted")
	}
	// Once the busy request ends, its (closed) breaker is the one to go.
	busy.Done(ok200)
	call(t, b, "p", "new", cfg, ok200)
	if _, ok := stateOf(b, "p", "busy"); ok {
		t.Fatal("closed idle breaker kept while full")
	}
	for _, m := range []string{modelName(0), modelName(MaxModelBreakers - 3), "probing"} {
		if s, ok := stateOf(b, "p", m); !ok || s.State == CircuitClosed {
			t.Fatalf("%s: %+v %v", m, s, ok)
		}
	}
	probe.Done(ok200)
}

func TestBreakerModelIdleExpiry(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Scope = "model"; s.FailureThreshold = 2 })
	call(t, b, "p", "idle", cfg, err503) // closed with one failure
	openBreaker(t, b, "p", "open", cfg)
	busy, _ := b.Allow("p", "busy", cfg)
	clk.Advance(ModelBreakerIdleTTL - time.Millisecond)
	call(t, b, "p", "fresh", cfg, ok200)
	if _, ok := stateOf(b, "p", "idle"); !ok {
		t.Fatal("expired too early")
	}
	clk.Advance(time.Millisecond)
	var persisted []BreakerState
	b.persist = func(s BreakerState) { persisted = append(persisted, s) }
	call(t, b, "p", "another", cfg, ok200) // a new model triggers the lazy sweep
	// checked before States, which sweeps as well
	if len(persisted) != 1 || persisted[0].Model != "idle" || persisted[0].ConsecutiveFailures != 0 {
		t.Fatalf("expiry must delete the stored failure count: %+v", persisted)
	}
	if _, ok := stateOf(b, "p", "idle"); ok {
		t.Fatal("idle closed breaker not expired")
	}
	for _, m := range []string{"open", "busy", "fresh", "another"} {
		if _, ok := stateOf(b, "p", m); !ok {
			t.Fatalf("%s dropped", m)
		}
	}
	busy.Done(ok200) // counts as use
	clk.Advance(ModelBreakerIdleTTL)
	if got := len(b.States()); got != 1 { // States sweeps too; only the open one stays
		t.Fatalf("%d breakers after idling: %v", got, b.States())
	}
}

func TestBreakerTransitionsAndReset(t *testing.T) {
	clk := clockwork.NewFakeClock()
	type tr struct {
		model    string
		from, to CircuitState
	}
	var got []tr
	var persisted []BreakerState
	b := NewBreakers(clk, func(s BreakerState) { persisted = append(persisted, s) })
	b.OnTransition(func(_, model string, from, to CircuitState) { got = append(got, tr{model, from, to}) })
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.FailureThreshold = 1; s.SuccessThreshold = 1 })
	openBreaker(t, b, "p", "", cfg)
	clk.Advance(30 * time.Second)
	call(t, b, "p", "", cfg, ok200)
	openBreaker(t, b, "p", "", cfg)
	b.Reset("p", "")
	want := []tr{{"", CircuitNone, CircuitClosed}, {"", CircuitClosed, CircuitOpen}, {"", CircuitOpen, CircuitHalfOpen},
		{"", CircuitHalfOpen, CircuitClosed}, {"", CircuitClosed, CircuitOpen}, {"", CircuitOpen, CircuitNone}}
	if len(got) != len(want) {
		t.Fatalf("transitions %v want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("transition %d: %v want %v", i, got[i], want[i])
		}
	}
	wantStates := []CircuitState{CircuitOpen, CircuitHalfOpen, CircuitClosed, CircuitOpen, CircuitClosed}
	if len(persisted) != len(wantStates) {
		t.Fatalf("persisted %+v", persisted)
	}
	for i, w := range wantStates {
		if persisted[i].State != w {
			t.Fatalf("persisted %d: %s want %s", i, persisted[i].State, w)
		}
	}
	if _, oe := b.Allow("p", "", cfg); oe != nil {
		t.Fatal("reset breaker still open")
	}
	if CircuitClosed.Gauge() != 0 || CircuitHalfOpen.Gauge() != 1 || CircuitOpen.Gauge() != 2 || CircuitNone.Gauge() != 0 {
		t.Fatal("gauge values")
	}

	model := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Scope = "model"; s.FailureThreshold = 1 })
	openBreaker(t, b, "q", "m1", model)
	openBreaker(t, b, "q", "m2", model)
	openBreaker(t, b, "q", "", model)
	b.Reset("q", "m1")
	if _, oe := b.Allow("q", "m1", model); oe != nil {
		t.Fatal("m1 not reset")
	}
	if _, oe := b.Allow("q", "m2", model); oe == nil {
		t.Fatal("m2 reset too")
	}
	b.ResetProvider("q")
	for _, m := range []string{"m2", ""} {
		if _, oe := b.Allow("q", m, model); oe != nil {
			t.Fatalf("%q not reset by ResetProvider", m)
		}
	}
	b.Reset("unknown", "")
	b.ResetProvider("unknown")
}

// A ticket issued before a reset (or an eviction) belongs to a breaker that is gone.
func TestBreakerTicketOfDroppedBreaker(t *testing.T) {
	b := NewBreakers(clockwork.NewFakeClock(), nil)
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.FailureThreshold = 1 })
	tk, _ := b.Allow("p", "", cfg)
	b.Reset("p", "")
	tk.Done(err503)
	if _, oe := b.Allow("p", "", cfg); oe != nil {
		t.Fatal("a ticket of a reset breaker opened the new one")
	}
}

func TestBreakerLoadRoundTrip(t *testing.T) {
	clk := clockwork.NewFakeClock()
	stored := map[BreakerKey]BreakerState{} // what a write-behind queue would keep
	persist := func(s BreakerState) {
		if s.State == CircuitClosed && s.ConsecutiveFailures == 0 {
			delete(stored, s.Key())
			return
		}
		stored[s.Key()] = s
	}
	b := NewBreakers(clk, persist)
	cfg := breakerCfg(t, nil)
	model := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Scope = "model" })
	openBreaker(t, b, "open", "", cfg)
	openBreaker(t, b, "half", "", cfg)
	for range 3 {
		call(t, b, "counting", "", cfg, err503)
	}
	openBreaker(t, b, "models", "m1", model)
	call(t, b, "models", "m2", model, ok200)
	clk.Advance(10 * time.Second)
	openBreaker(t, b, "reopened", "", cfg)
	clk.Advance(20 * time.Second)
	probe, _ := b.Allow("half", "", cfg) // half-open with a probe in flight at "shutdown"
	_ = probe
	if len(stored) != 5 {
		t.Fatalf("stored %d rows: %+v", len(stored), stored)
	}

	clk.Advance(5 * time.Second) // restart
	var loaded []string
	b2 := NewBreakers(clk, persist)
	b2.OnTransition(func(p, _ string, from, to CircuitState) {
		if from == CircuitNone {
			loaded = append(loaded, p+":"+string(to))
		}
	})
	var rows []BreakerState
	for _, s := range stored {
		rows = append(rows, s)
	}
	b2.Load(rows)
	if len(loaded) != 5 {
		t.Fatalf("loaded transitions %v", loaded)
	}
	if _, oe := b2.Allow("reopened", "", cfg); oe == nil || oe.RetryAfter != 5*time.Second {
		t.Fatalf("open breaker after restart: %+v", oe)
	}
	if s, _ := stateOf(b2, "half", ""); s.State != CircuitOpen {
		t.Fatalf("half-open must load as open: %+v", s)
	}
	probe2, oe := b2.Allow("half", "", cfg) // its timer had run out: a new probe may go at once
	if oe != nil || !probe2.Probe() {
		t.Fatalf("loaded half-open breaker: %+v", oe)
	}
	probe2.Done(ok200)
	if _, oe := b2.Allow("open", "", cfg); oe != nil {
		t.Fatal("open breaker whose timeout passed must probe")
	}
	if _, oe := b2.Allow("models", "m1", model); oe != nil { // 35 s since it opened
		t.Fatal("model breaker not probing")
	}
	if _, oe := b2.Allow("models", "m2", model); oe != nil {
		t.Fatal("closed model refused")
	}
	for range 2 {
		call(t, b2, "counting", "", cfg, err503)
	}
	if _, oe := b2.Allow("counting", "", cfg); oe == nil {
		t.Fatal("the failure count was not restored (3 + 2 must open)")
	}
}

// TestBreakerStateMachine drives one breaker through a long deterministic pseudo-random
// sequence of admissions, verdicts (in any order, repeated) and clock steps, and checks every
// step against the rules as seen from outside: the transitions reported, who gets in, and when.
func TestBreakerStateMachine(t *testing.T) {
	for _, scope := range []string{"provider", "model"} {
		t.Run(scope, func(t *testing.T) {
			clk := clockwork.NewFakeClock()
			const F, S = 3, 2
			timeout := 10 * time.Second
			cfg := breakerCfg(t, func(s *settings.CircuitBreaker) {
				s.Scope, s.FailureThreshold, s.SuccessThreshold, s.TimeoutMS = scope, F, S, timeout.Milliseconds()
			})
			model := ""
			if scope == "model" {
				model = "m"
			}
			b := NewBreakers(clk, nil)
			state, phase := CircuitNone, 0
			var transitions []CircuitState
			b.OnTransition(func(_, _ string, from, to CircuitState) {
				if from != state {
					t.Fatalf("transition from %s, but state was %s", from, state)
				}
				state = to
				phase++
				transitions = append(transitions, to)
			})
			type held struct {
				tk    Ticket
				phase int
			}
			var inFlight []*held
			var failStreak, probeWins int
			var openedAt time.Time
			seed := uint64(0x9e3779b97f4a7c15)
			rnd := func(n int) int { // xorshift: deterministic, no dependency on math/rand's stream
				seed ^= seed << 13
				seed ^= seed >> 7
				seed ^= seed << 17
				return int(seed % uint64(n))
			}
			results := []Result{ok200, bad400, err503, err429, {Transport: true}, abort503, {}}
			seen := map[CircuitState]int{}
			for step := range 20_000 {
				switch op := rnd(10); {
				case op < 4: // admit
					before := state
					beforePhase := phase
					tk, oe := b.Allow("p", model, cfg)
					if before == CircuitNone && phase == beforePhase+1 {
						before, beforePhase = CircuitClosed, phase // created just now
					}
					probing := false
					for _, h := range inFlight {
						probing = probing || h.tk.Probe() && !h.tk.done
					}
					switch {
					case before == CircuitClosed:
						if oe != nil || tk.Probe() {
							t.Fatalf("step %d: closed refused or probed", step)
						}
					case before == CircuitOpen && clk.Now().Before(openedAt.Add(timeout)):
						if oe == nil || oe.RetryAfter != openedAt.Add(timeout).Sub(clk.Now()) {
							t.Fatalf("step %d: open admitted or wrong RetryAfter: %+v", step, oe)
						}
					case probing:
						if oe == nil {
							t.Fatalf("step %d: second probe admitted", step)
						}
					default: // open past the timeout, or half-open without a probe
						if oe != nil || !tk.Probe() || state != CircuitHalfOpen {
							t.Fatalf("step %d: expected a probe from %s: %+v", step, before, oe)
						}
						if before == CircuitOpen {
							probeWins = 0
						}
					}
					if oe == nil {
						inFlight = append(inFlight, &held{tk, phase})
					}
				case op < 8 && len(inFlight) > 0: // settle one (sometimes twice)
					i := rnd(len(inFlight))
					h := inFlight[i]
					r := results[rnd(len(results))]
					v := cfg.judge(&r)
					before, beforePhase := state, phase
					live := h.phase == phase && !h.tk.done
					h.tk.Done(r)
					if rnd(3) == 0 {
						h.tk.Done(results[rnd(len(results))]) // must be ignored
					} else {
						inFlight = append(inFlight[:i], inFlight[i+1:]...)
					}
					want := before
					switch {
					case !live || v == verdictNeutral:
					case before == CircuitClosed && v == verdictSuccess:
						failStreak = 0
					case before == CircuitClosed:
						if failStreak++; failStreak >= F {
							want = CircuitOpen
						}
					case before == CircuitHalfOpen && h.tk.Probe() && v == verdictSuccess:
						if probeWins++; probeWins >= S {
							want = CircuitClosed
						}
					case before == CircuitHalfOpen && h.tk.Probe():
						want = CircuitOpen
					}
					if state != want || (want != before) != (phase == beforePhase+1) || want == before && phase != beforePhase {
						t.Fatalf("step %d: %s + %+v (live=%v) → %s, want %s", step, before, r, live, state, want)
					}
					if want == CircuitOpen && before != CircuitOpen {
						openedAt = clk.Now()
					}
					if want != before {
						failStreak, probeWins = 0, 0
					}
				default:
					clk.Advance(time.Duration(rnd(4000)) * time.Millisecond)
				}
				seen[state]++
				if s, ok := stateOf(b, "p", model); ok && s.State != state {
					t.Fatalf("step %d: States says %s, hooks say %s", step, s.State, state)
				}
			}
			if seen[CircuitClosed] == 0 || seen[CircuitOpen] == 0 || seen[CircuitHalfOpen] == 0 || len(transitions) < 20 {
				t.Fatalf("sequence too tame: %v, %d transitions", seen, len(transitions))
			}
		})
	}
}

func TestAllowClosedDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := NewBreakers(clockwork.NewRealClock(), nil)
	cfg := breakerCfg(t, nil)
	call(t, b, "openai", "", cfg, ok200)
	allocs := testing.AllocsPerRun(1000, func() {
		tk, oe := b.Allow("openai", "gpt-4o", cfg)
		if oe != nil {
			t.Fatal(oe)
		}
		tk.Done(ok200)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Allow+Done", allocs)
	}
}

func BenchmarkAllowClosed(b *testing.B) {
	br := NewBreakers(clockwork.NewRealClock(), nil)
	cfg := breakerCfg(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		tk, oe := br.Allow("openai", "gpt-4o", cfg)
		if oe != nil {
			b.Fatal(oe)
		}
		tk.Done(ok200)
	}
}

func TestBreakerLoadReplacesWithoutPersisting(t *testing.T) {
	clk := clockwork.NewFakeClock()
	var persisted []BreakerState
	var transitions []CircuitState
	b := NewBreakers(clk, func(s BreakerState) { persisted = append(persisted, s) })
	b.OnTransition(func(_, _ string, _, to CircuitState) { transitions = append(transitions, to) })
	cfg := breakerCfg(t, nil)
	open := BreakerState{Provider: "p", State: CircuitOpen, OpenedAt: clk.Now(), NextProbeAt: clk.Now().Add(time.Minute),
		ConsecutiveFailures: 5}
	counting := BreakerState{Provider: "p", State: CircuitClosed, ConsecutiveFailures: 2}
	b.Load([]BreakerState{open, open, {Provider: "q", State: CircuitClosed}}) // a row of nothing is skipped
	if _, oe := b.Allow("p", "", cfg); oe == nil || oe.RetryAfter != time.Minute {
		t.Fatalf("loaded open: %+v", oe)
	}
	b.Load([]BreakerState{counting})
	if _, oe := b.Allow("p", "", cfg); oe != nil {
		t.Fatal("the later state did not replace the earlier one")
	}
	if len(persisted) != 0 {
		t.Fatalf("Load persisted: %+v", persisted)
	}
	if len(transitions) != 2 || transitions[0] != CircuitOpen || transitions[1] != CircuitClosed {
		t.Fatalf("transitions %v", transitions)
	}
	if _, ok := stateOf(b, "q", ""); ok {
		t.Fatal("a row of nothing was loaded")
	}
}

// TestBreakerTransitionHooksAllHear: a second subscriber must never silence the first; each
// hears every transition, in the order the hooks were added.
func TestBreakerTransitionHooksAllHear(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	var order []string
	var first, second []CircuitState
	b.OnTransition(func(_, _ string, _, to CircuitState) { first = append(first, to); order = append(order, "first") })
	b.OnTransition(func(_, _ string, _, to CircuitState) { second = append(second, to); order = append(order, "second") })
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.FailureThreshold = 1; s.SuccessThreshold = 1 })
	openBreaker(t, b, "p", "", cfg)
	clk.Advance(30 * time.Second)
	call(t, b, "p", "", cfg, ok200) // the probe succeeds: half-open → closed
	want := []CircuitState{CircuitClosed, CircuitOpen, CircuitHalfOpen, CircuitClosed}
	if !slices.Equal(first, want) || !slices.Equal(second, want) {
		t.Fatalf("first heard %v, second %v; want both %v", first, second, want)
	}
	for i := 0; i < len(order); i += 2 {
		if order[i] != "first" || order[i+1] != "second" {
			t.Fatalf("hooks ran out of order: %v", order)
		}
	}
}

// TestBreakerPeekAdmitsNothing: Peek says what Allow would say of an open breaker and of a
// half-open one whose probe is in flight, and neither creates a breaker nor takes the probe slot.
func TestBreakerPeekAdmitsNothing(t *testing.T) {
	clk := clockwork.NewFakeClock()
	b := NewBreakers(clk, nil)
	cfg := breakerCfg(t, func(s *settings.CircuitBreaker) { s.FailureThreshold = 1 })
	if open, _ := b.Peek("openai", "", cfg); open {
		t.Fatal("an unknown provider peeks open")
	}
	if len(b.States()) != 0 {
		t.Fatal("Peek created a breaker")
	}
	call(t, b, "openai", "", cfg, err503)
	if open, left := b.Peek("openai", "gpt-4o", cfg); !open || left != 30*time.Second {
		t.Fatalf("open breaker peeks %v %v", open, left)
	}
	clk.Advance(30 * time.Second)
	if open, _ := b.Peek("openai", "", cfg); open {
		t.Fatal("a breaker due for its probe peeks open")
	}
	// Peeking took no probe slot: the next request is the probe.
	tk, oe := b.Allow("openai", "", cfg)
	if oe != nil || !tk.Probe() {
		t.Fatalf("the probe after a peek: %v %v", oe, tk.Probe())
	}
	if open, left := b.Peek("openai", "", cfg); !open || left != probeBusyRetry {
		t.Fatalf("half-open with its probe in flight peeks %v %v", open, left)
	}
	tk.Done(ok200)
	if open, _ := b.Peek("openai", "", cfg); open {
		t.Fatal("half-open with no probe in flight peeks open")
	}
	off := breakerCfg(t, func(s *settings.CircuitBreaker) { s.Enabled = false })
	if open, _ := b.Peek("openai", "", off); open {
		t.Fatal("a disabled breaker peeks open")
	}
}
