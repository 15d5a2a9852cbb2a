package health

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/errs"
)

func TestDegradedNeedsThreeFailuresAndHalfTheRequests(t *testing.T) {
	clk := clockwork.NewFakeClock()
	tr := New(clk)
	for i := 0; i < 2; i++ {
		tr.Record("p", "m", false, 500, errs.M("proxy.transport_op", "read", "boom"))
	}
	if len(tr.Degraded("p")) != 0 {
		t.Fatal("two failures must not degrade")
	}
	tr.Record("p", "m", false, 500, errs.M("proxy.transport_op", "read", "boom"))
	if d := tr.Degraded("p"); len(d) != 1 || d[0].Fail != 3 {
		t.Fatalf("three failures of three: %v", d)
	}
	for i := 0; i < 4; i++ {
		tr.Record("p", "m", true, 200, errs.Msg{})
	}
	if len(tr.Degraded("p")) != 0 {
		t.Fatal("3 of 7 is under half")
	}
	if f := tr.RecentFailures("p"); len(f) != 3 || f[0].Message != `proxy.transport_op("read", "boom")` {
		t.Fatalf("recent failures %v", f)
	}
}

func TestWindowRollsOff(t *testing.T) {
	clk := clockwork.NewFakeClock()
	tr := New(clk)
	for i := 0; i < 5; i++ {
		tr.Record("p", "m", false, 503, errs.M("proxy.transport_op", "read", "x"))
	}
	clk.Advance(Window + time.Minute)
	if len(tr.Degraded("p")) != 0 || len(tr.RecentFailures("p")) != 0 {
		t.Fatal("old outcomes must leave the window")
	}
	// Partially aged: failures 9 minutes ago still count, new successes dilute them.
	for i := 0; i < 4; i++ {
		tr.Record("p", "m", false, 503, errs.M("proxy.transport_op", "read", "x"))
	}
	clk.Advance(9 * time.Minute)
	if len(tr.Degraded("p")) != 1 {
		t.Fatal("failures within the window count")
	}
	tr.Reset("p")
	if len(tr.Degraded("p")) != 0 {
		t.Fatal("reset")
	}
}

func TestModelsBounded(t *testing.T) {
	tr := New(clockwork.NewFakeClock())
	for i := 0; i < maxModels+50; i++ {
		tr.Record("p", string(rune('a'+i%26))+time.Duration(i).String(), true, 200, errs.Msg{})
	}
	if n := len(tr.provs["p"].models); n > maxModels {
		t.Fatalf("%d models kept", n)
	}
}

func TestDerive(t *testing.T) {
	cases := []struct {
		name string
		in   Inputs
		want Status
	}{
		{"open wins", Inputs{Breaker: "open", EverDiscovered: true, DegradedModels: 2}, StatusCircuitOpen},
		{"half open", Inputs{Breaker: "half_open", EverDiscovered: true}, StatusRecovering},
		{"never discovered", Inputs{}, StatusUnhealthy},
		{"discovery failing", Inputs{EverDiscovered: true, DiscoveryFailing: true}, StatusOffline},
		{"degraded", Inputs{EverDiscovered: true, DegradedModels: 1}, StatusDegraded},
		{"healthy", Inputs{EverDiscovered: true, Breaker: "closed"}, StatusHealthy},
	}
	for _, c := range cases {
		if got := Derive(c.in); got != c.want {
			t.Errorf("%s: %s want %s", c.name, got, c.want)
		}
	}
}
