package settings

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// productDocument is the settings document of PRODUCT.md §3, verbatim, plus the sections added
// since (combo_routing: what a combo does per failure reason; in streams the adaptive readiness
// maximum, the total bound, whether a watchdog abort cools the connection, and the recovery
// hold-back; 529 among the retried statuses): the defaults are contract.
const productDocument = `{
  "connection_cooldown": {"max_cooldown_ms": 1800000,
    "oauth":   {"base_cooldown_ms": 5000, "max_backoff_steps": 8, "use_upstream_retry_hints": false},
    "api_key": {"base_cooldown_ms": 3000, "max_backoff_steps": 5, "use_upstream_retry_hints": true}},
  "retry": {"max_retries": 3, "max_attempts": 6, "initial_backoff_ms": 1000, "max_backoff_ms": 30000,
    "backoff_factor": 2, "jitter": 0.1, "retry_on_statuses": ["429", "502", "503", "504", "522", "524", "529"]},
  "circuit_breaker": {"enabled": true, "scope": "provider", "failure_threshold": 5,
    "success_threshold": 2, "timeout_ms": 30000, "failure_on_statuses": ["429", "5xx"],
    "slow_call_threshold_ms": 0},
  "provider_cooldown": {"enabled": false,
    "oauth":   {"failure_threshold": 10, "failure_window_ms": 900000,  "cooldown_ms": 300000},
    "api_key": {"failure_threshold": 15, "failure_window_ms": 1800000, "cooldown_ms": 600000}},
  "model_lockout": {"enabled": false, "error_codes": [403, 404, 429, 502, 503, 504],
    "base_cooldown_ms": 120000, "max_cooldown_ms": 1800000, "max_backoff_steps": 10,
    "use_exponential_backoff": true, "families": {}},
  "request_queue": {"max_wait_ms": 30000, "execution_max_wait_ms": 600000, "max_queue_depth": 0},
  "quota_share_concurrency": {"enabled": true},
  "combo_cooldown_wait": {"enabled": true, "max_wait_ms": 90000, "max_attempts": 5, "budget_ms": 300000},
  "combo_routing": {"skip_saturated": true, "on_failure": {"rate_limit": "skip", "quota_exhausted": "cool",
    "model_capacity": "skip", "server_error": "skip", "auth_error": "skip", "not_found": "cool",
    "request_rejected": "stop", "unknown": "skip"}},
  "claude_low_priority": {"slow_retry_after_default_ms": 20000, "slow_max_wait_default_ms": 1200000,
    "lane_cooloff_ms": 600000, "limit_reset_error_backoff_ms": 900000},
  "streams": {"connect_timeout_ms": 30000, "first_byte_timeout_ms": 600000,
    "readiness_timeout_ms": 80000, "readiness_max_timeout_ms": 180000, "idle_timeout_ms": 600000,
    "total_timeout_ms": 3600000, "watchdog_cools_connection": false,
    "throughput_watchdog": {"enabled": false, "warmup_ms": 30000, "window_ms": 30000,
      "min_useful_bytes_per_second": 4, "min_useful_bytes": 1},
    "recovery": {"enabled": false, "hold_ms": 750, "hold_bytes": 65536}},
  "discovery": {"model_refresh_interval_ms": 3600000, "provider_recheck_interval_ms": 60000},
  "session_affinity_ttl_ms": 0,
  "error_rules": [],
  "status_restatements": []
}`

func asGeneric(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDefaultsMatchProductDocument(t *testing.T) {
	var want any
	if err := json.Unmarshal([]byte(productDocument), &want); err != nil {
		t.Fatal(err)
	}
	got := asGeneric(t, Defaults())
	wantLeaves, gotLeaves := map[string]any{}, map[string]any{}
	flattenGeneric("", want, wantLeaves)
	flattenGeneric("", got, gotLeaves)
	for p, w := range wantLeaves {
		if g, ok := gotLeaves[p]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("default %s = %v, PRODUCT.md says %v", p, g, w)
		}
	}
	for p := range gotLeaves {
		if _, ok := wantLeaves[p]; !ok {
			t.Errorf("setting %s is not in the PRODUCT.md document", p)
		}
	}
}

// A few typed spot checks, so a wrong JSON tag cannot hide a wrong field.
func TestDefaultsTyped(t *testing.T) {
	d := Defaults()
	tests := []struct {
		name      string
		got, want any
	}{
		{"retry.max_retries", d.Retry.MaxRetries, 3},
		{"retry.backoff_factor", d.Retry.BackoffFactor, 2.0},
		{"retry.jitter", d.Retry.Jitter, 0.1},
		{"circuit_breaker.scope", d.CircuitBreaker.Scope, "provider"},
		{"connection_cooldown.api_key.use_upstream_retry_hints", d.ConnectionCooldown.APIKey.UseUpstreamRetryHints, true},
		{"connection_cooldown.oauth.base_cooldown_ms", d.ConnectionCooldown.OAuth.BaseCooldownMS, int64(5000)},
		{"model_lockout.error_codes", d.ModelLockout.ErrorCodes, []int{403, 404, 429, 502, 503, 504}},
		{"request_queue.execution_max_wait_ms", d.RequestQueue.ExecutionMaxWaitMS, int64(600_000)},
		{"provider_cooldown.api_key.failure_window_ms", d.ProviderCooldown.APIKey.FailureWindowMS, int64(1_800_000)},
		{"streams.throughput_watchdog.min_useful_bytes_per_second", d.Streams.ThroughputWatchdog.MinUsefulBytesPerSecond, int64(4)},
		{"error_rules", d.ErrorRules, []ErrorRule{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

// flattenGeneric maps every non-object value of a decoded JSON document to its dotted path;
// an empty object below the root is a value too (a map-valued leaf such as model_lockout.families).
func flattenGeneric(prefix string, v any, out map[string]any) {
	obj, ok := v.(map[string]any)
	if !ok || len(obj) == 0 && prefix != "" {
		out[prefix] = v
		return
	}
	for k, child := range obj {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flattenGeneric(p, child, out)
	}
}

func TestRegistryCoversEveryLeafOnce(t *testing.T) {
	doc := map[string]any{}
	flattenGeneric("", asGeneric(t, Defaults()), doc)
	var fromDoc, fromRegistry []string
	for p := range doc {
		fromDoc = append(fromDoc, p)
	}
	for _, st := range registry {
		fromRegistry = append(fromRegistry, st.path)
	}
	sort.Strings(fromDoc)
	sort.Strings(fromRegistry)
	if !slices.Equal(fromDoc, fromRegistry) {
		t.Errorf("registry paths differ from the document:\nregistry %v\ndocument %v", fromRegistry, fromDoc)
	}
	// Each leaf's accessor must point at the field its path names.
	for _, l := range registry {
		var r Resilience
		l.set(&r, cloneValue(l.def))
		got := map[string]any{}
		flattenGeneric("", asGeneric(t, r), got)
		for p, v := range got {
			zero := map[string]any{}
			flattenGeneric("", asGeneric(t, Resilience{}), zero)
			if p != l.path && !reflect.DeepEqual(v, zero[p]) {
				t.Errorf("leaf %s writes to %s", l.path, p)
			}
		}
	}
}

func TestEveryFieldIsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "schema.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		if st, ok := ts.Type.(*ast.StructType); ok {
			for _, field := range st.Fields.List {
				if field.Doc == nil || len(field.Doc.Text()) < 10 {
					t.Errorf("%s.%s has no doc comment", ts.Name.Name, field.Names[0].Name)
				}
			}
		}
		return false
	})
}
