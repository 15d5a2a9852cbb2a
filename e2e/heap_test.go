package e2e

import (
	"bufio"
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHeapStaysBoundedOverManyStreams runs 600 streams (complete, cut by the upstream, and
// abandoned by the client after the first event) and fails if the live heap grows past a bound.
func TestHeapStaysBoundedOverManyStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 600 streams")
	}
	e, _, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.Header.Get("User-Agent"), "cut"):
			testenv.SSEAnswer(testenv.SSEChunks, 2)(w, r)
		default:
			testenv.SSEAnswer(testenv.SSEChunks, -1)(w, r)
		}
	})
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	run := func(i int) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", e.Base+"/v1/chat/completions",
			strings.NewReader(`{"model":"up/gpt-test","stream":true,"messages":[]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		if i%3 == 1 {
			req.Header.Set("User-Agent", "cut")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if i%3 == 2 && strings.HasPrefix(sc.Text(), "data:") {
				cancel() // the client walks away mid-stream
				break
			}
		}
	}
	for i := 0; i < 60; i++ { // warm up pools and connections
		run(i)
	}
	before := liveHeap()
	for i := 0; i < 600; i++ {
		run(i)
	}
	after := liveHeap()
	const bound = 8 << 20
	if after > before+bound {
		t.Fatalf("live heap grew from %d to %d bytes over 600 streams", before, after)
	}
	t.Logf("live heap %d → %d bytes", before, after)
}
