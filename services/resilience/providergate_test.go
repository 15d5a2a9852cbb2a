package resilience

import (
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/settings"
)

// gateSettings are the documented defaults, switched on.
func gateSettings() settings.ProviderCooldown {
	return settings.ProviderCooldown{Enabled: true,
		OAuth:  settings.ProviderCooldownProfile{FailureThreshold: 10, FailureWindowMS: 900_000, CooldownMS: 300_000},
		APIKey: settings.ProviderCooldownProfile{FailureThreshold: 15, FailureWindowMS: 1_800_000, CooldownMS: 600_000}}
}

// newTestGate is a gate on a fake clock, with gateSettings.
func newTestGate() (*ProviderGate, *clockwork.FakeClock, settings.ProviderCooldown) {
	clk := clockwork.NewFakeClock()
	return NewProviderGate(clk), clk, gateSettings()
}

// failN records n failures of a provider, the clock advancing by every after each.
func failN(g *ProviderGate, clk *clockwork.FakeClock, provider string, auth AuthType, cfg settings.ProviderCooldown, n int, every time.Duration) {
	for range n {
		g.RecordFailure(provider, auth, cfg)
		clk.Advance(every)
	}
}

func TestProviderGateWindowByAuthType(t *testing.T) {
	cases := []struct {
		name      string
		auth      AuthType
		threshold int
		spacing   time.Duration // between failures
		wantTrip  bool
		cooldown  time.Duration
	}{
		{"oauth 10 in 15 min", AuthOAuth, 10, 90 * time.Second, true, 5 * time.Minute},        // 9 gaps = 13.5 min
		{"oauth 10 in 18 min", AuthOAuth, 10, 2 * time.Minute, false, 0},                      // 9 gaps = 18 min
		{"oauth exactly the window", AuthOAuth, 10, 100 * time.Second, true, 5 * time.Minute}, // 15 min
		{"api key 15 in 30 min", AuthAPIKey, 15, 2 * time.Minute, true, 10 * time.Minute},     // 28 min
		{"api key 15 in 35 min", AuthAPIKey, 15, 150 * time.Second, false, 0},
		{"unknown auth uses the api key profile", AuthType(""), 15, time.Second, true, 10 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, clk, cfg := newTestGate()
			for i := range c.threshold - 1 {
				if g.RecordFailure("p", c.auth, cfg) {
					t.Fatalf("tripped after %d failures", i+1)
				}
				if ok, _ := g.Check("p", cfg); !ok {
					t.Fatalf("cooling after %d failures", i+1)
				}
				clk.Advance(c.spacing)
			}
			tripped := g.RecordFailure("p", c.auth, cfg)
			ok, left := g.Check("p", cfg)
			if tripped != c.wantTrip || ok == c.wantTrip || left != c.cooldown {
				t.Fatalf("tripped=%v ok=%v left=%v; want trip=%v cooldown=%v", tripped, ok, left, c.wantTrip, c.cooldown)
			}
		})
	}
}

func TestProviderGateCooldownAndAfter(t *testing.T) {
	g, clk, cfg := newTestGate()
	failN(g, clk, "p", AuthOAuth, cfg, 10, 0)
	if ok, left := g.Check("p", cfg); ok || left != 5*time.Minute {
		t.Fatalf("not cooling: %v %v", ok, left)
	}
	if ok, _ := g.Check("other", cfg); !ok {
		t.Fatal("another provider cools too")
	}
	clk.Advance(time.Minute)
	for range 20 { // in-flight failures during the cooldown neither extend it nor count
		if g.RecordFailure("p", AuthOAuth, cfg) {
			t.Fatal("tripped again while cooling")
		}
	}
	if ok, left := g.Check("p", cfg); ok || left != 4*time.Minute {
		t.Fatalf("cooldown changed: %v %v", ok, left)
	}
	g.RecordSuccess("p") // clears the window, but the cooldown keeps running
	if ok, _ := g.Check("p", cfg); ok {
		t.Fatal("success ended the cooldown")
	}
	clk.Advance(4 * time.Minute)
	if ok, left := g.Check("p", cfg); !ok || left != 0 {
		t.Fatalf("cooldown did not end: %v %v", ok, left)
	}
	for range 9 { // a fresh window after the cooldown
		if g.RecordFailure("p", AuthOAuth, cfg) {
			t.Fatal("the old window counted")
		}
	}
	if !g.RecordFailure("p", AuthOAuth, cfg) {
		t.Fatal("the fresh window did not trip")
	}
}

func TestProviderGateSuccessResetsWindow(t *testing.T) {
	g, clk, cfg := newTestGate()
	failN(g, clk, "p", AuthOAuth, cfg, 9, 0)
	g.RecordSuccess("p")
	if len(g.States()) != 0 {
		t.Fatalf("a clean provider is still remembered: %+v", g.States())
	}
	for range 9 {
		if g.RecordFailure("p", AuthOAuth, cfg) {
			t.Fatal("failures before the success counted")
		}
	}
	if !g.RecordFailure("p", AuthOAuth, cfg) {
		t.Fatal("10 failures after the success did not trip")
	}
	g.RecordSuccess("never-failed") // no state, no effect
}

func TestProviderGateMixedAuthTypes(t *testing.T) {
	g := NewProviderGate(clockwork.NewFakeClock())
	cfg := gateSettings()
	for range 12 {
		if g.RecordFailure("p", AuthAPIKey, cfg) {
			t.Fatal("API key tripped below 15")
		}
	}
	// An OAuth failure is judged by the OAuth profile: the newest 10 failures are in the window.
	if !g.RecordFailure("p", AuthOAuth, cfg) {
		t.Fatal("OAuth failure did not trip with 13 failures in the window")
	}
	st := g.States()
	if len(st) != 1 || st[0].AuthType != AuthOAuth || st[0].CoolingUntil.IsZero() || st[0].Threshold != 10 {
		t.Fatalf("states: %+v", st)
	}
}

func TestProviderGateDisabled(t *testing.T) {
	g, clk, on := newTestGate()
	off := on
	off.Enabled = false
	for range 100 {
		if g.RecordFailure("p", AuthOAuth, off) {
			t.Fatal("disabled gate tripped")
		}
	}
	if ok, _ := g.Check("p", off); !ok || len(g.States()) != 0 {
		t.Fatal("disabled gate recorded something")
	}
	// Switching it off ends a running cooldown at once.
	failN(g, clk, "p", AuthOAuth, on, 10, 0)
	if ok, _ := g.Check("p", on); ok {
		t.Fatal("not cooling")
	}
	if ok, left := g.Check("p", off); !ok || left != 0 {
		t.Fatal("disabled gate refused")
	}
	if ok, _ := g.Check("p", on); !ok || len(g.States()) != 0 {
		t.Fatal("state survived disabling")
	}
}

func TestProviderGateStatesAndReset(t *testing.T) {
	g, clk, cfg := newTestGate()
	failN(g, clk, "b", AuthOAuth, cfg, 3, 5*time.Minute)
	failN(g, clk, "a", AuthAPIKey, cfg, 15, 0)
	st := g.States()
	if len(st) != 2 || st[0].Provider != "a" || st[1].Provider != "b" {
		t.Fatalf("states: %+v", st)
	}
	if a := st[0]; a.CoolingUntil != clk.Now().Add(10*time.Minute) || a.Failures != 0 || a.Window != 30*time.Minute {
		t.Fatalf("a: %+v", a)
	}
	// b failed at -15, -10 and -5 min: all inside its 15 min window.
	if b := st[1]; !b.CoolingUntil.IsZero() || b.Failures != 3 || b.Threshold != 10 ||
		b.LastFailureAt != clk.Now().Add(-5*time.Minute) {
		t.Fatalf("b: %+v", b)
	}
	clk.Advance(time.Millisecond) // the oldest leaves the window
	if b := g.States()[1]; b.Failures != 2 {
		t.Fatalf("sliding window: %+v", b)
	}
	g.Reset("a")
	if ok, _ := g.Check("a", cfg); !ok {
		t.Fatal("reset did not end the cooldown")
	}
	clk.Advance(15 * time.Minute)
	if st := g.States(); len(st) != 0 {
		t.Fatalf("expired windows kept: %+v", st)
	}
}

func TestProviderGateBoundedMemory(t *testing.T) {
	g, clk, cfg := newTestGate()
	failN(g, clk, "p", AuthAPIKey, cfg, 1000, 3*time.Minute) // never 15 within 30 min
	if n := len(g.states["p"].ring); n != 15 {
		t.Fatalf("ring holds %d slots", n)
	}
}

// A changed threshold resizes the ring and keeps the newest failures.
func TestProviderGateThresholdChangeKeepsNewest(t *testing.T) {
	g, clk, cfg := newTestGate()
	failN(g, clk, "p", AuthAPIKey, cfg, 5, time.Minute) // at 0, 1, 2, 3 and 4 min
	cfg.APIKey.FailureThreshold, cfg.APIKey.FailureWindowMS = 3, (2 * time.Minute).Milliseconds()
	// at 5 min: the newest kept are 3 and 4 min, so three failures span exactly the window
	if !g.RecordFailure("p", AuthAPIKey, cfg) {
		t.Fatal("the newest failures were not kept")
	}
	if n := len(g.states["p"].ring); n != 3 {
		t.Fatalf("ring not resized: %d", n)
	}
	cfg.APIKey.FailureThreshold = 20 // growing keeps what is there
	clk.Advance(time.Hour)
	failN(g, clk, "q", AuthAPIKey, cfg, 19, 0)
	cfg.APIKey.FailureThreshold = 25
	g.RecordFailure("q", AuthAPIKey, cfg)
	if st := g.States(); len(st) != 1 || st[0].Failures != 20 || st[0].Threshold != 25 {
		t.Fatalf("grown ring: %+v", st)
	}
}

func TestProviderGateConcurrent(t *testing.T) {
	g := NewProviderGate(clockwork.NewFakeClock())
	cfg := gateSettings()
	var wg sync.WaitGroup
	trips := make(chan bool, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trips <- g.RecordFailure("p", AuthOAuth, cfg)
			g.Check("p", cfg)
			if i%10 == 0 {
				g.States()
			}
		}()
	}
	wg.Wait()
	close(trips)
	n := 0
	for tripped := range trips {
		if tripped {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d trips; a running cooldown must absorb the rest", n)
	}
}
