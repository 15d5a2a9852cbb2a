package resilience

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Session affinity (PRODUCT.md §3.10, session_affinity_ttl_ms; 0 = off). A client session
// (X-Switchyard-Session, X-Session-Id, or Claude Code's own session id) is pinned to one
// connection per provider, and to one target per combo, while what it is pinned to stays
// eligible:
//
//   - the first request of a session that a connection (a target) serves pins the session to it;
//     every later request the pinned one serves extends the pin by the TTL;
//   - a failover away from the pinned connection evicts the pin, and the connection that then
//     serves is pinned;
//   - PinFailuresToClear failures in a row on the pinned connection clear the pin;
//   - a pin unused for the TTL is gone: lookups ignore it, the sweeper drops it (and its row).
//
// The engine decides what counts as a use, a failure and a failover; the table below keeps the
// rules. At most MaxPins are held, the least recently used evicted first. Pins are persisted
// through the state store: made, moved, failed and cleared at once, an extension at most every
// pinSaveGap (so a pin may lapse that much earlier after a restart), and loaded at start without
// the expired ones.

const (
	// MaxSessionKey bounds the session key: a longer value a client sends is replaced by its
	// SHA-256 (SessionKey).
	MaxSessionKey = 256
	// MaxPins bounds the pin table (about 200 bytes each).
	MaxPins = 100_000
	// PinFailuresToClear is how many failures in a row on the pinned connection (target) clear
	// the pin.
	PinFailuresToClear = 3
	// AffinitySweepInterval is how often the sweepers drop expired pins and bindings.
	AffinitySweepInterval = 30 * time.Second
	// sweepBatch bounds the entries one sweep drops, so a sweep never holds the lock for long;
	// the next sweep (or a lookup) takes the rest.
	sweepBatch = 10_000
	// pinSaveGap is the most a pin's last use on disk may lag behind the one in memory.
	pinSaveGap = time.Minute
)

// SessionKey is the session key of a header value: the value as sent (spaces trimmed), or its
// SHA-256 in hex when it is longer than MaxSessionKey bytes. "" = no session.
func SessionKey(v string) string {
	v = strings.TrimSpace(v)
	if len(v) <= MaxSessionKey {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Session identifies a client session in the tables: a digest of its key within a namespace
// (for pins, the client key that sent it, so two clients naming their sessions alike never
// share a pin). Neither an entry in memory nor a stored row holds what the client sent, and
// every key costs the same whatever its length.
type Session [16]byte

// NewSession is the session of key within namespace.
func NewSession(namespace, key string) Session {
	h := sha256.New()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var s Session
	copy(s[:], h.Sum(nil))
	return s
}

// String is the session in hex: its key in the state store.
func (s Session) String() string { return hex.EncodeToString(s[:]) }

// Short is a short hash of the session for logs.
func (s Session) Short() string { return hex.EncodeToString(s[:4]) }

// MarshalText writes the session in hex.
func (s Session) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a session written by MarshalText.
func (s *Session) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(s) {
		return errors.New("session: want 32 hex digits")
	}
	_, err := hex.Decode(s[:], b)
	return err
}

// The scopes of pins: a session has at most one pin per provider and one per combo.
const (
	providerScopePrefix = "provider:"
	comboScopePrefix    = "combo:"
)

// ProviderScope is the scope of a session's connection pin on a provider.
func ProviderScope(provider string) string { return providerScopePrefix + provider }

// ComboScope is the scope of a session's target pin on a combo.
func ComboScope(combo string) string { return comboScopePrefix + combo }

// PinKey identifies one pin.
type PinKey struct {
	Session Session `json:"session"`
	Scope   string  `json:"scope"`
}

// Pin is a session's pin in one scope; it is persisted.
type Pin struct {
	Session Session `json:"session"`
	// Scope is "provider:<name>" or "combo:<name>".
	Scope string `json:"scope"`
	// ConnectionID is the connection a provider pin holds.
	ConnectionID int64 `json:"connection_id,omitempty"`
	// Target is the target a combo pin holds.
	Target ComboTarget `json:"target,omitzero"`
	// Failures counts the failures in a row on what the pin holds.
	Failures int `json:"failures,omitempty"`
	// UsedAt is the pin's last use; it expires a TTL after.
	UsedAt time.Time `json:"used_at"`
}

// Key is the pin's key.
func (p Pin) Key() PinKey { return PinKey{p.Session, p.Scope} }

// Provider is the provider of a provider pin, "" for a combo pin.
func (p Pin) Provider() string {
	name, _ := strings.CutPrefix(p.Scope, providerScopePrefix)
	if name == p.Scope {
		return ""
	}
	return name
}

// ComboTarget is what a combo pin holds: the target's index among the combo's targets and, when
// the executor gives one, a key naming it (such as "provider/model"), so an edited combo whose
// targets moved still finds it.
type ComboTarget struct {
	Index int    `json:"index"`
	Key   string `json:"key,omitempty"`
}

// Find returns the index of the pinned target among a combo's target keys now: Index when the
// key there is still Key (or the pin has no key and Index is in range), else the index where Key
// moved to; false when the target is gone.
func (t ComboTarget) Find(keys []string) (int, bool) {
	if t.Index >= 0 && t.Index < len(keys) && (t.Key == "" || keys[t.Index] == t.Key) {
		return t.Index, true
	}
	if t.Key == "" {
		return 0, false
	}
	i := slices.Index(keys, t.Key)
	return i, i >= 0
}

// same reports whether two targets are the same one: by key when both have one, else by index.
func (t ComboTarget) same(o ComboTarget) bool {
	if t.Key != "" && o.Key != "" {
		return t.Key == o.Key
	}
	return t.Index == o.Index
}

// PinEvent says what a call did to a pin.
type PinEvent int

// The pin events.
const (
	PinUnchanged PinEvent = iota // no pin in the scope, or it holds something else
	PinMade                      // the session was pinned (it had no pin, or it had expired)
	PinExtended                  // the pin held what served and was extended
	PinMoved                     // the pin held something else and now holds what served
	PinCounted                   // a failure on what the pin holds was counted
	PinCleared                   // the pin was cleared (failures in a row, or a failover)
)

// Pins is the table of session pins.
type Pins struct {
	clock   clockwork.Clock
	persist func(PinKey, *Pin)
	ttl     atomic.Int64 // nanoseconds; 0 = affinity off

	mu      sync.Mutex
	t       ttlTable[PinKey, Pin]
	perConn map[int64]int // provider pins by the connection they hold
}

// NewPins builds the table, at most limit pins (MaxPins when ≤ 0) and off until SetTTL. persist
// (may be nil) receives every changed pin (a copy; nil = deleted) and must not block: hand it to
// a write-behind queue.
func NewPins(clock clockwork.Clock, limit int, persist func(PinKey, *Pin)) *Pins {
	persist = orDrop2(persist)
	if limit <= 0 {
		limit = MaxPins
	}
	return &Pins{clock: clock, persist: persist, t: newTTLTable[PinKey, Pin](limit), perConn: map[int64]int{}}
}

// SetTTL sets how long a pin lasts after its last use (session_affinity_ttl_ms), at start and
// after every settings save; it applies to the pins held too. 0 turns affinity off: nothing is
// pinned or found, and the sweeper drops the pins held.
func (p *Pins) SetTTL(d time.Duration) { p.ttl.Store(int64(max(d, 0))) }

// TTL is the pins' time to live; 0 = affinity off.
func (p *Pins) TTL() time.Duration { return time.Duration(p.ttl.Load()) }

// Load installs pins read at start. Expired pins (all of them while affinity is off) are not
// installed and are deleted from the store; past the bound the most recently used are kept.
func (p *Pins) Load(ps []Pin) {
	ttl, now := p.TTL(), p.clock.Now()
	ps = slices.Clone(ps)
	slices.SortStableFunc(ps, func(a, b Pin) int { return a.UsedAt.Compare(b.UsedAt) })
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pin := range ps {
		k := pin.Key()
		if p.t.get(k) != nil {
			continue // stored once per key; read twice only from a store that repeats itself
		}
		if ttl == 0 || expired(pin.UsedAt, now, ttl) || pin.Scope == "" {
			p.persist(k, nil)
			continue
		}
		pin.Failures = min(max(pin.Failures, 0), PinFailuresToClear-1)
		e := p.t.add(k, pin, pin.UsedAt)
		e.saved = pin.UsedAt
		p.index(&e.val, 1)
	}
	for p.t.len() > p.t.limit {
		p.drop(p.t.oldest())
	}
}

// Apply installs a pin as another replica recorded it under k, or deletes k's pin when pin is
// nil, without persisting either. The pin is stored under k whatever key fields it carries. A
// pin already expired when it arrives (every pin while affinity is off here) is not installed;
// the pin held here, if any, expires by its own last use. The last record of a key wins, like
// the store's row. Past the bound the least recently used pins leave this replica's memory
// only: the rows belong to every replica.
func (p *Pins) Apply(k PinKey, pin *Pin) {
	ttl, now := p.TTL(), p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if pin == nil {
		if e := p.t.get(k); e != nil {
			p.forget(e)
		}
		return
	}
	if ttl == 0 || k.Scope == "" || expired(pin.UsedAt, now, ttl) {
		return
	}
	v := *pin
	v.Session, v.Scope = k.Session, k.Scope
	v.Failures = min(max(v.Failures, 0), PinFailuresToClear-1)
	if e := p.t.get(k); e != nil {
		p.index(&e.val, -1)
	}
	e := p.t.set(k, v, v.UsedAt)
	e.saved = v.UsedAt // the store has this use: the next use here saves on the usual gap
	p.index(&e.val, 1)
	for p.t.len() > p.t.limit {
		p.forget(p.t.oldest())
	}
}

// Connection returns the connection the session is pinned to on the provider.
func (p *Pins) Connection(s Session, provider string) (int64, bool) {
	pin, ok := p.lookup(PinKey{s, ProviderScope(provider)})
	return pin.ConnectionID, ok
}

// UseConnection records that the connection served the session on the provider: the session is
// pinned to it (made, extended or moved there), and its failures in a row start again at 0.
func (p *Pins) UseConnection(s Session, provider string, connID int64) PinEvent {
	return p.use(PinKey{s, ProviderScope(provider)}, func(pin *Pin) bool { return pin.ConnectionID == connID },
		func(pin *Pin) { pin.ConnectionID = connID })
}

// ConnectionFailed records a failure of the connection for the session on the provider; it
// counts only when the session is pinned to that connection, and the PinFailuresToClear-th in a
// row clears the pin.
func (p *Pins) ConnectionFailed(s Session, provider string, connID int64) PinEvent {
	return p.failed(PinKey{s, ProviderScope(provider)}, func(pin *Pin) bool { return pin.ConnectionID == connID }, false)
}

// EvictConnection clears the session's pin on the provider if it holds the connection: the
// request failed over away from it.
func (p *Pins) EvictConnection(s Session, provider string, connID int64) PinEvent {
	return p.failed(PinKey{s, ProviderScope(provider)}, func(pin *Pin) bool { return pin.ConnectionID == connID }, true)
}

// Target returns the target the session is pinned to on the combo (see ComboTarget.Find).
func (p *Pins) Target(s Session, combo string) (ComboTarget, bool) {
	pin, ok := p.lookup(PinKey{s, ComboScope(combo)})
	return pin.Target, ok
}

// UseTarget records that the target served the session on the combo (UseConnection's rules).
func (p *Pins) UseTarget(s Session, combo string, t ComboTarget) PinEvent {
	return p.use(PinKey{s, ComboScope(combo)}, func(pin *Pin) bool { return pin.Target.same(t) },
		func(pin *Pin) { pin.Target = t })
}

// TargetFailed records a failure of the target for the session on the combo
// (ConnectionFailed's rules).
func (p *Pins) TargetFailed(s Session, combo string, t ComboTarget) PinEvent {
	return p.failed(PinKey{s, ComboScope(combo)}, func(pin *Pin) bool { return pin.Target.same(t) }, false)
}

// EvictTarget clears the session's pin on the combo if it holds the target: the request failed
// over away from it.
func (p *Pins) EvictTarget(s Session, combo string, t ComboTarget) PinEvent {
	return p.failed(PinKey{s, ComboScope(combo)}, func(pin *Pin) bool { return pin.Target.same(t) }, true)
}

// OnConnection is how many sessions are pinned to the connection now (0 while affinity is off).
func (p *Pins) OnConnection(connID int64) int {
	ttl := p.TTL()
	if ttl == 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweep(p.clock.Now(), ttl) // the count is of live pins
	return p.perConn[connID]
}

// Len is the number of pins held (expired ones not yet swept included).
func (p *Pins) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.t.len()
}

// ForgetConnection drops the pins that hold a deleted connection.
func (p *Pins) ForgetConnection(connID int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perConn[connID] == 0 {
		return
	}
	for el := p.t.lru.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*ttlEntry[PinKey, Pin]); e.val.ConnectionID == connID {
			p.drop(e)
		}
		el = next
	}
}

// Sweep drops expired pins (every pin while affinity is off), at most sweepBatch of them, and
// returns how many it dropped.
func (p *Pins) Sweep() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sweep(p.clock.Now(), p.TTL())
}

// RunSweeper sweeps every interval until ctx ends.
func (p *Pins) RunSweeper(ctx context.Context, interval time.Duration) {
	runEvery(ctx, p.clock, interval, func() { p.Sweep() })
}

// lookup returns the live pin of a key; an expired one is dropped.
func (p *Pins) lookup(k PinKey) (Pin, bool) {
	ttl := p.TTL()
	if ttl == 0 {
		return Pin{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.t.get(k)
	if e == nil {
		return Pin{}, false
	}
	if expired(e.used, p.clock.Now(), ttl) {
		p.drop(e)
		return Pin{}, false
	}
	return e.val, true
}

func (p *Pins) use(k PinKey, holds func(*Pin) bool, set func(*Pin)) PinEvent {
	ttl := p.TTL()
	if ttl == 0 {
		return PinUnchanged
	}
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.t.get(k)
	if e == nil {
		p.makeRoom(now, ttl)
		pin := Pin{Session: k.Session, Scope: k.Scope, UsedAt: now}
		set(&pin)
		e = p.t.add(k, pin, now)
		p.index(&e.val, 1)
		p.save(e)
		return PinMade
	}
	ev := PinExtended
	switch {
	case expired(e.used, now, ttl):
		ev = PinMade
	case !holds(&e.val):
		ev = PinMoved
	}
	before := e.val
	p.index(&e.val, -1)
	set(&e.val) // also when it holds the same: a combo target found under its key may have moved
	p.index(&e.val, 1)
	e.val.Failures = 0
	e.val.UsedAt = now
	p.t.touch(e, now)
	if ev != PinExtended || before.Failures != 0 || before.Target != e.val.Target || now.Sub(e.saved) >= min(pinSaveGap, ttl/8) {
		p.save(e)
	}
	return ev
}

// failed counts a failure against the pin of k when it holds what failed; evict clears the pin
// at once instead (the request failed over away from it).
func (p *Pins) failed(k PinKey, holds func(*Pin) bool, evict bool) PinEvent {
	ttl := p.TTL()
	if ttl == 0 {
		return PinUnchanged
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.t.get(k)
	if e == nil || !holds(&e.val) {
		return PinUnchanged
	}
	if evict {
		p.drop(e)
		return PinCleared
	}
	if expired(e.used, p.clock.Now(), ttl) {
		p.drop(e)
		return PinUnchanged
	}
	e.val.Failures++
	if e.val.Failures >= PinFailuresToClear {
		p.drop(e)
		return PinCleared
	}
	p.save(e)
	return PinCounted
}

// makeRoom drops expired pins, then the least recently used until one more fits. Called with
// mu held.
func (p *Pins) makeRoom(now time.Time, ttl time.Duration) {
	for e := p.t.oldest(); e != nil && (p.t.len() >= p.t.limit || expired(e.used, now, ttl)); e = p.t.oldest() {
		p.drop(e)
	}
}

// sweep drops up to sweepBatch expired pins (any while ttl is 0). Called with mu held.
func (p *Pins) sweep(now time.Time, ttl time.Duration) int {
	n := 0
	for e := p.t.oldest(); e != nil && n < sweepBatch && (ttl == 0 || expired(e.used, now, ttl)); e = p.t.oldest() {
		p.drop(e)
		n++
	}
	return n
}

// index counts a provider pin for its connection (d = 1) or stops counting it (d = -1). Called
// with mu held.
func (p *Pins) index(pin *Pin, d int) {
	if pin.ConnectionID == 0 {
		return
	}
	if n := p.perConn[pin.ConnectionID] + d; n > 0 {
		p.perConn[pin.ConnectionID] = n
	} else {
		delete(p.perConn, pin.ConnectionID)
	}
}

// save hands a copy of the pin to the persist hook. Called with mu held.
func (p *Pins) save(e *ttlEntry[PinKey, Pin]) {
	cp := e.val
	e.saved = cp.UsedAt
	p.persist(e.key, &cp)
}

// drop removes a pin and tells the persist hook. Called with mu held.
func (p *Pins) drop(e *ttlEntry[PinKey, Pin]) {
	p.forget(e)
	p.persist(e.key, nil)
}

// forget removes a pin from memory only. Called with mu held.
func (p *Pins) forget(e *ttlEntry[PinKey, Pin]) {
	p.index(&e.val, -1)
	p.t.remove(e)
}

// Claude Code session bindings (services/proxy/oauth_session.go): a Claude Code session is
// bound to the Claude account that first served it, which sees its ids as they came; every other
// account sees ids derived for it. The bindings are persisted like the pins, so a session keeps
// its account across a restart.

const (
	// SessionBindTTL is how long a session stays bound to its account after its last request.
	SessionBindTTL = 24 * time.Hour
	// MaxSessionBinds bounds the bindings held (about 150 bytes each).
	MaxSessionBinds = 50_000
)

// SessionBind binds a Claude Code session to an account; it is persisted.
type SessionBind struct {
	Session Session `json:"session"`
	// Account is the account's uuid, or "connection:<id>" when it has none.
	Account string `json:"account"`
	// SeenAt is the session's last request; the binding expires a TTL after.
	SeenAt time.Time `json:"seen_at"`
}

// SessionBinds is the table of Claude Code session bindings.
type SessionBinds struct {
	clock   clockwork.Clock
	ttl     time.Duration
	persist func(Session, *SessionBind)

	mu sync.Mutex
	t  ttlTable[Session, SessionBind]
}

// NewSessionBinds builds the table: bindings last ttl after their last request, at most limit
// are held (the least recently used evicted first). persist (may be nil) receives every changed
// binding (nil = deleted) and must not block.
func NewSessionBinds(clock clockwork.Clock, ttl time.Duration, limit int, persist func(Session, *SessionBind)) *SessionBinds {
	return &SessionBinds{clock: clock, ttl: ttl, persist: orDrop2(persist), t: newTTLTable[Session, SessionBind](limit)}
}

// Bind returns the account the session is bound to, binding it to account when it is bound to
// none (or its binding expired). Either way the binding lasts another TTL from now.
func (b *SessionBinds) Bind(s Session, account string) string {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.t.get(s)
	if e == nil {
		for old := b.t.oldest(); old != nil && (b.t.len() >= b.t.limit || expired(old.used, now, b.ttl)); old = b.t.oldest() {
			b.drop(old)
		}
		e = b.t.add(s, SessionBind{Session: s, Account: account, SeenAt: now}, now)
		b.save(e)
		return account
	}
	changed := false
	if expired(e.used, now, b.ttl) && e.val.Account != account {
		e.val.Account, changed = account, true
	}
	e.val.SeenAt = now
	b.t.touch(e, now)
	if changed || now.Sub(e.saved) >= min(pinSaveGap, b.ttl/8) {
		b.save(e)
	}
	return e.val.Account
}

// Load installs bindings read at start; expired ones are not installed and are deleted from the
// store; past the bound the most recent are kept.
func (b *SessionBinds) Load(bs []SessionBind) {
	now := b.clock.Now()
	bs = slices.Clone(bs)
	slices.SortStableFunc(bs, func(x, y SessionBind) int { return x.SeenAt.Compare(y.SeenAt) })
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, v := range bs {
		if b.t.get(v.Session) != nil {
			continue
		}
		if expired(v.SeenAt, now, b.ttl) || v.Account == "" {
			b.persist(v.Session, nil)
			continue
		}
		e := b.t.add(v.Session, v, v.SeenAt)
		e.saved = v.SeenAt
	}
	for b.t.len() > b.t.limit {
		b.drop(b.t.oldest())
	}
}

// Apply installs a binding as another replica recorded it for s, or deletes s's binding when
// bind is nil, without persisting either. A binding already expired when it arrives, or without
// an account, is not installed; the one held here, if any, expires by its own last request.
// Past the bound the least recently used bindings leave this replica's memory only.
func (b *SessionBinds) Apply(s Session, bind *SessionBind) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if bind == nil {
		if e := b.t.get(s); e != nil {
			b.t.remove(e)
		}
		return
	}
	if bind.Account == "" || expired(bind.SeenAt, now, b.ttl) {
		return
	}
	v := *bind
	v.Session = s
	e := b.t.set(s, v, v.SeenAt)
	e.saved = v.SeenAt
	for b.t.len() > b.t.limit {
		b.t.remove(b.t.oldest())
	}
}

// Len is the number of bindings held.
func (b *SessionBinds) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.t.len()
}

// Sweep drops up to sweepBatch expired bindings and returns how many it dropped.
func (b *SessionBinds) Sweep() int {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.t.sweep(now, b.ttl, b.drop)
}

// RunSweeper sweeps every interval until ctx ends.
func (b *SessionBinds) RunSweeper(ctx context.Context, interval time.Duration) {
	runEvery(ctx, b.clock, interval, func() { b.Sweep() })
}

func (b *SessionBinds) save(e *ttlEntry[Session, SessionBind]) {
	cp := e.val
	e.saved = cp.SeenAt
	b.persist(e.key, &cp)
}

func (b *SessionBinds) drop(e *ttlEntry[Session, SessionBind]) {
	b.t.remove(e)
	b.persist(e.key, nil)
}

// expired reports whether something last used at used has expired at now.
func expired(used, now time.Time, ttl time.Duration) bool { return now.Sub(used) >= ttl }

// ttlTable is an LRU table of entries that expire a TTL after their last use. Its list is in
// order of last use, most recent first, so the expired entries are always at its back: a sweep
// and making room walk only what they drop. Not safe for concurrent use.
type ttlTable[K comparable, V any] struct {
	limit int
	byKey map[K]*list.Element
	lru   list.List // of *ttlEntry[K, V]
}

type ttlEntry[K comparable, V any] struct {
	key   K
	val   V
	used  time.Time // the last use
	saved time.Time // the last use handed to the persist hook
	el    *list.Element
}

func newTTLTable[K comparable, V any](limit int) ttlTable[K, V] {
	return ttlTable[K, V]{limit: limit, byKey: map[K]*list.Element{}}
}

func (t *ttlTable[K, V]) get(k K) *ttlEntry[K, V] {
	if el, ok := t.byKey[k]; ok {
		return el.Value.(*ttlEntry[K, V])
	}
	return nil
}

// add inserts a new entry as the most recently used.
func (t *ttlTable[K, V]) add(k K, v V, used time.Time) *ttlEntry[K, V] {
	e := &ttlEntry[K, V]{key: k, val: v, used: used}
	e.el = t.lru.PushFront(e)
	t.byKey[k] = e.el
	return e
}

// set stores v under k as last used at used, where the order of last use puts it: a use
// recorded on another replica may be older than the newest here. The walk starts at the front,
// where recent uses go.
func (t *ttlTable[K, V]) set(k K, v V, used time.Time) *ttlEntry[K, V] {
	e := t.get(k)
	if e == nil {
		e = &ttlEntry[K, V]{key: k}
		e.el = t.lru.PushFront(e)
		t.byKey[k] = e.el
	}
	e.val, e.used = v, used
	for el := t.lru.Front(); el != nil; el = el.Next() {
		if el != e.el && !el.Value.(*ttlEntry[K, V]).used.After(used) {
			t.lru.MoveBefore(e.el, el)
			return e
		}
	}
	t.lru.MoveToBack(e.el)
	return e
}

// touch marks an entry used at now.
func (t *ttlTable[K, V]) touch(e *ttlEntry[K, V], now time.Time) {
	e.used = now
	t.lru.MoveToFront(e.el)
}

func (t *ttlTable[K, V]) remove(e *ttlEntry[K, V]) {
	delete(t.byKey, e.key)
	t.lru.Remove(e.el)
}

// oldest is the least recently used entry, nil when the table is empty.
func (t *ttlTable[K, V]) oldest() *ttlEntry[K, V] {
	if el := t.lru.Back(); el != nil {
		return el.Value.(*ttlEntry[K, V])
	}
	return nil
}

func (t *ttlTable[K, V]) len() int { return t.lru.Len() }

// sweep hands up to sweepBatch entries expired at now to drop, the oldest first, and returns how
// many it handed.
func (t *ttlTable[K, V]) sweep(now time.Time, ttl time.Duration, drop func(*ttlEntry[K, V])) int {
	n := 0
	for e := t.oldest(); e != nil && n < sweepBatch && expired(e.used, now, ttl); e = t.oldest() {
		drop(e)
		n++
	}
	return n
}

// runEvery calls fn every interval on the clock until ctx ends.
func runEvery(ctx context.Context, clock clockwork.Clock, interval time.Duration, fn func()) {
	t := clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			fn()
		}
	}
}
