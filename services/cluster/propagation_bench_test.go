package cluster

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"switchyard/db/dbtest"
)

// BenchmarkPropagation measures how long a change takes from one replica's Publish to its
// application on the two others (three buses on one PostgreSQL on loopback), and reports the
// median and the 99th percentile: go test -run XXX -bench Propagation ./services/cluster/
func BenchmarkPropagation(b *testing.B) {
	url := dbtest.Postgres(b)
	var mu sync.Mutex
	var lat []time.Duration
	got := make(chan struct{}, 2*b.N+2)
	handle := func(m Message) {
		sent, err := strconv.ParseInt(string(m.Value), 10, 64)
		if err != nil {
			return
		}
		mu.Lock()
		lat = append(lat, time.Since(time.Unix(0, sent)))
		mu.Unlock()
		got <- struct{}{}
	}
	var buses []*Bus
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b", "c"} {
		bus := New(Options{URL: url, Replica: id, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Handle: handle})
		buses = append(buses, bus)
		wg.Add(1)
		go func() { defer wg.Done(); bus.Run(ctx) }()
		<-bus.Listening()
	}
	defer func() { cancel(); wg.Wait() }()
	b.ResetTimer()
	for i := range b.N {
		buses[0].Publish(Message{Topic: TopicState, Kind: "connection", ID: json.RawMessage(strconv.Itoa(i % 50)),
			Value: json.RawMessage(strconv.FormatInt(time.Now().UnixNano(), 10))})
		for range 2 { // one change at a time: what is measured is the path, not coalescing
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				b.Fatal("a change never arrived")
			}
		}
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
