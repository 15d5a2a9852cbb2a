package clientkeys

import (
	"context"
	"io"
	"log/slog"
	"switchyard/db/dbtest"
	"testing"
	"time"

	"switchyard/services/errs"
)

func newService(t *testing.T, conns map[int64]bool) *Service {
	t.Helper()
	d := dbtest.Open(t)
	s, err := New(context.Background(), d, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now,
		func(id int64) bool { return conns[id] })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func fieldsOf(t *testing.T, err error) map[string]string {
	t.Helper()
	e, ok := err.(*errs.Error)
	if !ok || e.Code != errs.Invalid {
		t.Fatalf("want a validation error, got %v", err)
	}
	out := map[string]string{}
	for k, m := range e.Fields {
		out[k] = m.Key
	}
	return out
}

// A key's lists are checked field by field, stored without duplicates, and what the edge checks
// (the identity's Access) follows every change at once.
func TestKeyAccessListsAreValidatedAndFollowChanges(t *testing.T) {
	ctx := context.Background()
	conns := map[int64]bool{1: true, 2: true}
	s := newService(t, conns)
	created, err := s.Create(ctx, Input{Name: ptr("agent"), AllowedModels: ptr([]string{"ga/*", " ga/*", "combo"})})
	if err != nil {
		t.Fatal(err)
	}
	if got := created.AllowedModels; len(got) != 2 || got[0] != "ga/*" || got[1] != "combo" {
		t.Fatalf("allowed_models %v", got)
	}
	id, ok := s.Authenticate(created.Secret)
	if !ok || !id.Access.AllowsModel("ga/x") || id.Access.AllowsModel("gb/x") || id.Access.MayLease() {
		t.Fatalf("identity %+v", id.Access)
	}

	_, err = s.Update(ctx, created.ID, Input{AllowedModels: ptr([]string{"ok/*", "bad[", ""}),
		Scopes: ptr([]string{"lease:exclusive", "admin"}), AllowedConnections: ptr([]int64{1, 9})})
	f := fieldsOf(t, err)
	want := map[string]string{"allowed_models[1]": "keys.err.pattern_syntax", "allowed_models[2]": "keys.err.pattern_empty",
		"scopes[1]": "keys.err.unknown_scope", "allowed_connections[1]": "keys.err.no_connection"}
	if len(f) != len(want) {
		t.Fatalf("fields %v, want %v", f, want)
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s: %s, want %s", k, f[k], v)
		}
	}
	if id, _ := s.Authenticate(created.Secret); !id.Access.AllowsModel("ga/x") {
		t.Fatal("a refused change must change nothing")
	}

	f = fieldsOf(t, func() error {
		_, err := s.Update(ctx, created.ID, Input{Scopes: ptr([]string{ScopeLeaseExclusive})})
		return err
	}())
	if f["allowed_connections"] != "keys.err.lease_needs_connections" {
		t.Fatalf("the lease scope without connections: %v", f)
	}

	var hooked []bool
	s.OnChange(func(_ context.Context, keyID int64, a *Access, active bool) {
		if keyID != created.ID {
			t.Errorf("hook for key %d", keyID)
		}
		hooked = append(hooked, active && a.MayLease())
	})
	k, err := s.Update(ctx, created.ID, Input{Scopes: ptr([]string{ScopeLeaseExclusive}), AllowedConnections: ptr([]int64{2, 1, 2}),
		AllowedModels: ptr([]string{})})
	if err != nil {
		t.Fatal(err)
	}
	if len(k.AllowedConnections) != 2 || k.AllowedConnections[0] != 2 || len(k.AllowedModels) != 0 || k.Scopes[0] != ScopeLeaseExclusive {
		t.Fatalf("key %+v", k)
	}
	id, _ = s.Authenticate(created.Secret)
	if !id.Access.AllowsModel("anything/at-all") || !id.Access.MayLease() || len(id.Access.LeaseConnections()) != 2 {
		t.Fatalf("identity after the change %+v", id.Access)
	}

	// A deleted connection's id drops out of the view (ids are never reused) and of the next change.
	delete(conns, 2)
	if k, _ := s.Get(ctx, created.ID); len(k.AllowedConnections) != 1 || k.AllowedConnections[0] != 1 {
		t.Fatalf("after a connection went: %v", k.AllowedConnections)
	}
	if _, err := s.Update(ctx, created.ID, Input{Name: ptr("agent-2")}); err != nil {
		t.Fatalf("a change that names neither list keeps the rest valid: %v", err)
	}

	if err := s.Revoke(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if len(hooked) != 3 || !hooked[0] || !hooked[1] || hooked[2] {
		t.Fatalf("hooks %v: want two changes with the lease scope, then the revocation", hooked)
	}
	if _, err := s.Update(ctx, created.ID, Input{Name: ptr("x")}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("changing a revoked key: %v", err)
	}
	if _, ok := s.Authenticate(created.Secret); ok {
		t.Fatal("a revoked key still authenticates")
	}
}

// A key without lists has no Access at all: the request path pays nothing for the feature.
func TestUnrestrictedKeyHasNoAccess(t *testing.T) {
	s := newService(t, nil)
	created, err := s.Create(context.Background(), Input{Name: ptr("plain")})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.Authenticate(created.Secret)
	if id.Access != nil || !id.Access.AllowsModel("x/y") || id.Access.MayLease() || id.Access.RestrictsModels() {
		t.Fatalf("access %+v", id.Access)
	}
	if created.AllowedModels == nil || created.Scopes == nil || created.AllowedConnections == nil {
		t.Fatal("lists must be [] in JSON, never null")
	}
}
