package settings

import (
	"strings"

	"switchyard/services/errs"
)

// ConnectionOverrides are the per-connection knobs; a nil field inherits the global value
// (or, for the pacing limits, means no limit).
type ConnectionOverrides struct {
	// MaxConcurrent caps in-flight requests on the connection; nil = unlimited; range 1–10,000.
	MaxConcurrent *int `json:"max_concurrent,omitempty"`
	// RequestQueue overrides request_queue and adds optional pacing limits.
	RequestQueue QueueOverrides `json:"request_queue,omitzero"`
}

// QueueOverrides override request_queue for one connection.
type QueueOverrides struct {
	// MaxWaitMS overrides request_queue.max_wait_ms; range 1–86,400,000.
	MaxWaitMS *int64 `json:"max_wait_ms,omitempty"`
	// ExecutionMaxWaitMS overrides request_queue.execution_max_wait_ms; range 1–86,400,000.
	ExecutionMaxWaitMS *int64 `json:"execution_max_wait_ms,omitempty"`
	// MaxQueueDepth overrides request_queue.max_queue_depth; range 0–100,000 (0 = unbounded).
	MaxQueueDepth *int `json:"max_queue_depth,omitempty"`
	// RequestsPerMinute paces the connection; nil = no limit; range 1–1,000,000.
	RequestsPerMinute *int `json:"requests_per_minute,omitempty"`
	// MinGapMS is the least time between two request starts; nil = none; range 0–3,600,000.
	MinGapMS *int64 `json:"min_gap_ms,omitempty"`
	// MaxConcurrentExecutions caps executions in flight; nil = no cap; range 1–10,000.
	MaxConcurrentExecutions *int `json:"max_concurrent_executions,omitempty"`
}

// Validate checks every set field; the error is an *errs.Error keyed like the JSON.
func (o ConnectionOverrides) Validate() error {
	fe := fieldErrors{}
	checkBounds("", o, fe)
	q := o.RequestQueue
	checkPtr(fe, "max_concurrent", o.MaxConcurrent, between(1, 10_000))
	checkSetting(fe, "request_queue.max_wait_ms", q.MaxWaitMS)
	checkSetting(fe, "request_queue.execution_max_wait_ms", q.ExecutionMaxWaitMS)
	checkSetting(fe, "request_queue.max_queue_depth", q.MaxQueueDepth)
	checkPtr(fe, "request_queue.requests_per_minute", q.RequestsPerMinute, between(1, 1_000_000))
	checkPtr(fe, "request_queue.min_gap_ms", q.MinGapMS, between[int64](0, 3_600_000))
	checkPtr(fe, "request_queue.max_concurrent_executions", q.MaxConcurrentExecutions, between(1, 10_000))
	return fe.err()
}

// UnmarshalJSON decodes strictly: unknown keys are an error.
func (o *ConnectionOverrides) UnmarshalJSON(b []byte) error {
	type plain ConnectionOverrides // without the method, so decoding does not call it again
	return decodeOverrides(b, "connection overrides", (*plain)(o))
}

// ProviderOverrides are a provider's overrides of retry and circuit_breaker (the
// "resilience" object of PATCH /api/providers/{id}); a nil field inherits.
type ProviderOverrides struct {
	// Retry overrides retry.*.
	Retry RetryOverrides `json:"retry,omitzero"`
	// CircuitBreaker overrides circuit_breaker.*.
	CircuitBreaker BreakerOverrides `json:"circuit_breaker,omitzero"`
}

// RetryOverrides override retry.* with the same ranges.
type RetryOverrides struct {
	MaxRetries       *int      `json:"max_retries,omitempty"`
	MaxAttempts      *int      `json:"max_attempts,omitempty"`
	InitialBackoffMS *int64    `json:"initial_backoff_ms,omitempty"`
	MaxBackoffMS     *int64    `json:"max_backoff_ms,omitempty"`
	BackoffFactor    *float64  `json:"backoff_factor,omitempty"`
	Jitter           *float64  `json:"jitter,omitempty"`
	RetryOnStatuses  *[]string `json:"retry_on_statuses,omitempty"`
}

// BreakerOverrides override circuit_breaker.* with the same ranges.
type BreakerOverrides struct {
	Enabled             *bool     `json:"enabled,omitempty"`
	Scope               *string   `json:"scope,omitempty"`
	FailureThreshold    *int      `json:"failure_threshold,omitempty"`
	SuccessThreshold    *int      `json:"success_threshold,omitempty"`
	TimeoutMS           *int64    `json:"timeout_ms,omitempty"`
	FailureOnStatuses   *[]string `json:"failure_on_statuses,omitempty"`
	SlowCallThresholdMS *int64    `json:"slow_call_threshold_ms,omitempty"`
}

// Validate checks every set field against the global ranges, and initial ≤ max backoff
// when both are set. (If only one is overridden, engines cap the wait at max anyway.)
func (p ProviderOverrides) Validate() error {
	fe := fieldErrors{}
	checkBounds("", p, fe)
	for _, st := range registry {
		if v, ok := p.Value(st.path); ok {
			st.check(st.path, v, fe)
		}
	}
	if r := p.Retry; r.InitialBackoffMS != nil && r.MaxBackoffMS != nil {
		fe.check("retry.max_backoff_ms", atLeast("retry.initial_backoff_ms", *r.InitialBackoffMS, *r.MaxBackoffMS))
	}
	return fe.err()
}

// Value is the provider's own value of the setting at path; ok is false when it inherits (or
// a provider cannot override the setting).
func (p *ProviderOverrides) Value(path string) (v any, ok bool) {
	if st, found := byPath[path]; found && st.provGet != nil {
		return st.provGet(p)
	}
	return nil, false
}

// Set overrides the setting at path with v (a value of the setting's Go type), or with nil
// inherits it again. It reports false for a setting a provider cannot override or a value of
// the wrong type.
func (p *ProviderOverrides) Set(path string, v any) bool {
	st, found := byPath[path]
	if !found || st.provSet == nil || (v != nil && !st.accepts(v)) {
		return false
	}
	st.provSet(p, v)
	return true
}

// UnmarshalJSON decodes strictly: unknown keys are an error.
func (p *ProviderOverrides) UnmarshalJSON(b []byte) error {
	type plain ProviderOverrides // without the method, so decoding does not call it again
	return decodeOverrides(b, "provider overrides", (*plain)(p))
}

// RequestQueueFor merges a connection's overrides over the global request_queue and
// returns the result with the source of each setting ("connection" where overridden).
func (s *Snapshot) RequestQueueFor(o ConnectionOverrides) (RequestQueue, map[string]string) {
	src := s.sourcesUnder("request_queue.")
	return s.requestQueue(o, src), src
}

// RequestQueueValues is RequestQueueFor without the sources, for the request path.
func (s *Snapshot) RequestQueueValues(o ConnectionOverrides) RequestQueue {
	return s.requestQueue(o, nil)
}

// requestQueue merges o over the global request_queue, noting the overridden paths in src
// unless src is nil.
func (s *Snapshot) requestQueue(o ConnectionOverrides, src map[string]string) RequestQueue {
	q, r := s.values.RequestQueue, o.RequestQueue
	override(&q.MaxWaitMS, r.MaxWaitMS, src, "request_queue.max_wait_ms", SourceConnection)
	override(&q.ExecutionMaxWaitMS, r.ExecutionMaxWaitMS, src, "request_queue.execution_max_wait_ms", SourceConnection)
	override(&q.MaxQueueDepth, r.MaxQueueDepth, src, "request_queue.max_queue_depth", SourceConnection)
	return q
}

// RetryFor merges a provider's overrides over the global retry settings.
func (s *Snapshot) RetryFor(p ProviderOverrides) (Retry, map[string]string) {
	r, src, o := s.values.Retry, s.sourcesUnder("retry."), p.Retry
	override(&r.MaxRetries, o.MaxRetries, src, "retry.max_retries", SourceProvider)
	override(&r.MaxAttempts, o.MaxAttempts, src, "retry.max_attempts", SourceProvider)
	override(&r.InitialBackoffMS, o.InitialBackoffMS, src, "retry.initial_backoff_ms", SourceProvider)
	override(&r.MaxBackoffMS, o.MaxBackoffMS, src, "retry.max_backoff_ms", SourceProvider)
	override(&r.BackoffFactor, o.BackoffFactor, src, "retry.backoff_factor", SourceProvider)
	override(&r.Jitter, o.Jitter, src, "retry.jitter", SourceProvider)
	override(&r.RetryOnStatuses, o.RetryOnStatuses, src, "retry.retry_on_statuses", SourceProvider)
	return r, src
}

// CircuitBreakerFor merges a provider's overrides over the global breaker settings.
func (s *Snapshot) CircuitBreakerFor(p ProviderOverrides) (CircuitBreaker, map[string]string) {
	b, src, o := s.values.CircuitBreaker, s.sourcesUnder("circuit_breaker."), p.CircuitBreaker
	override(&b.Enabled, o.Enabled, src, "circuit_breaker.enabled", SourceProvider)
	override(&b.Scope, o.Scope, src, "circuit_breaker.scope", SourceProvider)
	override(&b.FailureThreshold, o.FailureThreshold, src, "circuit_breaker.failure_threshold", SourceProvider)
	override(&b.SuccessThreshold, o.SuccessThreshold, src, "circuit_breaker.success_threshold", SourceProvider)
	override(&b.TimeoutMS, o.TimeoutMS, src, "circuit_breaker.timeout_ms", SourceProvider)
	override(&b.FailureOnStatuses, o.FailureOnStatuses, src, "circuit_breaker.failure_on_statuses", SourceProvider)
	override(&b.SlowCallThresholdMS, o.SlowCallThresholdMS, src, "circuit_breaker.slow_call_threshold_ms", SourceProvider)
	return b, src
}

func (s *Snapshot) sourcesUnder(prefix string) map[string]string {
	src := map[string]string{}
	for p, v := range s.sources {
		if strings.HasPrefix(p, prefix) {
			src[p] = v
		}
	}
	return src
}

// override sets *dst to *v when v is set and records source for path in src (when src is not
// nil).
func override[T any](dst *T, v *T, src map[string]string, path, source string) {
	if v == nil {
		return
	}
	*dst = *v
	if src != nil {
		src[path] = source
	}
}

// decodeOverrides decodes an override document strictly into a fresh value and stores it in
// dst only when the whole document was read.
func decodeOverrides[T any](b []byte, what string, dst *T) error {
	var v T
	if err := strictUnmarshal(b, &v); err != nil {
		return &overridesError{what, err}
	}
	*dst = v
	return nil
}

// checkSetting validates a set override with the registry's check for path.
func checkSetting[T any](fe fieldErrors, path string, v *T) {
	if v != nil {
		byPath[path].check(path, *v, fe)
	}
}

func checkPtr[T any](fe fieldErrors, path string, v *T, f func(T) *errs.Msg) {
	if v != nil {
		fe.check(path, f(*v))
	}
}
