package routing

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"switchyard/db/dbtest"
	"testing"

	"switchyard/db"
	"switchyard/services/errs"
)

// newService opens a fresh database with provider "a" (connection "main") and the service on it.
func newService(t *testing.T) (*Service, *db.DB) {
	t.Helper()
	ctx := context.Background()
	d := dbtest.Open(t)
	p := db.Provider{Name: "a", Type: "openai-compatible", BaseURL: "http://x/v1"}
	if err := db.InsertProvider(ctx, d.W, &p); err != nil {
		t.Fatal(err)
	}
	if err := db.InsertConnection(ctx, d.W, &db.Connection{ProviderID: p.ID, Name: "main", AuthType: "api_key", Secret: []byte{1}, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

func input(name string, targets ...TargetInput) Input { return Input{Name: &name, Targets: &targets} }

// TestServiceSwapsTheRegistryAfterCommits: every listener hears every committed change (a second
// one never silences the first), the registry holds what was saved, and a refused save changes
// nothing and tells no one.
func TestServiceSwapsTheRegistryAfterCommits(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	var first, second []int
	s.OnChange(func(r *Registry) { first = append(first, len(r.Combos())) })
	s.OnChange(func(r *Registry) { second = append(second, len(r.Combos())) })
	before := s.Registry()
	c, err := s.Create(ctx, input("chat", TargetInput{Provider: "a", Model: "m"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Registry().Combo("chat"); !ok || got.ID != c.ID || got.Targets[0].Weight != DefaultWeight {
		t.Fatalf("registry after create: %+v", got)
	}
	if _, ok := before.Combo("chat"); ok {
		t.Fatal("the old snapshot changed")
	}
	if _, err := s.Create(ctx, input("bad", TargetInput{Provider: "nope", Model: "m"})); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("invalid create: %v", err)
	}
	if _, err := s.Create(ctx, input("chat", TargetInput{Provider: "a", Model: "n"})); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := s.Delete(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first, []int{1, 0}) || !slices.Equal(second, first) {
		t.Fatalf("listeners heard %v and %v, want [1 0] each", first, second)
	}
}

// TestMoveTarget swaps neighbours and refuses a move the page saw differently.
func TestMoveTarget(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	c, err := s.Create(ctx, input("chat", TargetInput{Provider: "a", Model: "x"}, TargetInput{Provider: "a", Model: "y"},
		TargetInput{Provider: "a", Model: "z", Connection: "main"}))
	if err != nil {
		t.Fatal(err)
	}
	models := func(c Combo) string {
		var out string
		for _, t := range c.Targets {
			out += t.Model
		}
		return out
	}
	moved, err := s.MoveTarget(ctx, c.ID, 2, -1, c.Targets[2].Key())
	if err != nil || models(moved) != "xzy" {
		t.Fatalf("move up: %v %s", err, models(moved))
	}
	if got, _ := s.Registry().Combo("chat"); models(*got) != "xzy" {
		t.Fatal("the registry keeps the old order")
	}
	if _, err := s.MoveTarget(ctx, c.ID, 2, -1, c.Targets[2].Key()); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("stale move: %v", err)
	}
	if same, err := s.MoveTarget(ctx, c.ID, 0, -1, moved.Targets[0].Key()); err != nil || models(same) != "xzy" {
		t.Fatalf("moving the first up: %v %s", err, models(same))
	}
	if _, err := s.MoveTarget(ctx, c.ID+1, 0, 1, ""); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("unknown combo: %v", err)
	}
}

// TestGuardCatalog names the combos that still use a provider or a pinned connection.
func TestGuardCatalog(t *testing.T) {
	s, d := newService(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, input("pinned", TargetInput{Provider: "a", Model: "m", Connection: "main"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, input("loose", TargetInput{Provider: "a", Model: "m"})); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                    string
		provider, conn, newName string
		code                    errs.Code
		text                    string
	}{
		{"provider used by both", "a", "", "", errs.Conflict, "loose, pinned"},
		{"pinned connection", "a", "main", "", errs.Conflict, "pinned"},
		{"unpinned connection", "a", "spare", "", "", ""},
		{"unknown provider", "b", "", "", "", ""},
		{"a combo's name for a provider", "", "", "loose", errs.Invalid, ""},
		{"a free name", "", "", "c", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.GuardCatalog(ctx, d.W, c.provider, c.conn, c.newName)
			if c.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if errs.CodeOf(err) != c.code {
				t.Fatalf("%v, want %s", err, c.code)
			}
			if msg := errs.As(err).Msg.String(); c.text != "" && !strings.Contains(msg, c.text) {
				t.Fatalf("message %q does not name %s", msg, c.text)
			}
		})
	}
}
