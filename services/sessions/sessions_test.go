package sessions

import (
	"context"
	"encoding/json"
	"switchyard/db/dbtest"
	"testing"
	"time"

	"switchyard/db"
	"switchyard/services/errs"
)

type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func newService(t *testing.T) (*Service, *db.DB, *testClock) {
	t.Helper()
	d := dbtest.Open(t)
	clk := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s, warnings, err := New(context.Background(), d, db.KV{DB: d}, clk.now)
	if err != nil || len(warnings) > 0 {
		t.Fatal(err, warnings)
	}
	return s, d, clk
}

func TestLifetimes(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		steps []time.Duration // clock advances, each followed by a use
		alive bool
	}{
		{"fresh", nil, true},
		{"used every 20 hours for 6 days", []time.Duration{20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour}, true},
		{"used every 20 hours past 7 days", []time.Duration{20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour, 20 * time.Hour}, false},
		{"idle just under a day", []time.Duration{24*time.Hour - time.Second}, true},
		{"idle a day", []time.Duration{24 * time.Hour}, false},
		{"8 days", []time.Duration{8 * 24 * time.Hour}, false},
		{"29 days", []time.Duration{29 * 24 * time.Hour}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _, clk := newService(t)
			id, err := s.Create(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got *Session
			got, _ = s.Lookup(ctx, id)
			for _, d := range c.steps {
				clk.t = clk.t.Add(d)
				if got, err = s.Lookup(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if (got != nil) != c.alive {
				t.Fatalf("alive %v, want %v", got != nil, c.alive)
			}
			if !c.alive {
				// Once refused, always refused, even if the settings grow again.
				if _, err := s.Save(ctx, Patch{AbsoluteLifetimeMS: opt(ranges["absolute_lifetime_ms"][1]), IdleTimeoutMS: opt(ranges["idle_timeout_ms"][1])}); err != nil {
					t.Fatal(err)
				}
				if again, _ := s.Lookup(ctx, id); again != nil {
					t.Fatal("an expired session came back")
				}
			}
		})
	}
}

func opt(v int64) Optional { return Optional{Set: true, Value: &v} }

// A short idle lifetime must not end a session in use: its last use is written at least every
// quarter of the idle lifetime, so a session used every idle/3 lives on over many idle periods,
// while one left alone ends once the idle lifetime passes.
func TestShortIdleTimeoutKeepsBusySessions(t *testing.T) {
	ctx := context.Background()
	for _, idle := range []time.Duration{time.Minute, 2 * time.Minute, 10 * time.Minute} {
		t.Run(idle.String(), func(t *testing.T) {
			s, _, clk := newService(t)
			if _, err := s.Save(ctx, Patch{IdleTimeoutMS: opt(idle.Milliseconds())}); err != nil {
				t.Fatal(err)
			}
			busy, _ := s.Create(ctx)
			unused, _ := s.Create(ctx)
			step := idle / 3
			for elapsed := time.Duration(0); elapsed < 30*idle; elapsed += step {
				clk.t = clk.t.Add(step)
				got, err := s.Lookup(ctx, busy)
				if err != nil {
					t.Fatal(err)
				}
				if got == nil {
					t.Fatalf("a session used every %v ended after %v under an idle lifetime of %v", step, elapsed+step, idle)
				}
			}
			if x, _ := s.Lookup(ctx, unused); x != nil {
				t.Fatalf("a session unused for %v works under an idle lifetime of %v", 30*idle, idle)
			}
			// Left alone now, the busy session ends within the idle lifetime of its last use, and
			// not before three quarters of it.
			clk.t = clk.t.Add(idle * 3 / 4)
			if x, _ := s.Lookup(ctx, busy); x == nil {
				t.Fatal("a session ended before three quarters of its idle lifetime passed")
			}
			clk.t = clk.t.Add(idle)
			if x, _ := s.Lookup(ctx, busy); x != nil {
				t.Fatal("a session unused for its idle lifetime works")
			}
		})
	}
}

func TestTouchInterval(t *testing.T) {
	for _, c := range []struct{ idle, want time.Duration }{
		{time.Minute, 15 * time.Second},
		{4 * time.Minute, time.Minute},
		{24 * time.Hour, time.Minute},
	} {
		if got := touchInterval(c.idle); got != c.want {
			t.Errorf("idle %v: touch every %v, want %v", c.idle, got, c.want)
		}
	}
}

func TestEndAndFlashes(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newService(t)
	a, _ := s.Create(ctx)
	b, _ := s.Create(ctx)
	sa, _ := s.Lookup(ctx, a)
	if err := s.AddFlash(ctx, sa.IDHash, Flash{Kind: "success", Text: `saved "x" <b>`}); err != nil {
		t.Fatal(err)
	}
	s.AddFlash(ctx, sa.IDHash, Flash{Kind: "error", Text: "second"})
	sa, _ = s.Lookup(ctx, a)
	if len(sa.Flashes) != 2 || sa.Flashes[0].Text != `saved "x" <b>` {
		t.Fatalf("flashes %+v", sa.Flashes)
	}
	got, err := s.TakeFlashes(ctx, sa.IDHash)
	if err != nil || len(got) != 2 || got[1].Kind != "error" {
		t.Fatalf("take %+v %v", got, err)
	}
	if got, _ := s.TakeFlashes(ctx, sa.IDHash); len(got) != 0 {
		t.Fatalf("flashes shown twice: %+v", got)
	}
	if err := s.End(ctx, sa.IDHash); err != nil {
		t.Fatal(err)
	}
	if x, _ := s.Lookup(ctx, a); x != nil {
		t.Fatal("ended session still live")
	}
	if x, _ := s.Lookup(ctx, b); x == nil {
		t.Fatal("ending one session ended another")
	}
	c, _ := s.Create(ctx)
	if n, err := s.EndAll(ctx); err != nil || n != 2 {
		t.Fatalf("end all: %d %v", n, err)
	}
	for _, id := range []string{b, c} {
		if x, _ := s.Lookup(ctx, id); x != nil {
			t.Fatal("a session survived ending all")
		}
	}
	for _, junk := range []string{"", "x", a + "x", "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"} {
		if x, err := s.Lookup(ctx, junk); x != nil || err != nil {
			t.Fatalf("junk id %q: %v %v", junk, x, err)
		}
	}
}

func TestSettingsSaveValidateAndReload(t *testing.T) {
	ctx := context.Background()
	s, d, clk := newService(t)
	if doc := s.Document(); doc.Values != Defaults() || doc.Sources["idle_timeout_ms"] != "default" {
		t.Fatalf("defaults: %+v", doc)
	}
	_, err := s.Save(ctx, Patch{IdleTimeoutMS: opt(1), AbsoluteLifetimeMS: opt(3600_000)})
	if e, ok := err.(*errs.Error); !ok || e.Fields["idle_timeout_ms"].Key != "err.between" || len(e.Fields) != 1 {
		t.Fatalf("invalid idle accepted or wrong error: %v", err)
	}
	if s.Settings() != Defaults() {
		t.Fatal("a refused patch changed something")
	}
	doc, err := s.Save(ctx, Patch{IdleTimeoutMS: opt(600_000)})
	if err != nil || doc.Values.IdleTimeoutMS != 600_000 || doc.Sources["idle_timeout_ms"] != "persisted" || doc.Sources["absolute_lifetime_ms"] != "default" {
		t.Fatalf("save: %+v %v", doc, err)
	}
	// The new idle lifetime applies to a session at once.
	id, _ := s.Create(ctx)
	clk.t = clk.t.Add(11 * time.Minute)
	if x, _ := s.Lookup(ctx, id); x != nil {
		t.Fatal("the shorter idle lifetime did not apply")
	}
	// Saved values survive a restart; null returns one to its default.
	again, warnings, err := New(ctx, d, db.KV{DB: d}, clk.now)
	if err != nil || len(warnings) > 0 || again.Settings().IdleTimeoutMS != 600_000 {
		t.Fatalf("reload: %+v %v %v", again.Settings(), warnings, err)
	}
	var p Patch
	json.Unmarshal([]byte(`{"idle_timeout_ms": null}`), &p)
	if doc, err := again.Save(ctx, p); err != nil || doc.Values != Defaults() || doc.Sources["idle_timeout_ms"] != "default" {
		t.Fatalf("null: %+v %v", doc, err)
	}
	// A saved value out of range is dropped with a warning, not fatal.
	db.PutValue(ctx, d.W, SettingsKey, `{"absolute_lifetime_ms": 5}`)
	bad, warnings, err := New(ctx, d, db.KV{DB: d}, clk.now)
	if err != nil || len(warnings) != 1 || bad.Settings() != Defaults() {
		t.Fatalf("bad saved value: %+v %v %v", bad.Settings(), warnings, err)
	}
}
