package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Source names of the layer an effective value came from.
const (
	SourceDefault    = "default"
	SourceEnv        = "env"
	SourcePersisted  = "persisted"
	SourceProvider   = "provider"
	SourceConnection = "connection"
)

// envPrefix starts every canonical environment variable name.
const envPrefix = "SWITCHYARD_"

// fieldErrors collects messages keyed by dotted path; the first message for a key wins.
type fieldErrors map[string]string

func (e fieldErrors) add(key, msg string) {
	if _, ok := e[key]; !ok {
		e[key] = msg
	}
}

// leaf is one setting: the registry entry from which env mapping, decoding, validation,
// sources and persistence are all derived. Slices and rule lists are whole leaves.
type leaf struct {
	path    string
	def     any
	aliases []string // extra env variable names, consulted after the canonical one
	get     func(*Resilience) any
	set     func(*Resilience, any)
	decode  func(json.RawMessage) (any, error)
	parse   func(string) (any, error) // env text → value
	check   func(path string, v any, errs fieldErrors)
}

// alias returns l with an extra env variable name.
func (l leaf) alias(names ...string) leaf {
	l.aliases = append(slices.Clone(l.aliases), names...)
	return l
}

func (l leaf) envNames() []string {
	name := envPrefix + strings.ToUpper(strings.ReplaceAll(l.path, ".", "_"))
	return append([]string{name}, l.aliases...)
}

// newLeaf builds a leaf of Go type T from a field accessor, a validator and an env parser.
func newLeaf[T any](path string, def T, field func(*Resilience) *T, check func(path string, v T, errs fieldErrors), parse func(string) (T, error)) leaf {
	return leaf{
		path: path,
		def:  def,
		get:  func(r *Resilience) any { return *field(r) },
		set:  func(r *Resilience, v any) { *field(r) = v.(T) },
		decode: func(raw json.RawMessage) (any, error) {
			var v T
			if err := strictUnmarshal(raw, &v); err != nil {
				return nil, errors.New(describeDecodeError[T](err))
			}
			return v, nil
		},
		parse: func(s string) (any, error) {
			v, err := parse(s)
			if err != nil {
				return nil, errors.New(describeDecodeError[T](err))
			}
			return v, nil
		},
		check: func(path string, v any, errs fieldErrors) { check(path, v.(T), errs) },
	}
}

// scalar adapts a single-message validator.
func scalar[T any](f func(T) string) func(string, T, fieldErrors) {
	return func(path string, v T, errs fieldErrors) {
		if msg := f(v); msg != "" {
			errs.add(path, msg)
		}
	}
}

type number interface{ int | int64 | float64 }

func between[T number](lo, hi T) func(T) string {
	return func(v T) string {
		if !(v >= lo && v <= hi) { // also rejects NaN
			return fmt.Sprintf("must be between %v and %v", lo, hi)
		}
		return ""
	}
}

func num[T number](path string, def, lo, hi T, field func(*Resilience) *T) leaf {
	return newLeaf(path, def, field, scalar(between(lo, hi)), parseNumber[T])
}

func flag(path string, def bool, field func(*Resilience) *bool) leaf {
	return newLeaf(path, def, field, scalar(func(bool) string { return "" }),
		func(s string) (bool, error) { return strconv.ParseBool(strings.TrimSpace(s)) })
}

func enum(path, def string, allowed []string, field func(*Resilience) *string) leaf {
	return newLeaf(path, def, field, scalar(oneOf(allowed)),
		func(s string) (string, error) { return strings.TrimSpace(s), nil })
}

func statusList(path string, def []string, field func(*Resilience) *[]string) leaf {
	return newLeaf(path, def, field, scalar(checkStatusPatterns), splitList)
}

func codeList(path string, def []int, field func(*Resilience) *[]int) leaf {
	return newLeaf(path, def, field, scalar(checkCodes), func(s string) ([]int, error) {
		parts, _ := splitList(s)
		out := make([]int, 0, len(parts))
		for _, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, err
			}
			out = append(out, n)
		}
		return out, nil
	})
}

// jsonList is a rule list; from the environment it is read as a JSON array.
func jsonList[T any](path string, field func(*Resilience) *[]T, check func(string, []T, fieldErrors)) leaf {
	return newLeaf(path, []T{}, field, check, func(s string) ([]T, error) {
		var v []T
		err := strictUnmarshal([]byte(s), &v)
		return v, err
	})
}

// leaves is the registry: one entry per setting, in document order.
var leaves = []leaf{
	num("connection_cooldown.max_cooldown_ms", 1_800_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ConnectionCooldown.MaxCooldownMS }),
	num("connection_cooldown.oauth.base_cooldown_ms", 5_000, 100, 600_000, func(r *Resilience) *int64 { return &r.ConnectionCooldown.OAuth.BaseCooldownMS }),
	num("connection_cooldown.oauth.max_backoff_steps", 8, 0, 20, func(r *Resilience) *int { return &r.ConnectionCooldown.OAuth.MaxBackoffSteps }),
	flag("connection_cooldown.oauth.use_upstream_retry_hints", false, func(r *Resilience) *bool { return &r.ConnectionCooldown.OAuth.UseUpstreamRetryHints }),
	num("connection_cooldown.api_key.base_cooldown_ms", 3_000, 100, 600_000, func(r *Resilience) *int64 { return &r.ConnectionCooldown.APIKey.BaseCooldownMS }),
	num("connection_cooldown.api_key.max_backoff_steps", 5, 0, 20, func(r *Resilience) *int { return &r.ConnectionCooldown.APIKey.MaxBackoffSteps }),
	flag("connection_cooldown.api_key.use_upstream_retry_hints", true, func(r *Resilience) *bool { return &r.ConnectionCooldown.APIKey.UseUpstreamRetryHints }),

	num("retry.max_retries", 3, 0, 10, func(r *Resilience) *int { return &r.Retry.MaxRetries }),
	num("retry.initial_backoff_ms", 1_000, 0, 600_000, func(r *Resilience) *int64 { return &r.Retry.InitialBackoffMS }),
	num("retry.max_backoff_ms", 30_000, 0, 3_600_000, func(r *Resilience) *int64 { return &r.Retry.MaxBackoffMS }),
	num("retry.backoff_factor", 2.0, 1, 10, func(r *Resilience) *float64 { return &r.Retry.BackoffFactor }),
	num("retry.jitter", 0.1, 0, 1, func(r *Resilience) *float64 { return &r.Retry.Jitter }),
	statusList("retry.retry_on_statuses", []string{"429", "502", "503", "504", "522", "524"}, func(r *Resilience) *[]string { return &r.Retry.RetryOnStatuses }),

	flag("circuit_breaker.enabled", true, func(r *Resilience) *bool { return &r.CircuitBreaker.Enabled }),
	enum("circuit_breaker.scope", "provider", []string{"provider", "model"}, func(r *Resilience) *string { return &r.CircuitBreaker.Scope }),
	num("circuit_breaker.failure_threshold", 5, 0, 1_000, func(r *Resilience) *int { return &r.CircuitBreaker.FailureThreshold }),
	num("circuit_breaker.success_threshold", 2, 1, 100, func(r *Resilience) *int { return &r.CircuitBreaker.SuccessThreshold }),
	num("circuit_breaker.timeout_ms", 30_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.CircuitBreaker.TimeoutMS }),
	statusList("circuit_breaker.failure_on_statuses", []string{"429", "5xx"}, func(r *Resilience) *[]string { return &r.CircuitBreaker.FailureOnStatuses }),
	num("circuit_breaker.slow_call_threshold_ms", 0, 0, 3_600_000, func(r *Resilience) *int64 { return &r.CircuitBreaker.SlowCallThresholdMS }),

	flag("provider_cooldown.enabled", false, func(r *Resilience) *bool { return &r.ProviderCooldown.Enabled }),
	num("provider_cooldown.oauth.failure_threshold", 10, 1, 1_000, func(r *Resilience) *int { return &r.ProviderCooldown.OAuth.FailureThreshold }).alias("SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_THRESHOLD"),
	num("provider_cooldown.oauth.failure_window_ms", 900_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ProviderCooldown.OAuth.FailureWindowMS }).alias("SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_WINDOW_MS"),
	num("provider_cooldown.oauth.cooldown_ms", 300_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ProviderCooldown.OAuth.CooldownMS }).alias("SWITCHYARD_PROVIDER_BREAKER_OAUTH_COOLDOWN_MS"),
	num("provider_cooldown.api_key.failure_threshold", 15, 1, 1_000, func(r *Resilience) *int { return &r.ProviderCooldown.APIKey.FailureThreshold }).alias("SWITCHYARD_PROVIDER_BREAKER_API_KEY_FAILURE_THRESHOLD"),
	num("provider_cooldown.api_key.failure_window_ms", 1_800_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ProviderCooldown.APIKey.FailureWindowMS }).alias("SWITCHYARD_PROVIDER_BREAKER_API_KEY_FAILURE_WINDOW_MS"),
	num("provider_cooldown.api_key.cooldown_ms", 600_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ProviderCooldown.APIKey.CooldownMS }).alias("SWITCHYARD_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS"),

	flag("model_lockout.enabled", false, func(r *Resilience) *bool { return &r.ModelLockout.Enabled }),
	codeList("model_lockout.error_codes", []int{403, 404, 429, 502, 503, 504}, func(r *Resilience) *[]int { return &r.ModelLockout.ErrorCodes }),
	num("model_lockout.base_cooldown_ms", 120_000, 5_000, 600_000, func(r *Resilience) *int64 { return &r.ModelLockout.BaseCooldownMS }),
	num("model_lockout.max_cooldown_ms", 1_800_000, 5_000, 3_600_000, func(r *Resilience) *int64 { return &r.ModelLockout.MaxCooldownMS }),
	num("model_lockout.max_backoff_steps", 10, 0, 20, func(r *Resilience) *int { return &r.ModelLockout.MaxBackoffSteps }),
	flag("model_lockout.use_exponential_backoff", true, func(r *Resilience) *bool { return &r.ModelLockout.UseExponentialBackoff }),
	newLeaf("model_lockout.families", map[string]map[string][]string{}, func(r *Resilience) *map[string]map[string][]string { return &r.ModelLockout.Families },
		checkFamilies, parseFamilies),

	num("request_queue.max_wait_ms", 30_000, 1, 86_400_000, func(r *Resilience) *int64 { return &r.RequestQueue.MaxWaitMS }).alias("RATE_LIMIT_MAX_WAIT_MS"),
	num("request_queue.execution_max_wait_ms", 600_000, 1, 86_400_000, func(r *Resilience) *int64 { return &r.RequestQueue.ExecutionMaxWaitMS }).alias("RATE_LIMIT_EXECUTION_MAX_WAIT_MS"),
	num("request_queue.max_queue_depth", 0, 0, 100_000, func(r *Resilience) *int { return &r.RequestQueue.MaxQueueDepth }).alias("RATE_LIMIT_MAX_QUEUE_DEPTH"),

	flag("quota_share_concurrency.enabled", true, func(r *Resilience) *bool { return &r.QuotaShareConcurrency.Enabled }),

	flag("combo_cooldown_wait.enabled", true, func(r *Resilience) *bool { return &r.ComboCooldownWait.Enabled }),
	num("combo_cooldown_wait.max_wait_ms", 90_000, 0, 300_000, func(r *Resilience) *int64 { return &r.ComboCooldownWait.MaxWaitMS }),
	num("combo_cooldown_wait.max_attempts", 5, 0, 10, func(r *Resilience) *int { return &r.ComboCooldownWait.MaxAttempts }),
	num("combo_cooldown_wait.budget_ms", 300_000, 0, 3_600_000, func(r *Resilience) *int64 { return &r.ComboCooldownWait.BudgetMS }),

	num("claude_low_priority.slow_retry_after_default_ms", 20_000, 5_000, 600_000, func(r *Resilience) *int64 { return &r.ClaudeLowPriority.SlowRetryAfterDefaultMS }),
	num("claude_low_priority.slow_max_wait_default_ms", 1_200_000, 60_000, 21_600_000, func(r *Resilience) *int64 { return &r.ClaudeLowPriority.SlowMaxWaitDefaultMS }),
	num("claude_low_priority.lane_cooloff_ms", 600_000, 0, 86_400_000, func(r *Resilience) *int64 { return &r.ClaudeLowPriority.LaneCooloffMS }),
	num("claude_low_priority.limit_reset_error_backoff_ms", 900_000, 0, 86_400_000, func(r *Resilience) *int64 { return &r.ClaudeLowPriority.LimitResetErrorBackoffMS }),

	num("streams.connect_timeout_ms", 30_000, 1_000, 600_000, func(r *Resilience) *int64 { return &r.Streams.ConnectTimeoutMS }),
	num("streams.first_byte_timeout_ms", 600_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.Streams.FirstByteTimeoutMS }),
	num("streams.readiness_timeout_ms", 80_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.Streams.ReadinessTimeoutMS }),
	num("streams.idle_timeout_ms", 600_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.Streams.IdleTimeoutMS }),
	flag("streams.throughput_watchdog.enabled", false, func(r *Resilience) *bool { return &r.Streams.ThroughputWatchdog.Enabled }),
	num("streams.throughput_watchdog.warmup_ms", 30_000, 0, 600_000, func(r *Resilience) *int64 { return &r.Streams.ThroughputWatchdog.WarmupMS }),
	num("streams.throughput_watchdog.window_ms", 30_000, 1_000, 600_000, func(r *Resilience) *int64 { return &r.Streams.ThroughputWatchdog.WindowMS }),
	num("streams.throughput_watchdog.min_useful_bytes_per_second", 4, 1, 1_000_000, func(r *Resilience) *int64 { return &r.Streams.ThroughputWatchdog.MinUsefulBytesPerSecond }),
	num("streams.throughput_watchdog.min_useful_bytes", 1, 1, 1_000_000, func(r *Resilience) *int64 { return &r.Streams.ThroughputWatchdog.MinUsefulBytes }),

	num("discovery.model_refresh_interval_ms", 3_600_000, 60_000, 86_400_000, func(r *Resilience) *int64 { return &r.Discovery.ModelRefreshIntervalMS }),
	num("discovery.provider_recheck_interval_ms", 60_000, 0, 86_400_000, func(r *Resilience) *int64 { return &r.Discovery.ProviderRecheckIntervalMS }),

	num("session_affinity_ttl_ms", 0, 0, maxRuleMS, func(r *Resilience) *int64 { return &r.SessionAffinityTTLMS }),
	jsonList("error_rules", func(r *Resilience) *[]ErrorRule { return &r.ErrorRules }, checkErrorRules),
	jsonList("status_restatements", func(r *Resilience) *[]StatusRestatement { return &r.StatusRestatements }, checkRestatements),
}

// leafByPath and sections index the registry; both are read-only after init.
var leafByPath, sections = indexLeaves()

func indexLeaves() (map[string]*leaf, map[string]bool) {
	byPath := make(map[string]*leaf, len(leaves))
	secs := map[string]bool{}
	for i := range leaves {
		p := leaves[i].path
		byPath[p] = &leaves[i]
		for j := strings.IndexByte(p, '.'); j >= 0; j = nextDot(p, j) {
			secs[p[:j]] = true
		}
	}
	return byPath, secs
}

func nextDot(s string, after int) int {
	i := strings.IndexByte(s[after+1:], '.')
	if i < 0 {
		return -1
	}
	return after + 1 + i
}

// Defaults returns the built-in defaults.
func Defaults() Resilience {
	var r Resilience
	for _, l := range leaves {
		l.set(&r, cloneValue(l.def))
	}
	return r
}

// cloneValue copies list values so no two documents share a backing array with the registry.
func cloneValue(v any) any {
	switch v := v.(type) {
	case []string:
		return slices.Clone(v)
	case []int:
		return slices.Clone(v)
	case []ErrorRule:
		return slices.Clone(v)
	case []StatusRestatement:
		return slices.Clone(v)
	case map[string]map[string][]string:
		return cloneFamilies(v)
	}
	return v
}

// strictUnmarshal decodes exactly one JSON value, rejecting unknown object fields.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the value")
	}
	return nil
}

func parseNumber[T number](s string) (T, error) {
	s = strings.TrimSpace(s)
	var zero T
	switch any(zero).(type) {
	case int:
		n, err := strconv.Atoi(s)
		return T(n), err
	case int64:
		n, err := strconv.ParseInt(s, 10, 64)
		return T(n), err
	default:
		f, err := strconv.ParseFloat(s, 64)
		return T(f), err
	}
}

// splitList reads a comma-separated env list; "" is the empty list.
func splitList(s string) ([]string, error) {
	out := []string{}
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// describeDecodeError turns a JSON or parse error for a value of type T into English.
func describeDecodeError[T any](err error) string {
	var zero T
	switch any(zero).(type) {
	case int, int64:
		return "must be a whole number"
	case float64:
		return "must be a number"
	case bool:
		return "must be true or false"
	case string:
		return "must be a string"
	case []string:
		return `must be a list of strings such as "429" or "5xx"`
	case []int:
		return "must be a list of whole numbers"
	case map[string]map[string][]string:
		return `must map each provider to families of model patterns, e.g. {"anthropic": {"opus": ["claude-opus-*"]}}`
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return "must be a list of objects"
		}
		return fmt.Sprintf("has the wrong type at %s (expected %s)", typeErr.Field, typeErr.Type)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field") {
		return "has an " + msg
	}
	return "is invalid: " + msg
}
