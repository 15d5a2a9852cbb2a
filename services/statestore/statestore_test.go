package statestore

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/services/resilience"
	"switchyard/services/servicetest"
)

// testDB opens a migrated database in a temp dir with two connections of the built-in
// anthropic provider.
func testDB(t *testing.T, version int) (*db.DB, []int64) {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.MigrateTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	// An older schema may lack today's provider columns: read only the id.
	var providerID int64
	if err := d.W.GetContext(ctx, &providerID, `SELECT id FROM providers WHERE name = 'anthropic'`); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, name := range []string{"a", "b"} {
		res, err := d.W.ExecContext(ctx, `INSERT INTO provider_connections (provider_id, name, auth_type, secret, created_at, updated_at)
			VALUES (?, ?, 'api_key', x'01', 1, 1)`, providerID, name)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		ids = append(ids, id)
	}
	return d, ids
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestRecordsRoundTripAndFollowWhatTheyBelongTo(t *testing.T) {
	ctx := context.Background()
	d, ids := testDB(t, -1)
	s := NewSQLite(d, quiet)
	at := time.UnixMilli(1_700_000_000_123).UTC()

	cooling := resilience.ConnState{ConnectionID: ids[0], Until: at.Add(time.Minute), Level: 2, LastError: "rate limited",
		LastErrorType: resilience.ReasonRateLimit, ErrorCode: 429, LastErrorAt: at, FromUpstream: true}
	expired := resilience.ConnState{ConnectionID: ids[1], Terminal: resilience.TerminalExpired, Probes: 1, NextProbe: at.Add(time.Hour),
		LastError: "credentials rejected", ErrorCode: 401, LastErrorAt: at}
	open := resilience.BreakerState{Provider: "anthropic", State: resilience.CircuitOpen, OpenedAt: at, NextProbeAt: at.Add(30 * time.Second),
		ConsecutiveFailures: 5, LastFailure: "status 503", LastFailureAt: at, ProbeSuccesses: 1}
	lock := resilience.Lockout{Provider: "anthropic", ConnectionID: ids[0], Model: "claude-opus-4", Target: "family:opus",
		Scope: resilience.LockoutFamily, Reason: "rate_limit", FailureCount: 2, ExpiresAt: at.Add(4 * time.Minute)}

	s.Put(ConnRecord(cooling))
	s.Put(ConnRecord(expired))
	s.Put(BreakerRecord(open))
	s.Put(BreakerRecord(resilience.BreakerState{Provider: "openai", State: resilience.CircuitClosed, ConsecutiveFailures: 1}))
	s.Put(BreakerRecord(resilience.BreakerState{Provider: "no-such-provider", State: resilience.CircuitOpen})) // skipped
	s.Put(LockoutRecord(lock.Key(), &lock))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := LoadResilience(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	open.ProbeSuccesses = 0 // not persisted
	if len(got.Connections) != 2 || !connEqual(got.Connections[0], cooling) || !connEqual(got.Connections[1], expired) {
		t.Fatalf("connections\n got %+v\nwant %+v, %+v", got.Connections, cooling, expired)
	}
	if len(got.Breakers) != 2 || !breakerEqual(got.Breakers[0], open) || got.Breakers[1].Provider != "openai" {
		t.Fatalf("breakers %+v", got.Breakers)
	}
	if len(got.Lockouts) != 1 || !lockoutEqual(got.Lockouts[0], lock) {
		t.Fatalf("lockouts %+v", got.Lockouts)
	}

	// Nothing left to remember deletes; deleting a connection drops its records.
	s.Put(ConnRecord(resilience.ConnState{ConnectionID: ids[1]}))
	s.Put(BreakerRecord(resilience.BreakerState{Provider: "openai", State: resilience.CircuitClosed}))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteConnection(ctx, d.W, ids[0]); err != nil {
		t.Fatal(err)
	}
	s.Put(ConnRecord(cooling)) // arrives after the deletion: not written
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = LoadResilience(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Connections) != 0 || len(got.Lockouts) != 0 || len(got.Breakers) != 1 {
		t.Fatalf("after deletes: %+v", got)
	}
}

func TestSyncWaitsForTheBatchInFlight(t *testing.T) {
	d, ids := testDB(t, -1)
	s := NewSQLite(d, quiet)
	ctx, stop := servicetest.Start(t, s.Run)
	defer stop()
	for i := range 200 {
		s.Put(ConnRecord(resilience.ConnState{ConnectionID: ids[0], Level: i + 1, LastError: "x"}))
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := LoadAll[resilience.ConnState](ctx, s, Connection)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Level != i+1 {
			t.Fatalf("after Sync of level %d the store holds %+v", i+1, got)
		}
	}
}

// TestMigrationCarriesOldState builds a database as the previous schema left it (one table per
// kind) and checks that every row comes back through the store after the merge.
func TestMigrationCarriesOldState(t *testing.T) {
	ctx := context.Background()
	d, ids := testDB(t, 4)
	ms := int64(1_700_000_000_123)
	stmts := []struct {
		q    string
		args []any
	}{
		{`INSERT INTO connection_state (connection_id, terminal, until_ms, backoff_level, last_error, last_error_type, error_code,
			last_error_at, rejections, probes, next_probe_ms, from_upstream, updated_at) VALUES (?, '', ?, 2, 'slow down', 'rate_limit', 429, ?, 0, 0, 0, 1, 1)`,
			[]any{ids[0], ms + 60_000, ms}},
		{`INSERT INTO connection_state (connection_id, terminal, until_ms, backoff_level, last_error, last_error_type, error_code,
			last_error_at, rejections, probes, next_probe_ms, from_upstream, updated_at) VALUES (?, 'banned', 0, 0, 'forbidden', 'auth_error', 403, ?, 3, 0, 0, 0, 1)`,
			[]any{ids[1], ms}},
		{`INSERT INTO breaker_state (provider, model, state, opened_at, next_probe_at, consecutive_failures, last_failure,
			last_failure_at, updated_at) VALUES ('anthropic', 'claude-x', 'open', ?, ?, 5, 'status 503', ?, 1)`, []any{ms, ms + 30_000, ms}},
		{`INSERT INTO model_lockouts (provider, connection_id, target, model, scope, reason, failure_count, expires_at, updated_at)
			VALUES ('anthropic', ?, 'family:opus', 'claude-opus-4', 'family', 'rate_limit', 3, ?, 1)`, []any{ids[0], ms + 120_000}},
	}
	for _, st := range stmts {
		if _, err := d.W.ExecContext(ctx, st.q, st.args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := LoadResilience(ctx, NewSQLite(d, quiet))
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(ms)
	wantConns := []resilience.ConnState{
		{ConnectionID: ids[0], Until: at.Add(time.Minute), Level: 2, LastError: "slow down", LastErrorType: resilience.ReasonRateLimit,
			ErrorCode: 429, LastErrorAt: at, FromUpstream: true},
		{ConnectionID: ids[1], Terminal: resilience.TerminalBanned, LastError: "forbidden", LastErrorType: resilience.ReasonAuthError,
			ErrorCode: 403, LastErrorAt: at, Rejections: 3},
	}
	slices.SortFunc(got.Connections, func(a, b resilience.ConnState) int { return int(a.ConnectionID - b.ConnectionID) })
	if !slices.EqualFunc(got.Connections, wantConns, connEqual) {
		t.Fatalf("connections\n got %+v\nwant %+v", got.Connections, wantConns)
	}
	wantBreaker := resilience.BreakerState{Provider: "anthropic", Model: "claude-x", State: resilience.CircuitOpen, OpenedAt: at,
		NextProbeAt: at.Add(30 * time.Second), ConsecutiveFailures: 5, LastFailure: "status 503", LastFailureAt: at}
	if len(got.Breakers) != 1 || !breakerEqual(got.Breakers[0], wantBreaker) {
		t.Fatalf("breakers %+v", got.Breakers)
	}
	wantLock := resilience.Lockout{Provider: "anthropic", ConnectionID: ids[0], Model: "claude-opus-4", Target: "family:opus",
		Scope: resilience.LockoutFamily, Reason: "rate_limit", FailureCount: 3, ExpiresAt: at.Add(2 * time.Minute)}
	if len(got.Lockouts) != 1 || !lockoutEqual(got.Lockouts[0], wantLock) {
		t.Fatalf("lockouts %+v", got.Lockouts)
	}
	// The loaded state works in the tables.
	clk := clockwork.NewFakeClockAt(at)
	c := resilience.NewCooldowns(clk, nil)
	c.Load(got.Connections)
	if ok, _ := c.Peek(ids[0]); ok {
		t.Fatal("the migrated cooldown does not hold")
	}
}

func connEqual(a, b resilience.ConnState) bool {
	eq := a.Until.Equal(b.Until) && a.LastErrorAt.Equal(b.LastErrorAt) && a.NextProbe.Equal(b.NextProbe)
	a.Until, b.Until, a.LastErrorAt, b.LastErrorAt, a.NextProbe, b.NextProbe = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return eq && a == b
}

func breakerEqual(a, b resilience.BreakerState) bool {
	eq := a.OpenedAt.Equal(b.OpenedAt) && a.NextProbeAt.Equal(b.NextProbeAt) && a.LastFailureAt.Equal(b.LastFailureAt)
	a.OpenedAt, b.OpenedAt, a.NextProbeAt, b.NextProbeAt, a.LastFailureAt, b.LastFailureAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return eq && a == b
}

func lockoutEqual(a, b resilience.Lockout) bool {
	eq := a.ExpiresAt.Equal(b.ExpiresAt)
	a.ExpiresAt, b.ExpiresAt = time.Time{}, time.Time{}
	return eq && a == b
}

// Stored-state pins round-trip through the store and go with their connection.
func TestStoredPinsRoundTrip(t *testing.T) {
	ctx := context.Background()
	d, ids := testDB(t, -1)
	s := NewSQLite(d, quiet)
	at := time.UnixMilli(1_700_000_000_123).UTC()
	a := resilience.StoredPin{StoredKey: resilience.StoredKey{Namespace: 3, ID: "resp_1"}, Provider: "openai", ConnectionID: ids[0], UsedAt: at}
	b := resilience.StoredPin{StoredKey: resilience.StoredKey{Namespace: 3, ID: "msg_1"}, Provider: "openai", ConnectionID: ids[1], UsedAt: at}
	for _, p := range []resilience.StoredPin{a, b} {
		s.Put(StoredPinRecord(p.StoredKey, &p))
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := LoadResilience(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.StoredPins) != 2 {
		t.Fatalf("stored pins %+v", got.StoredPins)
	}
	for _, want := range []resilience.StoredPin{a, b} {
		if !slices.ContainsFunc(got.StoredPins, func(p resilience.StoredPin) bool {
			return p.StoredKey == want.StoredKey && p.Provider == want.Provider && p.ConnectionID == want.ConnectionID && p.UsedAt.Equal(want.UsedAt)
		}) {
			t.Fatalf("%+v not loaded: %+v", want, got.StoredPins)
		}
	}
	// Deleting a connection drops its pins.
	if err := db.DeleteConnection(ctx, d.W, ids[0]); err != nil {
		t.Fatal(err)
	}
	if got, err = LoadResilience(ctx, s); err != nil || len(got.StoredPins) != 1 || got.StoredPins[0].ID != "msg_1" {
		t.Fatalf("after deleting the connection: %+v %v", got.StoredPins, err)
	}
}

// Seals a connection refused round-trip through the store as digests and go with their
// connection; a resync (ApplyStored) installs them and the stored pins.
func TestReplaySealsRoundTrip(t *testing.T) {
	ctx := context.Background()
	d, ids := testDB(t, -1)
	s := NewSQLite(d, quiet)
	clock := clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_123).UTC())
	put := resilience.NewReplayMemory(clock, 0, func(k resilience.ReplayKey, r *resilience.ReplaySeal) { s.Put(ReplaySealRecord(k, r)) })
	put.Record(ids[0], "gpt-5", []string{"sealed-a"})
	put.Record(ids[1], "claude-opus-4-5", []string{"sig/with/slashes"})
	pins := resilience.NewStoredPins(clock, 0, func(k resilience.StoredKey, p *resilience.StoredPin) { s.Put(StoredPinRecord(k, p)) })
	pins.Record(1, "openai", ids[0], []string{"resp_1"})
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := LoadResilience(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ReplaySeals) != 2 {
		t.Fatalf("seals %+v", got.ReplaySeals)
	}
	for _, r := range got.ReplaySeals {
		if !r.SeenAt.Equal(clock.Now()) || (r.ConnectionID != ids[0] && r.ConnectionID != ids[1]) {
			t.Errorf("loaded %+v", r)
		}
	}
	var raw []string
	if err := s.Load(ctx, ReplaySeal, func(b []byte) error { raw = append(raw, string(b)); return nil }); err != nil {
		t.Fatal(err)
	}
	if j := strings.Join(raw, " "); strings.Contains(j, "sealed-a") || strings.Contains(j, "slashes") {
		t.Fatalf("the store holds a seal itself: %s", j)
	}
	tables := Tables{Replays: resilience.NewReplayMemory(clock, 0, nil), Stored: resilience.NewStoredPins(clock, 0, nil)}
	if err := tables.ApplyStored(ctx, s); err != nil {
		t.Fatal(err)
	}
	if !tables.Replays.Unreadable(ids[1], "claude-opus-4-5", "sig/with/slashes") || tables.Replays.Unreadable(ids[1], "gpt-5", "sealed-a") {
		t.Error("the resync did not install the seals")
	}
	if id, ok := tables.Stored.Connection(1, "openai", []string{"resp_1"}); !ok || id != ids[0] {
		t.Errorf("the resync did not install the stored pins: %d %v", id, ok)
	}
	// Deleting a connection drops its seals.
	if err := db.DeleteConnection(ctx, d.W, ids[0]); err != nil {
		t.Fatal(err)
	}
	if got, err = LoadResilience(ctx, s); err != nil || len(got.ReplaySeals) != 1 || got.ReplaySeals[0].ConnectionID != ids[1] {
		t.Fatalf("after deleting the connection: %+v %v", got.ReplaySeals, err)
	}
}

// Session pins and Claude Code session bindings round-trip through the store; a provider pin
// goes with its connection, and the stored rows hold digests, never the client's session key.
func TestSessionPinsAndBindsRoundTrip(t *testing.T) {
	ctx := context.Background()
	d, ids := testDB(t, -1)
	s := NewSQLite(d, quiet)
	at := time.UnixMilli(1_700_000_000_123).UTC()
	sess := resilience.NewSession("key:1", "my-secret-session")
	onA := resilience.Pin{Session: sess, Scope: resilience.ProviderScope("anthropic"), ConnectionID: ids[0], Failures: 1, UsedAt: at}
	onB := resilience.Pin{Session: resilience.NewSession("key:1", "other"), Scope: resilience.ProviderScope("anthropic"),
		ConnectionID: ids[1], UsedAt: at}
	combo := resilience.Pin{Session: sess, Scope: resilience.ComboScope("chat"), Target: resilience.ComboTarget{Index: 2, Key: "a/m"}, UsedAt: at}
	bind := resilience.SessionBind{Session: resilience.NewSession("claude-code", "cc-1"), Account: "uuid-ada", SeenAt: at}
	for _, p := range []resilience.Pin{onA, onB, combo} {
		s.Put(PinRecord(p.Key(), &p))
	}
	s.Put(SessionBindRecord(bind.Session, &bind))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := LoadResilience(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	pinEqual := func(a, b resilience.Pin) bool {
		eq := a.UsedAt.Equal(b.UsedAt)
		a.UsedAt, b.UsedAt = time.Time{}, time.Time{}
		return eq && a == b
	}
	if len(got.Pins) != 3 {
		t.Fatalf("pins %+v", got.Pins)
	}
	for _, want := range []resilience.Pin{onA, onB, combo} {
		if !slices.ContainsFunc(got.Pins, func(p resilience.Pin) bool { return pinEqual(p, want) }) {
			t.Fatalf("pin %+v not loaded: %+v", want, got.Pins)
		}
	}
	if len(got.SessionBinds) != 1 || got.SessionBinds[0].Account != "uuid-ada" || got.SessionBinds[0].Session != bind.Session ||
		!got.SessionBinds[0].SeenAt.Equal(at) {
		t.Fatalf("binds %+v", got.SessionBinds)
	}
	rows, err := db.ListState(ctx, d.W, string(SessionPin))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if strings.Contains(r.Key+r.Value, "my-secret-session") {
			t.Fatalf("a stored pin holds the session key: %+v", r)
		}
	}

	// Deleting a connection drops its pins; a deleted pin and binding are gone.
	if err := db.DeleteConnection(ctx, d.W, ids[0]); err != nil {
		t.Fatal(err)
	}
	s.Put(PinRecord(combo.Key(), nil))
	s.Put(SessionBindRecord(bind.Session, nil))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = LoadResilience(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pins) != 1 || got.Pins[0].ConnectionID != ids[1] || len(got.SessionBinds) != 0 {
		t.Fatalf("after deletes: %+v %+v", got.Pins, got.SessionBinds)
	}
}
