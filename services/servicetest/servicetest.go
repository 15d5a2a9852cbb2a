// Package servicetest runs the background loops of services in their tests and waits for what
// they do, without sleeping on the fake clock's timers.
package servicetest

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Patience is how long in real time a wait goes on before it fails the test: generous, so that
// a bug shows as a failure, not a hang, and a slow machine is no bug.
const Patience = 10 * time.Second

// Eventually checks cond until it holds or Patience has passed, and reports whether cond holds.
// It yields between the first checks, which is all a goroutine on the fake clock needs; what
// waits for real work (a write to SQLite, a server) is then polled every millisecond, so that a
// long wait does not hold a core the work itself needs.
func Eventually(cond func() bool) bool {
	limit := time.Now().Add(Patience)
	for i := 0; !cond(); i++ {
		if time.Now().After(limit) {
			return false
		}
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	return true
}

// WaitUntil waits as Eventually does and fails the test with what when cond still does not hold.
func WaitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if !Eventually(cond) {
		tb.Fatalf("timed out waiting until %s", what)
	}
}

// Start runs loop in a goroutine on a context of its own and returns that context and stop,
// which cancels it and waits until loop has returned, failing the test when it has not within
// Patience. stop runs again when the test ends; a second call does nothing more.
func Start(tb testing.TB, loop func(ctx context.Context)) (ctx context.Context, stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(Patience):
			tb.Fatal("the loop did not return after its context ended")
		}
	}
	tb.Cleanup(stop)
	return ctx, stop
}

// Beside runs main (a test's writes) while one goroutine calls read over and over and another
// calls step(i) for i from 0 to n-1: how a reload is shown to be safe beside requests and local
// writes (run with -race). It returns once main has returned and both goroutines have ended;
// an error of step fails the test.
func Beside(tb testing.TB, read func(), n int, step func(i int) error, main func()) {
	tb.Helper()
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				read()
			}
		}
	})
	wg.Go(func() {
		for i := range n {
			if err := step(i); err != nil {
				tb.Error(err)
			}
		}
	})
	defer wg.Wait()
	defer close(done)
	main()
}

// Announcements returns a check of a service's commit announcements (its OnCommitted functions):
// check(what, want, write) runs write and expects it to have announced topic want times, and
// when want is 0, nothing (write may then fail; a write that should announce must not). heard
// returns the topics announced since its last call and forgets them; check calls it before
// write too, so that only write's announcements count.
func Announcements(tb testing.TB, topic string, heard func() []string) (check func(what string, want int, write func() error)) {
	return func(what string, want int, write func() error) {
		tb.Helper()
		heard()
		err := write()
		if want > 0 && err != nil {
			tb.Fatalf("%s: %v", what, err)
		}
		if got := heard(); len(got) != want || (want > 0 && got[0] != topic) {
			tb.Errorf("%s: announced %v, want %d × %q", what, got, want, topic)
		}
	}
}
