package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"switchyard/services/errs"
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

// Kind says what a setting holds and so how it is edited: which input a card shows for it and
// how that input's text is read back.
type Kind int

// The kinds of settings.
const (
	KindNumber   Kind = iota // a count or a fraction: an int, int64 or float64 with a range
	KindDuration             // a whole number of milliseconds with a range; the unit is "ms"
	KindToggle               // on or off
	KindSelect               // one of a fixed list of options
	KindStatuses             // a list of statuses: codes such as "429" or classes such as "5xx"
	KindCodes                // a list of status codes 100–599
	KindFamilies             // model quota families, edited as lines "provider: family = pattern, …"
	KindRules                // a list of rules, edited by a card of its own
	KindText                 // one line of text (an address, an identifier, a version)
	KindWords                // a list of words (scopes, beta names), edited as one line
)

// Setting is one entry of the registry: a setting described once. Its path names it in the
// settings document, in error keys and on the dashboard (label setting.<path>, help
// setting.<path>.help); from the entry follow its default, its environment variables, JSON and
// form decoding, validation, its source and, where a provider may override it, the override.
type Setting struct {
	path        string
	kind        Kind
	def         any
	min, max    float64 // the range of a number; ranged says whether there is one
	ranged      bool
	options     []string // the values of a select
	suggestions []string // offered when adding to a status list
	aliases     []string // extra env variable names, consulted after the canonical one

	get      func(doc any) any // doc is a pointer to the setting's document (*Resilience, *OAuth)
	set      func(doc any, v any)
	accepts  func(any) bool                         // whether a value has the setting's Go type
	decode   func(json.RawMessage) (any, *errs.Msg) // a JSON value of a patch
	parseEnv func(string) (any, *errs.Msg)          // an environment variable's text
	check    func(path string, v any, fe fieldErrors)
	input    func(v any) Input                      // the value as a form shows it
	parse    func(in Input) (any, Input, *errs.Msg) // a form's input back to a value

	provGet func(*ProviderOverrides) (any, bool) // nil: a provider cannot override the setting
	provSet func(*ProviderOverrides, any)
}

// Path is the setting's dotted path, e.g. "retry.max_retries".
func (s *Setting) Path() string { return s.path }

// Kind is what the setting holds.
func (s *Setting) Kind() Kind { return s.kind }

// Unit is the unit its value is written in: "ms" for durations, else "".
func (s *Setting) Unit() string {
	if s.kind == KindDuration {
		return "ms"
	}
	return ""
}

// Range is the smallest and largest value of a number; ok is false for other kinds.
func (s *Setting) Range() (lo, hi float64, ok bool) { return s.min, s.max, s.ranged }

// Options are the values a select offers.
func (s *Setting) Options() []string { return slices.Clone(s.options) }

// Suggestions are statuses offered when adding to a list.
func (s *Setting) Suggestions() []string { return slices.Clone(s.suggestions) }

// LabelKey is the catalog key of the setting's label.
func (s *Setting) LabelKey() string { return "setting." + s.path }

// HelpKey is the catalog key of the setting's help text.
func (s *Setting) HelpKey() string { return "setting." + s.path + ".help" }

// OptionKey is the catalog key of one option's label.
func (s *Setting) OptionKey(value string) string { return "setting." + s.path + ".option." + value }

// EnvNames are the environment variables that set the setting, the canonical one first.
func (s *Setting) EnvNames() []string {
	name := envPrefix + strings.ToUpper(strings.ReplaceAll(s.path, ".", "_"))
	return append([]string{name}, s.aliases...)
}

// Default is the built-in default.
func (s *Setting) Default() any { return cloneValue(s.def) }

// ProviderOverridable reports whether a provider may override the setting.
func (s *Setting) ProviderOverridable() bool { return s.provGet != nil }

// alias adds extra env variable names.
func (s *Setting) alias(names ...string) *Setting {
	s.aliases = append(s.aliases, names...)
	return s
}

// newSetting builds an entry of Go type T from a field accessor, a validator, an env parser and
// its form codec (nil input and parse for settings a card of their own edits).
func newSetting[D, T any](path string, kind Kind, def T, field func(*D) *T, check func(string, T, fieldErrors),
	parseEnv func(string) (T, *errs.Msg), input func(T) Input, parse func(Input) (T, Input, *errs.Msg)) *Setting {
	s := &Setting{
		path: path,
		kind: kind,
		def:  def,
		get:  func(d any) any { return *field(d.(*D)) },
		set:  func(d any, v any) { *field(d.(*D)) = v.(T) },
		accepts: func(v any) bool {
			_, ok := v.(T)
			return ok
		},
		decode: func(raw json.RawMessage) (any, *errs.Msg) {
			var v T
			if err := strictUnmarshal(raw, &v); err != nil {
				m := decodeError[T](err)
				return nil, &m
			}
			return v, nil
		},
		parseEnv: func(text string) (any, *errs.Msg) {
			v, msg := parseEnv(text)
			if msg != nil {
				return nil, msg
			}
			return v, nil
		},
		check: func(path string, v any, fe fieldErrors) {
			if checkBounds(path, v, fe) {
				check(path, v.(T), fe)
			}
		},
	}
	if input != nil {
		s.input = func(v any) Input { return input(v.(T)) }
		s.parse = func(in Input) (any, Input, *errs.Msg) {
			v, shown, msg := parse(in)
			if msg != nil {
				return nil, shown, msg
			}
			return v, shown, nil
		}
	}
	return s
}

// scalar adapts a single-message validator.
func scalar[T any](f func(T) *errs.Msg) func(string, T, fieldErrors) {
	return func(path string, v T, fe fieldErrors) {
		if m := f(v); m != nil {
			fe.add(path, *m)
		}
	}
}

type number interface{ int | int64 | float64 }

func between[T number](lo, hi T) func(T) *errs.Msg {
	return func(v T) *errs.Msg {
		if !(v >= lo && v <= hi) { // also rejects NaN
			return msg("err.between", lo, hi)
		}
		return nil
	}
}

// msg is a message as the pointer the decoders and validators return.
func msg(key string, args ...any) *errs.Msg {
	m := errs.M(key, args...)
	return &m
}

func ranged[D any, T number](kind Kind, path string, def, lo, hi T, field func(*D) *T) *Setting {
	s := newSetting(path, kind, def, field, scalar(between(lo, hi)), envNumber[T],
		func(v T) Input { return Input{Text: formatNumber(v)} },
		func(in Input) (T, Input, *errs.Msg) {
			n, m := parseNumber[T](in.Text)
			return n, Input{Text: strings.TrimSpace(in.Text)}, m
		})
	s.min, s.max, s.ranged = float64(lo), float64(hi), true
	return s
}

// num is a count or fraction with its range.
func num[D any, T number](path string, def, lo, hi T, field func(*D) *T) *Setting {
	return ranged(KindNumber, path, def, lo, hi, field)
}

// ms is a duration in milliseconds with its range.
func ms[D any](path string, def, lo, hi int64, field func(*D) *int64) *Setting {
	return ranged(KindDuration, path, def, lo, hi, field)
}

func flag[D any](path string, def bool, field func(*D) *bool) *Setting {
	return newSetting(path, KindToggle, def, field, func(string, bool, fieldErrors) {},
		func(text string) (bool, *errs.Msg) {
			b, err := strconv.ParseBool(strings.TrimSpace(text))
			if err != nil {
				return false, msg("err.bool")
			}
			return b, nil
		},
		func(v bool) Input { return Input{Text: strconv.FormatBool(v)} },
		parseToggle)
}

func enum[D any](path, def string, allowed []string, field func(*D) *string) *Setting {
	s := newSetting(path, KindSelect, def, field, scalar(oneOf(allowed)),
		func(text string) (string, *errs.Msg) { return strings.TrimSpace(text), nil },
		func(v string) Input { return Input{Text: v} },
		func(in Input) (string, Input, *errs.Msg) {
			text := strings.TrimSpace(in.Text)
			return text, Input{Text: text}, nil
		})
	s.options = allowed
	return s
}

// statusSuggestions are offered for the status lists of retry and the breaker.
var statusSuggestions = []string{"408", "429", "500", "502", "503", "504", "522", "524", "529", "5xx", "4xx"}

func statusList[D any](path string, def []string, field func(*D) *[]string) *Setting {
	s := newSetting(path, KindStatuses, def, field, scalar(checkStatusPatterns), splitList,
		func(v []string) Input { return Input{List: slices.Clone(v)} }, parseStatuses)
	s.suggestions = statusSuggestions
	return s
}

func codeList[D any](path string, def []int, field func(*D) *[]int) *Setting {
	s := newSetting(path, KindCodes, def, field, scalar(checkCodes),
		func(text string) ([]int, *errs.Msg) {
			parts, _ := splitList(text)
			out := make([]int, 0, len(parts))
			for _, p := range parts {
				n, err := strconv.Atoi(p)
				if err != nil {
					return nil, msg("err.codes_list")
				}
				out = append(out, n)
			}
			return out, nil
		},
		func(v []int) Input {
			list := make([]string, len(v))
			for i, n := range v {
				list[i] = strconv.Itoa(n)
			}
			return Input{List: list}
		}, parseCodeChips)
	s.suggestions = []string{"403", "404", "429", "500", "502", "503", "504", "529"}
	return s
}

func families[D any](path string, field func(*D) *map[string]map[string][]string) *Setting {
	return newSetting(path, KindFamilies, map[string]map[string][]string{}, field, checkFamilies,
		func(text string) (map[string]map[string][]string, *errs.Msg) {
			v := map[string]map[string][]string{}
			if err := strictUnmarshal([]byte(text), &v); err != nil {
				return nil, msg("err.families_json")
			}
			return v, nil
		},
		func(v map[string]map[string][]string) Input { return Input{Text: formatFamilies(v)} },
		parseFamilies)
}

// ruleList is a list of rules; from the environment it is read as a JSON array. Its card reads
// each rule's fields itself (ParseWhole, ParseCodes, ParseLines).
func ruleList[D, T any](path string, field func(*D) *[]T, check func(string, []T, fieldErrors)) *Setting {
	return newSetting(path, KindRules, []T{}, field, check, func(text string) ([]T, *errs.Msg) {
		var v []T
		if err := strictUnmarshal([]byte(text), &v); err != nil {
			m := decodeError[[]T](err)
			return nil, &m
		}
		return v, nil
	}, nil, nil)
}

// perProvider lets a provider override s through field of its ProviderOverrides.
func perProvider[T any](s *Setting, field func(*ProviderOverrides) **T) *Setting {
	s.provGet = func(p *ProviderOverrides) (any, bool) {
		if v := *field(p); v != nil {
			return *v, true
		}
		return nil, false
	}
	s.provSet = func(p *ProviderOverrides, v any) {
		if v == nil {
			*field(p) = nil
			return
		}
		t := v.(T)
		*field(p) = &t
	}
	return s
}

// registry holds every setting, in the order the dashboard shows them. Adding a setting is one
// line here (and its field in schema.go) and its label and help in both catalogs: the settings
// card of its section shows it (handlers/settings_cards.go names a card per section).
var registry = []*Setting{
	ms("connection_cooldown.max_cooldown_ms", 1_800_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ConnectionCooldown.MaxCooldownMS }),
	ms("connection_cooldown.api_key.base_cooldown_ms", 3_000, 100, 600_000, func(r *Resilience) *int64 { return &r.ConnectionCooldown.APIKey.BaseCooldownMS }),
	num("connection_cooldown.api_key.max_backoff_steps", 5, 0, 20, func(r *Resilience) *int { return &r.ConnectionCooldown.APIKey.MaxBackoffSteps }),
	flag("connection_cooldown.api_key.use_upstream_retry_hints", true, func(r *Resilience) *bool { return &r.ConnectionCooldown.APIKey.UseUpstreamRetryHints }),
	ms("connection_cooldown.oauth.base_cooldown_ms", 5_000, 100, 600_000, func(r *Resilience) *int64 { return &r.ConnectionCooldown.OAuth.BaseCooldownMS }),
	num("connection_cooldown.oauth.max_backoff_steps", 8, 0, 20, func(r *Resilience) *int { return &r.ConnectionCooldown.OAuth.MaxBackoffSteps }),
	flag("connection_cooldown.oauth.use_upstream_retry_hints", false, func(r *Resilience) *bool { return &r.ConnectionCooldown.OAuth.UseUpstreamRetryHints }),

	perProvider(num("retry.max_retries", 3, 0, 10, func(r *Resilience) *int { return &r.Retry.MaxRetries }),
		func(p *ProviderOverrides) **int { return &p.Retry.MaxRetries }),
	perProvider(num("retry.max_attempts", 6, 1, 100, func(r *Resilience) *int { return &r.Retry.MaxAttempts }),
		func(p *ProviderOverrides) **int { return &p.Retry.MaxAttempts }),
	perProvider(ms("retry.initial_backoff_ms", 1_000, 0, 600_000, func(r *Resilience) *int64 { return &r.Retry.InitialBackoffMS }),
		func(p *ProviderOverrides) **int64 { return &p.Retry.InitialBackoffMS }),
	perProvider(ms("retry.max_backoff_ms", 30_000, 0, 3_600_000, func(r *Resilience) *int64 { return &r.Retry.MaxBackoffMS }),
		func(p *ProviderOverrides) **int64 { return &p.Retry.MaxBackoffMS }),
	perProvider(num("retry.backoff_factor", 2.0, 1, 10, func(r *Resilience) *float64 { return &r.Retry.BackoffFactor }),
		func(p *ProviderOverrides) **float64 { return &p.Retry.BackoffFactor }),
	perProvider(num("retry.jitter", 0.1, 0, 1, func(r *Resilience) *float64 { return &r.Retry.Jitter }),
		func(p *ProviderOverrides) **float64 { return &p.Retry.Jitter }),
	perProvider(statusList("retry.retry_on_statuses", []string{"429", "502", "503", "504", "522", "524", "529"}, func(r *Resilience) *[]string { return &r.Retry.RetryOnStatuses }),
		func(p *ProviderOverrides) **[]string { return &p.Retry.RetryOnStatuses }),

	perProvider(flag("circuit_breaker.enabled", true, func(r *Resilience) *bool { return &r.CircuitBreaker.Enabled }),
		func(p *ProviderOverrides) **bool { return &p.CircuitBreaker.Enabled }),
	perProvider(enum("circuit_breaker.scope", "provider", []string{"provider", "model"}, func(r *Resilience) *string { return &r.CircuitBreaker.Scope }),
		func(p *ProviderOverrides) **string { return &p.CircuitBreaker.Scope }),
	perProvider(num("circuit_breaker.failure_threshold", 5, 0, 1_000, func(r *Resilience) *int { return &r.CircuitBreaker.FailureThreshold }),
		func(p *ProviderOverrides) **int { return &p.CircuitBreaker.FailureThreshold }),
	perProvider(num("circuit_breaker.success_threshold", 2, 1, 100, func(r *Resilience) *int { return &r.CircuitBreaker.SuccessThreshold }),
		func(p *ProviderOverrides) **int { return &p.CircuitBreaker.SuccessThreshold }),
	perProvider(ms("circuit_breaker.timeout_ms", 30_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.CircuitBreaker.TimeoutMS }),
		func(p *ProviderOverrides) **int64 { return &p.CircuitBreaker.TimeoutMS }),
	perProvider(statusList("circuit_breaker.failure_on_statuses", []string{"429", "5xx"}, func(r *Resilience) *[]string { return &r.CircuitBreaker.FailureOnStatuses }),
		func(p *ProviderOverrides) **[]string { return &p.CircuitBreaker.FailureOnStatuses }),
	perProvider(ms("circuit_breaker.slow_call_threshold_ms", 0, 0, 3_600_000, func(r *Resilience) *int64 { return &r.CircuitBreaker.SlowCallThresholdMS }),
		func(p *ProviderOverrides) **int64 { return &p.CircuitBreaker.SlowCallThresholdMS }),

	flag("provider_cooldown.enabled", false, func(r *Resilience) *bool { return &r.ProviderCooldown.Enabled }),
	num("provider_cooldown.api_key.failure_threshold", 15, 1, 1_000, func(r *Resilience) *int { return &r.ProviderCooldown.APIKey.FailureThreshold }).alias("SWITCHYARD_PROVIDER_BREAKER_API_KEY_FAILURE_THRESHOLD"),
	ms("provider_cooldown.api_key.failure_window_ms", 1_800_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ProviderCooldown.APIKey.FailureWindowMS }).alias("SWITCHYARD_PROVIDER_BREAKER_API_KEY_FAILURE_WINDOW_MS"),
	ms("provider_cooldown.api_key.cooldown_ms", 600_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ProviderCooldown.APIKey.CooldownMS }).alias("SWITCHYARD_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS"),
	num("provider_cooldown.oauth.failure_threshold", 10, 1, 1_000, func(r *Resilience) *int { return &r.ProviderCooldown.OAuth.FailureThreshold }).alias("SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_THRESHOLD"),
	ms("provider_cooldown.oauth.failure_window_ms", 900_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ProviderCooldown.OAuth.FailureWindowMS }).alias("SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_WINDOW_MS"),
	ms("provider_cooldown.oauth.cooldown_ms", 300_000, 1_000, 86_400_000, func(r *Resilience) *int64 { return &r.ProviderCooldown.OAuth.CooldownMS }).alias("SWITCHYARD_PROVIDER_BREAKER_OAUTH_COOLDOWN_MS"),

	flag("model_lockout.enabled", false, func(r *Resilience) *bool { return &r.ModelLockout.Enabled }),
	codeList("model_lockout.error_codes", []int{403, 404, 429, 502, 503, 504}, func(r *Resilience) *[]int { return &r.ModelLockout.ErrorCodes }),
	ms("model_lockout.base_cooldown_ms", 120_000, 5_000, 600_000, func(r *Resilience) *int64 { return &r.ModelLockout.BaseCooldownMS }),
	ms("model_lockout.max_cooldown_ms", 1_800_000, 5_000, 3_600_000, func(r *Resilience) *int64 { return &r.ModelLockout.MaxCooldownMS }),
	flag("model_lockout.use_exponential_backoff", true, func(r *Resilience) *bool { return &r.ModelLockout.UseExponentialBackoff }),
	num("model_lockout.max_backoff_steps", 10, 0, 20, func(r *Resilience) *int { return &r.ModelLockout.MaxBackoffSteps }),
	families("model_lockout.families", func(r *Resilience) *map[string]map[string][]string { return &r.ModelLockout.Families }),

	ms("request_queue.max_wait_ms", 30_000, 1, 86_400_000, func(r *Resilience) *int64 { return &r.RequestQueue.MaxWaitMS }).alias("RATE_LIMIT_MAX_WAIT_MS"),
	ms("request_queue.execution_max_wait_ms", 600_000, 1, 86_400_000, func(r *Resilience) *int64 { return &r.RequestQueue.ExecutionMaxWaitMS }).alias("RATE_LIMIT_EXECUTION_MAX_WAIT_MS"),
	num("request_queue.max_queue_depth", 0, 0, 100_000, func(r *Resilience) *int { return &r.RequestQueue.MaxQueueDepth }).alias("RATE_LIMIT_MAX_QUEUE_DEPTH"),

	flag("quota_share_concurrency.enabled", true, func(r *Resilience) *bool { return &r.QuotaShareConcurrency.Enabled }),

	flag("combo_cooldown_wait.enabled", true, func(r *Resilience) *bool { return &r.ComboCooldownWait.Enabled }),
	ms("combo_cooldown_wait.max_wait_ms", 90_000, 0, 300_000, func(r *Resilience) *int64 { return &r.ComboCooldownWait.MaxWaitMS }),
	num("combo_cooldown_wait.max_attempts", 5, 0, 10, func(r *Resilience) *int { return &r.ComboCooldownWait.MaxAttempts }),
	ms("combo_cooldown_wait.budget_ms", 300_000, 0, 3_600_000, func(r *Resilience) *int64 { return &r.ComboCooldownWait.BudgetMS }),

	flag("combo_routing.skip_saturated", true, func(r *Resilience) *bool { return &r.ComboRouting.SkipSaturated }),
	enum("combo_routing.on_failure.rate_limit", ComboSkip, comboActions, func(r *Resilience) *string { return &r.ComboRouting.OnFailure.RateLimit }),
	enum("combo_routing.on_failure.quota_exhausted", ComboCool, comboActions, func(r *Resilience) *string { return &r.ComboRouting.OnFailure.QuotaExhausted }),
	enum("combo_routing.on_failure.model_capacity", ComboSkip, comboActions, func(r *Resilience) *string { return &r.ComboRouting.OnFailure.ModelCapacity }),
	enum("combo_routing.on_failure.server_error", ComboSkip, comboActions, func(r *Resilience) *string { return &r.ComboRouting.OnFailure.ServerError }),
	enum("combo_routing.on_failure.auth_error", ComboSkip, comboActions, func(r *Resilience) *string { return &r.ComboRouting.OnFailure.AuthError }),
	enum("combo_routing.on_failure.not_found", ComboCool, comboActions, func(r *Resilience) *string { return &r.ComboRouting.OnFailure.NotFound }),
	enum("combo_routing.on_failure.request_rejected", ComboStop, comboActions, func(r *Resilience) *string { return &r.ComboRouting.OnFailure.RequestRejected }),
	enum("combo_routing.on_failure.unknown", ComboSkip, comboActions, func(r *Resilience) *string { return &r.ComboRouting.OnFailure.Unknown }),

	ms("claude_low_priority.slow_retry_after_default_ms", 20_000, 5_000, 600_000, func(r *Resilience) *int64 { return &r.ClaudeLowPriority.SlowRetryAfterDefaultMS }),
	ms("claude_low_priority.slow_max_wait_default_ms", 1_200_000, 60_000, 21_600_000, func(r *Resilience) *int64 { return &r.ClaudeLowPriority.SlowMaxWaitDefaultMS }),
	ms("claude_low_priority.lane_cooloff_ms", 600_000, 0, 86_400_000, func(r *Resilience) *int64 { return &r.ClaudeLowPriority.LaneCooloffMS }),
	ms("claude_low_priority.limit_reset_error_backoff_ms", 900_000, 0, 86_400_000, func(r *Resilience) *int64 { return &r.ClaudeLowPriority.LimitResetErrorBackoffMS }),

	ms("streams.connect_timeout_ms", 30_000, 1_000, 600_000, func(r *Resilience) *int64 { return &r.Streams.ConnectTimeoutMS }).alias("FETCH_CONNECT_TIMEOUT_MS"),
	ms("streams.first_byte_timeout_ms", 600_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.Streams.FirstByteTimeoutMS }).alias("FETCH_TIMEOUT_MS"),
	ms("streams.readiness_timeout_ms", 80_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.Streams.ReadinessTimeoutMS }).alias("STREAM_READINESS_TIMEOUT_MS"),
	ms("streams.readiness_max_timeout_ms", 180_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.Streams.ReadinessMaxTimeoutMS }).alias("STREAM_READINESS_MAX_TIMEOUT_MS"),
	ms("streams.idle_timeout_ms", 600_000, 1_000, 3_600_000, func(r *Resilience) *int64 { return &r.Streams.IdleTimeoutMS }).alias("STREAM_IDLE_TIMEOUT_MS"),
	ms("streams.total_timeout_ms", 3_600_000, 0, 86_400_000, func(r *Resilience) *int64 { return &r.Streams.TotalTimeoutMS }).alias("STREAM_TOTAL_TIMEOUT_MS"),
	flag("streams.watchdog_cools_connection", false, func(r *Resilience) *bool { return &r.Streams.WatchdogCoolsConnection }),
	flag("streams.throughput_watchdog.enabled", false, func(r *Resilience) *bool { return &r.Streams.ThroughputWatchdog.Enabled }).alias("STREAM_THROUGHPUT_WATCHDOG_ENABLED"),
	ms("streams.throughput_watchdog.warmup_ms", 30_000, 0, 600_000, func(r *Resilience) *int64 { return &r.Streams.ThroughputWatchdog.WarmupMS }).alias("STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS"),
	ms("streams.throughput_watchdog.window_ms", 30_000, 1_000, 600_000, func(r *Resilience) *int64 { return &r.Streams.ThroughputWatchdog.WindowMS }).alias("STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS"),
	num("streams.throughput_watchdog.min_useful_bytes_per_second", 4, 1, 1_000_000, func(r *Resilience) *int64 { return &r.Streams.ThroughputWatchdog.MinUsefulBytesPerSecond }).alias("STREAM_THROUGHPUT_WATCHDOG_MIN_USEFUL_BYTES_PER_SECOND"),
	num("streams.throughput_watchdog.min_useful_bytes", 1, 1, 1_000_000, func(r *Resilience) *int64 { return &r.Streams.ThroughputWatchdog.MinUsefulBytes }).alias("STREAM_THROUGHPUT_WATCHDOG_MIN_USEFUL_BYTES"),
	flag("streams.recovery.enabled", false, func(r *Resilience) *bool { return &r.Streams.Recovery.Enabled }).alias("STREAM_RECOVERY_ENABLED"),
	ms("streams.recovery.hold_ms", 750, 0, 10_000, func(r *Resilience) *int64 { return &r.Streams.Recovery.HoldMS }),
	num("streams.recovery.hold_bytes", 64<<10, 0, 1<<20, func(r *Resilience) *int64 { return &r.Streams.Recovery.HoldBytes }),

	ms("discovery.model_refresh_interval_ms", 3_600_000, 60_000, 86_400_000, func(r *Resilience) *int64 { return &r.Discovery.ModelRefreshIntervalMS }),
	ms("discovery.provider_recheck_interval_ms", 60_000, 0, 86_400_000, func(r *Resilience) *int64 { return &r.Discovery.ProviderRecheckIntervalMS }),

	ms("session_affinity_ttl_ms", 0, 0, maxRuleMS, func(r *Resilience) *int64 { return &r.SessionAffinityTTLMS }),
	ruleList("error_rules", func(r *Resilience) *[]ErrorRule { return &r.ErrorRules }, checkErrorRules),
	ruleList("status_restatements", func(r *Resilience) *[]StatusRestatement { return &r.StatusRestatements }, checkRestatements),
}

// comboActions are the values of combo_routing.on_failure.*.
var comboActions = []string{ComboSkip, ComboCool, ComboStop}

// byPath and sections index the registry; both are read-only after init.
var byPath, sections = indexRegistry(registry)

// schema is one settings document: its settings in document order, indexed by path, the key
// its saved values live under and its cross-field rules. The resilience document and the OAuth
// document (oauth.go) are both read, layered, validated and saved by the same code through it.
type schema struct {
	key      string // the key_value key of the saved values
	list     []*Setting
	byPath   map[string]*Setting
	sections map[string]bool
	newDoc   func() any // a pointer to an empty document
	cross    func(doc any, fe fieldErrors) []crossCheck
}

// resilienceSchema is the resilience document (GET/PATCH /api/settings/resilience).
var resilienceSchema = &schema{key: StoreKey, list: registry, byPath: byPath, sections: sections,
	newDoc: func() any { return new(Resilience) },
	cross:  func(doc any, fe fieldErrors) []crossCheck { return checkCross(doc.(*Resilience), fe) }}

func indexRegistry(list []*Setting) (map[string]*Setting, map[string]bool) {
	idx := make(map[string]*Setting, len(list))
	secs := map[string]bool{}
	for _, s := range list {
		idx[s.path] = s
		for j := strings.IndexByte(s.path, '.'); j >= 0; j = nextDot(s.path, j) {
			secs[s.path[:j]] = true
		}
	}
	return idx, secs
}

func nextDot(s string, after int) int {
	i := strings.IndexByte(s[after+1:], '.')
	if i < 0 {
		return -1
	}
	return after + 1 + i
}

// Lookup returns the setting at path, of the resilience, the OAuth or the session lifetimes
// document (their paths never collide).
func Lookup(path string) (*Setting, bool) {
	if s, ok := byPath[path]; ok {
		return s, true
	}
	if s, ok := oauthSchema.byPath[path]; ok {
		return s, true
	}
	s, ok := sessionByPath[path]
	return s, ok
}

// Section returns the paths of the settings at or below section (e.g. "retry" gives
// retry.max_retries, …), of the resilience or the OAuth document, in registry order. Rule lists
// are left out: a form field cannot edit them.
func Section(section string) []string {
	var out []string
	for _, list := range [][]*Setting{registry, oauthRegistry} {
		for _, s := range list {
			if s.kind != KindRules && (s.path == section || strings.HasPrefix(s.path, section+".")) {
				out = append(out, s.path)
			}
		}
	}
	return out
}

// All returns every setting, in document order.
func All() []*Setting { return slices.Clone(registry) }

// ProviderOverridable returns the settings a provider may override, in document order.
func ProviderOverridable() []*Setting {
	var out []*Setting
	for _, s := range registry {
		if s.ProviderOverridable() {
			out = append(out, s)
		}
	}
	return out
}

// Defaults returns the built-in defaults.
func Defaults() Resilience {
	var r Resilience
	for _, s := range registry {
		s.set(&r, cloneValue(s.def))
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

// envNumber reads a number from the environment.
func envNumber[T number](text string) (T, *errs.Msg) {
	text = strings.TrimSpace(text)
	var zero T
	switch any(zero).(type) {
	case int:
		n, err := strconv.Atoi(text)
		if err != nil {
			return zero, msg("err.whole_number")
		}
		return T(n), nil
	case int64:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return zero, msg("err.whole_number")
		}
		return T(n), nil
	default:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return zero, msg("err.number")
		}
		return T(f), nil
	}
}

// splitList reads a comma-separated env list; "" is the empty list.
func splitList(s string) ([]string, *errs.Msg) {
	out := []string{}
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// decodeError says why a JSON value is no value of type T.
func decodeError[T any](err error) errs.Msg {
	var zero T
	switch any(zero).(type) {
	case int, int64:
		return errs.M("err.whole_number")
	case float64:
		return errs.M("err.number")
	case bool:
		return errs.M("err.bool")
	case string:
		return errs.M("err.string")
	case []string:
		return errs.M("err.status_list")
	case []int:
		return errs.M("err.codes_list")
	case map[string]map[string][]string:
		return errs.M("err.families_json")
	}
	return jsonError(err)
}

// jsonError says what is wrong with a JSON object or list of objects.
func jsonError(err error) errs.Msg {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return errs.M("err.object_list")
		}
		return errs.M("err.wrong_type", typeErr.Field, typeErr.Type.String())
	}
	text := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(text, "unknown field "); ok {
		return errs.M("err.unknown_field", strings.Trim(name, `"`))
	}
	return errs.M("err.invalid_json", text)
}
