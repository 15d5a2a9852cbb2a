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

// TestOverridesValidate checks the bounds of a provider's and a connection's overrides: every
// field out of range is named by its key.
func TestOverridesValidate(t *testing.T) {
	tests := []struct {
		name     string
		o        interface{ Validate() error }
		wantKeys []string
	}{
		{"provider empty", ProviderOverrides{}, nil},
		{"provider at bounds", ProviderOverrides{Retry: RetryOverrides{MaxRetries: new(10), Jitter: new(1.0), BackoffFactor: new(1.0)},
			CircuitBreaker: BreakerOverrides{TimeoutMS: new(int64(1000)), SuccessThreshold: new(100)}}, nil},
		{"provider out of range", ProviderOverrides{Retry: RetryOverrides{MaxRetries: new(11), Jitter: new(-0.1), RetryOnStatuses: &[]string{"6xx"}},
			CircuitBreaker: BreakerOverrides{Scope: new("global"), TimeoutMS: new(int64(999)), FailureOnStatuses: &[]string{"abc"}}},
			[]string{"circuit_breaker.failure_on_statuses", "circuit_breaker.scope", "circuit_breaker.timeout_ms", "retry.jitter", "retry.max_retries", "retry.retry_on_statuses"}},
		{"provider initial above max", ProviderOverrides{Retry: RetryOverrides{InitialBackoffMS: new(int64(5000)), MaxBackoffMS: new(int64(4000))}}, []string{"retry.max_backoff_ms"}},
		{"connection empty", ConnectionOverrides{}, nil},
		{"connection valid", ConnectionOverrides{MaxConcurrent: new(1), RequestQueue: QueueOverrides{MaxWaitMS: new(int64(1)), MaxQueueDepth: new(0),
			RequestsPerMinute: new(60), MinGapMS: new(int64(0)), MaxConcurrentExecutions: new(10_000)}}, nil},
		{"connection invalid", ConnectionOverrides{MaxConcurrent: new(0), RequestQueue: QueueOverrides{MaxWaitMS: new(int64(0)), ExecutionMaxWaitMS: new(int64(86_400_001)),
			MaxQueueDepth: new(-1), RequestsPerMinute: new(0), MinGapMS: new(int64(-1)), MaxConcurrentExecutions: new(10_001)}},
			[]string{"max_concurrent", "request_queue.execution_max_wait_ms", "request_queue.max_concurrent_executions", "request_queue.max_queue_depth",
				"request_queue.max_wait_ms", "request_queue.min_gap_ms", "request_queue.requests_per_minute"}},
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
