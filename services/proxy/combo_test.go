package proxy

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/tidwall/gjson"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/resilience"
	"switchyard/services/routing"
)

// headroom reads the usage windows the gateway polls: the tightest window that has not reset
// yet, and its reset; API keys and accounts without readings count as full. The headroom
// strategy then prefers the connection (or target) with the most left, of equals the one whose
// window resets first.
func TestHeadroomFromUsageWindows(t *testing.T) {
	clk := clockwork.NewFakeClock()
	now := clk.Now()
	u := resilience.NewUsage(clk, nil)
	e := New(Options{Clock: clk, Usage: u})
	u.Polled(1, &resilience.UsageWindow{Utilization: 80, ResetsAt: now.Add(time.Hour)},
		&resilience.UsageWindow{Utilization: 30, ResetsAt: now.Add(72 * time.Hour)})
	u.Polled(2, &resilience.UsageWindow{Utilization: 40, ResetsAt: now.Add(2 * time.Hour)},
		&resilience.UsageWindow{Utilization: 10, ResetsAt: now.Add(100 * time.Hour)})
	u.Polled(3, &resilience.UsageWindow{Utilization: 100, ResetsAt: now.Add(-time.Minute)}, // reset already
		&resilience.UsageWindow{Utilization: 60, ResetsAt: now.Add(24 * time.Hour)})
	u.Polled(4, &resilience.UsageWindow{Utilization: 60, ResetsAt: now.Add(30 * time.Minute)}, nil)
	tests := []struct {
		id    int64
		want  float64
		reset time.Duration
	}{
		{1, 0.2, time.Hour},
		{2, 0.6, 2 * time.Hour},
		{3, 0.4, 24 * time.Hour},
		{4, 0.4, 30 * time.Minute},
		{5, 1, 0}, // an API key: no readings
	}
	var cands []routing.Candidate
	for _, tc := range tests {
		h, reset := e.headroom(&catalog.ConnEntry{ID: tc.id})
		if d := h - tc.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("connection %d: headroom %v, want %v", tc.id, h, tc.want)
		}
		if (tc.reset == 0) != reset.IsZero() || tc.reset != 0 && !reset.Equal(now.Add(tc.reset)) {
			t.Errorf("connection %d: reset %v, want in %v", tc.id, reset, tc.reset)
		}
		cands = append(cands, routing.Candidate{Weight: 1, Headroom: h, ResetAt: reset})
	}
	order := routing.Order(routing.Headroom, cands, 0, rand.New(rand.NewPCG(1, 2)))
	// Most left first (the API key), then 0.6, then the two at 0.4 with the sooner reset first.
	want := []int{4, 1, 3, 2, 0}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("headroom order %v, want %v", order, want)
		}
	}
}

// A target's route header names the combo, the target and the calls made.
func TestRouteHeader(t *testing.T) {
	tr := &Trace{Combo: "c", Provider: "p", Model: "m", Attempts: 3}
	if got := tr.route(); got != "combo=c; target=p/m; attempts=3" {
		t.Fatalf("%q", got)
	}
	if got := (&Trace{Provider: "p", Model: "m", Attempts: 1}).route(); got != "target=p/m; attempts=1" {
		t.Fatalf("%q", got)
	}
	if got := (&Trace{Combo: "c"}).route(); got != "combo=c; attempts=0" {
		t.Fatalf("%q", got)
	}
}

// The numbers strategies read: requests in flight and started, the error rate and time to first
// byte as moving averages.
func TestRouteStats(t *testing.T) {
	s := newRouteStats()
	st := s.get("k")
	st.begin()
	st.begin()
	if inFlight, uses, _, _ := st.read(); inFlight != 2 || uses != 2 {
		t.Fatalf("in flight %d, uses %d", inFlight, uses)
	}
	st.end(false, 0)
	st.end(true, 100*time.Millisecond)
	inFlight, _, errRate, ttft := st.read()
	if inFlight != 0 || ttft != 100*time.Millisecond || errRate <= 0 || errRate >= 0.2 {
		t.Fatalf("in flight %d, error rate %v, ttft %v", inFlight, errRate, ttft)
	}
	if s.peek("other") != nil {
		t.Fatal("peek created numbers")
	}
	if inFlight, uses, _, _ := s.peek("other").read(); inFlight != 0 || uses != 0 {
		t.Fatal("unknown numbers are not zero")
	}
}

// A combo's error carries its route beside the attempts and exclusions, the same in the OpenAI
// and the Anthropic format; a request without a route adds none.
func TestComboErrorCarriesItsRoute(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	route := []RouteStep{
		{Target: "pa/m", Round: 1, Outcome: "failed", Reason: "server_error", Attempts: 1, Action: "skip"},
		{Target: "pb/m", Via: []string{"inner"}, Round: 1, Outcome: "skipped", Reason: "circuit_open", Source: "provider pb", Until: until},
	}
	e := withRetry(fail(errs.Unavailable, "all_targets_cooling_down", "proxy.combo_all_cooling", "c", "circuit_open", 30), 30*time.Second)
	attachExcluded(e, []Excluded{{Target: "pb/m", Reason: "circuit_open", SecondsLeft: 30}})
	finalError(e, 1)
	attachRoute(e, route)
	route[0].Reason = "changed" // the error keeps the route as it was when answered
	for name, body := range map[string][]byte{"openai": OpenAIErrorBody(e), "anthropic": AnthropicErrorBody(e)} {
		d := gjson.GetBytes(body, "diagnostics")
		steps := d.Get("route").Array()
		if d.Get("attempts").Int() != 1 || len(d.Get("excluded").Array()) != 1 || len(steps) != 2 {
			t.Fatalf("%s: diagnostics %s", name, d.Raw)
		}
		if steps[0].Get("reason").String() != "server_error" || steps[0].Get("outcome").String() != "failed" ||
			steps[0].Get("attempts").Int() != 1 || steps[0].Get("action").String() != "skip" {
			t.Fatalf("%s: route[0] %s", name, steps[0].Raw)
		}
		if steps[1].Get("reason").String() != "circuit_open" || steps[1].Get("source").String() != "provider pb" ||
			!steps[1].Get("until").Time().Equal(until) || steps[1].Get("via.0").String() != "inner" {
			t.Fatalf("%s: route[1] %s", name, steps[1].Raw)
		}
	}
	plain := fail(errs.NotFound, "model_not_found", "proxy.model_not_found", "m")
	attachRoute(plain, nil)
	if plain.Diagnostics != nil {
		t.Fatalf("diagnostics without a route: %+v", plain.Diagnostics)
	}
}
