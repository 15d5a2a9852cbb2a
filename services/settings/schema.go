// Package settings holds the typed schema of every resilience setting, its defaults and
// ranges, the layered precedence (default < env < persisted < per-connection override) and
// the immutable snapshot the hot path reads through an atomic pointer.
//
// The structs below mirror the JSON document of GET/PATCH /api/settings/resilience
// (PRODUCT.md §3). Every leaf is described once in the registry (registry.go): its kind,
// unit, range, options and default, from which follow env mapping, JSON and form decoding
// (form.go), validation, sources, persistence, per-provider overrides and the dashboard's
// labels and help texts (catalog keys setting.<path> and setting.<path>.help).
package settings

// Resilience is the whole resilience settings document.
type Resilience struct {
	// ConnectionCooldown configures per-connection cooldown with exponential backoff.
	ConnectionCooldown ConnectionCooldown `json:"connection_cooldown"`
	// Retry configures same-target retries with exponential backoff.
	Retry Retry `json:"retry"`
	// CircuitBreaker configures the per-provider (or per-model) circuit breaker.
	CircuitBreaker CircuitBreaker `json:"circuit_breaker"`
	// ProviderCooldown configures the optional provider cooldown window gate.
	ProviderCooldown ProviderCooldown `json:"provider_cooldown"`
	// ModelLockout configures per connection+model lockouts.
	ModelLockout ModelLockout `json:"model_lockout"`
	// RequestQueue configures request queue admission per provider+connection.
	RequestQueue RequestQueue `json:"request_queue"`
	// QuotaShareConcurrency is the kill switch of the per-connection max_concurrent semaphore.
	QuotaShareConcurrency QuotaShareConcurrency `json:"quota_share_concurrency"`
	// ComboCooldownWait configures waiting for a cooling combo target instead of failing.
	ComboCooldownWait ComboCooldownWait `json:"combo_cooldown_wait"`
	// ComboRouting says how a combo moves from one target to the next.
	ComboRouting ComboRouting `json:"combo_routing"`
	// ClaudeLowPriority configures the Claude OAuth low-priority lane and limit reset.
	ClaudeLowPriority ClaudeLowPriority `json:"claude_low_priority"`
	// Streams configures stream timeouts and watchdogs.
	Streams Streams `json:"streams"`
	// Discovery configures how often providers are asked for their models.
	Discovery Discovery `json:"discovery"`
	// SessionAffinityTTLMS is how long a session stays pinned to a connection. Default 0 (off);
	// range 0–2,592,000,000 (30 days).
	SessionAffinityTTLMS int64 `json:"session_affinity_ttl_ms"`
	// ErrorRules are operator-declared failure classification rules, checked before the
	// built-in ones. Default []; at most 1,000 rules with unique names.
	ErrorRules []ErrorRule `json:"error_rules"`
	// StatusRestatements rewrite an upstream status before classification. Default [];
	// at most 1,000 rules with unique names.
	StatusRestatements []StatusRestatement `json:"status_restatements"`
}

// Discovery configures model discovery.
type Discovery struct {
	// ModelRefreshIntervalMS is how often every provider's model list is fetched again.
	// Default 3,600,000 (1 h); range 60,000–86,400,000.
	ModelRefreshIntervalMS int64 `json:"model_refresh_interval_ms"`
	// ProviderRecheckIntervalMS is how often a provider whose last refresh failed is asked
	// again. Default 60,000 (60 s); 0 = off; range 0–86,400,000.
	ProviderRecheckIntervalMS int64 `json:"provider_recheck_interval_ms"`
}

// ConnectionCooldown configures cooldown = base × 2^level, capped by MaxCooldownMS.
type ConnectionCooldown struct {
	// MaxCooldownMS caps every synthetic connection cooldown. Default 1,800,000 (30 min);
	// range 1,000–86,400,000; must be ≥ both base_cooldown_ms.
	MaxCooldownMS int64 `json:"max_cooldown_ms"`
	// OAuth is the profile for OAuth connections. Defaults: base 5,000, 8 steps, hints off.
	OAuth CooldownProfile `json:"oauth"`
	// APIKey is the profile for API-key connections. Defaults: base 3,000, 5 steps, hints on.
	APIKey CooldownProfile `json:"api_key"`
}

// CooldownProfile is the connection cooldown policy of one auth type.
type CooldownProfile struct {
	// BaseCooldownMS is the cooldown at backoff level 0. Default 5,000 (OAuth) / 3,000
	// (API key); range 100–600,000; must be ≤ max_cooldown_ms.
	BaseCooldownMS int64 `json:"base_cooldown_ms"`
	// MaxBackoffSteps caps the backoff level. Default 8 (OAuth) / 5 (API key); range 0–20.
	MaxBackoffSteps int `json:"max_backoff_steps"`
	// UseUpstreamRetryHints honours Retry-After and reset headers instead of backoff.
	// Default false (OAuth) / true (API key).
	UseUpstreamRetryHints bool `json:"use_upstream_retry_hints"`
}

// Retry configures same-target retries.
type Retry struct {
	// MaxRetries is the number of retries after the first attempt. Default 3; range 0–10.
	MaxRetries int `json:"max_retries"`
	// MaxAttempts is the budget of upstream calls one client request may make across retries and
	// failover, so a client's own retries add up instead of multiplying. Default 6; range 1–100.
	MaxAttempts int `json:"max_attempts"`
	// InitialBackoffMS is the wait before the first retry. Default 1,000; range 0–600,000;
	// must be ≤ max_backoff_ms.
	InitialBackoffMS int64 `json:"initial_backoff_ms"`
	// MaxBackoffMS caps the wait between retries. Default 30,000; range 0–3,600,000.
	MaxBackoffMS int64 `json:"max_backoff_ms"`
	// BackoffFactor multiplies the wait after each retry. Default 2; range 1–10.
	BackoffFactor float64 `json:"backoff_factor"`
	// Jitter is the random ± fraction applied to each wait. Default 0.1; range 0–1.
	Jitter float64 `json:"jitter"`
	// RetryOnStatuses lists statuses that are retried: exact codes ("429") or classes
	// ("5xx"); [] = none. Default ["429","502","503","504","522","524"].
	RetryOnStatuses []string `json:"retry_on_statuses"`
}

// CircuitBreaker configures the breaker.
type CircuitBreaker struct {
	// Enabled turns breakers on. Default true.
	Enabled bool `json:"enabled"`
	// Scope is "provider" (one breaker per provider) or "model" (per provider+model).
	// Default "provider".
	Scope string `json:"scope"`
	// FailureThreshold is the number of consecutive failures that opens the breaker.
	// Default 5; range 0–1,000 (0 = never opens).
	FailureThreshold int `json:"failure_threshold"`
	// SuccessThreshold is the number of probe successes that closes a half-open breaker.
	// Default 2; range 1–100.
	SuccessThreshold int `json:"success_threshold"`
	// TimeoutMS is how long the breaker stays open before probing. Default 30,000;
	// range 1,000–3,600,000.
	TimeoutMS int64 `json:"timeout_ms"`
	// FailureOnStatuses lists statuses that count as failures: codes or classes.
	// Default ["429","5xx"].
	FailureOnStatuses []string `json:"failure_on_statuses"`
	// SlowCallThresholdMS counts calls slower than this as failures. Default 0 (off);
	// range 0–3,600,000.
	SlowCallThresholdMS int64 `json:"slow_call_threshold_ms"`
}

// ProviderCooldown configures the provider cooldown window gate.
type ProviderCooldown struct {
	// Enabled turns the gate on. Default false.
	Enabled bool `json:"enabled"`
	// OAuth is the window of OAuth providers. Defaults: 10 failures in 900,000 → 300,000.
	OAuth ProviderCooldownProfile `json:"oauth"`
	// APIKey is the window of API-key providers. Defaults: 15 failures in 1,800,000 → 600,000.
	APIKey ProviderCooldownProfile `json:"api_key"`
}

// ProviderCooldownProfile cools a provider down after N failures within a window.
type ProviderCooldownProfile struct {
	// FailureThreshold is the number of failures within the window. Default 10 (OAuth) /
	// 15 (API key); range 1–1,000.
	FailureThreshold int `json:"failure_threshold"`
	// FailureWindowMS is the counting window. Default 900,000 (OAuth) / 1,800,000 (API key);
	// range 1,000–86,400,000.
	FailureWindowMS int64 `json:"failure_window_ms"`
	// CooldownMS is how long the provider then cools down. Default 300,000 (OAuth) /
	// 600,000 (API key); range 1,000–86,400,000.
	CooldownMS int64 `json:"cooldown_ms"`
}

// ModelLockout configures connection+model lockouts.
type ModelLockout struct {
	// Enabled turns model lockouts on. Default false.
	Enabled bool `json:"enabled"`
	// ErrorCodes are the upstream statuses that lock a model out. Default
	// [403,404,429,502,503,504]; each 100–599.
	ErrorCodes []int `json:"error_codes"`
	// BaseCooldownMS is the first lockout. Default 120,000; range 5,000–600,000.
	BaseCooldownMS int64 `json:"base_cooldown_ms"`
	// MaxCooldownMS caps synthetic lockouts. Default 1,800,000; range 5,000–3,600,000;
	// must be ≥ base_cooldown_ms.
	MaxCooldownMS int64 `json:"max_cooldown_ms"`
	// MaxBackoffSteps caps the exponent. Default 10; range 0–20.
	MaxBackoffSteps int `json:"max_backoff_steps"`
	// UseExponentialBackoff doubles the lockout per repeated failure. Default true.
	UseExponentialBackoff bool `json:"use_exponential_backoff"`
	// Families groups models that share one quota: provider → family name → model patterns
	// (an exact name, or a prefix ending in "*" such as "claude-opus-*"). A 429/402/403 locks
	// the whole family on that connection. Default {} (each model is its own family).
	Families map[string]map[string][]string `json:"families"`
}

// RequestQueue configures admission per provider+connection.
type RequestQueue struct {
	// MaxWaitMS is the longest wait for a slot. Default 30,000; range 1–86,400,000.
	// Env alias RATE_LIMIT_MAX_WAIT_MS.
	MaxWaitMS int64 `json:"max_wait_ms"`
	// ExecutionMaxWaitMS bounds one execution. Default 600,000; range 1–86,400,000.
	// Env alias RATE_LIMIT_EXECUTION_MAX_WAIT_MS.
	ExecutionMaxWaitMS int64 `json:"execution_max_wait_ms"`
	// MaxQueueDepth is the most requests waiting. Default 0 (unbounded); range 0–100,000.
	// Env alias RATE_LIMIT_MAX_QUEUE_DEPTH.
	MaxQueueDepth int `json:"max_queue_depth"`
}

// QuotaShareConcurrency is the max_concurrent kill switch.
type QuotaShareConcurrency struct {
	// Enabled enforces each connection's max_concurrent. Default true.
	Enabled bool `json:"enabled"`
}

// ComboRouting says how a combo moves from one target to the next.
type ComboRouting struct {
	// SkipSaturated passes over a target whose connections are all at their concurrency cap
	// with requests waiting in line, for the next target that can start now; only when none can
	// does the request wait in the first full target's line. Default true.
	SkipSaturated bool `json:"skip_saturated"`
	// OnFailure says, per failure reason, what a combo does once a target failed with it.
	OnFailure ComboFailureActions `json:"on_failure"`
}

// The actions a combo takes after a target failed (ComboFailureActions).
const (
	// ComboSkip moves on to the next target; the failing connection is treated as the failure
	// says (cooldown, terminal state, lockout) as always.
	ComboSkip = "skip"
	// ComboCool moves on and also locks the model out on the connection that failed, for the
	// failure's cooldown (the upstream's reset hint, else the model lockout's base), so the next
	// requests pass the target over before they call it.
	ComboCool = "cool"
	// ComboStop ends the combo: the client gets this failure.
	ComboStop = "stop"
)

// ComboFailureActions are the combo's action per failure reason: skip, cool or stop. A failure
// the classification lets fail over (a context-overflow or model-access 400) always moves on.
type ComboFailureActions struct {
	// RateLimit: 429 rate limits. Default skip.
	RateLimit string `json:"rate_limit"`
	// QuotaExhausted: quotas and credits used up. Default cool.
	QuotaExhausted string `json:"quota_exhausted"`
	// ModelCapacity: the model is overloaded. Default skip.
	ModelCapacity string `json:"model_capacity"`
	// ServerError: 5xx, broken answers, redirects, transport errors and timeouts. Default skip.
	ServerError string `json:"server_error"`
	// AuthError: credentials refused (the connection is marked expired or banned). Default skip.
	AuthError string `json:"auth_error"`
	// NotFound: the model is not there. Default cool.
	NotFound string `json:"not_found"`
	// RequestRejected: a plain invalid request, which every target would refuse alike.
	// Default stop.
	RequestRejected string `json:"request_rejected"`
	// Unknown: anything else. Default skip.
	Unknown string `json:"unknown"`
}

// For returns the action for a failure reason (a resilience reason string).
func (a ComboFailureActions) For(reason string) string {
	switch reason {
	case "rate_limit":
		return a.RateLimit
	case "quota_exhausted":
		return a.QuotaExhausted
	case "model_capacity":
		return a.ModelCapacity
	case "server_error":
		return a.ServerError
	case "auth_error":
		return a.AuthError
	case "not_found":
		return a.NotFound
	case "request_rejected":
		return a.RequestRejected
	}
	return a.Unknown
}

// ComboCooldownWait configures waiting for a cooling combo.
type ComboCooldownWait struct {
	// Enabled turns the wait on. Default true.
	Enabled bool `json:"enabled"`
	// MaxWaitMS is the longest single wait. Default 90,000; range 0–300,000.
	MaxWaitMS int64 `json:"max_wait_ms"`
	// MaxAttempts is the number of re-dispatches. Default 5; range 0–10.
	MaxAttempts int `json:"max_attempts"`
	// BudgetMS bounds the total wait of one request. Default 300,000; range 0–3,600,000;
	// must be ≥ max_wait_ms.
	BudgetMS int64 `json:"budget_ms"`
}

// ClaudeLowPriority configures the Claude OAuth usage-wall handling.
type ClaudeLowPriority struct {
	// SlowRetryAfterDefaultMS is the slot_busy wait when the server announces none.
	// Default 20,000; range 5,000–600,000.
	SlowRetryAfterDefaultMS int64 `json:"slow_retry_after_default_ms"`
	// SlowMaxWaitDefaultMS bounds the time spent in the lane. Default 1,200,000;
	// range 60,000–21,600,000.
	SlowMaxWaitDefaultMS int64 `json:"slow_max_wait_default_ms"`
	// LaneCooloffMS is the pause after the lane ends. Default 600,000; range 0–86,400,000.
	LaneCooloffMS int64 `json:"lane_cooloff_ms"`
	// LimitResetErrorBackoffMS is the pause after a failed limit reset. Default 900,000;
	// range 0–86,400,000.
	LimitResetErrorBackoffMS int64 `json:"limit_reset_error_backoff_ms"`
}

// Streams configures stream timeouts.
type Streams struct {
	// ConnectTimeoutMS bounds connecting to the upstream. Default 30,000; range 1,000–600,000.
	ConnectTimeoutMS int64 `json:"connect_timeout_ms"`
	// FirstByteTimeoutMS bounds the wait for response headers. Default 600,000;
	// range 1,000–3,600,000.
	FirstByteTimeoutMS int64 `json:"first_byte_timeout_ms"`
	// ReadinessTimeoutMS bounds the wait for the first content. Default 80,000;
	// range 1,000–3,600,000.
	ReadinessTimeoutMS int64 `json:"readiness_timeout_ms"`
	// ReadinessMaxTimeoutMS is what the readiness timeout grows to for large requests and
	// requests that ask for reasoning. Default 180,000; range 1,000–3,600,000.
	ReadinessMaxTimeoutMS int64 `json:"readiness_max_timeout_ms"`
	// IdleTimeoutMS bounds the gap between two content events. Default 600,000; range
	// 1,000–3,600,000.
	IdleTimeoutMS int64 `json:"idle_timeout_ms"`
	// TotalTimeoutMS bounds a stream from its response headers to its end; 0 = no bound.
	// Default 3,600,000; range 0–86,400,000.
	TotalTimeoutMS int64 `json:"total_timeout_ms"`
	// WatchdogCoolsConnection makes a watchdog abort count against the connection (cooldown,
	// breaker, provider health) like a broken stream. Default false: an abort is a local decision.
	WatchdogCoolsConnection bool `json:"watchdog_cools_connection"`
	// ThroughputWatchdog aborts streams that deliver too few useful bytes.
	ThroughputWatchdog ThroughputWatchdog `json:"throughput_watchdog"`
	// Recovery holds back the beginning of a stream so that an early break is retried unseen.
	Recovery StreamRecovery `json:"recovery"`
}

// StreamRecovery configures the hold-back at the start of a stream.
type StreamRecovery struct {
	// Enabled turns the hold-back on. Default false.
	Enabled bool `json:"enabled"`
	// HoldMS is how long after the first content the stream is held back. Default 750;
	// range 0–10,000.
	HoldMS int64 `json:"hold_ms"`
	// HoldBytes is how much of the client's stream is held back at most. Default 65,536;
	// range 0–1,048,576.
	HoldBytes int64 `json:"hold_bytes"`
}

// ThroughputWatchdog configures the optional throughput watchdog.
type ThroughputWatchdog struct {
	// Enabled turns the watchdog on. Default false.
	Enabled bool `json:"enabled"`
	// WarmupMS is the grace period before judging. Default 30,000; range 0–600,000.
	WarmupMS int64 `json:"warmup_ms"`
	// WindowMS is the sliding window. Default 30,000; range 1,000–600,000.
	WindowMS int64 `json:"window_ms"`
	// MinUsefulBytesPerSecond is the lowest acceptable rate. Default 4; range 1–1,000,000.
	MinUsefulBytesPerSecond int64 `json:"min_useful_bytes_per_second"`
	// MinUsefulBytes is the least content a window must carry. Default 1; range 1–1,000,000.
	MinUsefulBytes int64 `json:"min_useful_bytes"`
}

// ErrorRule is an operator-declared classification rule. It matches when every given
// condition matches; header and marker comparisons are case-insensitive substrings.
type ErrorRule struct {
	// Name identifies the rule in logs and diagnostics; required and unique.
	Name string `json:"name"`
	// Provider limits the rule to one provider; "" = any.
	Provider string `json:"provider"`
	// Statuses limits the rule to these upstream statuses (100–599); empty = any.
	Statuses []int `json:"statuses"`
	// HeaderMatches maps a header name (case-insensitive) to a substring its value must
	// contain; all must match. An empty substring only requires the header to be present.
	HeaderMatches map[string]string `json:"header_matches"`
	// BodyMarkers match if any is in the body; empty = no body condition.
	BodyMarkers []string `json:"body_markers"`
	// ExcludeMarkers stop the rule from matching if any is in the body.
	ExcludeMarkers []string `json:"exclude_markers"`
	// Reason is rate_limit, quota_exhausted, model_capacity, server_error, auth_error,
	// not_found, request_rejected or unknown.
	Reason string `json:"reason"`
	// Scope is connection, model, provider or none.
	Scope string `json:"scope"`
	// CooldownMS fixes the cooldown; 0 = computed by the engine; range 0–2,592,000,000.
	CooldownMS int64 `json:"cooldown_ms"`
	// Terminal is "" or banned, expired, credits_exhausted.
	Terminal string `json:"terminal"`
}

// StatusRestatement rewrites an upstream status before classification, e.g. a 403 with a
// quota marker text becomes 429.
type StatusRestatement struct {
	// Name identifies the rule; required and unique.
	Name string `json:"name"`
	// Provider limits the rule to one provider; "" = any.
	Provider string `json:"provider"`
	// FromStatus is the upstream status to restate (100–599).
	FromStatus int `json:"from_status"`
	// BodyMarkers match if any is in the body (case-insensitive); empty = no body condition.
	BodyMarkers []string `json:"body_markers"`
	// ExcludeMarkers keep the status as is if any is in the body.
	ExcludeMarkers []string `json:"exclude_markers"`
	// HeaderMatches maps a header name to a required case-insensitive substring.
	HeaderMatches map[string]string `json:"header_matches"`
	// ToStatus is the status classification sees instead (100–599).
	ToStatus int `json:"to_status"`
	// RetryAfterMS is the Retry-After to assume when the upstream gave none; 0 = none;
	// range 0–2,592,000,000.
	RetryAfterMS int64 `json:"retry_after_ms"`
}
