package resilience

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// sweptTable is a ttlTable behind a mutex whose entries expire ttl after their last use: the
// in-memory tables that are neither persisted nor shared (StoredPins, ReplayMemory). Its
// methods Len, Sweep and RunSweeper are the tables' own.
type sweptTable[K comparable, V any] struct {
	clock clockwork.Clock
	ttl   time.Duration
	mu    sync.Mutex
	t     ttlTable[K, V]
	// onDrop is told of each entry dropped, with mu held (nil = nobody).
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
	s.t.add(k, v, now)
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
