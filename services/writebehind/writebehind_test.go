package writebehind

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

func TestQueueKeepsTheNewestValueAndRetriesFailedBatches(t *testing.T) {
	var written []map[string]int
	fail := true
	q := New("test", slog.New(slog.NewTextHandler(io.Discard, nil)), func(_ context.Context, b map[string]int) error {
		if fail {
			return errors.New("disk full")
		}
		written = append(written, b)
		return nil
	})
	q.Put("a", 1)
	q.Put("a", 2) // coalesced: only the newest value is written
	q.Put("b", 1)
	q.Flush(context.Background())
	if len(written) != 0 {
		t.Fatal("a failed batch was counted as written")
	}
	q.Put("b", 5) // newer than the failed batch: it must win
	fail = false
	q.Flush(context.Background())
	if len(written) != 1 || written[0]["a"] != 2 || written[0]["b"] != 5 || len(written[0]) != 2 {
		t.Fatalf("written %v", written)
	}
	q.Flush(context.Background())
	if len(written) != 1 {
		t.Fatal("an empty queue wrote a batch")
	}
}

func TestRunFlushesWhatIsLeftWhenStopped(t *testing.T) {
	got := make(chan map[int]int, 10)
	q := New("test", slog.New(slog.NewTextHandler(io.Discard, nil)), func(_ context.Context, b map[int]int) error {
		got <- b
		return nil
	})
	q.Put(7, 7)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stopped at once: the change must still be written before Run returns
	q.Run(ctx)
	select {
	case b := <-got:
		if b[7] != 7 {
			t.Fatalf("batch %v", b)
		}
	default:
		t.Fatal("Run returned with a change unwritten")
	}
}

// A batch that failed is written again by Run without waiting for another change.
func TestRunRetriesAFailedBatch(t *testing.T) {
	defer func(d time.Duration) { RetryInterval = d }(RetryInterval)
	RetryInterval = 5 * time.Millisecond
	var calls atomic.Int32
	written := make(chan map[int]int, 1)
	q := New("test", slog.New(slog.NewTextHandler(io.Discard, nil)), func(_ context.Context, b map[int]int) error {
		if calls.Add(1) < 3 {
			return errors.New("database unreachable")
		}
		written <- b
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.Run(ctx) }()
	defer func() { cancel(); <-done }()
	q.Put(1, 1)
	select {
	case b := <-written:
		if b[1] != 1 || calls.Load() != 3 {
			t.Fatalf("batch %v after %d tries", b, calls.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the failed batch was not tried again (%d tries)", calls.Load())
	}
}
