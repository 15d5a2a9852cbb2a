// Package metrics owns the Prometheus registry and every metric the gateway exports. Services
// report through small methods; state that already lives in memory (connection states, breaker
// states, queue depths) is read at scrape time by collectors instead of being mirrored.
//
// A "connection" label carries the connection's client label (catalog.ClientLabel), never its
// name as such: the name of a Claude account may be its e-mail address, and scrapes travel far
// from the dashboard. Label values are written escaped by the Prometheus text format, so any name
// the catalog accepts keeps the exposition parseable.
package metrics

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the registry and the metrics updated on the request path.
type Metrics struct {
	Registry *prometheus.Registry

	requests   *prometheus.CounterVec
	refused    *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	ttft       *prometheus.HistogramVec
	attempts   *prometheus.CounterVec
	retries    *prometheus.CounterVec
	tokens     *prometheus.CounterVec
	cooldowns  *prometheus.CounterVec
	breakerTr  *prometheus.CounterVec
	queueWait  *prometheus.HistogramVec
	queueRej   *prometheus.CounterVec
	failOpen   *prometheus.CounterVec
	lockoutsRc *prometheus.CounterVec
	streamEnds *prometheus.CounterVec
	// ends counts the streams by how they ended, for the dashboard (a fixed set: StreamEnds).
	ends [len(StreamEnds)][2]atomic.Int64
}

// StreamEnds are the ways a stream can end other than complete, as the engine names them: the
// upstream broke it, ended it with its own error, failed it or cut it short (Responses), the
// client left, or a watchdog ended it (readiness, idle, throughput, total).
var StreamEnds = [...]string{"stream_incomplete", "upstream_stream_error", "response_failed", "response_incomplete",
	"client_closed", "stream_readiness_timeout", "stream_idle_timeout", "stream_throughput_too_low", "stream_total_timeout"}

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New registers every metric (plus the Go and process collectors) on a fresh registry.
func New() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{Registry: r,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_requests_total",
			Help: "Client requests by route, status, provider and model."}, []string{"route", "status", "provider", "model"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_refused_requests_total",
			Help: "Proxy requests refused before a client key authenticated (not in the request log), by surface and reason."},
			[]string{"surface", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchyard_request_duration_seconds",
			Help: "Client request latency, to the last byte.", Buckets: latencyBuckets}, []string{"route", "provider"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchyard_time_to_first_token_seconds",
			Help: "Time from request to the first streamed event relayed.", Buckets: latencyBuckets}, []string{"provider"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_upstream_attempts_total",
			Help: "Upstream calls by provider and outcome (ok, or the failure reason)."}, []string{"provider", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_upstream_retries_total",
			Help: "Upstream calls that were retries or failovers of an earlier attempt."}, []string{"provider", "kind"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_tokens_total",
			Help: "Tokens reported by upstreams, by type (input, output)."}, []string{"provider", "model", "type"}),
		cooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_connection_cooldowns_total",
			Help: "Connection failures recorded, by reason."}, []string{"provider", "reason"}),
		breakerTr: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_circuit_breaker_transitions_total",
			Help: "Circuit breaker state changes."}, []string{"provider", "to"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "switchyard_queue_wait_seconds",
			Help: "Time requests waited for a connection slot.", Buckets: latencyBuckets}, []string{"provider", "connection", "outcome"}),
		queueRej: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_queue_rejections_total",
			Help: "Requests turned away by the request queue, by code."}, []string{"provider", "connection", "code"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_concurrency_fail_open_total",
			Help: "Requests that proceeded without a quota-share slot (line full or wait timed out)."}, []string{"provider", "connection"}),
		lockoutsRc: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_model_lockouts_total",
			Help: "Model lockouts recorded, by scope."}, []string{"provider", "scope"}),
		streamEnds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_stream_ends_total",
			Help: "Streams that did not end complete, by why (the watchdogs' aborts included); phase is " +
				"before_client when it happened before the client saw anything (the request went on) or after_first_byte."},
			[]string{"provider", "end", "phase"}),
	}
	r.MustRegister(m.requests, m.refused, m.duration, m.ttft, m.attempts, m.retries, m.tokens, m.cooldowns, m.breakerTr,
		m.queueWait, m.queueRej, m.failOpen, m.lockoutsRc, m.streamEnds)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Request records one finished client request.
func (m *Metrics) Request(route string, status int, provider, model string, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status), provider, model).Inc()
	m.duration.WithLabelValues(route, provider).Observe(d.Seconds())
}

// Refused counts a proxy request refused before any client key authenticated (a missing or
// invalid key): such requests are counted here and in the traffic charts, never logged row by row.
func (m *Metrics) Refused(surface, reason string) {
	m.refused.WithLabelValues(surface, reason).Inc()
}

// FirstToken records the time to the first streamed event.
func (m *Metrics) FirstToken(provider string, d time.Duration) {
	m.ttft.WithLabelValues(provider).Observe(d.Seconds())
}

// Attempt records one upstream call; kind is "" for a first attempt, else "retry" or "failover".
func (m *Metrics) Attempt(provider, outcome, kind string) {
	m.attempts.WithLabelValues(provider, outcome).Inc()
	if kind != "" {
		m.retries.WithLabelValues(provider, kind).Inc()
	}
}

// Tokens adds token usage.
func (m *Metrics) Tokens(provider, model string, input, output int64) {
	if input > 0 {
		m.tokens.WithLabelValues(provider, model, "input").Add(float64(input))
	}
	if output > 0 {
		m.tokens.WithLabelValues(provider, model, "output").Add(float64(output))
	}
}

// ConnectionFailure counts a failure applied to a connection.
func (m *Metrics) ConnectionFailure(provider, reason string) {
	m.cooldowns.WithLabelValues(provider, reason).Inc()
}

// BreakerTransition counts a circuit breaker state change.
func (m *Metrics) BreakerTransition(provider, to string) {
	m.breakerTr.WithLabelValues(provider, to).Inc()
}

// QueueWait records how long a request waited for its connection and how the wait ended.
func (m *Metrics) QueueWait(provider, connection, outcome string, d time.Duration) {
	m.queueWait.WithLabelValues(provider, connection, outcome).Observe(d.Seconds())
}

// QueueRejected counts a request turned away by the queue.
func (m *Metrics) QueueRejected(provider, connection, code string) {
	m.queueRej.WithLabelValues(provider, connection, code).Inc()
}

// FailOpen counts a request that proceeded without a quota-share slot.
func (m *Metrics) FailOpen(provider, connection string) {
	m.failOpen.WithLabelValues(provider, connection).Inc()
}

// StreamEnd counts a stream that did not end complete; early: before the client saw any of it.
func (m *Metrics) StreamEnd(provider, end string, early bool) {
	phase := 1
	if early {
		phase = 0
	}
	m.streamEnds.WithLabelValues(provider, end, [2]string{"before_client", "after_first_byte"}[phase]).Inc()
	for i, e := range StreamEnds {
		if e == end {
			m.ends[i][phase].Add(1)
		}
	}
}

// StreamEndCount is how many streams ended one way since the start, before the client saw any of
// them (the request went on) and after.
type StreamEndCount struct {
	End                   string
	BeforeClient, AfterFB int64
}

// StreamEndCounts are the counts of every way a stream can end, in StreamEnds order.
func (m *Metrics) StreamEndCounts() []StreamEndCount {
	out := make([]StreamEndCount, len(StreamEnds))
	for i, e := range StreamEnds {
		out[i] = StreamEndCount{End: e, BeforeClient: m.ends[i][0].Load(), AfterFB: m.ends[i][1].Load()}
	}
	return out
}

// Lockout counts a model lockout.
func (m *Metrics) Lockout(provider, scope string) {
	m.lockoutsRc.WithLabelValues(provider, scope).Inc()
}

// GaugeSample is one value of a state gauge read at scrape time.
type GaugeSample struct {
	Labels []string
	Value  float64
}

// RegisterStateGauge adds a gauge whose samples are produced by fn at every scrape, so state
// that lives in memory is exported without mirroring it.
func (m *Metrics) RegisterStateGauge(name, help string, labels []string, fn func() []GaugeSample) {
	m.Registry.MustRegister(&stateCollector{desc: prometheus.NewDesc(name, help, labels, nil), fn: fn})
}

type stateCollector struct {
	desc *prometheus.Desc
	fn   func() []GaugeSample
}

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range s.fn() {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, g.Value, g.Labels...)
	}
}
