package resilience

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// LockoutScope says which status class chose a lockout's width.
type LockoutScope string

// Lockout scopes (PRODUCT.md §3.6).
const (
	// LockoutFamily: a quota or permission signal (429, 402, 403) locks the model's quota family
	// on the connection: "family:<name>" when the provider's families list the model, else the
	// model alone (each unlisted model is its own family).
	LockoutFamily LockoutScope = "family"
	// LockoutModel: a 404 locks the model on the connection.
	LockoutModel LockoutScope = "model"
	// LockoutExact: any other status (5xx, a synthetic 502) locks only the exact
	// provider/connection/model tuple: one broken answer says nothing about the quota.
	LockoutExact LockoutScope = "exact"
)

// Target prefixes. A model target is the bare model name, so a model literally named
// "family:…" or "exact:…" would share keys with these; no provider uses such names.
const (
	familyTargetPrefix = "family:"
	exactTargetPrefix  = "exact:"
)

// MaxLockouts bounds the lockout table. Model names come from clients, so a client sending
// made-up models that each 404 must not grow memory without limit. Past the bound, entries
// that are no longer locking are dropped first; then the lockout that would expire soonest
// (the newcomer included) is evicted, so the table keeps the lockouts with the most time left.
const MaxLockouts = 10_000

// LockoutSweepInterval is how often RunSweeper drops forgotten entries.
const LockoutSweepInterval = 15 * time.Second

// LockoutConfig is settings.ModelLockout in engine units.
type LockoutConfig struct {
	// Enabled is the master switch; false = RecordFailure records nothing and Check always
	// passes (existing entries stay, inert, until they run out or are cleared). Default false.
	Enabled bool
	// ErrorCodes are the statuses that lock (529 with 503). Default [403, 404, 429, 502, 503, 504].
	ErrorCodes []int
	// Base is the first lockout; repeated failures double it. Default 2 min.
	Base time.Duration
	// Max caps computed lockouts (verified upstream resets are honoured above it, up to
	// MaxResetHint) and is also the escalation tail: a failure within Max after a lockout ran
	// out escalates it. Default 30 min.
	Max time.Duration
	// MaxSteps caps the exponent: lockout = Base × 2^min(count−1, MaxSteps). Default 10.
	MaxSteps int
	// Exponential doubles the lockout per repeated failure; false = always Base. Default true.
	Exponential bool
	// Families groups models that share a quota: provider → family name → patterns (an exact
	// model name, or a prefix ending in "*" such as "claude-opus-*"). Default empty: each
	// model is its own family. Copied by SetConfig.
	Families map[string]map[string][]string
}

// LockoutKey identifies one lockout: the persisted primary key.
type LockoutKey struct {
	Provider     string `json:"provider"`
	ConnectionID int64  `json:"connection_id"`
	// Target is "family:<name>", the model itself, or "exact:<model>".
	Target string `json:"target"`
}

// Lockout is one model lockout on one connection.
type Lockout struct {
	Provider     string `json:"provider"`
	ConnectionID int64  `json:"connection_id"`
	// Model is the model whose failure set (or last raised) the lockout.
	Model string `json:"model"`
	// Target is what is locked: "family:<name>", the model itself, or "exact:<model>".
	Target string       `json:"target"`
	Scope  LockoutScope `json:"scope"`
	// Reason is the caller's reason for the last failure that set the lockout (the
	// classifier's reason, e.g. "rate_limit").
	Reason string `json:"reason,omitempty"`
	// FailureCount is the number of escalating failures; success decay halves it.
	FailureCount int       `json:"failure_count"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// Key returns the lockout's key.
func (l Lockout) Key() LockoutKey {
	return LockoutKey{Provider: l.Provider, ConnectionID: l.ConnectionID, Target: l.Target}
}

// Remaining is the time left at now; 0 once expired.
func (l Lockout) Remaining(now time.Time) time.Duration {
	return max(l.ExpiresAt.Sub(now), 0)
}

// Active reports whether the lockout still locks at now.
func (l Lockout) Active(now time.Time) bool { return now.Before(l.ExpiresAt) }

// targetKind is the kind of a lockout target.
type targetKind uint8

const (
	kindModel targetKind = iota
	kindFamily
	kindExact
)

// lockKey is the in-memory key: the target split into kind and name so Check can look up the
// exact and family targets without building strings.
type lockKey struct {
	provider string
	conn     int64
	kind     targetKind
	name     string // model name, or family name for kindFamily
}

// connKey is a connection of a provider.
type connKey struct {
	provider string
	conn     int64
}

func (k lockKey) connection() connKey { return connKey{k.provider, k.conn} }

func (k lockKey) public() LockoutKey {
	t := k.name
	switch k.kind {
	case kindFamily:
		t = familyTargetPrefix + k.name
	case kindExact:
		t = exactTargetPrefix + k.name
	}
	return LockoutKey{Provider: k.provider, ConnectionID: k.conn, Target: t}
}

// parseTarget splits a stored target into kind and name.
func parseTarget(target string) (targetKind, string) {
	if name, ok := strings.CutPrefix(target, familyTargetPrefix); ok {
		return kindFamily, name
	}
	if name, ok := strings.CutPrefix(target, exactTargetPrefix); ok {
		return kindExact, name
	}
	return kindModel, target
}

// lockoutConf is a LockoutConfig prepared for the hot path.
type lockoutConf struct {
	LockoutConfig
	families map[string]*familyIndex // by provider
}

// familyIndex matches the models of one provider to their family.
type familyIndex struct {
	exact    map[string]string // model → family name
	prefixes []familyPrefix    // longest prefix first
}

type familyPrefix struct{ prefix, family string }

func compileFamilies(m map[string]map[string][]string) map[string]*familyIndex {
	out := make(map[string]*familyIndex, len(m))
	for provider, fams := range m {
		idx := &familyIndex{exact: map[string]string{}}
		for _, name := range slices.Sorted(maps.Keys(fams)) {
			if name == "" {
				continue
			}
			for _, p := range fams[name] {
				if prefix, ok := strings.CutSuffix(p, "*"); ok {
					idx.prefixes = append(idx.prefixes, familyPrefix{prefix, name})
				} else if _, dup := idx.exact[p]; p != "" && !dup { // first family (by name) wins
					idx.exact[p] = name
				}
			}
		}
		// A model matching several prefixes belongs to the most specific one; ties go to the
		// family first by name, so the choice never depends on map order.
		slices.SortStableFunc(idx.prefixes, func(a, b familyPrefix) int {
			return cmp.Or(cmp.Compare(len(b.prefix), len(a.prefix)), cmp.Compare(a.family, b.family))
		})
		if len(idx.exact) > 0 || len(idx.prefixes) > 0 {
			out[provider] = idx
		}
	}
	return out
}

// familyOf returns the family of model on provider; exact names win over prefixes.
func (c *lockoutConf) familyOf(provider, model string) (string, bool) {
	idx := c.families[provider]
	if idx == nil {
		return "", false
	}
	if f, ok := idx.exact[model]; ok {
		return f, true
	}
	for _, p := range idx.prefixes {
		if strings.HasPrefix(model, p.prefix) {
			return p.family, true
		}
	}
	return "", false
}

// locks reports whether status is one of the configured error codes. 529 is Anthropic's
// "overloaded", what other upstreams answer with 503: it locks wherever 503 does.
func (c *lockoutConf) locks(status int) bool {
	return slices.Contains(c.ErrorCodes, status) || status == 529 && slices.Contains(c.ErrorCodes, 503)
}

// target picks the key a failure with status writes to.
func (c *lockoutConf) target(provider string, connID int64, model string, status int) (lockKey, LockoutScope) {
	switch status {
	case 429, 402, 403:
		if fam, ok := c.familyOf(provider, model); ok {
			return lockKey{provider, connID, kindFamily, fam}, LockoutFamily
		}
		return lockKey{provider, connID, kindModel, model}, LockoutFamily
	case 404:
		return lockKey{provider, connID, kindModel, model}, LockoutModel
	}
	return lockKey{provider, connID, kindExact, model}, LockoutExact
}

// covering returns the keys that can lock model on the connection: the model, its exact
// tuple and its family. A fixed array keeps Check free of allocations.
func (c *lockoutConf) covering(provider string, connID int64, model string) ([3]lockKey, int) {
	keys := [3]lockKey{
		{provider, connID, kindModel, model},
		{provider, connID, kindExact, model},
	}
	if fam, ok := c.familyOf(provider, model); ok {
		keys[2] = lockKey{provider, connID, kindFamily, fam}
		return keys, 3
	}
	return keys, 2
}

// backoff is the computed lockout for the count-th escalating failure.
func (c *lockoutConf) backoff(count int) time.Duration {
	d := c.Base
	if c.Exponential {
		for i := 0; i < min(count-1, c.MaxSteps) && d < c.Max; i++ {
			d *= 2
		}
	}
	return min(d, c.Max)
}

// Lockouts is the model lockout table (PRODUCT.md §3.6): per provider + connection + target
// (quota family, model or exact tuple), in memory, with every change handed to a persist hook.
//
// Escalation window: the reference escalates a failure that arrives within the breaker reset
// timeout plus the last applied cooldown of the previous one, i.e. during the lockout and for
// a while after it. Here a failure escalates (failure count + 1, lockout doubled) when it
// arrives within Max after the previous lockout ran out; after that the count starts again at
// 1. Failures that arrive while the lockout is still running come from requests dispatched
// before it began (Check keeps new ones away): like the connection cooldown's herd guard they
// neither raise the count nor extend the lockout, except that a longer upstream reset hint
// still lengthens it. So a burst of parallel 429s costs one base lockout, not 2^n of them.
type Lockouts struct {
	clock   clockwork.Clock
	persist func(LockoutKey, *Lockout)
	conf    atomic.Pointer[lockoutConf]
	limit   int

	mu      sync.RWMutex
	entries map[lockKey]*Lockout // expired entries stay for the escalation tail, then the sweep drops them
	perConn map[connKey]int      // entries per connection: most Checks end after this one lookup
	evicted atomic.Uint64
}

// NewLockouts builds the table with cfg. persist (may be nil) receives every changed lockout
// (a copy; nil = deleted) and must not block: hand it to a write-behind queue.
func NewLockouts(clock clockwork.Clock, cfg LockoutConfig, persist func(LockoutKey, *Lockout)) *Lockouts {
	l := &Lockouts{clock: clock, persist: orDrop2(persist), limit: MaxLockouts, entries: map[lockKey]*Lockout{},
		perConn: map[connKey]int{}}
	l.SetConfig(cfg)
	return l
}

// SetConfig installs a new configuration (at start and after every settings save). Existing
// lockouts keep their expiry; family membership is always judged by the current families.
func (l *Lockouts) SetConfig(cfg LockoutConfig) {
	cfg.ErrorCodes = slices.Clone(cfg.ErrorCodes)
	c := &lockoutConf{LockoutConfig: cfg, families: compileFamilies(cfg.Families)}
	c.Families = nil // compiled; the caller's map is not kept
	l.conf.Store(c)
}

// Load installs lockouts read at start; those already expired are dropped.
func (l *Lockouts) Load(ls []Lockout) {
	now := l.clock.Now()
	live := make([]Lockout, 0, len(ls))
	for _, e := range ls {
		if e.Active(now) && e.Provider != "" && e.Target != "" {
			live = append(live, e)
		}
	}
	// Past the bound, keep those with the most time left.
	slices.SortFunc(live, func(a, b Lockout) int { return b.ExpiresAt.Compare(a.ExpiresAt) })
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range live {
		kind, name := parseTarget(e.Target)
		k := lockKey{e.Provider, e.ConnectionID, kind, name}
		if _, exists := l.entries[k]; !exists && len(l.entries) >= l.limit {
			continue
		}
		e.FailureCount = max(e.FailureCount, 1)
		l.put(k, &e)
	}
}

// Apply installs a lockout as another replica recorded it under k, or deletes k's lockout when
// e is nil, without persisting either. The entry is stored under k whatever key fields e
// carries. A lockout that no longer locks when it arrives is not installed (the entry held here,
// if any, runs out by its own time), as Load drops expired ones; so the escalation tail of an
// expired lockout stays with the replica that saw its failures. Past MaxLockouts room is made
// as RecordFailure makes it, but what is dropped only leaves this replica's memory: the rows
// belong to every replica.
func (l *Lockouts) Apply(k LockoutKey, e *Lockout) {
	if k.Provider == "" || k.Target == "" {
		return
	}
	kind, name := parseTarget(k.Target)
	lk := lockKey{k.Provider, k.ConnectionID, kind, name}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e == nil {
		l.remove(lk)
		return
	}
	now := l.clock.Now()
	if !e.Active(now) {
		return
	}
	cp := *e
	cp.Provider, cp.ConnectionID, cp.Target = k.Provider, k.ConnectionID, k.Target
	cp.FailureCount = max(cp.FailureCount, 1)
	if _, exists := l.entries[lk]; !exists && len(l.entries) >= l.limit && !l.makeRoom(now, cp.ExpiresAt, false) {
		l.evicted.Add(1)
		return
	}
	l.put(lk, &cp)
}

// Check reports whether model may be used on the connection now: locked when the model, its
// exact tuple or its quota family has a running lockout. until and entry are those of the
// lockout that runs longest. Expired lockouts are absent (lazy recovery). Check takes a read
// lock and allocates nothing.
func (l *Lockouts) Check(provider string, connID int64, model string) (locked bool, until time.Time, entry Lockout) {
	c := l.conf.Load()
	if !c.Enabled {
		return false, time.Time{}, Lockout{}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.perConn[connKey{provider, connID}] == 0 {
		return false, time.Time{}, Lockout{}
	}
	var now time.Time
	keys, n := c.covering(provider, connID, model)
	for _, k := range keys[:n] {
		e := l.entries[k]
		if e == nil {
			continue
		}
		if now.IsZero() {
			now = l.clock.Now()
		}
		if e.Active(now) && e.ExpiresAt.After(until) {
			locked, until, entry = true, e.ExpiresAt, *e
		}
	}
	return locked, until, entry
}

// RecordFailure applies a failed answer (status) of model on the connection and returns the
// lockout now in force. It is ignored (false) when lockouts are off, the status is not one of
// the error codes, or the table is full of lockouts that run longer.
//
// The lockout is Base × 2^(count−1) (exponent capped at MaxSteps; always Base when not
// exponential), capped at Max. A hint from the upstream wins: hintVerified (a Retry-After or
// reset header, a parsed "resets in …") is honoured exactly, above Max too, up to
// MaxResetHint; an unverified hint (an estimate) replaces a shorter backoff but stays capped
// at Max. A running lockout is never shortened. See Lockouts for the escalation window.
func (l *Lockouts) RecordFailure(provider string, connID int64, model string, status int, reason string, hint time.Duration, hintVerified bool) (Lockout, bool) {
	c := l.conf.Load()
	if !c.Enabled || !c.locks(status) || model == "" {
		return Lockout{}, false
	}
	k, scope := c.target(provider, connID, model, status)
	now := l.clock.Now()

	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.entries[k]
	count := 1
	herd := prev != nil && prev.Active(now)
	switch {
	case herd:
		count = prev.FailureCount
	case prev != nil && now.Before(prev.ExpiresAt.Add(c.Max)):
		count = prev.FailureCount + 1
	}

	var d time.Duration
	if !herd {
		d = c.backoff(count)
	}
	if hint > 0 {
		if hintVerified {
			d = min(hint, MaxResetHint)
		} else {
			d = min(max(d, hint), c.Max)
		}
	}
	until := now.Add(d)
	if herd {
		if !until.After(prev.ExpiresAt) {
			return *prev, true // an in-flight request of the same burst: nothing changes
		}
	} else if d <= 0 {
		return Lockout{}, false // a zero base: nothing to lock
	}

	if prev == nil && len(l.entries) >= l.limit && !l.makeRoom(now, until, true) {
		l.evicted.Add(1)
		return Lockout{}, false
	}
	// until is later than any running lockout of k here (the herd branch returned otherwise):
	// a lockout is never shortened.
	e := &Lockout{Provider: provider, ConnectionID: connID, Model: model, Target: k.public().Target,
		Scope: scope, Reason: reason, FailureCount: count, ExpiresAt: until}
	l.put(k, e)
	l.save(k, e)
	return *e, true
}

// makeRoom frees one slot for a lockout running until: it drops every entry that no longer
// locks, else evicts the running lockout that expires soonest if it expires before until.
// With persist the drops are handed to the persist hook; without, they only leave memory.
// It reports whether there is room now. Called with mu held; O(n), only when full.
func (l *Lockouts) makeRoom(now, until time.Time, persist bool) bool {
	drop := l.remove
	if persist {
		drop = l.drop
	}
	var soonest lockKey
	var soonestAt time.Time
	found := false
	for k, e := range l.entries {
		if !e.Active(now) {
			drop(k)
			continue
		}
		if !found || e.ExpiresAt.Before(soonestAt) {
			soonest, soonestAt, found = k, e.ExpiresAt, true
		}
	}
	if len(l.entries) < l.limit {
		return true
	}
	if !found || !soonestAt.Before(until) {
		return false
	}
	drop(soonest)
	l.evicted.Add(1)
	return true
}

// Evicted counts lockouts lost to the MaxLockouts bound (evicted or refused), for a metric.
func (l *Lockouts) Evicted() uint64 { return l.evicted.Load() }

// RecordSuccess is success decay: a good answer of model on the connection halves (floor) the
// failure count of every lockout covering it (model, exact tuple, family), running or within
// its escalation tail; at 0 the lockout is deleted before its timer ends. Cheap when nothing
// covers the model: a read lock and no allocation.
func (l *Lockouts) RecordSuccess(provider string, connID int64, model string) {
	c := l.conf.Load()
	if !c.Enabled {
		return
	}
	keys, n := c.covering(provider, connID, model)
	l.mu.RLock()
	found := false
	for _, k := range keys[:n] {
		if l.perConn[k.connection()] == 0 {
			break
		}
		if l.entries[k] != nil {
			found = true
			break
		}
	}
	l.mu.RUnlock()
	if !found {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys[:n] {
		e := l.entries[k]
		if e == nil {
			continue
		}
		if e.FailureCount /= 2; e.FailureCount == 0 {
			l.drop(k)
		} else {
			l.save(k, e)
		}
	}
}

// List returns the lockouts running at now, the soonest to end first.
func (l *Lockouts) List(now time.Time) []Lockout {
	l.mu.RLock()
	out := make([]Lockout, 0, len(l.entries))
	for _, e := range l.entries {
		if e.Active(now) {
			out = append(out, *e)
		}
	}
	l.mu.RUnlock()
	slices.SortFunc(out, func(a, b Lockout) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.Provider, b.Provider),
			cmp.Compare(a.ConnectionID, b.ConnectionID), cmp.Compare(a.Target, b.Target))
	})
	return out
}

// Clear re-enables model on one connection: it deletes every lockout covering it (its model,
// exact and family targets, and any entry set by that model). model may also be a listed
// Target ("family:opus"). The failure count goes with it. It returns how many running
// lockouts it removed.
func (l *Lockouts) Clear(provider string, connID int64, model string) int {
	return l.clear(func(k lockKey, e *Lockout, fam string, hasFam bool) bool {
		return k.provider == provider && k.conn == connID && coversModel(k, e, model, fam, hasFam)
	}, provider, model)
}

// ClearModel re-enables model on every connection of provider, like Clear.
func (l *Lockouts) ClearModel(provider, model string) int {
	return l.clear(func(k lockKey, e *Lockout, fam string, hasFam bool) bool {
		return k.provider == provider && coversModel(k, e, model, fam, hasFam)
	}, provider, model)
}

// ClearAll deletes every lockout and returns how many were running.
func (l *Lockouts) ClearAll() int {
	return l.clear(func(lockKey, *Lockout, string, bool) bool { return true }, "", "")
}

// ForgetConnection drops the lockouts of a deleted connection (its rows go by cascade).
func (l *Lockouts) ForgetConnection(connID int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.entries {
		if k.conn == connID {
			l.remove(k)
		}
	}
}

// coversModel reports whether the entry at k locks model (whose family is fam, if hasFam), was
// set by it, or is the target named by model.
func coversModel(k lockKey, e *Lockout, model, fam string, hasFam bool) bool {
	switch {
	case e.Model == model || e.Target == model:
		return true
	case k.kind == kindFamily:
		return hasFam && k.name == fam
	}
	return k.name == model
}

func (l *Lockouts) clear(match func(k lockKey, e *Lockout, fam string, hasFam bool) bool, provider, model string) int {
	fam, hasFam := l.conf.Load().familyOf(provider, model)
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, e := range l.entries {
		if match(k, e, fam, hasFam) {
			if e.Active(now) {
				n++
			}
			l.drop(k)
		}
	}
	return n
}

// Sweep drops entries whose escalation tail (Max after expiry) has passed, and returns how
// many it dropped. Expired entries already count as absent; the sweep only frees memory and
// deletes their rows.
func (l *Lockouts) Sweep() int {
	tail := l.conf.Load().Max
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, e := range l.entries {
		if !now.Before(e.ExpiresAt.Add(tail)) {
			l.drop(k)
			n++
		}
	}
	return n
}

// RunSweeper sweeps every interval until ctx ends.
func (l *Lockouts) RunSweeper(ctx context.Context, interval time.Duration) {
	runEvery(ctx, l.clock, interval, func() { l.Sweep() })
}

// Now is the lockout table's clock.
func (l *Lockouts) Now() time.Time { return l.clock.Now() }

// save hands a copy of e to the persist hook. Called with mu held.
func (l *Lockouts) save(k lockKey, e *Lockout) {
	cp := *e
	l.persist(k.public(), &cp)
}

// put stores an entry. Called with mu held.
func (l *Lockouts) put(k lockKey, e *Lockout) {
	if _, exists := l.entries[k]; !exists {
		l.perConn[k.connection()]++
	}
	l.entries[k] = e
}

// remove deletes an entry. Called with mu held.
func (l *Lockouts) remove(k lockKey) {
	if _, exists := l.entries[k]; !exists {
		return
	}
	delete(l.entries, k)
	if c := k.connection(); l.perConn[c] <= 1 {
		delete(l.perConn, c)
	} else {
		l.perConn[c]--
	}
}

// drop deletes an entry and tells the persist hook. Called with mu held.
func (l *Lockouts) drop(k lockKey) {
	l.remove(k)
	l.persist(k.public(), nil)
}
