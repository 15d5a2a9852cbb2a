package oauth

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"switchyard/services/catalog"
	"switchyard/services/errs"
)

// signInAs runs start (with a connection name) → authorize → complete for an account.
func (h *harness) signInAs(email, name string) catalog.Connection {
	h.t.Helper()
	si, err := h.svc.Start("", name)
	if err != nil {
		h.t.Fatal(err)
	}
	conn, _, err := h.svc.Complete(context.Background(), h.fake.authorize(si.AuthURL, email))
	if err != nil {
		h.t.Fatal(err)
	}
	return conn
}

// A new account's connection is named claude-1, claude-2, … (the first free), or what the
// operator chose (with -2, -3 when taken); never after the e-mail. An account signed in again
// keeps its connection and the name the operator gave it.
func TestSignInNamesConnectionsWithoutTheEmail(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ada := h.signInAs("ada@example.com", "")
	bob := h.signInAs("bob@example.com", "")
	if ada.Name != "claude-1" || bob.Name != "claude-2" || ada.Account.Email != "ada@example.com" {
		t.Fatalf("names %q, %q (account %+v)", ada.Name, bob.Name, ada.Account)
	}
	if err := h.cat.DeleteConnection(ctx, ada.ID); err != nil {
		t.Fatal(err)
	}
	if cy := h.signInAs("cy@example.com", ""); cy.Name != "claude-1" {
		t.Fatalf("the first free name is claude-1, got %q", cy.Name)
	}
	if dan := h.signInAs("dan@example.com", " work "); dan.Name != "work" {
		t.Fatalf("chosen name: %q", dan.Name)
	}
	if eve := h.signInAs("eve@example.com", "work"); eve.Name != "work-2" {
		t.Fatalf("a taken chosen name: %q", eve.Name)
	}

	// The operator renames bob's connection; signing in again keeps it, whatever the form says.
	renamed := "Bob's Max"
	if _, err := h.cat.UpdateConnection(ctx, bob.ID, catalog.ConnectionInput{Name: &renamed}, nil); err != nil {
		t.Fatal(err)
	}
	again := h.signInAs("bob@example.com", "another")
	if again.ID != bob.ID || again.Name != renamed {
		t.Fatalf("re-sign-in: %+v, want connection %d named %q", again, bob.ID, renamed)
	}
	conns, _ := h.cat.ListConnections(ctx)
	if len(conns) != 4 {
		t.Fatalf("%d connections", len(conns))
	}
	for _, c := range conns {
		if strings.Contains(c.Name, "@") {
			t.Fatalf("connection named %q", c.Name)
		}
	}

	// A name that is not printable is refused before the sign-in starts.
	_, err := h.svc.Start("", "bad\u202ename")
	var e *errs.Error
	if !errors.As(err, &e) || e.Fields["name"].Key != "err.name_invisible" {
		t.Fatalf("start with a bidi override in the name: %v", err)
	}
}

// Pending gives the address of a started sign-in back from the server's own record, until the
// sign-in is used or expires.
func TestPendingSignIn(t *testing.T) {
	h := newHarness(t)
	si, _ := h.svc.Start("", "")
	got, ok := h.svc.Pending(si.State)
	if !ok || got.AuthURL != si.AuthURL || got.State != si.State {
		t.Fatalf("pending %+v %v, started %+v", got, ok, si)
	}
	if _, ok := h.svc.Pending("forged"); ok {
		t.Fatal("a state never given out is pending")
	}
	if _, _, err := h.svc.Complete(context.Background(), h.fake.authorize(si.AuthURL, "ada@example.com")); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.svc.Pending(si.State); ok {
		t.Fatal("a used sign-in is still pending")
	}
	late, _ := h.svc.Start("", "")
	h.clock.Advance(SignInTTL)
	if _, ok := h.svc.Pending(late.State); ok {
		t.Fatal("an expired sign-in is still pending")
	}
}

// Connections that earlier versions named after their account's e-mail are renamed to claude-N
// once, at the start after the upgrade, with a log line that names no e-mail; a name chosen
// later stays.
func TestEmailNamedConnectionsAreRenamedOnce(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ada := h.signInAs("ada@example.com", "")
	bob := h.signInAs("bob@example.com", "")
	keep := h.signInAs("cy@example.com", "cy-team")
	for id, name := range map[int64]string{ada.ID: "ada@example.com", bob.ID: "BOB@example.com-2"} {
		if _, err := h.cat.UpdateConnection(ctx, id, catalog.ConnectionInput{Name: &name}, nil); err != nil {
			t.Fatal(err)
		}
	}
	key, other := "sk-a", "carl@example.com" // an API key named like an address: not an account's e-mail
	p := "anthropic"
	apiKey, err := h.cat.CreateConnection(ctx, catalog.ConnectionInput{Provider: &p, Name: &other, APIKey: &key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	restart := func() (*catalog.Service, string) {
		var log bytes.Buffer
		cat, err := catalog.New(ctx, h.db, h.box, slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return cat, log.String()
	}
	names := func(cat *catalog.Service) map[int64]string {
		out := map[int64]string{}
		conns, _ := cat.ListConnections(ctx)
		for _, c := range conns {
			out[c.ID] = c.Name
		}
		return out
	}

	// This database was made by this version: renamed already, the operator's choice stays.
	if cat, _ := restart(); names(cat)[ada.ID] != "ada@example.com" {
		t.Fatalf("renamed again: %v", names(cat))
	}
	// A database of an earlier version.
	if _, err := h.db.W.ExecContext(ctx, `DELETE FROM key_value WHERE key = 'catalog.oauth_names_neutral'`); err != nil {
		t.Fatal(err)
	}
	cat, log := restart()
	got := names(cat)
	if got[ada.ID] != "claude-1" || got[bob.ID] != "claude-2" || got[keep.ID] != "cy-team" || got[apiKey.ID] != other {
		t.Fatalf("after the upgrade: %v", got)
	}
	if strings.Count(log, "renamed a Claude connection") != 2 || strings.Contains(log, "@") {
		t.Fatalf("log: %s", log)
	}
	if c, _ := cat.GetConnection(ctx, ada.ID); c.Account == nil || c.Account.Email != "ada@example.com" {
		t.Fatalf("the account lost its e-mail: %+v", c.Account)
	}
	// Once: the next start leaves a name chosen since alone.
	name := "ada@example.com"
	if _, err := cat.UpdateConnection(ctx, ada.ID, catalog.ConnectionInput{Name: &name}, nil); err != nil {
		t.Fatal(err)
	}
	if cat, log := restart(); names(cat)[ada.ID] != name || strings.Contains(log, "renamed") {
		t.Fatalf("renamed twice: %v %s", names(cat), log)
	}
}
