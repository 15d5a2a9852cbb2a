package resilience

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// sweptTable is a ttlTable behind a mutex whose entries expire ttl after their last use, swept
// by a runner of its own (sharedTable: StoredPins, ReplayMemory). Its methods Len, Sweep and
// RunSweeper are the tables' own.
type sweptTable[K comparable, V any] struct {
	clock clockwork.Clock
	ttl   time.Duration
	mu    sync.Mutex
	t     ttlTable[K, V]
	// onAdd and onDrop are told of each entry added and dropped, with mu held (nil = nobody).
	onAdd  func(*ttlEntry[K, V])
	onDrop func(*ttlEntry[K, V])
}

func newSweptTable[K comparable, V any](clock clockwork.Clock, ttl time.Duration, limit int) sweptTable[K, V] {
	return sweptTable[K, V]{clock: clock, ttl: ttl, t: newTTLTable[K, V](limit)}
}

// live is k's entry unless it expired (then it is dropped), marked used at now. Called with mu
// held.
func (s *sweptTable[K, V]) live(k K, now time.Time) *ttlEntry[K, V] {
	e := s.t.get(k)
	if e == nil {
		return nil
	}
	if expired(e.used, now, s.ttl) {
		s.drop(e)
		return nil
	}
	s.t.touch(e, now)
	return e
}

// put stores v under k, used at now: over an entry held, else after making room (the expired
// and the least recently used go). It reports whether the entry is new. Called with mu held.
func (s *sweptTable[K, V]) put(k K, v V, now time.Time) bool {
	if e := s.t.get(k); e != nil {
		e.val = v
		s.t.touch(e, now)
		return false
	}
	for e := s.t.oldest(); e != nil && (s.t.len() >= s.t.limit || expired(e.used, now, s.ttl)); e = s.t.oldest() {
		s.drop(e)
	}
	e := s.t.add(k, v, now)
	if s.onAdd != nil {
		s.onAdd(e)
	}
	return true
}

// drop removes an entry. Called with mu held.
func (s *sweptTable[K, V]) drop(e *ttlEntry[K, V]) {
	if s.onDrop != nil {
		s.onDrop(e)
	}
	s.t.remove(e)
}

// Len is the number of entries held, expired ones not yet swept included.
func (s *sweptTable[K, V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.len()
}

// Sweep drops up to sweepBatch expired entries and returns how many it dropped.
func (s *sweptTable[K, V]) Sweep() int {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.sweep(now, s.ttl, s.drop)
}

// RunSweeper sweeps every interval until ctx ends.
func (s *sweptTable[K, V]) RunSweeper(ctx context.Context, interval time.Duration) {
	runEvery(ctx, s.clock, interval, func() { s.Sweep() })
}

// sharedValue is what a sharedTable holds: a value that names its key and its last use.
type sharedValue[K comparable, V any] interface {
	tableKey() K
	lastUse() time.Time
	// keyed is the value under key k (a record's value says its key again; the record's id
	// decides).
	keyed(k K) V
}

// sharedTable is a sweptTable persisted through the state store and shared with the other
// replicas. persist receives every entry made or changed (a copy) and every entry dropped
// (nil), except what is dropped while another replica's records are installed (Apply): those
// rows belong to every replica. A use only moves an entry up in memory, so after a restart an
// entry lasts ttl from when it was made or changed.
type sharedTable[K comparable, V sharedValue[K, V]] struct {
	sweptTable[K, V]
	persist func(K, *V)
	quiet   bool // guarded by mu
}

func newSharedTable[K comparable, V sharedValue[K, V]](clock clockwork.Clock, ttl time.Duration, limit int, persist func(K, *V)) sharedTable[K, V] {
	return sharedTable[K, V]{sweptTable: newSweptTable[K, V](clock, ttl, limit), persist: orDrop2(persist)}
}

// dropped is the persisting part of onDrop; a table's own onDrop calls it. Called with mu held.
func (s *sharedTable[K, V]) dropped(e *ttlEntry[K, V]) {
	if !s.quiet {
		s.persist(e.key, nil)
	}
}

// store puts v under its key, used at now, and persists it. Called with mu held.
func (s *sharedTable[K, V]) store(v V, now time.Time) {
	k := v.tableKey()
	s.put(k, v, now)
	s.persist(k, &v)
}

// load installs entries read at start (or at a resync), each where its last use puts it;
// expired ones are deleted from the store, and past the bound the most recently used are kept.
// valid (nil = all) says which values are whole; the others are deleted too.
func (s *sharedTable[K, V]) load(vs []V, valid func(*V) bool) {
	now := s.clock.Now()
	vs = slices.Clone(vs)
	slices.SortStableFunc(vs, func(a, b V) int { return a.lastUse().Compare(b.lastUse()) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vs {
		k, used := v.tableKey(), v.lastUse()
		if expired(used, now, s.ttl) || (valid != nil && !valid(&v)) {
			s.persist(k, nil)
			continue
		}
		_, had := s.t.byKey[k]
		if e := s.t.set(k, v, used); !had && s.onAdd != nil {
			s.onAdd(e)
		}
	}
	for s.t.len() > s.t.limit {
		s.drop(s.t.oldest())
	}
}

// Apply installs an entry as another replica recorded it under k, or forgets k's entry when v
// is nil, without persisting either.
func (s *sharedTable[K, V]) Apply(k K, v *V) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quiet = true
	defer func() { s.quiet = false }()
	if v == nil {
		if e := s.t.get(k); e != nil {
			s.drop(e)
		}
		return
	}
	if expired((*v).lastUse(), now, s.ttl) {
		return
	}
	s.put(k, (*v).keyed(k), now)
}
