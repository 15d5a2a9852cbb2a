package resilience

import (
	"sync"

	"github.com/jonboulle/clockwork"
)

// stateTable is what the in-memory state tables (connection cooldowns, target cooldowns, account
// usage) share: the clock their times come from, the persist hook every change goes to, and the
// states by key under one lock. The tables embed it and keep their own rules.
type stateTable[K comparable, V any] struct {
	clock   clockwork.Clock
	persist func(V)

	mu sync.RWMutex
	m  map[K]*V // only keys with something to remember
}

// newStateTable builds an empty table; persist (may be nil) must not block.
func newStateTable[K comparable, V any](clock clockwork.Clock, persist func(V)) stateTable[K, V] {
	return stateTable[K, V]{clock: clock, persist: orDrop(persist), m: map[K]*V{}}
}

// load installs states read at start, each under key(state).
func (t *stateTable[K, V]) load(list []V, key func(*V) K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range list {
		t.m[key(&v)] = &v
	}
}

// apply installs a state another replica recorded under k, or deletes k's state when v is nil.
// Nothing is persisted: the replica that made the change already did.
func (t *stateTable[K, V]) apply(k K, v *V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v == nil {
		delete(t.m, k)
		return
	}
	cp := *v
	t.m[k] = &cp
}
