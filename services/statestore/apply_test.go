package statestore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/resilience"
)

// replicas are two replicas' tables on one fake clock: A's changes are captured as the records
// its store would get, B receives them through Tables.Apply after a JSON round trip, as from the
// wire. Every persist call of B is counted: Apply must make none.
type replicas struct {
	t     *testing.T
	clock *clockwork.FakeClock
	a     Tables
	b     Tables
	sent  []Record // A's records not shipped yet
	echo  int      // persist calls of B
	hooks []string // B's breaker transitions, "provider/model from→to"
}

var lockoutCfg = resilience.LockoutConfig{Enabled: true, ErrorCodes: []int{404, 429, 503}, Base: 2 * time.Minute,
	Max: 30 * time.Minute, MaxSteps: 10, Exponential: true}

func newReplicas(t *testing.T) *replicas {
	r := &replicas{t: t, clock: clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0).UTC())}
	put := func(rec Record) { r.sent = append(r.sent, rec) }
	r.a = tablesOn(r.clock, put)
	r.b = tablesOn(r.clock, func(Record) { r.echo++ })
	r.b.Breakers.OnTransition(func(provider, model string, from, to resilience.CircuitState) {
		r.hooks = append(r.hooks, provider+"/"+model+" "+string(from)+"→"+string(to))
	})
	return r
}

// tablesOn builds every table on clock with put as the store, as the app wires them.
func tablesOn(clock clockwork.Clock, put func(Record)) Tables {
	pins := resilience.NewPins(clock, 0, func(k resilience.PinKey, p *resilience.Pin) { put(PinRecord(k, p)) })
	pins.SetTTL(time.Hour)
	return Tables{
		Cooldowns: resilience.NewCooldowns(clock, func(s resilience.ConnState) { put(ConnRecord(s)) }),
		Breakers:  resilience.NewBreakers(clock, func(s resilience.BreakerState) { put(BreakerRecord(s)) }),
		Lockouts: resilience.NewLockouts(clock, lockoutCfg, func(k resilience.LockoutKey, l *resilience.Lockout) {
			put(LockoutRecord(k, l))
		}),
		Lanes: resilience.NewLanes(clock, func(s resilience.LaneState) { put(LaneRecord(s)) }),
		Usage: resilience.NewUsage(clock, func(u resilience.AccountUsage) { put(UsageRecord(u)) }),
		Rests: resilience.NewTargetCooldowns(clock, func(c resilience.TargetCooldown) { put(TargetRestRecord(c)) }),
		Pins:  pins,
		Stored: resilience.NewStoredPins(clock, 0, func(k resilience.StoredKey, p *resilience.StoredPin) {
			put(StoredPinRecord(k, p))
		}),
		Replays: resilience.NewReplayMemory(clock, 0, func(k resilience.ReplayKey, s *resilience.ReplaySeal) {
			put(ReplaySealRecord(k, s))
		}),
		Binds: resilience.NewSessionBinds(clock, resilience.SessionBindTTL, 100, func(s resilience.Session, b *resilience.SessionBind) {
			put(SessionBindRecord(s, b))
		}),
	}
}

// wire encodes a record as the broadcast does: its ID and Value as JSON.
func wire(t *testing.T, r Record) (id, value []byte) {
	t.Helper()
	id, err := EncodeID(r)
	if err != nil {
		t.Fatal(err)
	}
	if value, err = json.Marshal(r.Value); err != nil {
		t.Fatal(err)
	}
	return id, value
}

// ship applies A's pending records to B and returns how many there were.
func (r *replicas) ship() int {
	r.t.Helper()
	n := len(r.sent)
	for _, rec := range r.sent {
		id, value := wire(r.t, rec)
		before := r.echo
		if err := r.b.Apply(rec.Kind, id, value); err != nil {
			r.t.Fatal(err)
		}
		if r.echo != before {
			r.t.Fatalf("applying %s %s persisted on B", rec.Kind, id)
		}
	}
	r.sent = nil
	return n
}

func TestApplyConnectionState(t *testing.T) {
	r := newReplicas(t)
	policy := resilience.CooldownPolicy{Base: time.Minute, MaxSteps: 5, Max: time.Hour}
	fail := resilience.Outcome{Reason: resilience.ReasonRateLimit, Scope: resilience.ScopeConnection, Status: 429, Message: "slow down"}
	r.a.Cooldowns.RecordFailure(7, fail, policy)
	r.a.Cooldowns.MarkExpired(8, "refresh token dead")
	r.ship()
	r.clock.Advance(20 * time.Second)
	for _, id := range []int64{7, 8} {
		okA, whyA := r.a.Cooldowns.Peek(id)
		okB, whyB := r.b.Cooldowns.Peek(id)
		if okA || okA != okB || whyA != whyB {
			t.Fatalf("connection %d: A %v %+v, B %v %+v", id, okA, whyA, okB, whyB)
		}
	}
	if _, why := r.b.Cooldowns.Peek(7); why.Status != resilience.StatusCooling || why.Remaining != 40*time.Second {
		t.Fatalf("B's cooldown %+v", why)
	}
	if a, b := r.a.Cooldowns.Get(7), r.b.Cooldowns.Get(7); a.Level != b.Level || a.LastError != b.LastError || !a.Until.Equal(b.Until) {
		t.Fatalf("state A %+v, B %+v", a, b)
	}
	// The backoff level came along: B's next cooldown is the second step.
	r.clock.Advance(time.Minute)
	if st := r.b.Cooldowns.RecordFailure(7, fail, policy); st.Level != 2 || st.Until.Sub(r.clock.Now()) != 2*time.Minute {
		t.Fatalf("B's next cooldown %+v", st)
	}
	r.echo = 0

	r.a.Cooldowns.RecordSuccess(7)
	r.a.Cooldowns.Clear(8, true)
	if n := r.ship(); n != 2 {
		t.Fatalf("%d records for two deletes", n)
	}
	for _, id := range []int64{7, 8} {
		if ok, why := r.b.Cooldowns.Peek(id); !ok || len(r.b.Cooldowns.All()) != 0 {
			t.Fatalf("connection %d still held on B: %+v", id, why)
		}
	}
}

func TestApplyBreaker(t *testing.T) {
	r := newReplicas(t)
	cfg := resilience.BreakerConfig{Enabled: true, FailureThreshold: 2, Timeout: 30 * time.Second}
	failOnce := func(m *resilience.Breakers) {
		tk, oe := m.Allow("openai", "", cfg)
		if oe != nil {
			t.Fatal(oe)
		}
		tk.Done(resilience.Result{Transport: true})
	}
	failOnce(r.a.Breakers)
	r.ship()
	if st := r.b.Breakers.States(); len(st) != 1 || st[0].State != resilience.CircuitClosed || st[0].ConsecutiveFailures != 1 {
		t.Fatalf("B after one failure: %+v", st)
	}
	failOnce(r.a.Breakers) // the threshold: A opens
	r.ship()
	r.clock.Advance(10 * time.Second)
	_, oeA := r.a.Breakers.Allow("openai", "", cfg)
	_, oeB := r.b.Breakers.Allow("openai", "", cfg)
	if oeA == nil || oeB == nil || oeA.RetryAfter != 20*time.Second || oeB.RetryAfter != oeA.RetryAfter {
		t.Fatalf("A refuses %+v, B refuses %+v", oeA, oeB)
	}
	if open, left := r.b.Breakers.Peek("openai", "", cfg); !open || left != 20*time.Second {
		t.Fatalf("B's Peek %v %v", open, left)
	}

	// At the probe time each replica lets one probe of its own through.
	r.clock.Advance(20 * time.Second)
	probeA, oe := r.a.Breakers.Allow("openai", "", cfg)
	if oe != nil || !probeA.Probe() {
		t.Fatalf("A's probe: %+v", oe)
	}
	r.ship() // A's half-open leaves B open with the probe due
	probeB, oe := r.b.Breakers.Allow("openai", "", cfg)
	if oe != nil || !probeB.Probe() {
		t.Fatalf("B's probe: %+v", oe)
	}
	if _, oe := r.b.Breakers.Allow("openai", "", cfg); oe == nil || oe.RetryAfter != time.Second {
		t.Fatalf("a second probe on B: %+v", oe)
	}
	r.ship() // nothing more from A
	echo := r.echo

	// A's probe succeeds: A closes and B follows, its own probe now stale.
	probeA.Done(resilience.Result{Status: 200})
	r.ship()
	if st := r.b.Breakers.States(); len(st) != 1 || st[0].State != resilience.CircuitClosed || st[0].ConsecutiveFailures != 0 {
		t.Fatalf("B after A closed: %+v", st)
	}
	probeB.Done(resilience.Result{Transport: true})
	if st := r.b.Breakers.States(); st[0].State != resilience.CircuitClosed || st[0].ConsecutiveFailures != 0 || r.echo != echo {
		t.Fatalf("a stale probe changed B: %+v", st)
	}
	want := []string{
		"openai/ →closed", // one failure arrives
		"openai/ closed→open",
		"openai/ open→half_open", // B's own probe
		"openai/ half_open→closed",
	}
	if strings.Join(r.hooks, ", ") != strings.Join(want, ", ") {
		t.Fatalf("B's transitions %q, want %q", r.hooks, want)
	}
}

func TestApplyLockout(t *testing.T) {
	r := newReplicas(t)
	r.a.Lockouts.RecordFailure("anthropic", 7, "claude-opus-4", 429, "rate_limit", 0, false)
	r.ship()
	r.clock.Advance(30 * time.Second)
	lockedA, untilA, _ := r.a.Lockouts.Check("anthropic", 7, "claude-opus-4")
	lockedB, untilB, entry := r.b.Lockouts.Check("anthropic", 7, "claude-opus-4")
	if !lockedA || !lockedB || !untilA.Equal(untilB) || entry.Reason != "rate_limit" || entry.FailureCount != 1 {
		t.Fatalf("A %v %v, B %v %v %+v", lockedA, untilA, lockedB, untilB, entry)
	}
	if locked, _, _ := r.b.Lockouts.Check("anthropic", 8, "claude-opus-4"); locked {
		t.Fatal("B locked another connection")
	}
	r.a.Lockouts.Clear("anthropic", 7, "claude-opus-4")
	if n := r.ship(); n != 1 {
		t.Fatalf("%d records for one delete", n)
	}
	if locked, _, _ := r.b.Lockouts.Check("anthropic", 7, "claude-opus-4"); locked || len(r.b.Lockouts.List(r.clock.Now())) != 0 {
		t.Fatal("B still locked after the delete")
	}
}

func TestApplyLaneAndUsage(t *testing.T) {
	r := newReplicas(t)
	now := r.clock.Now()
	wall := resilience.Unified{Present: true, Status: "rejected", Claim: "five_hour", Reset: now.Add(time.Hour), SlowOffer: "treatment"}
	cfg := resilience.LaneConfig{SlowRetryAfterDefault: 20 * time.Second, SlowMaxWaitDefault: 20 * time.Minute, CoolOff: 10 * time.Minute}
	if d := r.a.Lanes.Decide(7, resilience.LaneInput{Status: 429, Signal: wall, Lane: true}, cfg); d.Why != "accepted" {
		t.Fatalf("A did not accept the lane: %+v", d)
	}
	r.a.Usage.Observe(7, wall)
	r.a.Usage.Polled(8, &resilience.UsageWindow{Utilization: 42, ResetsAt: now.Add(2 * time.Hour)}, nil)
	r.ship()
	if !r.b.Lanes.Active(7) || r.b.Lanes.CanTakeWall(8, false, false) {
		t.Fatal("B's lane differs")
	}
	if a, _ := r.a.Lanes.Get(7); true {
		if b, _ := r.b.Lanes.Get(7); !a.Until.Equal(b.Until) || !a.Window.Equal(b.Window) {
			t.Fatalf("lane A %+v, B %+v", a, b)
		}
	}
	for _, id := range []int64{7, 8} {
		atA, untilA := r.a.Usage.AtWall(id, 90)
		atB, untilB := r.b.Usage.AtWall(id, 90)
		a, _ := r.a.Usage.Get(id)
		b, ok := r.b.Usage.Get(id)
		if !ok || atA != atB || !untilA.Equal(untilB) || *a.FiveHour != *b.FiveHour || !a.UpdatedAt.Equal(b.UpdatedAt) {
			t.Fatalf("usage of %d: A %v %v %+v, B %v %v %+v", id, atA, untilA, a, atB, untilB, b)
		}
	}
	r.a.Lanes.Clear(7)
	r.ship()
	if r.b.Lanes.Active(7) {
		t.Fatal("B's lane outlived the delete")
	}
	// A deleted usage record (the store never gets one from the table, but the wire can say so).
	if err := r.b.Apply(ClaudeUsage, []byte("8"), []byte("null")); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.b.Usage.Get(8); ok || r.echo != 0 {
		t.Fatal("B still holds the deleted reading")
	}
}

func TestApplyTargetRest(t *testing.T) {
	r := newReplicas(t)
	r.a.Rests.Cool("openai", "gpt-5", 7, "not_found", 0, time.Minute, time.Hour)
	r.ship()
	r.clock.Advance(10 * time.Second)
	restA, a := r.a.Rests.Check("openai", "gpt-5", 7)
	restB, b := r.b.Rests.Check("openai", "gpt-5", 7)
	if !restA || !restB || a != b {
		t.Fatalf("A %v %+v, B %v %+v", restA, a, restB, b)
	}
	if rest, _ := r.b.Rests.Check("openai", "gpt-5", 8); rest {
		t.Fatal("B rests another connection")
	}
	r.a.Rests.Success("openai", "gpt-5", 7)
	r.ship()
	if rest, _ := r.b.Rests.Check("openai", "gpt-5", 7); rest || len(r.b.Rests.List()) != 0 {
		t.Fatal("B still rests after the delete")
	}
}

func TestApplyPinsAndBinds(t *testing.T) {
	r := newReplicas(t)
	s := resilience.NewSession("key-1", "session-1")
	r.a.Pins.UseConnection(s, "anthropic", 7)
	r.a.Pins.UseTarget(s, "fast", resilience.ComboTarget{Index: 1, Key: "openai/gpt-5"})
	r.a.Binds.Bind(s, "account-a")
	r.ship()
	if id, ok := r.b.Pins.Connection(s, "anthropic"); !ok || id != 7 || r.b.Pins.OnConnection(7) != 1 {
		t.Fatalf("B's pin: %d %v", id, ok)
	}
	if tgt, ok := r.b.Pins.Target(s, "fast"); !ok || tgt.Key != "openai/gpt-5" {
		t.Fatalf("B's combo pin: %+v %v", tgt, ok)
	}
	// B binds the session to A's account; the store has that binding, so B writes nothing.
	if acct := r.b.Binds.Bind(s, "account-b"); acct != "account-a" || r.echo != 0 {
		t.Fatalf("B bound to %q, persisted %d", acct, r.echo)
	}

	// A moves the pin, then evicts it; B follows each step.
	r.clock.Advance(time.Minute)
	r.a.Pins.UseConnection(s, "anthropic", 8)
	r.ship()
	if id, _ := r.b.Pins.Connection(s, "anthropic"); id != 8 || r.b.Pins.OnConnection(7) != 0 || r.b.Pins.OnConnection(8) != 1 {
		t.Fatalf("B's pin after the move: %d", id)
	}
	r.a.Pins.EvictConnection(s, "anthropic", 8)
	r.ship()
	if _, ok := r.b.Pins.Connection(s, "anthropic"); ok || r.b.Pins.OnConnection(8) != 0 || r.b.Pins.Len() != 1 {
		t.Fatal("B's pin outlived the eviction")
	}
	id, value := wire(t, SessionBindRecord(s, nil))
	if err := r.b.Apply(ClaudeSession, id, value); err != nil || r.b.Binds.Len() != 0 {
		t.Fatalf("B's binding after the delete: %v, %d held", err, r.b.Binds.Len())
	}
	if r.echo != 0 {
		t.Fatalf("B persisted %d times", r.echo)
	}
}

// A stored response pinned on one replica is found on the other; a move and an end follow.
func TestApplyStoredPins(t *testing.T) {
	r := newReplicas(t)
	r.a.Stored.Record(1, "openai", 7, []string{"resp_1", "msg_1"})
	if n := r.ship(); n != 2 {
		t.Fatalf("%d records, want one per id", n)
	}
	if id, ok := r.b.Stored.Connection(1, "openai", []string{"msg_1"}); !ok || id != 7 {
		t.Fatalf("B: %d %v", id, ok)
	}
	// A use of a pin that holds its connection writes nothing; a move does.
	r.a.Stored.Record(1, "openai", 7, []string{"resp_1"})
	if n := r.ship(); n != 0 {
		t.Fatalf("a use wrote %d records", n)
	}
	r.a.Stored.Record(1, "openai", 8, []string{"resp_1"})
	r.ship()
	if id, _ := r.b.Stored.Connection(1, "openai", []string{"resp_1"}); id != 8 {
		t.Fatalf("B after the move: %d", id)
	}
	// A sweep on A ends its pins; B forgets them.
	r.clock.Advance(resilience.StoredPinTTL)
	if n := r.a.Stored.Sweep(); n != 2 {
		t.Fatalf("A swept %d", n)
	}
	r.ship()
	if r.b.Stored.Len() != 0 || r.echo != 0 {
		t.Fatalf("B holds %d, persisted %d times", r.b.Stored.Len(), r.echo)
	}
}

// Reasoning a connection refused on one replica is left out on the other at once; new
// credentials on the first forget it on both.
func TestApplyReplaySeals(t *testing.T) {
	r := newReplicas(t)
	r.a.Replays.Record(7, "gpt-5", []string{"sealed-1", "sealed-2"})
	if n := r.ship(); n != 2 {
		t.Fatalf("%d records, want one per seal", n)
	}
	if !r.b.Replays.Holds(7) || !r.b.Replays.Unreadable(7, "gpt-5", "sealed-2") || r.b.Replays.Unreadable(7, "gpt-4o", "sealed-2") {
		t.Fatal("B does not know what connection 7 refused")
	}
	r.a.Replays.Record(7, "gpt-5", []string{"sealed-1"}) // known: nothing to write
	if n := r.ship(); n != 0 {
		t.Fatalf("a known seal wrote %d records", n)
	}
	r.a.Replays.ForgetConnection(7)
	r.ship()
	if r.b.Replays.Holds(7) || r.b.Replays.Len() != 0 || r.echo != 0 {
		t.Fatalf("B holds %d, persisted %d times", r.b.Replays.Len(), r.echo)
	}
}

// A record that arrives after what it holds ran out changes nothing.
func TestApplyExpiredIsNoOp(t *testing.T) {
	r := newReplicas(t)
	s := resilience.NewSession("key-1", "session-1")
	r.a.Lockouts.RecordFailure("anthropic", 7, "claude-opus-4", 429, "rate_limit", 0, false)
	r.a.Rests.Cool("openai", "gpt-5", 7, "not_found", 0, time.Minute, time.Hour)
	r.a.Pins.UseConnection(s, "anthropic", 7)
	r.a.Binds.Bind(s, "account-a")
	r.clock.Advance(resilience.SessionBindTTL) // past every one of them
	if n := r.ship(); n != 4 {
		t.Fatalf("%d records", n)
	}
	if len(r.b.Lockouts.List(r.clock.Now())) != 0 || len(r.b.Rests.List()) != 0 || r.b.Pins.Len() != 0 || r.b.Binds.Len() != 0 {
		t.Fatal("B installed expired state")
	}
	// The tables are truly empty, not holding expired entries: nothing to sweep.
	if r.b.Lockouts.Sweep() != 0 || r.b.Pins.Sweep() != 0 || r.b.Binds.Sweep() != 0 || r.echo != 0 {
		t.Fatal("B held expired state")
	}
}

func TestApplyRoutesAndRejects(t *testing.T) {
	var got []string
	tables := Tables{OAuth: func(id, value []byte) error {
		got = append(got, string(id)+" "+string(value))
		return nil
	}}
	rec := Record{Kind: OAuthRefresh, Key: "7", ConnectionID: 7, ID: int64(7)}
	id, value := wire(t, rec)
	if err := tables.Apply(OAuthRefresh, id, value); err != nil {
		t.Fatal(err)
	}
	if err := tables.Apply(OAuthRefresh, id, []byte(`{"strikes":1}`)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != `7 |7 {"strikes":1}` {
		t.Fatalf("oauth got %q", got)
	}
	// Tables left nil skip their kinds.
	if err := tables.Apply(Connection, []byte("7"), []byte(`{"connection_id":7,"level":1}`)); err != nil {
		t.Fatal(err)
	}
	r := newReplicas(t)
	for _, c := range []struct {
		name      string
		kind      Kind
		id, value string
	}{
		{"unknown kind", "nope", "1", "null"},
		{"bad id", Connection, `"seven"`, "null"},
		{"no id", ModelLockout, "", "null"},
		{"bad value", Breaker, `{"provider":"openai"}`, `{"state":`},
	} {
		if err := r.b.Apply(c.kind, []byte(c.id), []byte(c.value)); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, err := EncodeID(Record{Kind: Connection, Key: "7"}); err == nil {
		t.Error("EncodeID of a record without ID")
	}
}

// The ID names the entry: a value carrying other key fields cannot put it elsewhere.
func TestApplyIDNamesTheEntry(t *testing.T) {
	r := newReplicas(t)
	now := r.clock.Now()
	l := resilience.Lockout{Provider: "other", ConnectionID: 9, Model: "m", Target: "m", Scope: resilience.LockoutModel,
		FailureCount: 1, ExpiresAt: now.Add(time.Minute)}
	k := resilience.LockoutKey{Provider: "anthropic", ConnectionID: 7, Target: "m"}
	id, value := wire(t, Record{Kind: ModelLockout, ID: k, Value: l})
	if err := r.b.Apply(ModelLockout, id, value); err != nil {
		t.Fatal(err)
	}
	list := r.b.Lockouts.List(now)
	if len(list) != 1 || list[0].Key() != k {
		t.Fatalf("B holds %+v", list)
	}
	st := resilience.ConnState{ConnectionID: 9, Until: now.Add(time.Minute), Level: 1}
	id, value = wire(t, Record{Kind: Connection, ID: int64(7), Value: st})
	if err := r.b.Apply(Connection, id, value); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.b.Cooldowns.Peek(7); ok {
		t.Fatal("connection 7 not cooling")
	}
	if ok, _ := r.b.Cooldowns.Peek(9); !ok {
		t.Fatal("connection 9 cooling")
	}
}
