package resilience

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// AuthType is how a connection authenticates upstream.
type AuthType string

// Auth types of a connection.
const (
	AuthOAuth  AuthType = "oauth"
	AuthAPIKey AuthType = "api_key"
)

// Reason says why an upstream answer failed.
type Reason string

// Failure reasons.
const (
	ReasonRateLimit       Reason = "rate_limit"
	ReasonQuotaExhausted  Reason = "quota_exhausted"
	ReasonModelCapacity   Reason = "model_capacity"
	ReasonServerError     Reason = "server_error"
	ReasonAuthError       Reason = "auth_error"
	ReasonNotFound        Reason = "not_found"
	ReasonRequestRejected Reason = "request_rejected"
	ReasonUnknown         Reason = "unknown"
)

// Valid reports whether r is one of the defined reasons.
func (r Reason) Valid() bool {
	switch r {
	case ReasonRateLimit, ReasonQuotaExhausted, ReasonModelCapacity, ReasonServerError,
		ReasonAuthError, ReasonNotFound, ReasonRequestRejected, ReasonUnknown:
		return true
	}
	return false
}

// Transient reports whether the reason is a short-lived condition worth waiting out (combo
// cooldown wait); quota exhaustion, auth and not-found never are.
func (r Reason) Transient() bool {
	return r == ReasonRateLimit || r == ReasonModelCapacity || r == ReasonServerError
}

// CodeStoredStateMissing (Outcome.Code): the upstream does not hold the stored response, item
// or conversation the request names (OpenAI keeps them per organisation and project). Another
// connection of the provider may: the request fails over, and nothing is recorded against
// the connection or the model (services/proxy/stored.go routes such requests to the
// connection that made the state).
const CodeStoredStateMissing = "stored_state_not_found"

// Scope says which state a failure should cool down.
type Scope string

// Failure scopes.
const (
	// ScopeConnection cools the connection (account, API key) that answered.
	ScopeConnection Scope = "connection"
	// ScopeModel locks the model (or its quota family) on that connection.
	ScopeModel Scope = "model"
	// ScopeProvider cools the whole provider.
	ScopeProvider Scope = "provider"
	// ScopeNone records nothing: no cooldown, no lockout. The request itself failed.
	ScopeNone Scope = "none"
)

// Valid reports whether s is one of the defined scopes.
func (s Scope) Valid() bool {
	switch s {
	case ScopeConnection, ScopeModel, ScopeProvider, ScopeNone:
		return true
	}
	return false
}

// Terminal is a connection state that no cooldown may overwrite; only new credentials or an
// operator clear it.
type Terminal string

// Terminal states; TerminalNone means the failure is not terminal.
const (
	TerminalNone             Terminal = ""
	TerminalBanned           Terminal = "banned"
	TerminalExpired          Terminal = "expired"
	TerminalCreditsExhausted Terminal = "credits_exhausted"
)

// Valid reports whether t is one of the defined terminal states (TerminalNone included).
func (t Terminal) Valid() bool {
	switch t {
	case TerminalNone, TerminalBanned, TerminalExpired, TerminalCreditsExhausted:
		return true
	}
	return false
}

// RejectionsBeforeBan is how many consecutive request_rejected answers with ScopeConnection (a
// plain 403 such as Anthropic's "Request not allowed") a connection may get before the caller
// marks it banned. Classify never bans on a single 403; counting the streak is the caller's job.
// request_rejected with ScopeNone (a bad request, context overflow, a route restriction, a
// Cloudflare fingerprint rejection) is about the request, not the account, and never counts.
const RejectionsBeforeBan = 3

// Rule is an operator-declared classification rule (settings "error_rules"). A rule matches when
// every condition holds: Provider ("" = any, case-insensitive), Statuses (empty = any; the
// status after restatement), HeaderMatches (every header present with a value containing the
// given text, case-insensitive; "" = present), BodyMarkers (any one present, case-insensitive;
// empty = no body condition) and no ExcludeMarkers present. The first matching rule overrides the
// built-in result; unlike the reference system, rules also fire for 400.
type Rule struct {
	Name           string
	Provider       string
	Statuses       []int
	HeaderMatches  map[string]string
	BodyMarkers    []string
	ExcludeMarkers []string
	// Reason replaces the built-in reason; "" keeps it.
	Reason Reason
	// Scope replaces the built-in scope; "" keeps it.
	Scope Scope
	// Cooldown > 0 replaces any cooldown (upstream hints included), capped at MaxResetHint;
	// 0 keeps an upstream hint if there is one and otherwise leaves it to backoff.
	Cooldown time.Duration
	// Terminal always replaces the built-in terminal state: a rule is the operator's verdict,
	// so a rule without one makes the answer non-terminal (e.g. "OpenRouter 402 → 2 min").
	Terminal Terminal
}

// Restatement corrects a misleading upstream status before classification (settings
// "status_restatements"), e.g. a gateway that reports a temporary quota wall as 403 with a
// marker text is restated to 429. It matches on Provider ("" = any), FromStatus (exact; 0 never
// matches), HeaderMatches, BodyMarkers and ExcludeMarkers like Rule; exclude markers keep
// permanent errors ("no access to this model") at their original status. The first matching
// restatement applies.
type Restatement struct {
	Name           string
	Provider       string
	FromStatus     int
	HeaderMatches  map[string]string
	BodyMarkers    []string
	ExcludeMarkers []string
	// ToStatus is the status the answer is treated as (100–599; otherwise the rule is skipped).
	ToStatus int
	// RetryAfter is what the restated answer tells the client (Outcome.RetryAfter). It is not
	// a cooldown: the cooldown engine computes that as for any other answer of ToStatus.
	RetryAfter time.Duration
}

// Input is one failed upstream answer.
type Input struct {
	// Status is the HTTP status; 0 (or less) means no answer (transport error). A 2xx is an
	// error hidden in a 200: the error object's status is used, else 502. A 3xx is a redirect,
	// which the gateway never follows: a server error whose effective status is 502.
	Status int
	Header http.Header
	// Body is the response body or its start; only the first 16 KiB are read.
	Body     string
	Provider string
	AuthType AuthType
	// ErrorCode and ErrorType are the structured error fields when the caller already parsed
	// them; when empty they are read from Body.
	ErrorCode, ErrorType string
	// Now is the time the answer arrived; reset hints are relative to it.
	Now          time.Time
	Rules        []Rule
	Restatements []Restatement
}

// Outcome is what Classify decided.
type Outcome struct {
	Reason Reason
	Scope  Scope
	// Cooldown is how long Scope should cool down; 0 lets the cooldown engine compute it from
	// backoff. Always 0 for ScopeNone and terminal outcomes; never above MaxResetHint.
	Cooldown time.Duration
	// FromUpstream is true when Cooldown is the upstream's own reset hint (which the engine
	// honours or not depending on the auth type's use_upstream_retry_hints); false for synthetic
	// and operator cooldowns, which the engine caps at its configured max.
	FromUpstream bool
	Terminal     Terminal
	// Failover says whether to try another connection or target.
	Failover bool
	// Status is the effective status: after hidden-error mapping and restatement.
	Status int
	// RetryAfter is what to tell the client: the restatement's Retry-After, else the upstream
	// hint, else 0.
	RetryAfter time.Duration
	// UntilReset says Cooldown is the end of the account's usage window as the upstream
	// announced it (the Codex backend's usage_limit_reached with its resets_at): the connection
	// rests exactly until then for every auth type (use_upstream_retry_hints is about rate-limit
	// hints, not about the end of a window the account has used up), the rest is no step of its
	// backoff, and the answer says nothing about the provider's health.
	UntilReset bool
	// Rule names the operator rule that decided, else the restatement that applied, else "".
	Rule string
	// Restatement names the restatement that changed the status, if any.
	Restatement string
	// Message is a short English explanation for logs and last_error.
	Message string
	// Code names the failure more finely than Reason where a built-in verdict has a name of
	// its own (CodeStoredStateMissing); the request's chain shows it. "" = Reason says it all.
	Code string
	// At is when the answer was classified (Input.Now). Cooldown counts from it, so a cooldown
	// recorded a moment later still ends at the instant an upstream's reset names; zero: the
	// cooldown engine's own clock.
	At time.Time
}

// cooldownKind says how a built-in verdict gets its cooldown when it has a scope.
type cooldownKind int

const (
	// cdBackoff: the upstream hint when present, else 0 (engine backoff).
	cdBackoff cooldownKind = iota
	// cdQuota: the upstream hint when present, else a quota window (classify_markers.go).
	cdQuota
	// cdWindow: a usage window used up; the reset the body announces, else any other upstream
	// hint (Outcome.UntilReset either way), else a quota window as for cdQuota.
	cdWindow
)

// facts is what the built-in table decides on.
type facts struct {
	status int
	auth   AuthType
	// evidence holds, per signal, the marker or code that raised it; "" = absent.
	evidence [numSignals]string
}

func (f *facts) has(s signal) bool { return f.evidence[s] != "" }

// quotaLike: a daily limit, or quota wording that is not about a per-minute bucket (Gemini and
// Google say "Quota exceeded for metric …PerMinute…" for plain rate limits).
func (f *facts) quotaLike() bool {
	return f.has(sigPerDay) || (f.has(sigQuota) && !f.has(sigPerMinute))
}

func is4xx(status int) bool { return status >= 400 && status < 500 }

// isBadRequest: the statuses that say "this request, as sent, is not acceptable here".
func isBadRequest(status int) bool { return status == 400 || status == 413 || status == 422 }

// builtinRule is one row of the built-in classification table.
type builtinRule struct {
	name     string
	match    func(f *facts) bool
	reason   Reason
	scope    Scope
	terminal Terminal
	failover bool
	cooldown cooldownKind
	// evidence is the signal whose marker is quoted in the message; sigNone for none.
	evidence signal
	msg      string
	// code is Outcome.Code for the row ("" = none).
	code string
}

// builtinRules is the built-in classification, first match wins. Judgment calls:
//
//   - Ban and credit wording is only read below 500: a server error that mentions "billing" or
//     a disabled account is still a server error.
//   - Credit wording on a 429 from an API key (or unknown auth) stays a quota cooldown, as
//     OpenAI's "exceeded your current quota, … billing details" does; only OAuth subscriptions
//     turn it terminal.
//   - 400-family answers (400, 413, 422) record nothing (ScopeNone): context overflow and model
//     access fail over because another target may accept the request; any other 400 does not.
//     A 400 carries no evidence about time, so no cooldown or lockout is guessed from it.
//   - A plain 403 cools the connection and fails over but is never terminal; the caller bans
//     after RejectionsBeforeBan in a row. A 403 about model access locks only the model.
//   - A 429 that names a used-up usage window (the Codex backend's usage_limit_reached) is the
//     account's quota until the reset it announces, before any credit wording is read: the
//     window comes back by itself, so it is never terminal.
var builtinRules = []builtinRule{
	{name: "transport_error", match: func(f *facts) bool { return f.status <= 0 },
		reason: ReasonServerError, scope: ScopeConnection, failover: true, evidence: sigNone,
		msg: "no answer from upstream"},
	{name: "redirect", match: func(f *facts) bool { return f.status >= 300 && f.status < 400 },
		reason: ReasonServerError, scope: ScopeConnection, failover: true, evidence: sigNone,
		msg: "redirect, not followed"},
	{name: "account_deactivated", match: func(f *facts) bool { return f.status < 500 && f.has(sigBanned) },
		reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalBanned, failover: true, evidence: sigBanned,
		msg: "account deactivated upstream"},
	{name: "usage_window", match: func(f *facts) bool { return f.status == 429 && f.has(sigUsageWindow) },
		reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: cdWindow, evidence: sigUsageWindow,
		msg: "usage window used up"},
	{name: "credits_on_api_key_429", match: func(f *facts) bool {
		return f.status == 429 && f.has(sigCredits) && f.auth != AuthOAuth
	},
		reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: cdQuota, evidence: sigCredits,
		msg: "quota exhausted (credit wording on an API-key 429)"},
	{name: "credits_exhausted", match: func(f *facts) bool { return f.status < 500 && (f.status == 402 || f.has(sigCredits)) },
		reason: ReasonQuotaExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: true, evidence: sigCredits,
		msg: "credits exhausted"},
	{name: "model_capacity", match: func(f *facts) bool { return f.status >= 500 && (f.status == 529 || f.has(sigCapacity)) },
		reason: ReasonModelCapacity, scope: ScopeModel, failover: true, evidence: sigCapacity,
		msg: "model overloaded"},
	{name: "server_error", match: func(f *facts) bool { return f.status >= 500 },
		reason: ReasonServerError, scope: ScopeConnection, failover: true, evidence: sigNone,
		msg: "upstream server error"},
	{name: "unauthorized", match: func(f *facts) bool {
		return f.status == 401 || (f.status == 400 && f.has(sigBadCredential))
	},
		reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalExpired, failover: true, evidence: sigBadCredential,
		msg: "credentials rejected"},
	{name: "route_restricted", match: func(f *facts) bool { return f.status == 403 && f.has(sigRouteRestricted) },
		reason: ReasonRequestRejected, scope: ScopeNone, failover: false, evidence: sigRouteRestricted,
		msg: "key not allowed on this route"},
	{name: "fingerprint_rejected", match: func(f *facts) bool { return f.status == 403 && f.has(sigFingerprint) },
		reason: ReasonRequestRejected, scope: ScopeNone, failover: true, evidence: sigFingerprint,
		msg: "request fingerprint rejected by the upstream's edge"},
	{name: "quota_exhausted", match: func(f *facts) bool {
		return is4xx(f.status) && f.status != 404 && f.status != 410 && f.quotaLike()
	},
		reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: cdQuota, evidence: sigQuota,
		msg: "quota exhausted"},
	{name: "model_capacity_429", match: func(f *facts) bool { return f.status == 429 && f.has(sigCapacity) },
		reason: ReasonModelCapacity, scope: ScopeModel, failover: true, evidence: sigCapacity,
		msg: "model out of capacity"},
	{name: "rate_limit_wording", match: func(f *facts) bool {
		return is4xx(f.status) && f.status != 404 && f.status != 410 && f.has(sigRateLimit)
	},
		reason: ReasonRateLimit, scope: ScopeConnection, failover: true, evidence: sigRateLimit,
		msg: "rate limited"},
	{name: "rate_limit", match: func(f *facts) bool { return f.status == 429 },
		reason: ReasonRateLimit, scope: ScopeConnection, failover: true, evidence: sigNone,
		msg: "rate limited"},
	{name: "stored_state_elsewhere", match: func(f *facts) bool {
		return (f.status == 400 || f.status == 404) && f.has(sigStoredState)
	},
		reason: ReasonRequestRejected, scope: ScopeNone, failover: true, evidence: sigStoredState, code: CodeStoredStateMissing,
		msg: "stored response or item not found with this connection"},
	{name: "context_overflow", match: func(f *facts) bool { return isBadRequest(f.status) && f.has(sigContextOverflow) },
		reason: ReasonRequestRejected, scope: ScopeNone, failover: true, evidence: sigContextOverflow,
		msg: "prompt exceeds the model's context"},
	{name: "model_access", match: func(f *facts) bool { return isBadRequest(f.status) && f.has(sigModelAccess) },
		reason: ReasonNotFound, scope: ScopeNone, failover: true, evidence: sigModelAccess,
		msg: "model not available to this account"},
	{name: "function_degraded", match: func(f *facts) bool { return isBadRequest(f.status) && f.has(sigDegraded) },
		reason: ReasonModelCapacity, scope: ScopeNone, failover: true, evidence: sigDegraded,
		msg: "model function degraded"},
	{name: "payload_too_large", match: func(f *facts) bool { return f.status == 413 },
		reason: ReasonRequestRejected, scope: ScopeNone, failover: true, evidence: sigNone,
		msg: "request too large for this target"},
	{name: "bad_request", match: func(f *facts) bool { return isBadRequest(f.status) },
		reason: ReasonRequestRejected, scope: ScopeNone, failover: false, evidence: sigNone,
		msg: "request rejected as invalid"},
	{name: "model_forbidden", match: func(f *facts) bool { return f.status == 403 && f.has(sigModelAccess) },
		reason: ReasonNotFound, scope: ScopeModel, failover: true, evidence: sigModelAccess,
		msg: "model not accessible with this connection"},
	{name: "forbidden", match: func(f *facts) bool { return f.status == 403 },
		reason: ReasonRequestRejected, scope: ScopeConnection, failover: true, evidence: sigPermission,
		msg: "request refused"},
	{name: "not_found", match: func(f *facts) bool { return f.status == 404 || f.status == 410 },
		reason: ReasonNotFound, scope: ScopeModel, failover: true, evidence: sigNone,
		msg: "model or endpoint not found"},
	{name: "request_timeout", match: func(f *facts) bool { return f.status == 408 },
		reason: ReasonServerError, scope: ScopeConnection, failover: true, evidence: sigNone,
		msg: "upstream request timeout"},
	{name: "unknown", match: func(*facts) bool { return true },
		reason: ReasonUnknown, scope: ScopeConnection, failover: true, evidence: sigNone,
		msg: "unclassified upstream error"},
}

// Classify maps one failed upstream answer to a reason, scope, cooldown and terminal state. It
// is pure: the same Input always gives the same Outcome.
//
// Order: hidden-200 mapping (and a 3xx as 502) → first matching Restatement (changes the
// status) → built-in table (builtinRules) → first matching operator Rule (overrides) → cooldown
// from, in order, a
// terminal state or ScopeNone (none), the rule's Cooldown, the upstream reset hint
// (ParseResetHint; rate-limit bucket headers only for rate_limit/quota_exhausted or a 429,
// FromUpstream=true; for a used-up usage window the reset its body announces comes first and
// sets UntilReset), a quota window for quota walls, else 0 (engine backoff). Whether an
// upstream hint is honoured for the auth type is the cooldown engine's decision, not this one.
func Classify(in Input) Outcome {
	ex, exOK := extractError(in.Body)
	code := strings.ToLower(strings.TrimSpace(in.ErrorCode))
	typ := strings.ToLower(strings.TrimSpace(in.ErrorType))
	if exOK {
		if code == "" {
			code = strings.ToLower(ex.code)
		}
		if typ == "" {
			typ = strings.ToLower(ex.typ)
		}
	}
	text := matchText(in.Body, ex, exOK)

	status := in.Status
	classStatus := status
	if status >= 200 && status < 300 {
		// An error hidden in a 200: keep its own status, else 502. Without a numeric status the
		// table still reads the structured code ("rate_limit_error" classifies as a 429 would).
		status = http.StatusBadGateway
		if exOK && ex.status != 0 {
			status = ex.status
		}
		classStatus = status
		if !exOK || ex.status == 0 {
			if st := codeStatus(code, typ); st != 0 {
				classStatus = st
			}
		}
	}
	redirect := status >= 300 && status < 400
	if redirect {
		// Not followed: the upstream failed to answer here. Restatements, rules, breakers and
		// lockouts see the 502 it amounts to; the table still names the redirect.
		status = http.StatusBadGateway
	}
	out := Outcome{Status: status, At: in.Now}

	var restatedFrom int
	var restatement *Restatement
	for i := range in.Restatements {
		r := &in.Restatements[i]
		if r.matches(in.Provider, status, in.Header, text) {
			restatement, restatedFrom = r, status
			status, classStatus = r.ToStatus, r.ToStatus
			out.Status, out.Restatement, out.Rule = status, r.Name, r.Name
			break
		}
	}

	f := newFacts(classStatus, in.AuthType, text, code, typ)
	var row *builtinRule
	for i := range builtinRules {
		if builtinRules[i].match(&f) {
			row = &builtinRules[i]
			break
		}
	}
	out.Reason, out.Scope, out.Terminal, out.Failover = row.reason, row.scope, row.terminal, row.failover
	out.Code = row.code
	out.Message = describe(status, row, &f)
	if redirect && restatement == nil {
		out.Message = strconv.Itoa(in.Status) + " " + row.msg
	}
	kind := row.cooldown

	var ruleCooldown time.Duration
	for i := range in.Rules {
		r := &in.Rules[i]
		if !r.matches(in.Provider, status, in.Header, text) {
			continue
		}
		changed := false
		if r.Reason.Valid() {
			out.Reason, changed = r.Reason, true
		}
		if r.Scope.Valid() {
			out.Scope, changed = r.Scope, true
		}
		out.Terminal = TerminalNone
		if r.Terminal.Valid() {
			out.Terminal = r.Terminal
		}
		if changed || out.Terminal != TerminalNone {
			// A rule cannot say "fail over" directly: a request-level rejection that records
			// nothing stops the request, like a plain 400; everything else fails over.
			out.Failover = out.Terminal != TerminalNone ||
				!(out.Reason == ReasonRequestRejected && out.Scope == ScopeNone)
		}
		ruleCooldown = max(r.Cooldown, 0)
		kind = cdBackoff
		out.Rule, out.Code = r.Name, ""
		out.Message = "operator rule " + strconv.Quote(r.Name) + ": " + string(out.Reason)
		break
	}
	if restatement != nil {
		out.Message = "restated " + strconv.Itoa(restatedFrom) + " as " + strconv.Itoa(status) +
			" by " + strconv.Quote(restatement.Name) + "; " + out.Message
	}

	buckets := out.Reason == ReasonRateLimit || out.Reason == ReasonQuotaExhausted || classStatus == 429
	hint, hintOK := resetHint(in.Header, text, in.Now, buckets)
	if kind == cdWindow {
		// The window's own end, as the body states it, wins over a generic Retry-After.
		if d, ok := bodyReset(text, in.Now); ok {
			hint, hintOK = d, true
		}
	}
	switch {
	case out.Terminal != TerminalNone || out.Scope == ScopeNone:
		// nothing to cool: terminal states are not cooldowns, ScopeNone records nothing
	case ruleCooldown > 0:
		out.Cooldown = min(ruleCooldown, MaxResetHint)
	case restatement != nil && restatement.RetryAfter > 0:
		// The operator declared when such an answer resets: the connection rests that long, so
		// the client's Retry-After and the connection's recovery agree.
		out.Cooldown, out.FromUpstream = min(restatement.RetryAfter, MaxResetHint), true
	case hintOK:
		out.Cooldown, out.FromUpstream, out.UntilReset = hint, true, kind == cdWindow
	case kind == cdQuota || kind == cdWindow:
		out.Cooldown = min(quotaWindow(text, in.Now), MaxResetHint)
	}

	switch {
	case restatement != nil && restatement.RetryAfter > 0:
		out.RetryAfter = min(restatement.RetryAfter, MaxResetHint)
	case hintOK:
		out.RetryAfter = hint
	}
	return out
}

// newFacts gathers the signals of one answer from its text and structured code and type.
func newFacts(status int, auth AuthType, text, code, typ string) facts {
	f := facts{status: status, auth: auth}
	for _, group := range textMarkers {
		for _, m := range group.markers {
			if strings.Contains(text, m) {
				f.evidence[group.sig] = m
				break
			}
		}
	}
	if !f.has(sigStoredState) && strings.Contains(text, "not found") {
		if m := storedPhrase.FindString(text); m != "" {
			f.evidence[sigStoredState] = m
		}
	}
	if !f.has(sigBanned) && containsAnyMarker(text, banVerbs) {
		if m := banPhrase.FindString(text); m != "" {
			f.evidence[sigBanned] = m
		}
	}
	// On a 429 any mention of a quota counts (brief and reference: "quota" on a rate-limit
	// status is the quota wall); elsewhere only the explicit phrases above do.
	if status == 429 && !f.has(sigQuota) && strings.Contains(text, "quota") {
		f.evidence[sigQuota] = "quota"
	}
	for _, c := range [...]string{code, typ} {
		if sig, _, ok := lookupCode(c); ok && sig != sigNone && !f.has(sig) {
			f.evidence[sig] = c
		}
	}
	return f
}

// codeStatus is the status a structured code or type stands for, or 0.
func codeStatus(code, typ string) int {
	if _, st, ok := lookupCode(code); ok {
		return st
	}
	if _, st, ok := lookupCode(typ); ok {
		return st
	}
	return 0
}

func describe(status int, row *builtinRule, f *facts) string {
	msg := row.msg
	if row.evidence != sigNone && f.has(row.evidence) {
		msg += " (" + strconv.Quote(f.evidence[row.evidence]) + ")"
	}
	if status > 0 {
		msg = strconv.Itoa(status) + " " + msg
	}
	return msg
}

func (r *Rule) matches(provider string, status int, h http.Header, text string) bool {
	if r.Provider != "" && !strings.EqualFold(r.Provider, provider) {
		return false
	}
	if len(r.Statuses) > 0 && !hasStatus(r.Statuses, status) {
		return false
	}
	return conditionsMatch(h, r.HeaderMatches, text, r.BodyMarkers, r.ExcludeMarkers)
}

func (r *Restatement) matches(provider string, status int, h http.Header, text string) bool {
	if r.FromStatus == 0 || r.FromStatus != status || r.ToStatus < 100 || r.ToStatus > 599 {
		return false
	}
	if r.Provider != "" && !strings.EqualFold(r.Provider, provider) {
		return false
	}
	return conditionsMatch(h, r.HeaderMatches, text, r.BodyMarkers, r.ExcludeMarkers)
}

func containsAnyMarker(text string, words []string) bool {
	for _, w := range words {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

func hasStatus(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// conditionsMatch applies the shared header and marker conditions of Rule and Restatement to
// lower-cased text. Empty markers are ignored.
func conditionsMatch(h http.Header, headers map[string]string, text string, markers, excludes []string) bool {
	for name, want := range headers {
		if !headerContains(h, name, want) {
			return false
		}
	}
	for _, m := range excludes {
		if m != "" && strings.Contains(text, strings.ToLower(m)) {
			return false
		}
	}
	anyMarker, hit := false, false
	for _, m := range markers {
		if m == "" {
			continue
		}
		anyMarker = true
		if strings.Contains(text, strings.ToLower(m)) {
			hit = true
			break
		}
	}
	return !anyMarker || hit
}

// headerContains reports whether header name is present with a value containing want,
// case-insensitively; want "" only requires presence.
func headerContains(h http.Header, name, want string) bool {
	want = strings.ToLower(want)
	for k, vs := range h {
		if !strings.EqualFold(k, name) {
			continue
		}
		for _, v := range vs {
			if strings.Contains(strings.ToLower(v), want) {
				return true
			}
		}
	}
	return false
}
