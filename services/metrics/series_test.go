package metrics

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// histCounts reads a histogram family's sample counts by their label values joined with "|".
func histCounts(t *testing.T, m *Metrics, name string, labels ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, s := range exposition(t, m)[name].GetMetric() {
		out[labelKey(s, labels)] = s.GetHistogram().GetSampleCount()
	}
	return out
}

// TestRequestPathSeries: the series every request adds to, looked up through their cache from
// many goroutines at once, count what they were given under the right labels, and a token
// series appears only once tokens of its type were counted.
func TestRequestPathSeries(t *testing.T) {
	m := New()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				status := []int{200, 429, 502}[i%3]
				m.Request("/v1/chat/completions", status, "p"+strconv.Itoa(i%2), "m", time.Millisecond)
				m.Attempt("p0", "ok", "")
				if i%10 == 0 {
					m.Attempt("p1", "rate_limited", "failover")
				}
				m.Tokens("p0", "m", 3, 0)
				m.FirstToken("p1", time.Millisecond)
			}
		}()
	}
	wg.Wait()
	equal(t, "requests", scrape(t, m, "switchyard_requests_total", "route", "status", "provider", "model"), map[string]float64{
		"/v1/chat/completions|200|p0|m": 136, "/v1/chat/completions|429|p1|m": 136, "/v1/chat/completions|502|p0|m": 136,
		"/v1/chat/completions|200|p1|m": 136, "/v1/chat/completions|429|p0|m": 128, "/v1/chat/completions|502|p1|m": 128})
	if got := histCounts(t, m, "switchyard_request_duration_seconds", "route", "provider"); got["/v1/chat/completions|p0"] != 400 ||
		got["/v1/chat/completions|p1"] != 400 || len(got) != 2 {
		t.Fatalf("durations %v", got)
	}
	if got := histCounts(t, m, "switchyard_time_to_first_token_seconds", "provider"); got["p1"] != 800 || len(got) != 1 {
		t.Fatalf("ttft %v", got)
	}
	equal(t, "attempts", scrape(t, m, "switchyard_upstream_attempts_total", "provider", "outcome"),
		map[string]float64{"p0|ok": 800, "p1|rate_limited": 80})
	equal(t, "retries", scrape(t, m, "switchyard_upstream_retries_total", "provider", "kind"), map[string]float64{"p1|failover": 80})
	equal(t, "tokens", scrape(t, m, "switchyard_tokens_total", "provider", "model", "type"), map[string]float64{"p0|m|input": 2400})
}

// BenchmarkRequestSeries is a served request's metrics (count, duration, attempt, tokens):
// through the cache, and through WithLabelValues as before.
func BenchmarkRequestSeries(b *testing.B) {
	m := New()
	b.Run("WithLabelValues", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.requests.WithLabelValues("/v1/chat/completions", strconv.Itoa(200), "bench", "json-small-0ms").Inc()
			m.duration.WithLabelValues("/v1/chat/completions", "bench").Observe(0.0004)
			m.attempts.WithLabelValues("bench", "ok").Inc()
			m.tokens.WithLabelValues("bench", "json-small-0ms", "input").Add(12)
			m.tokens.WithLabelValues("bench", "json-small-0ms", "output").Add(34)
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Request("/v1/chat/completions", 200, "bench", "json-small-0ms", 400*time.Microsecond)
			m.Attempt("bench", "ok", "")
			m.Tokens("bench", "json-small-0ms", 12, 34)
		}
	})
}
