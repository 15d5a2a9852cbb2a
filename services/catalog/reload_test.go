package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"switchyard/db"
	"switchyard/db/dbtest"
	"switchyard/services/errs"
	"switchyard/services/secrets"
	"switchyard/services/servicetest"
)

// replica is one catalog on the shared database with what its hooks heard.
type replica struct {
	*Service
	mu        sync.Mutex
	changes   int
	deleted   []int64
	newCreds  []int64
	committed []string
}

func (r *replica) heard() (changes int, deleted, newCreds []int64, committed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes, slices.Clone(r.deleted), slices.Clone(r.newCreds), slices.Clone(r.committed)
}

func (r *replica) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes, r.deleted, r.newCreds, r.committed = 0, nil, nil, nil
}

var testBox = func() *secrets.Box {
	b, err := secrets.NewBox(make([]byte, 32))
	if err != nil {
		panic(err)
	}
	return b
}()

// newReplica starts a catalog on d, as a replica of the gateway does, with its hooks recorded.
func newReplica(t *testing.T, d *db.DB) *replica {
	t.Helper()
	s, err := New(context.Background(), d, testBox, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{Service: s}
	s.OnChange(func(*Registry) { r.mu.Lock(); r.changes++; r.mu.Unlock() })
	s.OnConnectionDeleted(func(id int64) { r.mu.Lock(); r.deleted = append(r.deleted, id); r.mu.Unlock() })
	s.OnNewCredentials(func(_ context.Context, id int64) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.newCreds = append(r.newCreds, id)
		return nil
	})
	s.OnCommitted(func(topic string) { r.mu.Lock(); r.committed = append(r.committed, topic); r.mu.Unlock() })
	return r
}

func ptr[T any](v T) *T { return &v }

// reload reloads r and checks what its hooks heard since the last check.
func (r *replica) reload(t *testing.T, what string, changes int, deleted, newCreds []int64) {
	t.Helper()
	r.forget()
	if err := r.Reload(context.Background()); err != nil {
		t.Fatalf("%s: reload: %v", what, err)
	}
	gotChanges, gotDeleted, gotNew, gotCommitted := r.heard()
	if gotChanges != changes || !slices.Equal(gotDeleted, deleted) || !slices.Equal(gotNew, newCreds) {
		t.Errorf("%s: the reload published %d registries, deleted %v, new credentials %v; want %d, %v, %v",
			what, gotChanges, gotDeleted, gotNew, changes, deleted, newCreds)
	}
	if len(gotCommitted) > 0 {
		t.Errorf("%s: the reload announced %v: it wrote nothing", what, gotCommitted)
	}
}

// A replica that reloads after another one wrote has the other's providers and connections, and
// its hooks ran as they would have for the write made here: deletions forget connections, a
// new API key is a new credential, and a reload that finds nothing new tells no one.
func TestReloadFollowsAnotherReplica(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	a, b := newReplica(t, d), newReplica(t, d)

	b.reload(t, "nothing changed", 0, nil, nil)

	p, err := a.CreateProvider(ctx, ProviderInput{Name: ptr("p"), Type: ptr(TypeOpenAICompatible), BaseURL: ptr("http://x/v1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.reload(t, "provider created", 1, nil, nil)
	if _, ok := b.Registry().Provider("p"); !ok {
		t.Fatal("the provider created on the other replica is not in the registry")
	}

	c, err := a.CreateConnection(ctx, ConnectionInput{Provider: ptr("p"), Name: ptr("main"), APIKey: ptr("key-1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.reload(t, "connection created", 1, nil, nil)
	if e, _ := b.Registry().Provider("p"); len(e.Conns) != 1 || e.Conns[0].APIKey.Reveal() != "key-1" {
		t.Fatalf("connections after the create: %+v", e.Conns)
	}

	if _, err := a.UpdateConnection(ctx, c.ID, ConnectionInput{Priority: ptr(5)}, nil); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "priority changed", 1, nil, nil)
	if e, _ := b.Registry().Connection(c.ID); e.Priority != 5 {
		t.Fatalf("priority %d, want 5", e.Priority)
	}

	if _, err := a.UpdateConnection(ctx, c.ID, ConnectionInput{APIKey: ptr("key-2")}, nil); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "new API key", 1, nil, []int64{c.ID})
	if e, _ := b.Registry().Connection(c.ID); e.APIKey.Reveal() != "key-2" {
		t.Fatal("the new API key did not reach the registry")
	}
	// The same key entered again is a new credential too, as it is where it is entered.
	if _, err := a.UpdateConnection(ctx, c.ID, ConnectionInput{APIKey: ptr("key-2")}, nil); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "API key entered again", 1, nil, []int64{c.ID})

	if err := a.DeleteConnection(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "connection deleted", 1, []int64{c.ID}, nil)
	if _, ok := b.Registry().Connection(c.ID); ok {
		t.Fatal("the deleted connection is still in the registry")
	}

	c2, err := a.CreateConnection(ctx, ConnectionInput{Provider: ptr("p"), Name: ptr("second"), APIKey: ptr("key-3")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.reload(t, "second connection", 1, nil, nil)
	if err := a.DeleteProvider(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "provider deleted", 1, []int64{c2.ID}, nil)
	if _, ok := b.Registry().Provider("p"); ok {
		t.Fatal("the deleted provider is still in the registry")
	}
	b.reload(t, "nothing changed since", 0, nil, nil)
}

// OAuth credentials: a sign-in or a pasted token stored elsewhere is a new credential here; a
// token pair another replica refreshed reaches the registry (the token holder takes it from
// there) but clears nothing. Credentials stored before the grant was recorded count the same.
func TestReloadTellsSignInsFromRefreshes(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	a, b := newReplica(t, d), newReplica(t, d)
	if _, err := a.CreateProvider(ctx, ProviderInput{Name: ptr("claude"), Type: ptr(TypeAnthropic),
		BaseURL: ptr("https://api.anthropic.com")}, nil); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "provider", 1, nil, nil)

	acct := OAuthAccount{UUID: "u-1", Email: "x@example.com"}
	conn, created, err := a.SaveOAuthAccount(ctx, "claude", "", OAuthCredential{AccessToken: "at-1", RefreshToken: "rt-1", Account: acct})
	if err != nil || !created {
		t.Fatalf("sign-in: %v, created %v", err, created)
	}
	b.reload(t, "new account", 1, nil, nil)

	refresh := func(prev int64, token string) {
		t.Helper()
		if err := a.StoreRefreshed(ctx, conn.ID, prev, OAuthCredential{AccessToken: Secret(token), RefreshToken: Secret("rt-" + token),
			Account: acct}); err != nil {
			t.Fatal(err)
		}
	}
	refresh(1, "at-2")
	b.reload(t, "refreshed pair", 1, nil, nil)
	if e, _ := b.Registry().Connection(conn.ID); e.OAuth == nil || e.OAuth.Rev != 2 || e.OAuth.RefreshToken.Reveal() != "rt-at-2" {
		t.Fatalf("registry credential after the refresh: %+v", e.OAuth)
	}

	if _, _, err := a.SaveOAuthAccount(ctx, "claude", "", OAuthCredential{AccessToken: "at-3", RefreshToken: "rt-3", Account: acct}); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "signed in again", 1, nil, []int64{conn.ID})
	refresh(3, "at-4")
	b.reload(t, "refresh after the sign-in", 1, nil, nil)

	token := setupTokenPrefix + "01-abc"
	pasted, err := a.CreateConnection(ctx, ConnectionInput{Provider: ptr("claude"), Name: ptr("pasted"), AuthType: ptr(AuthOAuth),
		SetupToken: &token}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.reload(t, "pasted token", 1, nil, nil)
	token2 := token + "2"
	if _, err := a.UpdateConnection(ctx, pasted.ID, ConnectionInput{SetupToken: &token2}, nil); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "token pasted anew", 1, nil, []int64{pasted.ID})

	// A credential as stored before grants were recorded: its refresh is no new credential, a
	// sign-in over it is.
	old := db.Connection{ProviderID: conn.ProviderID, Name: "older", AuthType: AuthOAuth, Enabled: true, Secret: []byte{0}}
	if err := db.InsertConnection(ctx, d.W, &old); err != nil {
		t.Fatal(err)
	}
	legacy := OAuthAccount{UUID: "u-old"}
	old.Secret = testBox.Seal(encodeOAuth(OAuthCredential{AccessToken: "o-1", RefreshToken: "o-r1", Account: legacy, Rev: 1}),
		connectionAAD(old.ID))
	if err := db.UpdateConnection(ctx, d.W, &old); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "older credential", 1, nil, nil)
	if err := a.StoreRefreshed(ctx, old.ID, 1, OAuthCredential{AccessToken: "o-2", RefreshToken: "o-r2", Account: legacy}); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "older credential refreshed", 1, nil, nil)
	if _, _, err := a.SaveOAuthAccount(ctx, "claude", "", OAuthCredential{AccessToken: "o-3", RefreshToken: "o-r3", Account: legacy}); err != nil {
		t.Fatal(err)
	}
	b.reload(t, "older credential signed in again", 1, nil, []int64{old.ID})
}

// Every committed write is announced once, after the write lock is released; a write that is
// refused or rolled back is not, and neither is a reload.
func TestCommittedWritesAreAnnounced(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	a := newReplica(t, d)
	refuse := false
	a.OnChanging(func(context.Context, db.Querier, Change) error {
		if refuse {
			return errs.New(errs.Conflict, "err.conflict")
		}
		return nil
	})
	// A function that calls back into the service runs outside its lock.
	a.OnCommitted(func(string) { _ = a.Registry(); _, _ = a.ListProviders(ctx) })

	step := servicetest.Announcements(t, Topic, func() []string {
		_, _, _, got := a.heard()
		a.forget()
		return got
	})
	var p Provider
	step("create provider", 1, func() (err error) {
		p, err = a.CreateProvider(ctx, ProviderInput{Name: ptr("p"), Type: ptr(TypeAnthropic), BaseURL: ptr("https://x")}, nil)
		return err
	})
	step("invalid provider", 0, func() error {
		_, err := a.CreateProvider(ctx, ProviderInput{Name: ptr("Bad Name"), Type: ptr(TypeOpenAI), BaseURL: ptr("https://x")}, nil)
		return err
	})
	step("duplicate provider (rolled back)", 0, func() error {
		_, err := a.CreateProvider(ctx, ProviderInput{Name: ptr("p"), Type: ptr(TypeOpenAI), BaseURL: ptr("https://x")}, nil)
		if errs.CodeOf(err) != errs.Conflict {
			return fmt.Errorf("want a conflict, got %v", err)
		}
		return nil
	})
	step("update provider", 1, func() error {
		_, err := a.UpdateProvider(ctx, p.ID, ProviderInput{BaseURL: ptr("https://y")}, nil)
		return err
	})
	var c Connection
	step("create connection", 1, func() (err error) {
		c, err = a.CreateConnection(ctx, ConnectionInput{Provider: ptr("p"), Name: ptr("main"), APIKey: ptr("k")}, nil)
		return err
	})
	step("update connection", 1, func() error {
		_, err := a.UpdateConnection(ctx, c.ID, ConnectionInput{APIKey: ptr("k2")}, nil)
		return err
	})
	refuse = true
	step("rename refused by a guard", 0, func() error {
		_, err := a.UpdateConnection(ctx, c.ID, ConnectionInput{Name: ptr("other")}, nil)
		return err
	})
	step("delete refused by a guard", 0, func() error { return a.DeleteConnection(ctx, c.ID) })
	refuse = false
	step("delete a missing connection", 0, func() error { return a.DeleteConnection(ctx, c.ID+100) })
	acct := OAuthAccount{UUID: "u"}
	var acctConn Connection
	step("sign-in", 1, func() (err error) {
		acctConn, _, err = a.SaveOAuthAccount(ctx, "p", "", OAuthCredential{AccessToken: "a", RefreshToken: "r", Account: acct})
		return err
	})
	step("refresh", 1, func() error {
		return a.StoreRefreshed(ctx, acctConn.ID, 1, OAuthCredential{AccessToken: "a2", RefreshToken: "r2", Account: acct})
	})
	step("stale refresh", 0, func() error {
		err := a.StoreRefreshed(ctx, acctConn.ID, 1, OAuthCredential{AccessToken: "a3", RefreshToken: "r3", Account: acct})
		if !errors.Is(err, ErrStaleCredential) {
			return fmt.Errorf("want ErrStaleCredential, got %v", err)
		}
		return nil
	})
	step("reload", 0, func() error { return a.Reload(ctx) })
	step("delete connection", 1, func() error { return a.DeleteConnection(ctx, c.ID) })
	step("delete provider", 1, func() error { return a.DeleteProvider(ctx, p.ID) })
}

// The one-time renaming of connections named after e-mails is a write New commits before
// anyone can register: a function registered afterwards hears of it, once; a replica started
// later renames nothing and announces nothing.
func TestStartRenamingIsAnnounced(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	p := db.Provider{Name: "claude", Type: TypeAnthropic, BaseURL: "https://x", Strategy: "priority", ResponsesModels: "[]"}
	if err := db.InsertProvider(ctx, d.W, &p); err != nil {
		t.Fatal(err)
	}
	c := db.Connection{ProviderID: p.ID, Name: "x@example.com", AuthType: AuthOAuth, Enabled: true, Secret: []byte{0}}
	if err := db.InsertConnection(ctx, d.W, &c); err != nil {
		t.Fatal(err)
	}
	c.Secret = testBox.Seal(encodeOAuth(OAuthCredential{AccessToken: "a", Account: OAuthAccount{Email: "x@example.com"}, Rev: 1}),
		connectionAAD(c.ID))
	if err := db.UpdateConnection(ctx, d.W, &c); err != nil {
		t.Fatal(err)
	}
	a := newReplica(t, d)
	if _, _, _, got := a.heard(); !slices.Equal(got, []string{Topic}) {
		t.Fatalf("the renaming was announced as %v", got)
	}
	if e, _ := a.Registry().Connection(c.ID); e.Name != "claude-1" {
		t.Fatalf("connection named %q", e.Name)
	}
	b := newReplica(t, d)
	if _, _, _, got := b.heard(); len(got) != 0 {
		t.Fatalf("a later start announced %v", got)
	}
}

// Reloads run beside requests reading the registry and beside local writes (run with -race).
func TestReloadBesideWritesAndReads(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t)
	a, b := newReplica(t, d), newReplica(t, d)
	local, err := b.CreateProvider(ctx, ProviderInput{Name: ptr("local"), Type: ptr(TypeOpenAI), BaseURL: ptr("https://x")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func() {
		if p, ok := b.Registry().Provider("p"); ok {
			_ = p.Candidates()
		}
	}
	servicetest.Beside(t, read, 10, func(i int) error {
		if err := b.Reload(ctx); err != nil {
			return err
		}
		_, err := b.UpdateProvider(ctx, local.ID, ProviderInput{BaseURL: ptr(fmt.Sprintf("https://x/%d", i))}, nil)
		return err
	}, func() {
		for i := range 10 {
			name := fmt.Sprintf("c%d", i)
			if i == 0 {
				if _, err := a.CreateProvider(ctx, ProviderInput{Name: ptr("p"), Type: ptr(TypeOpenAI), BaseURL: ptr("https://x")}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := a.CreateConnection(ctx, ConnectionInput{Provider: ptr("p"), Name: &name, APIKey: ptr("k")}, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if p, ok := b.Registry().Provider("p"); !ok || len(p.Conns) != 10 {
		t.Fatalf("after the last reload: %+v", p)
	}
}
