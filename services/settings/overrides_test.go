package settings

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestProviderOverridesInheritance(t *testing.T) {
	s := newService(t, NewMemoryStore(), map[string]string{"SWITCHYARD_RETRY_JITTER": "0.2"})
	snap := s.Snapshot()
	var p ProviderOverrides
	if err := json.Unmarshal([]byte(`{"retry": {"max_retries": 1, "retry_on_statuses": []},
		"circuit_breaker": {"scope": "model", "failure_threshold": 0}}`), &p); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	r, rs := snap.RetryFor(p)
	want := Defaults().Retry
	want.MaxRetries, want.RetryOnStatuses, want.Jitter = 1, []string{}, 0.2
	if !reflect.DeepEqual(r, want) {
		t.Errorf("RetryFor = %+v, want %+v", r, want)
	}
	wantSrc := map[string]string{
		"retry.max_retries": SourceProvider, "retry.retry_on_statuses": SourceProvider, "retry.jitter": SourceEnv,
		"retry.initial_backoff_ms": SourceDefault, "retry.max_backoff_ms": SourceDefault, "retry.backoff_factor": SourceDefault,
		"retry.max_attempts": SourceDefault,
	}
	if !reflect.DeepEqual(rs, wantSrc) {
		t.Errorf("retry sources = %v", rs)
	}
	b, bs := snap.CircuitBreakerFor(p)
	if b.Scope != "model" || b.FailureThreshold != 0 || b.SuccessThreshold != 2 || !b.Enabled {
		t.Errorf("CircuitBreakerFor = %+v", b)
	}
	if bs["circuit_breaker.scope"] != SourceProvider || bs["circuit_breaker.timeout_ms"] != SourceDefault || len(bs) != 7 {
		t.Errorf("breaker sources = %v", bs)
	}
	if got, _ := snap.RetryFor(ProviderOverrides{}); !reflect.DeepEqual(got, snap.Resilience().Retry) {
		t.Errorf("empty overrides changed retry: %+v", got)
	}
}

// checkInvalidKeys checks that err is nil when want is, else that it names exactly the fields
// of want.
func checkInvalidKeys(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if keys := fieldKeys(t, err); !slices.Equal(keys, want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
}

func TestProviderOverridesValidate(t *testing.T) {
	i := func(v int) *int { return &v }
	i64 := func(v int64) *int64 { return &v }
	f := func(v float64) *float64 { return &v }
	str := func(v string) *string { return &v }
	tests := []struct {
		name     string
		o        ProviderOverrides
		wantKeys []string
	}{
		{"empty", ProviderOverrides{}, nil},
		{"at bounds", ProviderOverrides{Retry: RetryOverrides{MaxRetries: i(10), Jitter: f(1), BackoffFactor: f(1)},
			CircuitBreaker: BreakerOverrides{TimeoutMS: i64(1000), SuccessThreshold: i(100)}}, nil},
		{"out of range", ProviderOverrides{Retry: RetryOverrides{MaxRetries: i(11), Jitter: f(-0.1), RetryOnStatuses: &[]string{"6xx"}},
			CircuitBreaker: BreakerOverrides{Scope: str("global"), TimeoutMS: i64(999), FailureOnStatuses: &[]string{"abc"}}},
			[]string{"circuit_breaker.failure_on_statuses", "circuit_breaker.scope", "circuit_breaker.timeout_ms", "retry.jitter", "retry.max_retries", "retry.retry_on_statuses"}},
		{"initial above max", ProviderOverrides{Retry: RetryOverrides{InitialBackoffMS: i64(5000), MaxBackoffMS: i64(4000)}}, []string{"retry.max_backoff_ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkInvalidKeys(t, tt.o.Validate(), tt.wantKeys) })
	}
}

func TestOverridesJSONIsStrict(t *testing.T) {
	tests := []struct {
		name, body string
		target     any
		ok         bool
	}{
		{"provider ok", `{"retry":{"jitter":0.5},"circuit_breaker":{"enabled":false}}`, &ProviderOverrides{}, true},
		{"provider unknown top", `{"retries":{}}`, &ProviderOverrides{}, false},
		{"provider unknown nested", `{"retry":{"max_retry":1}}`, &ProviderOverrides{}, false},
		{"provider wrong type", `{"retry":{"max_retries":"1"}}`, &ProviderOverrides{}, false},
		{"connection ok", `{"max_concurrent":2,"request_queue":{"min_gap_ms":100}}`, &ConnectionOverrides{}, true},
		{"connection unknown", `{"request_queue":{"rpm":5}}`, &ConnectionOverrides{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := json.Unmarshal([]byte(tt.body), tt.target)
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	// Round trip: unset fields stay unset.
	in := ProviderOverrides{CircuitBreaker: BreakerOverrides{Enabled: new(bool)}}
	b, _ := json.Marshal(in)
	if string(b) != `{"circuit_breaker":{"enabled":false}}` {
		t.Errorf("marshal = %s", b)
	}
}

func TestConnectionOverridesValidate(t *testing.T) {
	i := func(v int) *int { return &v }
	i64 := func(v int64) *int64 { return &v }
	tests := []struct {
		name     string
		o        ConnectionOverrides
		wantKeys []string
	}{
		{"empty", ConnectionOverrides{}, nil},
		{"valid", ConnectionOverrides{MaxConcurrent: i(1), RequestQueue: QueueOverrides{MaxWaitMS: i64(1), MaxQueueDepth: i(0),
			RequestsPerMinute: i(60), MinGapMS: i64(0), MaxConcurrentExecutions: i(10_000)}}, nil},
		{"invalid", ConnectionOverrides{MaxConcurrent: i(0), RequestQueue: QueueOverrides{MaxWaitMS: i64(0), ExecutionMaxWaitMS: i64(86_400_001),
			MaxQueueDepth: i(-1), RequestsPerMinute: i(0), MinGapMS: i64(-1), MaxConcurrentExecutions: i(10_001)}},
			[]string{"max_concurrent", "request_queue.execution_max_wait_ms", "request_queue.max_concurrent_executions", "request_queue.max_queue_depth",
				"request_queue.max_wait_ms", "request_queue.min_gap_ms", "request_queue.requests_per_minute"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkInvalidKeys(t, tt.o.Validate(), tt.wantKeys) })
	}
}

func TestRequestQueueValuesMatchesRequestQueueFor(t *testing.T) {
	snap := newSnapshot(Defaults(), nil, 0, time.Time{})
	wait, depth := int64(5), 7
	for _, o := range []ConnectionOverrides{{}, {RequestQueue: QueueOverrides{MaxWaitMS: &wait, MaxQueueDepth: &depth}}} {
		want, _ := snap.RequestQueueFor(o)
		if got := snap.RequestQueueValues(o); got != want {
			t.Errorf("%+v: values %+v, with sources %+v", o, got, want)
		}
	}
}
