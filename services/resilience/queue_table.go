package resilience

import (
	"maps"
	"sync"
	"sync/atomic"
)

// connTable maps connection ids to per-connection state. A read is one atomic load and a map
// lookup, so the proxy's hot path takes no lock; adding a connection copies the map, which
// happens once per connection (connections number in the tens or hundreds, not millions).
type connTable[T any] struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[int64]*T]
}

// lookup returns the state of id, or nil when there is none.
func (t *connTable[T]) lookup(id int64) *T {
	if m := t.m.Load(); m != nil {
		return (*m)[id]
	}
	return nil
}

// get returns the state of id, creating it with mk on first use. mk is a plain function, not
// a closure, so the lookup allocates nothing.
func (t *connTable[T]) get(id int64, mk func(int64) *T) *T {
	if v := t.lookup(id); v != nil {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.m.Load()
	if old != nil {
		if v := (*old)[id]; v != nil {
			return v
		}
	}
	next := make(map[int64]*T, 1+lenOf(old))
	if old != nil {
		maps.Copy(next, *old)
	}
	v := mk(id)
	next[id] = v
	t.m.Store(&next)
	return v
}

// forget drops the state of id; holders of the old state keep working on it.
func (t *connTable[T]) forget(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.m.Load()
	if old == nil {
		return
	}
	if _, ok := (*old)[id]; !ok {
		return
	}
	next := maps.Clone(*old)
	delete(next, id)
	t.m.Store(&next)
}

// all returns the current map; callers must not modify it.
func (t *connTable[T]) all() map[int64]*T {
	if m := t.m.Load(); m != nil {
		return *m
	}
	return nil
}

// statsOf reads the counters of id's state with stats, zero when there is none.
func statsOf[T, S any](t *connTable[T], id int64, stats func(*T) S) S {
	if v := t.lookup(id); v != nil {
		return stats(v)
	}
	var zero S
	return zero
}

// allStats reads the counters of every state with stats.
func allStats[T, S any](t *connTable[T], stats func(*T) S) map[int64]S {
	all := t.all()
	out := make(map[int64]S, len(all))
	for id, v := range all {
		out[id] = stats(v)
	}
	return out
}

func lenOf[T any](m *map[int64]*T) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
