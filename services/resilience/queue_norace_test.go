//go:build !race

package resilience

import (
	"context"
	"testing"

	"github.com/jonboulle/clockwork"
)

// The race detector makes sync.Pool drop objects on purpose, so this runs without it.
func TestAcquireUnlimitedDoesNotAllocate(t *testing.T) {
	qs := NewQueues(clockwork.NewRealClock(), nil)
	ctx := context.Background()
	first, _ := qs.Acquire(ctx, 1, QueueConfig{}, AcquireHooks{}) // creates the connection's queue
	first.Release()
	allocs := testing.AllocsPerRun(1000, func() {
		s, _ := qs.Acquire(ctx, 1, QueueConfig{MaxDepth: 10}, AcquireHooks{})
		s.Release()
	})
	if allocs != 0 {
		t.Fatalf("unlimited Acquire+Release allocates %v times", allocs)
	}
}
