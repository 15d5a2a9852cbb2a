package settings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/services/errs"
)

var fixedNow = func() time.Time { return time.Unix(1_700_000_000, 0) }

func envFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func newService(t *testing.T, store *MemoryStore, env map[string]string) *Service {
	t.Helper()
	s, err := New(context.Background(), store, envFrom(env), fixedNow)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// patchOf builds {"a":{"b":value}} for the dotted path "a.b".
func patchOf(path, value string) []byte {
	parts := strings.Split(path, ".")
	s := value
	for i := len(parts) - 1; i >= 0; i-- {
		s = fmt.Sprintf("{%q:%s}", parts[i], s)
	}
	return []byte(s)
}

func fieldKeys(t *testing.T, err error) []string {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != errs.Invalid {
		t.Fatalf("error %v is not an Invalid *errs.Error", err)
	}
	for k, m := range e.Fields {
		if m.Key == "" {
			t.Errorf("the message of %s has no catalog key", k)
		}
	}
	return slices.Sorted(maps.Keys(e.Fields))
}

func TestPatchRanges(t *testing.T) {
	tests := []struct {
		path, value string
		ok          bool
	}{
		{"model_lockout.base_cooldown_ms", "4999", false},
		{"model_lockout.base_cooldown_ms", "5000", true},
		{"model_lockout.base_cooldown_ms", "600000", true},
		{"model_lockout.base_cooldown_ms", "600001", false},
		{"model_lockout.max_cooldown_ms", "3600000", true},
		{"model_lockout.max_cooldown_ms", "3600001", false},
		{"model_lockout.max_backoff_steps", "-1", false},
		{"model_lockout.max_backoff_steps", "0", true},
		{"model_lockout.max_backoff_steps", "20", true},
		{"model_lockout.max_backoff_steps", "21", false},
		{"model_lockout.error_codes", "[100, 599]", true},
		{"model_lockout.error_codes", "[99]", false},
		{"model_lockout.error_codes", "[429, 600]", false},
		{"request_queue.max_wait_ms", "0", false},
		{"request_queue.max_wait_ms", "1", true},
		{"request_queue.max_wait_ms", "86400000", true},
		{"request_queue.max_wait_ms", "86400001", false},
		{"request_queue.execution_max_wait_ms", "0", false},
		{"request_queue.max_queue_depth", "-1", false},
		{"request_queue.max_queue_depth", "100000", true},
		{"request_queue.max_queue_depth", "100001", false},
		{"retry.max_retries", "-1", false},
		{"retry.max_retries", "10", true},
		{"retry.max_retries", "11", false},
		{"retry.backoff_factor", "0.99", false},
		{"retry.backoff_factor", "1", true},
		{"retry.backoff_factor", "10", true},
		{"retry.backoff_factor", "10.5", false},
		{"retry.jitter", "-0.01", false},
		{"retry.jitter", "0", true},
		{"retry.jitter", "1", true},
		{"retry.jitter", "1.01", false},
		{"retry.retry_on_statuses", `[]`, true},
		{"retry.retry_on_statuses", `["5xx", "429", "100", "599", "1xx"]`, true},
		{"retry.retry_on_statuses", `["6xx"]`, false},
		{"retry.retry_on_statuses", `["099"]`, false},
		{"retry.retry_on_statuses", `["42"]`, false},
		{"retry.retry_on_statuses", `["5XX"]`, false},
		{"retry.retry_on_statuses", `["600"]`, false},
		{"circuit_breaker.scope", `"model"`, true},
		{"circuit_breaker.scope", `"global"`, false},
		{"circuit_breaker.failure_threshold", "0", true},
		{"circuit_breaker.failure_threshold", "1000", true},
		{"circuit_breaker.failure_threshold", "1001", false},
		{"circuit_breaker.success_threshold", "0", false},
		{"circuit_breaker.success_threshold", "100", true},
		{"circuit_breaker.timeout_ms", "999", false},
		{"circuit_breaker.timeout_ms", "1000", true},
		{"circuit_breaker.timeout_ms", "3600001", false},
		{"connection_cooldown.max_cooldown_ms", "999", false},
		{"connection_cooldown.max_cooldown_ms", "86400000", true},
		{"connection_cooldown.max_cooldown_ms", "86400001", false},
		{"connection_cooldown.oauth.base_cooldown_ms", "99", false},
		{"connection_cooldown.oauth.base_cooldown_ms", "100", true},
		{"connection_cooldown.api_key.max_backoff_steps", "21", false},
		{"provider_cooldown.oauth.failure_threshold", "0", false},
		{"claude_low_priority.slow_retry_after_default_ms", "4999", false},
		{"claude_low_priority.slow_max_wait_default_ms", "21600000", true},
		{"claude_low_priority.slow_max_wait_default_ms", "21600001", false},
		{"streams.throughput_watchdog.window_ms", "999", false},
		{"session_affinity_ttl_ms", "-1", false},
		{"session_affinity_ttl_ms", "2592000000", true},
	}
	for _, tt := range tests {
		t.Run(tt.path+"="+tt.value, func(t *testing.T) {
			s := newService(t, NewMemoryStore(), nil)
			_, err := s.Patch(context.Background(), patchOf(tt.path, tt.value))
			if tt.ok {
				if err != nil {
					t.Fatalf("Patch: %v", err)
				}
				if got := s.Snapshot().Source(tt.path); got != SourcePersisted {
					t.Errorf("source = %q, want persisted", got)
				}
				return
			}
			if keys := fieldKeys(t, err); !slices.Equal(keys, []string{tt.path}) {
				t.Errorf("error keys = %v, want [%s]", keys, tt.path)
			}
		})
	}
}

func TestPrecedenceOfAllLayers(t *testing.T) {
	const path = "request_queue.max_wait_ms"
	ptr := func(v int64) *int64 { return &v }
	tests := []struct {
		name       string
		env        map[string]string
		persisted  string
		connection *int64
		want       int64
		wantSource string
	}{
		{"default", nil, "", nil, 30_000, SourceDefault},
		{"env alias", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "45000"}, "", nil, 45_000, SourceEnv},
		{"canonical env wins over alias", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "45000", "SWITCHYARD_REQUEST_QUEUE_MAX_WAIT_MS": "50000"}, "", nil, 50_000, SourceEnv},
		{"persisted over env", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "45000"}, "60000", nil, 60_000, SourcePersisted},
		{"connection over persisted", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "45000"}, "60000", ptr(70_000), 70_000, SourceConnection},
		{"connection over default", nil, "", ptr(70_000), 70_000, SourceConnection},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newService(t, NewMemoryStore(), tt.env)
			if tt.persisted != "" {
				if _, err := s.Patch(context.Background(), patchOf(path, tt.persisted)); err != nil {
					t.Fatal(err)
				}
			}
			q, src := s.Snapshot().RequestQueueFor(ConnectionOverrides{RequestQueue: QueueOverrides{MaxWaitMS: tt.connection}})
			if q.MaxWaitMS != tt.want || src[path] != tt.wantSource {
				t.Errorf("got %d from %q, want %d from %q", q.MaxWaitMS, src[path], tt.want, tt.wantSource)
			}
			if src["request_queue.max_queue_depth"] != SourceDefault || q.MaxQueueDepth != 0 {
				t.Errorf("untouched leaf: got %d from %q", q.MaxQueueDepth, src["request_queue.max_queue_depth"])
			}
			if tt.connection == nil && s.Snapshot().Source(path) != tt.wantSource {
				t.Errorf("snapshot source = %q", s.Snapshot().Source(path))
			}
		})
	}
}

func TestEnvVariables(t *testing.T) {
	tests := []struct {
		name, variable, value string
		get                   func(Resilience) any
		want                  any
		path                  string
	}{
		{"canonical int", "SWITCHYARD_RETRY_MAX_RETRIES", "7", func(r Resilience) any { return r.Retry.MaxRetries }, 7, "retry.max_retries"},
		{"nested profile", "SWITCHYARD_CONNECTION_COOLDOWN_API_KEY_BASE_COOLDOWN_MS", "4500", func(r Resilience) any { return r.ConnectionCooldown.APIKey.BaseCooldownMS }, int64(4500), "connection_cooldown.api_key.base_cooldown_ms"},
		{"float", "SWITCHYARD_RETRY_JITTER", " 0.5 ", func(r Resilience) any { return r.Retry.Jitter }, 0.5, "retry.jitter"},
		{"bool", "SWITCHYARD_MODEL_LOCKOUT_ENABLED", "true", func(r Resilience) any { return r.ModelLockout.Enabled }, true, "model_lockout.enabled"},
		{"enum", "SWITCHYARD_CIRCUIT_BREAKER_SCOPE", "model", func(r Resilience) any { return r.CircuitBreaker.Scope }, "model", "circuit_breaker.scope"},
		{"status list", "SWITCHYARD_RETRY_RETRY_ON_STATUSES", "429, 5xx", func(r Resilience) any { return r.Retry.RetryOnStatuses }, []string{"429", "5xx"}, "retry.retry_on_statuses"},
		{"empty status list", "SWITCHYARD_RETRY_RETRY_ON_STATUSES", "", func(r Resilience) any { return r.Retry.RetryOnStatuses }, []string{}, "retry.retry_on_statuses"},
		{"code list", "SWITCHYARD_MODEL_LOCKOUT_ERROR_CODES", "429,503", func(r Resilience) any { return r.ModelLockout.ErrorCodes }, []int{429, 503}, "model_lockout.error_codes"},
		{"rules as JSON", "SWITCHYARD_STATUS_RESTATEMENTS", `[{"name":"r","from_status":403,"to_status":429}]`, func(r Resilience) any { return len(r.StatusRestatements) }, 1, "status_restatements"},
		{"alias max wait", "RATE_LIMIT_MAX_WAIT_MS", "1234", func(r Resilience) any { return r.RequestQueue.MaxWaitMS }, int64(1234), "request_queue.max_wait_ms"},
		{"alias execution", "RATE_LIMIT_EXECUTION_MAX_WAIT_MS", "700000", func(r Resilience) any { return r.RequestQueue.ExecutionMaxWaitMS }, int64(700_000), "request_queue.execution_max_wait_ms"},
		{"alias depth", "RATE_LIMIT_MAX_QUEUE_DEPTH", "50", func(r Resilience) any { return r.RequestQueue.MaxQueueDepth }, 50, "request_queue.max_queue_depth"},
		{"breaker oauth threshold", "SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_THRESHOLD", "3", func(r Resilience) any { return r.ProviderCooldown.OAuth.FailureThreshold }, 3, "provider_cooldown.oauth.failure_threshold"},
		{"breaker oauth window", "SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_WINDOW_MS", "60000", func(r Resilience) any { return r.ProviderCooldown.OAuth.FailureWindowMS }, int64(60_000), "provider_cooldown.oauth.failure_window_ms"},
		{"breaker oauth cooldown", "SWITCHYARD_PROVIDER_BREAKER_OAUTH_COOLDOWN_MS", "61000", func(r Resilience) any { return r.ProviderCooldown.OAuth.CooldownMS }, int64(61_000), "provider_cooldown.oauth.cooldown_ms"},
		{"breaker api key threshold", "SWITCHYARD_PROVIDER_BREAKER_API_KEY_FAILURE_THRESHOLD", "4", func(r Resilience) any { return r.ProviderCooldown.APIKey.FailureThreshold }, 4, "provider_cooldown.api_key.failure_threshold"},
		{"breaker api key window", "SWITCHYARD_PROVIDER_BREAKER_API_KEY_FAILURE_WINDOW_MS", "62000", func(r Resilience) any { return r.ProviderCooldown.APIKey.FailureWindowMS }, int64(62_000), "provider_cooldown.api_key.failure_window_ms"},
		{"breaker api key cooldown", "SWITCHYARD_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS", "63000", func(r Resilience) any { return r.ProviderCooldown.APIKey.CooldownMS }, int64(63_000), "provider_cooldown.api_key.cooldown_ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := newService(t, NewMemoryStore(), map[string]string{tt.variable: tt.value}).Snapshot()
			if got := tt.get(snap.Resilience()); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if src := snap.Source(tt.path); src != SourceEnv {
				t.Errorf("source = %q, want env", src)
			}
		})
	}
}

func TestInvalidEnvFailsConstruction(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantKey string
	}{
		{"not a number", map[string]string{"SWITCHYARD_RETRY_MAX_RETRIES": "three"}, "SWITCHYARD_RETRY_MAX_RETRIES"},
		{"empty number", map[string]string{"SWITCHYARD_RETRY_MAX_RETRIES": ""}, "SWITCHYARD_RETRY_MAX_RETRIES"},
		{"out of range", map[string]string{"SWITCHYARD_RETRY_MAX_RETRIES": "11"}, "SWITCHYARD_RETRY_MAX_RETRIES"},
		{"NaN", map[string]string{"SWITCHYARD_RETRY_JITTER": "NaN"}, "SWITCHYARD_RETRY_JITTER"},
		{"bad bool", map[string]string{"SWITCHYARD_MODEL_LOCKOUT_ENABLED": "yes please"}, "SWITCHYARD_MODEL_LOCKOUT_ENABLED"},
		{"bad enum", map[string]string{"SWITCHYARD_CIRCUIT_BREAKER_SCOPE": "global"}, "SWITCHYARD_CIRCUIT_BREAKER_SCOPE"},
		{"bad status", map[string]string{"SWITCHYARD_CIRCUIT_BREAKER_FAILURE_ON_STATUSES": "429,9xx"}, "SWITCHYARD_CIRCUIT_BREAKER_FAILURE_ON_STATUSES"},
		{"bad code", map[string]string{"SWITCHYARD_MODEL_LOCKOUT_ERROR_CODES": "429,abc"}, "SWITCHYARD_MODEL_LOCKOUT_ERROR_CODES"},
		{"bad alias", map[string]string{"RATE_LIMIT_MAX_QUEUE_DEPTH": "-5"}, "RATE_LIMIT_MAX_QUEUE_DEPTH"},
		{"bad rules JSON", map[string]string{"SWITCHYARD_ERROR_RULES": `[{"nme":"x"}]`}, "SWITCHYARD_ERROR_RULES"},
		{"invalid rule", map[string]string{"SWITCHYARD_ERROR_RULES": `[{"name":"x","statuses":[429],"reason":"bad","scope":"none"}]`}, "SWITCHYARD_ERROR_RULES"},
		{"cross-field", map[string]string{"SWITCHYARD_RETRY_INITIAL_BACKOFF_MS": "60000"}, "retry.max_backoff_ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(context.Background(), NewMemoryStore(), envFrom(tt.env), fixedNow)
			if err == nil {
				t.Fatal("New succeeded")
			}
			if keys := fieldKeys(t, err); !slices.Equal(keys, []string{tt.wantKey}) {
				t.Errorf("keys = %v, want [%s]", keys, tt.wantKey)
			}
			if name := slices.Collect(maps.Keys(tt.env))[0]; !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name %s", err, name)
			}
			if !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("error %q does not name %s", err, tt.wantKey)
			}
		})
	}
}

func TestStrictPatchRejectsEverythingAndSavesNothing(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantKeys []string
	}{
		{"all kinds at once", `{
			"bogus": 1,
			"retry": {"max_retrys": 2, "max_retries": "3"},
			"request_queue": {"max_queue_depth": 100001},
			"model_lockout": {"base_cooldown_ms": 600000, "max_cooldown_ms": 300000},
			"circuit_breaker": {"enabled": 1, "scope": "global"}
		}`, []string{"bogus", "circuit_breaker.enabled", "circuit_breaker.scope", "model_lockout.max_cooldown_ms", "request_queue.max_queue_depth", "retry.max_retries", "retry.max_retrys"}},
		{"cross-field against the saved value", `{"model_lockout": {"max_cooldown_ms": 100000}}`, []string{"model_lockout.max_cooldown_ms"}},
		{"cross-field initial above max", `{"retry": {"initial_backoff_ms": 40000}}`, []string{"retry.max_backoff_ms"}},
		{"cross-field base above connection max", `{"connection_cooldown": {"max_cooldown_ms": 4000}}`, []string{"connection_cooldown.oauth.base_cooldown_ms"}},
		{"cross-field combo budget", `{"combo_cooldown_wait": {"budget_ms": 1000}}`, []string{"combo_cooldown_wait.budget_ms"}},
		{"range error suppresses cross-field", `{"model_lockout": {"base_cooldown_ms": 1, "max_cooldown_ms": 6000}}`, []string{"model_lockout.base_cooldown_ms"}},
		{"section is not an object", `{"streams": 5}`, []string{"streams"}},
		{"leaf is an object", `{"retry": {"max_retries": {"x": 1}}}`, []string{"retry.max_retries"}},
		{"dotted key", `{"retry.max_retries": 2}`, []string{"retry.max_retries"}},
		{"fractional int", `{"retry": {"max_retries": 2.5}}`, []string{"retry.max_retries"}},
		{"repeated key", `{"retry": {"max_retries": 2, "max_retries": 3}}`, []string{"retry"}},
		{"not an object", `[1]`, []string{""}},
		{"invalid JSON", `{"retry":`, []string{""}},
		{"trailing data", `{} {}`, []string{""}},
		{"empty body", ``, []string{""}},
		{"unknown field in rule", `{"error_rules": [{"name": "a", "statuses": [429], "reason": "rate_limit", "scope": "none", "colour": "red"}]}`, []string{"error_rules"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewMemoryStore()
			s := newService(t, store, nil)
			if _, err := s.Patch(context.Background(), []byte(`{"model_lockout": {"base_cooldown_ms": 200000}}`)); err != nil {
				t.Fatal(err)
			}
			beforeSnap := s.Snapshot()
			beforeDoc, beforeSaves := store.snapshot()

			snap, err := s.Patch(context.Background(), []byte(tt.body))
			if snap != nil {
				t.Error("Patch returned a snapshot with an error")
			}
			if keys := fieldKeys(t, err); !slices.Equal(keys, tt.wantKeys) {
				t.Errorf("keys = %v, want %v (%v)", keys, tt.wantKeys, err)
			}
			if doc, saves := store.snapshot(); doc != beforeDoc || saves != beforeSaves {
				t.Errorf("store changed: %q (%d saves)", doc, saves)
			}
			if s.Snapshot() != beforeSnap {
				t.Error("snapshot was swapped")
			}
		})
	}
}

func TestPatchNullReverts(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	s := newService(t, store, map[string]string{"SWITCHYARD_RETRY_MAX_RETRIES": "4"})
	if _, err := s.Patch(ctx, []byte(`{"retry": {"max_retries": 6, "jitter": 0.3}, "streams": {"idle_timeout_ms": 5000}}`)); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Patch(ctx, []byte(`{"retry": {"max_retries": null}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := snap.Resilience().Retry
	if r.MaxRetries != 4 || snap.Source("retry.max_retries") != SourceEnv {
		t.Errorf("max_retries = %d from %s, want 4 from env", r.MaxRetries, snap.Source("retry.max_retries"))
	}
	if r.Jitter != 0.3 || snap.Source("retry.jitter") != SourcePersisted {
		t.Errorf("jitter = %v from %s, want the saved 0.3", r.Jitter, snap.Source("retry.jitter"))
	}
	snap, err = s.Patch(ctx, []byte(`{"retry": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Resilience().Retry.Jitter != 0.1 || snap.Source("retry.jitter") != SourceDefault {
		t.Errorf("section null did not revert jitter: %v", snap.Resilience().Retry.Jitter)
	}
	if doc, _ := store.snapshot(); doc != `{"streams":{"idle_timeout_ms":5000}}` {
		t.Errorf("stored document = %s", doc)
	}
}

func TestRevisionIncrementsAndNoopDoesNotSave(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	s := newService(t, store, nil)
	if s.Snapshot().Revision() != 0 {
		t.Fatalf("initial revision = %d", s.Snapshot().Revision())
	}
	for i, body := range []string{`{"retry":{"max_retries":1}}`, `{"retry":{"max_retries":2}}`, `{"session_affinity_ttl_ms":60000}`} {
		snap, err := s.Patch(ctx, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(i + 1); snap.Revision() != want || s.Effective().Revision != want {
			t.Errorf("after patch %d revision = %d, want %d", i+1, snap.Revision(), want)
		}
	}
	for _, body := range []string{`{}`, `{"session_affinity_ttl_ms":60000}`, `{"streams":{"idle_timeout_ms":null}}`} {
		snap, err := s.Patch(ctx, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if _, saves := store.snapshot(); saves != 3 || snap.Revision() != 3 {
			t.Errorf("no-op %s saved (saves %d, revision %d)", body, saves, snap.Revision())
		}
	}
}

func TestReloadRestoresSavedValues(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	env := map[string]string{"RATE_LIMIT_MAX_QUEUE_DEPTH": "10"}
	s := newService(t, store, env)
	body := `{"model_lockout": {"enabled": true, "error_codes": [429]}, "retry": {"backoff_factor": 1.5},
		"error_rules": [{"name": "opencode quota", "provider": "opencode", "statuses": [429],
			"header_matches": {"x-ratelimit-remaining-requests": "0"}, "reason": "quota_exhausted", "scope": "connection"}]}`
	if _, err := s.Patch(ctx, []byte(body)); err != nil {
		t.Fatal(err)
	}
	reloaded := newService(t, store, env)
	if w := reloaded.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	want, got := s.Effective(), reloaded.Effective()
	want.Revision, got.Revision = 0, 0
	if !reflect.DeepEqual(want, got) {
		t.Errorf("reloaded document differs:\nwant %+v\ngot  %+v", want, got)
	}
	if got.Sources["request_queue.max_queue_depth"] != SourceEnv || got.Sources["retry.backoff_factor"] != SourcePersisted {
		t.Errorf("sources after reload: %v", got.Sources)
	}
}

func TestLoadSkipsStaleAndInvalidSavedValues(t *testing.T) {
	store := NewMemoryStore()
	store.values[StoreKey] = `{"retry": {"max_retries": 99, "jitter": 0.2, "old_knob": true},
		"gone_section": {"x": 1},
		"model_lockout": {"base_cooldown_ms": 300000, "max_cooldown_ms": 200000}}`
	s := newService(t, store, nil)
	r, snap := s.Snapshot().Resilience(), s.Snapshot()
	if r.Retry.Jitter != 0.2 || snap.Source("retry.jitter") != SourcePersisted {
		t.Errorf("valid saved jitter lost: %v", r.Retry.Jitter)
	}
	if r.Retry.MaxRetries != 3 || r.ModelLockout.BaseCooldownMS != 120_000 || r.ModelLockout.MaxCooldownMS != 1_800_000 {
		t.Errorf("invalid saved values applied: %+v %+v", r.Retry, r.ModelLockout)
	}
	w := strings.Join(s.Warnings(), "\n")
	for _, want := range []string{"retry.max_retries", "retry.old_knob", "gone_section", "model_lockout.max_cooldown_ms"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings do not mention %s:\n%s", want, w)
		}
	}

	store.values[StoreKey] = `not json`
	s = newService(t, store, nil)
	if len(s.Warnings()) != 1 || s.Snapshot().Source("retry.jitter") != SourceDefault {
		t.Errorf("garbage document: warnings %v", s.Warnings())
	}
}

func TestStoreErrors(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("disk on fire")
	store := NewMemoryStore()
	store.getErr = boom
	if _, err := New(ctx, store, nil, fixedNow); !errors.Is(err, boom) {
		t.Errorf("New error = %v, want wrapped %v", err, boom)
	}

	store = NewMemoryStore()
	s := newService(t, store, nil)
	before := s.Snapshot()
	store.saveErr = boom
	if _, err := s.Patch(ctx, []byte(`{"retry":{"max_retries":5}}`)); !errors.Is(err, boom) {
		t.Errorf("Patch error = %v", err)
	}
	if s.Snapshot() != before {
		t.Error("snapshot swapped after a failed save")
	}
	store.saveErr = nil
	if _, err := s.Patch(ctx, []byte(`{"retry":{"jitter":0.5}}`)); err != nil {
		t.Fatal(err)
	}
	if doc, _ := store.snapshot(); doc != `{"retry":{"jitter":0.5}}` {
		t.Errorf("the failed value leaked into the next save: %s", doc)
	}
}

func TestConcurrentPatchesLoseNothing(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	s := newService(t, store, nil)
	var got []*Snapshot
	var gotMu sync.Mutex
	s.OnChange(func(snap *Snapshot) { gotMu.Lock(); got = append(got, snap); gotMu.Unlock() })
	paths := []string{"retry.max_retries", "circuit_breaker.failure_threshold", "model_lockout.max_backoff_steps",
		"request_queue.max_queue_depth", "combo_cooldown_wait.max_attempts", "connection_cooldown.oauth.max_backoff_steps"}
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Go(func() {
			if _, err := s.Patch(ctx, patchOf(p, "7")); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() { _ = s.Snapshot().Resilience().Retry.MaxRetries })
	}
	wg.Wait()
	reloaded := newService(t, store, nil).Snapshot()
	for _, p := range paths {
		if reloaded.Source(p) != SourcePersisted {
			t.Errorf("%s was lost", p)
		}
	}
	if len(got) != len(paths) {
		t.Fatalf("OnChange called %d times, want %d", len(got), len(paths))
	}
	for i, snap := range got {
		if snap.Revision() != int64(i+1) {
			t.Errorf("notification %d has revision %d", i, snap.Revision())
		}
	}
	if s.Snapshot() != got[len(got)-1] {
		t.Error("current snapshot is not the last notified one")
	}
}

func TestEffectiveDocumentJSON(t *testing.T) {
	s := newService(t, NewMemoryStore(), map[string]string{"SWITCHYARD_RETRY_MAX_RETRIES": "2"})
	b, err := json.Marshal(s.Effective())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Values   map[string]json.RawMessage `json:"values"`
		Sources  map[string]string          `json:"sources"`
		Revision *int64                     `json:"revision"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Values) != 15 || len(doc.Sources) != len(registry) || doc.Revision == nil {
		t.Errorf("document shape: %d sections, %d sources", len(doc.Values), len(doc.Sources))
	}
	if doc.Sources["retry.max_retries"] != SourceEnv || doc.Sources["retry.jitter"] != SourceDefault {
		t.Errorf("sources: %v", doc.Sources)
	}
}

func TestRuleValidation(t *testing.T) {
	const good = `{"name":"r","statuses":[429],"reason":"rate_limit","scope":"connection"}`
	tests := []struct {
		name, path, rules string
		wantKeys          []string
	}{
		{"valid rule", "error_rules", `[` + good + `]`, nil},
		{"full rule", "error_rules", `[{"name":"gw","provider":"agentrouter","statuses":[403],"header_matches":{"x-a":""},"body_markers":["quota"],"exclude_markers":["no access"],"reason":"quota_exhausted","scope":"model","cooldown_ms":60000,"terminal":"credits_exhausted"}]`, nil},
		{"body marker only", "error_rules", `[{"name":"m","body_markers":["overloaded"],"reason":"model_capacity","scope":"none"}]`, nil},
		{"bad enums", "error_rules", `[{"name":"r","statuses":[429],"reason":"slow","scope":"world","terminal":"dead"}]`,
			[]string{"error_rules[0].reason", "error_rules[0].scope", "error_rules[0].terminal"}},
		{"status out of range", "error_rules", `[{"name":"r","statuses":[99],"reason":"unknown","scope":"none"}]`, []string{"error_rules[0].statuses"}},
		{"no condition", "error_rules", `[{"name":"r","reason":"unknown","scope":"none","exclude_markers":["x"]}]`, []string{"error_rules[0]"}},
		{"empty name and duplicate", "error_rules", `[` + good + `,` + good + `,{"name":"","statuses":[500],"reason":"unknown","scope":"none"}]`,
			[]string{"error_rules[1].name", "error_rules[2].name"}},
		{"empty marker", "error_rules", `[{"name":"r","body_markers":[""],"reason":"unknown","scope":"none"}]`, []string{"error_rules[0].body_markers"}},
		{"negative cooldown", "error_rules", `[{"name":"r","statuses":[429],"reason":"unknown","scope":"none","cooldown_ms":-1}]`, []string{"error_rules[0].cooldown_ms"}},
		{"wrong type inside rule", "error_rules", `[{"name":"r","statuses":["429"],"reason":"unknown","scope":"none"}]`, []string{"error_rules"}},
		{"valid restatement", "status_restatements", `[{"name":"ar","provider":"agentrouter","from_status":403,"body_markers":["额度不足"],"exclude_markers":["无权访问"],"to_status":429,"retry_after_ms":60000}]`, nil},
		{"restatement statuses", "status_restatements", `[{"name":"x","from_status":0,"to_status":600}]`,
			[]string{"status_restatements[0].from_status", "status_restatements[0].to_status"}},
		{"restatement without name", "status_restatements", `[{"from_status":403,"to_status":429}]`, []string{"status_restatements[0].name"}},
		{"restatement empty header name", "status_restatements", `[{"name":"h","from_status":403,"to_status":429,"header_matches":{" ":"x"}}]`, []string{"status_restatements[0].header_matches"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newService(t, NewMemoryStore(), nil)
			_, err := s.Patch(context.Background(), patchOf(tt.path, tt.rules))
			if tt.wantKeys == nil {
				if err != nil {
					t.Fatalf("Patch: %v", err)
				}
				return
			}
			if keys := fieldKeys(t, err); !slices.Equal(keys, tt.wantKeys) {
				t.Errorf("keys = %v, want %v (%v)", keys, tt.wantKeys, err)
			}
		})
	}
}
