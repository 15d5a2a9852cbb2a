package routing

import (
	"sync"
	"sync/atomic"
)

// Published holds the current immutable snapshot of a registry (this package's combos, the
// catalog's providers and connections) and the functions told of each new one. Reading it is one
// atomic load, so the engine's hot path takes no lock. The zero value holds nothing.
type Published[T any] struct {
	cur atomic.Pointer[T]

	mu        sync.Mutex // guards listeners
	listeners []func(*T)
}

// Load returns the current snapshot (nil before the first Store).
func (p *Published[T]) Load() *T { return p.cur.Load() }

// OnChange registers fn to run after every later Store; registering never replaces an earlier
// fn.
func (p *Published[T]) OnChange(fn func(*T)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listeners = append(p.listeners, fn)
}

// Store swaps in v and hands it to every listener, in the order they were registered. Callers
// serialise their Stores, so listeners see the snapshots in the order they were stored.
func (p *Published[T]) Store(v *T) {
	p.cur.Store(v)
	p.mu.Lock()
	listeners := p.listeners
	p.mu.Unlock()
	for _, fn := range listeners {
		fn(v)
	}
}
