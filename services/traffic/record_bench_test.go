package traffic

import (
	"context"
	"strconv"
	"switchyard/db/dbtest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/db"
	"switchyard/services/servicetest"
)

// BenchmarkRecord is the request log's whole cost per request as the gateway pays it: entries
// of a served request (one attempt, tokens) recorded from two goroutines at a steady pace (8
// entries a millisecond each, the runner sleeping in between as at a real request rate) while
// the runner runs, aggregated and written; it reports the process's CPU time per entry beside
// the wall time. The buffer holds every entry, so none is dropped.
func BenchmarkRecord(b *testing.B) {
	d := dbtest.Open(b)
	clk := clockwork.NewRealClock()
	s := newService(b, d, clk, Options{Retention: time.Hour, Buffer: b.N})
	_, stop := servicetest.Start(b, s.Run)
	defer stop()
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "7f3a9c0d2e1b" + strconv.Itoa(100000+i)
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < b.N; i += 2 {
				s.Record(Entry{RequestID: ids[i%len(ids)], At: clk.Now(), ClientKeyID: 1, Surface: "/v1/chat/completions",
					Model: "json-small-0ms", Provider: "bench", ConnectionID: 1, Connection: "bench-1", Status: 200, Attempts: 1,
					Latency: 420 * time.Microsecond, InputTokens: 12, OutputTokens: 34,
					Chain: []Attempt{{ConnectionID: 1, Connection: "bench-1", Kind: "first", Status: 200, Duration: 400 * time.Microsecond}}})
				if i%16 >= 14 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/entry")
	written, err := db.MaxRequestLogID(context.Background(), d.R)
	if err != nil {
		b.Fatal(err)
	}
	if written != int64(b.N) {
		b.Fatalf("%d of %d entries written: the runner fell behind", written, b.N)
	}
}

// cpuTime is the CPU time the process used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
