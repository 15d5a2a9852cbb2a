// Package writebehind persists state changes off the request path: callers mark keys dirty in
// memory and one goroutine writes the latest value of each dirty key in batches.
package writebehind

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Queue coalesces changes by key; only the newest value of a key is written.
type Queue[K comparable, V any] struct {
	write func(ctx context.Context, batch map[K]V) error
	log   *slog.Logger
	name  string

	// flushMu serialises flushes, so a Flush that returns has seen every earlier batch written
	// (or failed): a change Put before Flush was called is committed when Flush returns nil.
	flushMu sync.Mutex
	mu      sync.Mutex
	dirty   map[K]V
	kick    chan struct{}
}

// New builds a queue whose write persists one batch (in one transaction, ideally).
func New[K comparable, V any](name string, log *slog.Logger, write func(ctx context.Context, batch map[K]V) error) *Queue[K, V] {
	return &Queue[K, V]{write: write, log: log, name: name, dirty: map[K]V{}, kick: make(chan struct{}, 1)}
}

// Put records the newest value of key; it never blocks on I/O.
func (q *Queue[K, V]) Put(key K, v V) {
	q.mu.Lock()
	q.dirty[key] = v
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Run writes batches as soon as changes arrive, until ctx ends; then it writes what is left. A
// batch that failed (the database is gone for a while) is tried again every RetryInterval, not
// only when the next change arrives, so what was learned meanwhile is written once it is back.
func (q *Queue[K, V]) Run(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			_ = q.Flush(context.WithoutCancel(ctx)) // a failure is logged by Flush
			return
		case <-q.kick:
		case <-retry:
		}
		retry = nil
		if err := q.Flush(ctx); err != nil && ctx.Err() == nil {
			retry = time.After(RetryInterval)
		}
	}
}

// RetryInterval is how long Run waits before it tries a failed batch again.
var RetryInterval = time.Second

// Flush writes every pending change now and returns once it is committed. A failed batch is
// put back (unless newer values arrived meanwhile) so a later flush retries it.
func (q *Queue[K, V]) Flush(ctx context.Context) error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	batch := q.dirty
	q.dirty = make(map[K]V, len(batch))
	q.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := q.write(ctx, batch)
	if err != nil {
		q.log.Error("persist state", "what", q.name, "error", err, "pending", len(batch))
		q.mu.Lock()
		for k, v := range batch {
			if _, newer := q.dirty[k]; !newer {
				q.dirty[k] = v
			}
		}
		q.mu.Unlock()
	}
	return err
}

// Pending is the number of changes not yet written (a batch being written counts as written).
func (q *Queue[K, V]) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.dirty)
}
