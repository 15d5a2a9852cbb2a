// Package announce tells a service's listeners that one of its writes committed. A replica that
// shares the database hears the service's topic and reloads what the service keeps in memory.
package announce

import "sync"

// Commits records, under a service's write lock, that a write committed, and calls the
// registered functions with the service's topic once the lock is released, so that they may call
// back into the service. On and Mark are called with the lock held; Unlock releases it.
type Commits struct {
	topic string
	fns   []func(topic string)
	dirty bool
}

// New returns the commits of the service named topic.
func New(topic string) Commits { return Commits{topic: topic} }

// On registers fn to run after every committed write; registering never replaces an earlier fn.
func (c *Commits) On(fn func(topic string)) { c.fns = append(c.fns, fn) }

// Mark records that a write committed while the lock is held.
func (c *Commits) Mark() { c.dirty = true }

// Unlock releases mu and then, when a write committed while it was held, calls the registered
// functions: whatever the service did in memory after the write, the database changed.
func (c *Commits) Unlock(mu *sync.Mutex) {
	dirty, fns := c.dirty, c.fns
	c.dirty = false
	mu.Unlock()
	if dirty {
		for _, fn := range fns {
			fn(c.topic)
		}
	}
}
