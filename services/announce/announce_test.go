package announce

import (
	"slices"
	"sync"
	"testing"
)

// A write that committed is announced once to every function, after the lock is released; a
// lock held without a committed write announces nothing.
func TestCommitsAnnounceAfterTheLock(t *testing.T) {
	var mu sync.Mutex
	c := New("keys")
	var heard []string
	for i := range 2 {
		c.On(func(topic string) {
			if !mu.TryLock() {
				t.Errorf("function %d ran with the lock held", i)
				return
			}
			mu.Unlock()
			heard = append(heard, topic)
		})
	}
	mu.Lock()
	c.Unlock(&mu)
	if len(heard) != 0 {
		t.Fatalf("nothing committed, announced %v", heard)
	}
	mu.Lock()
	c.Mark()
	c.Mark()
	c.Unlock(&mu)
	if want := []string{"keys", "keys"}; !slices.Equal(heard, want) {
		t.Fatalf("announced %v, want %v (once per function)", heard, want)
	}
	heard = nil
	mu.Lock()
	c.Unlock(&mu)
	if len(heard) != 0 {
		t.Fatalf("the next lock announced %v again", heard)
	}
}
