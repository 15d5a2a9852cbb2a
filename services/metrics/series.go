package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The series every request adds to are cached by their label values: a finished request then
// costs a map lookup under a read lock per series, where WithLabelValues checks each value's
// UTF-8, hashes them all and looks the hash up every time. The label sets are bounded (routes,
// statuses, providers, listed models with "unlisted" for the rest, outcomes) and none of these
// series is ever deleted, so the caches only grow as far as the series themselves.

// seriesCache maps label values to a vector's child.
type seriesCache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *seriesCache[K, V]) load(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

// store keeps v for k unless another goroutine stored one first, and returns the one kept.
func (c *seriesCache[K, V]) store(k K, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		return old
	}
	if c.m == nil {
		c.m = map[K]V{}
	}
	c.m[k] = v
	return v
}

type requestKey struct {
	route    string
	status   int
	provider string
	model    string
}

// requestSeries are a finished request's count and duration.
type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// series are the caches of the request path's series.
type series struct {
	requests seriesCache[requestKey, requestSeries]
	ttft     seriesCache[string, prometheus.Observer]
	attempts seriesCache[[2]string, prometheus.Counter] // provider, outcome
	retries  seriesCache[[2]string, prometheus.Counter] // provider, kind
	tokens   seriesCache[[3]string, prometheus.Counter] // provider, model, type
}

func (m *Metrics) requestSeries(route string, status int, provider, model string) requestSeries {
	k := requestKey{route, status, provider, model}
	if s, ok := m.series.requests.load(k); ok {
		return s
	}
	return m.series.requests.store(k, requestSeries{
		count:    m.requests.WithLabelValues(route, strconv.Itoa(status), provider, model),
		duration: m.duration.WithLabelValues(route, provider)})
}

func (m *Metrics) ttftSeries(provider string) prometheus.Observer {
	if s, ok := m.series.ttft.load(provider); ok {
		return s
	}
	return m.series.ttft.store(provider, m.ttft.WithLabelValues(provider))
}

// counter2 and counter3 are vec's child for the label values, cached in c.
func counter2(c *seriesCache[[2]string, prometheus.Counter], vec *prometheus.CounterVec, a, b string) prometheus.Counter {
	k := [2]string{a, b}
	if s, ok := c.load(k); ok {
		return s
	}
	return c.store(k, vec.WithLabelValues(a, b))
}

func counter3(c *seriesCache[[3]string, prometheus.Counter], vec *prometheus.CounterVec, a, b, d string) prometheus.Counter {
	k := [3]string{a, b, d}
	if s, ok := c.load(k); ok {
		return s
	}
	return c.store(k, vec.WithLabelValues(a, b, d))
}
