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
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the registry and the metrics updated on the request path.
type Metrics struct {
	Registry *prometheus.Registry
	// reg is where every metric is registered: Registry itself, or Registry behind the replica
	// label (Options.Replica).
	reg     prometheus.Registerer
	handler http.Handler

	requests    *prometheus.CounterVec
	refused     *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	attempts    *prometheus.CounterVec
	retries     *prometheus.CounterVec
	tokens      *prometheus.CounterVec
	cooldowns   *prometheus.CounterVec
	breakerTr   *prometheus.CounterVec
	queueWait   *prometheus.HistogramVec
	queueRej    *prometheus.CounterVec
	failOpen    *prometheus.CounterVec
	lockoutsRc  *prometheus.CounterVec
	streamEnds  *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	droppedMu   sync.Mutex
	droppedSeen map[string]struct{}
	spendUSD    *prometheus.CounterVec
	keyTokens   *prometheus.CounterVec
	webhooks    *prometheus.CounterVec
	// spend caches each key, provider and model's counters (spendKey → *spendSeries), so a
	// finished request adds its cost and tokens without hashing label values six times. Entries
	// are made and forgotten under spendMu, so the cache never holds a series ForgetKey removed.
	spend   sync.Map
	spendMu sync.Mutex
	// ends counts the streams by how they ended, for the dashboard (a fixed set: StreamEnds).
	ends [len(StreamEnds)][2]atomic.Int64
	// series caches the children every request adds to (series.go).
	series series
}

// StreamEnds are the ways a stream can end other than complete, as the engine names them: the
// upstream broke it, ended it with its own error, failed it or cut it short (Responses), the
// client left, or a watchdog ended it (readiness, idle, throughput, total).
var StreamEnds = [...]string{"stream_incomplete", "upstream_stream_error", "response_failed", "response_incomplete",
	"client_closed", "stream_readiness_timeout", "stream_idle_timeout", "stream_throughput_too_low", "stream_total_timeout"}

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Options configure NewWith.
type Options struct {
	// Replica is this replica's id when several replicas share one database:
	// switchyard_replica_info{replica, name} 1 then names it, so a replica's series (told apart
	// by their instance label when each replica is a scrape target) can be joined to its id and
	// name. Empty: no info gauge, and the exposition is that of New.
	Replica string
	// ReplicaName is the replica's name for people (host and listen address), the name label
	// of switchyard_replica_info.
	ReplicaName string
	// LabelSeries puts the label replica="<Replica>" on every series as well, so the series of
	// replicas stay apart where no instance label does it: one scrape target in front of them
	// all, a federation or a remote write that merges them. Off (the default): the series are
	// those of New. Ignored without Replica.
	LabelSeries bool
}

// New registers every metric (plus the Go and process collectors) on a fresh registry.
func New() *Metrics { return NewWith(Options{}) }

// NewWith is New with options. The replica label is added to every series as it is gathered
// (prometheus.WrapRegistererWith), not to the vectors themselves, so the request path pays
// nothing for it and metrics registered later (RegisterStateGauge) carry it too.
func NewWith(opt Options) *Metrics {
	r := prometheus.NewRegistry()
	var reg prometheus.Registerer = r
	if opt.Replica != "" {
		if opt.LabelSeries {
			reg = prometheus.WrapRegistererWith(prometheus.Labels{"replica": opt.Replica}, r)
		}
		// Never through the wrapper: it carries its own replica label.
		info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_replica_info",
			Help:        "1 for this replica: its id (the replica label) and its name (host and listen address).",
			ConstLabels: prometheus.Labels{"replica": opt.Replica, "name": opt.ReplicaName}})
		info.Set(1)
		r.MustRegister(info)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Made once: the handler registers its own error counter on reg, which a wrapped registry
	// would refuse a second time.
	handler := promhttp.HandlerFor(r, promhttp.HandlerOpts{Registry: reg})
	m := &Metrics{Registry: r, reg: reg, handler: handler, droppedSeen: map[string]struct{}{},
		requests: counter(reg, "switchyard_requests_total",
			"Client requests by route, status, provider and model.", "route", "status", "provider", "model"),
		refused: counter(reg, "switchyard_refused_requests_total",
			"Proxy requests refused before a client key authenticated (not in the request log), by surface and reason.",
			"surface", "reason"),
		duration: latency(reg, "switchyard_request_duration_seconds",
			"Client request latency, to the last byte.", "route", "provider"),
		ttft: latency(reg, "switchyard_time_to_first_token_seconds",
			"Time from request to the first streamed event relayed.", "provider"),
		attempts: counter(reg, "switchyard_upstream_attempts_total",
			"Upstream calls by provider and outcome (ok, or the failure reason).", "provider", "outcome"),
		retries: counter(reg, "switchyard_upstream_retries_total",
			"Upstream calls that were retries or failovers of an earlier attempt.", "provider", "kind"),
		tokens: counter(reg, "switchyard_tokens_total",
			"Tokens reported by upstreams, by type (input, output).", "provider", "model", "type"),
		cooldowns: counter(reg, "switchyard_connection_cooldowns_total",
			"Connection failures recorded, by reason.", "provider", "reason"),
		breakerTr: counter(reg, "switchyard_circuit_breaker_transitions_total",
			"Circuit breaker state changes.", "provider", "to"),
		queueWait: latency(reg, "switchyard_queue_wait_seconds",
			"Time requests waited for a connection slot.", "provider", "connection", "outcome"),
		queueRej: counter(reg, "switchyard_queue_rejections_total",
			"Requests turned away by the request queue, by code.", "provider", "connection", "code"),
		failOpen: counter(reg, "switchyard_concurrency_fail_open_total",
			"Requests that proceeded without a quota-share slot (line full or wait timed out).", "provider", "connection"),
		lockoutsRc: counter(reg, "switchyard_model_lockouts_total",
			"Model lockouts recorded, by scope.", "provider", "scope"),
		dropped: counter(reg, "switchyard_translation_dropped_total",
			"Request fields or tools a translation could not carry to the upstream's format, by provider and field.",
			"provider", "field"),
		streamEnds: counter(reg, "switchyard_stream_ends_total",
			"Streams that did not end complete, by why (the watchdogs' aborts included); phase is "+
				"before_client when it happened before the client saw anything (the request went on) or after_first_byte.",
			"provider", "end", "phase"),
		spendUSD: counter(reg, "switchyard_spend_usd_total",
			"What client keys' requests cost in USD at the price table, by key name, provider and upstream model; "+
				"requests of models without a price add nothing (their tokens count in switchyard_key_tokens_total).",
			"key", "provider", "model"),
		keyTokens: counter(reg, "switchyard_key_tokens_total",
			"Tokens of client keys' requests by key name, provider, upstream model and kind: input (every prompt "+
				"token, cache reads and writes included), output (reasoning included), and the cache_read, cache_write "+
				"and reasoning parts of them.", "key", "provider", "model", "kind"),
		webhooks: counter(reg, "switchyard_webhook_deliveries_total",
			"Webhook delivery attempts and drops by outcome: delivered, retry (failed, tried again), failed "+
				"(given up) and dropped (queue full or shutting down).", "outcome"),
	}
	for _, o := range WebhookOutcomes {
		m.webhooks.WithLabelValues(o) // every outcome is exported from the start, at 0
	}
	return m
}

// counter registers a counter vector on r.
func counter(r prometheus.Registerer, name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	r.MustRegister(c)
	return c
}

// latency registers a histogram vector of durations in seconds (latencyBuckets) on r.
func latency(r prometheus.Registerer, name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}, labels)
	r.MustRegister(h)
	return h
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Request records one finished client request.
func (m *Metrics) Request(route string, status int, provider, model string, d time.Duration) {
	s := m.requestSeries(route, status, provider, model)
	s.count.Inc()
	s.duration.Observe(d.Seconds())
}

// Refused counts a proxy request refused before any client key authenticated (a missing or
// invalid key): such requests are counted here and in the traffic charts, never logged row by row.
func (m *Metrics) Refused(surface, reason string) {
	m.refused.WithLabelValues(surface, reason).Inc()
}

// FirstToken records the time to the first streamed event.
func (m *Metrics) FirstToken(provider string, d time.Duration) {
	m.ttftSeries(provider).Observe(d.Seconds())
}

// Attempt records one upstream call; kind is "" for a first attempt, else "retry" or "failover".
func (m *Metrics) Attempt(provider, outcome, kind string) {
	counter2(&m.series.attempts, m.attempts, provider, outcome).Inc()
	if kind != "" {
		counter2(&m.series.retries, m.retries, provider, kind).Inc()
	}
}

// Tokens adds token usage.
func (m *Metrics) Tokens(provider, model string, input, output int64) {
	if input > 0 {
		counter3(&m.series.tokens, m.tokens, provider, model, "input").Add(float64(input))
	}
	if output > 0 {
		counter3(&m.series.tokens, m.tokens, provider, model, "output").Add(float64(output))
	}
}

// TokenKinds are the kind label's values of switchyard_key_tokens_total, in Spend's order.
var TokenKinds = [...]string{"input", "output", "cache_read", "cache_write", "reasoning"}

// spendKey names one key, provider and model's series.
type spendKey struct{ key, provider, model string }

// spendSeries are one spendKey's counters; usd is made at the first priced request, so a model
// without a price has no spend series rather than one that says 0 USD.
type spendSeries struct {
	tokens [len(TokenKinds)]prometheus.Counter
	usd    atomic.Pointer[prometheus.Counter]
}

// spendSeries returns k's counters, making them (and the USD counter when priced) on first use.
func (m *Metrics) spendSeries(k spendKey, priced bool) *spendSeries {
	if v, ok := m.spend.Load(k); ok {
		if s := v.(*spendSeries); !priced || s.usd.Load() != nil {
			return s
		}
	}
	m.spendMu.Lock()
	defer m.spendMu.Unlock()
	var s *spendSeries
	if v, ok := m.spend.Load(k); ok {
		s = v.(*spendSeries)
	} else {
		s = &spendSeries{}
		for i, kind := range TokenKinds {
			s.tokens[i] = m.keyTokens.WithLabelValues(k.key, k.provider, k.model, kind)
		}
		m.spend.Store(k, s)
	}
	if priced && s.usd.Load() == nil {
		c := m.spendUSD.WithLabelValues(k.key, k.provider, k.model)
		s.usd.Store(&c)
	}
	return s
}

// Spend records one finished request of a client key: its tokens by kind (input includes the
// cache reads and writes, output the reasoning, as spend.Usage counts them) and, when it was
// priced, its cost in USD (a subscription's 0 included). key is the client key's name, so the
// series grow with the keys (ForgetKey drops a deleted or renamed key's); model is the upstream
// model id, which callers bound (a listed model or "unlisted").
func (m *Metrics) Spend(key, provider, model string, inputTokens, outputTokens, cacheRead, cacheWrite, reasoning int64,
	costUSD float64, priced bool) {
	s := m.spendSeries(spendKey{key, provider, model}, priced)
	for i, n := range [len(TokenKinds)]int64{inputTokens, outputTokens, cacheRead, cacheWrite, reasoning} {
		if n > 0 {
			s.tokens[i].Add(float64(n))
		}
	}
	if priced && costUSD > 0 && !math.IsInf(costUSD, 1) { // a counter only grows; NaN fails the comparison
		(*s.usd.Load()).Add(costUSD)
	}
}

// ForgetKey drops the spend and token series of a client key's name, for a key deleted or
// renamed: without it every name a key ever had would stay in every scrape until a restart.
// Prometheus sees the series end, as it does at a restart. A request of that name finishing
// meanwhile may go uncounted.
func (m *Metrics) ForgetKey(key string) {
	m.spendMu.Lock()
	defer m.spendMu.Unlock()
	m.spend.Range(func(k, _ any) bool {
		if k.(spendKey).key == key {
			m.spend.Delete(k)
		}
		return true
	})
	m.spendUSD.DeletePartialMatch(prometheus.Labels{"key": key})
	m.keyTokens.DeletePartialMatch(prometheus.Labels{"key": key})
}

// WebhookOutcomes are the outcome label's values of switchyard_webhook_deliveries_total (the
// webhooks package's Outcome… constants).
var WebhookOutcomes = [...]string{"delivered", "retry", "failed", "dropped"}

// WebhookDelivery counts one webhook delivery outcome; it suits webhooks.Options.OnOutcome.
func (m *Metrics) WebhookDelivery(outcome string) {
	m.webhooks.WithLabelValues(outcome).Inc()
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

// Dropped counts a request field or tool a translation could not carry. Field names come from
// the translators' fixed vocabulary (top-level fields of the wire formats, "tools.<type>"), so
// the series stay bounded.
// A client chooses the top-level keys it sends, so past maxDroppedFields distinct names the
// rest count as "other": the series stay bounded.
func (m *Metrics) Dropped(provider, field string) {
	m.droppedMu.Lock()
	if _, ok := m.droppedSeen[field]; !ok {
		if len(m.droppedSeen) >= maxDroppedFields {
			field = "other"
		} else {
			m.droppedSeen[field] = struct{}{}
		}
	}
	m.droppedMu.Unlock()
	m.dropped.WithLabelValues(provider, field).Inc()
}

const maxDroppedFields = 100

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
	m.reg.MustRegister(&stateCollector{desc: prometheus.NewDesc(name, help, labels, nil), fn: fn})
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
