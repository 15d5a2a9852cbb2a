package routing

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"switchyard/services/errs"
	"switchyard/services/servicetest"
)

// A combo saved by one replica resolves on another after its reload, and the registry's
// listeners there hear each change once; a reload that finds nothing new tells no one.
func TestReloadFollowsAnotherReplica(t *testing.T) {
	ctx := context.Background()
	a, d := newService(t)
	b, err := New(ctx, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var heard []int
	b.OnChange(func(r *Registry) { heard = append(heard, len(r.Combos())) })
	var announced []string
	b.OnCommitted(func(topic string) { announced = append(announced, topic) })
	reload := func(what string, want ...int) {
		t.Helper()
		heard = nil
		if err := b.Reload(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(heard, want) {
			t.Errorf("%s: listeners heard %v, want %v", what, heard, want)
		}
	}

	before := b.Registry()
	reload("nothing saved")
	if b.Registry() != before {
		t.Fatal("a reload without a change swapped the registry")
	}

	c, err := a.Create(ctx, input("chat", TargetInput{Provider: "a", Model: "m"}))
	if err != nil {
		t.Fatal(err)
	}
	reload("combo created", 1)
	if x, ok := b.Registry().Expand("chat"); !ok || len(x.Leaves()) != 1 || x.Leaves()[0].Model != "m" {
		t.Fatalf("the combo created on the other replica does not resolve: %+v", x)
	}

	if _, err := a.Create(ctx, input("outer", TargetInput{Combo: "chat"})); err != nil {
		t.Fatal(err)
	}
	models := []TargetInput{{Provider: "a", Model: "n"}}
	if _, err := a.Update(ctx, c.ID, Input{Targets: &models}); err != nil {
		t.Fatal(err)
	}
	reload("two changes", 2)
	if x, _ := b.Registry().Expand("outer"); len(x.Leaves()) != 1 || x.Leaves()[0].Model != "n" {
		t.Fatalf("the nested combo did not follow the change: %+v", x.Leaves())
	}
	reload("nothing new")

	outer, _ := b.Registry().Combo("outer")
	if err := a.Delete(ctx, outer.ID); err != nil {
		t.Fatal(err)
	}
	reload("combo deleted", 1)
	if _, ok := b.Registry().Combo("outer"); ok {
		t.Fatal("the deleted combo is still in the registry")
	}
	if len(announced) > 0 {
		t.Errorf("the reloads announced %v", announced)
	}
}

// Every committed write is announced once, with the lock released; a refused or rolled back
// write is not.
func TestCommittedWritesAreAnnounced(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	var got []string
	s.OnCommitted(func(topic string) {
		got = append(got, topic)
		_ = s.Reload(ctx) // runs outside the lock
	})
	step := servicetest.Announcements(t, Topic, func() []string {
		heard := got
		got = nil
		return heard
	})
	var c Combo
	step("create", 1, func() (err error) {
		c, err = s.Create(ctx, input("chat", TargetInput{Provider: "a", Model: "x"}, TargetInput{Provider: "a", Model: "y"}))
		return err
	})
	step("invalid create", 0, func() error {
		_, err := s.Create(ctx, input("bad", TargetInput{Provider: "nope", Model: "m"}))
		return err
	})
	step("duplicate name", 0, func() error {
		_, err := s.Create(ctx, input("chat", TargetInput{Provider: "a", Model: "m"}))
		if errs.CodeOf(err) != errs.Conflict {
			t.Errorf("duplicate: %v", err)
		}
		return err
	})
	attempts := 2
	step("update", 1, func() error { _, err := s.Update(ctx, c.ID, Input{MaxAttempts: &attempts}); return err })
	second := c.Targets[1].Key()
	step("move", 1, func() error { _, err := s.MoveTarget(ctx, c.ID, 1, -1, second); return err })
	step("move refused", 0, func() error {
		_, err := s.MoveTarget(ctx, c.ID, 1, -1, second) // it stands first now
		if errs.CodeOf(err) != errs.Conflict {
			t.Errorf("stale move: %v", err)
		}
		return err
	})
	step("update of a missing combo", 0, func() error { _, err := s.Update(ctx, c.ID+100, Input{}); return err })
	step("reload", 0, func() error { return s.Reload(ctx) })
	step("delete", 1, func() error { return s.Delete(ctx, c.ID) })
}

// Reloads run beside requests reading the registry and beside local writes (run with -race).
func TestReloadBesideWrites(t *testing.T) {
	ctx := context.Background()
	a, d := newService(t)
	b, err := New(ctx, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	servicetest.Beside(t, func() { b.Registry().Expand("remote-0") }, 10, func(i int) error {
		if err := b.Reload(ctx); err != nil {
			return err
		}
		_, err := b.Create(ctx, input("local-"+string(rune('0'+i)), TargetInput{Provider: "a", Model: "m"}))
		return err
	}, func() {
		for i := range 10 {
			if _, err := a.Create(ctx, input("remote-"+string(rune('0'+i)), TargetInput{Provider: "a", Model: "m"})); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Registry().Combos()); n != 20 {
		t.Fatalf("%d combos after the last reload, want 20", n)
	}
}
