package resilience

import (
	"regexp"
	"strings"
	"time"
)

// signal is one piece of evidence found in an error answer (its text or its structured code).
// The built-in table in classify.go decides on signals plus the status.
type signal int

// sigNone marks a structured code that only tells the status, not a signal.
const sigNone signal = -1

const (
	sigBanned          signal = iota // account deactivated, suspended, banned
	sigCredits                       // prepaid credits or billing exhausted
	sigQuota                         // quota or usage wall
	sigPerDay                        // the limit that was hit is a daily one
	sigPerMinute                     // the limit that was hit is a per-minute one
	sigRateLimit                     // rate limiting
	sigCapacity                      // upstream model overloaded or out of capacity
	sigBadCredential                 // the key or token itself is invalid or expired
	sigPermission                    // structured permission error
	sigModelAccess                   // model unknown or not accessible with this account
	sigContextOverflow               // prompt larger than the model's context
	sigRouteRestricted               // key valid but not allowed on this route
	sigFingerprint                   // Cloudflare 1010 / browser signature rejection
	sigDegraded                      // NVIDIA-style "function degraded"
	sigUsageWindow                   // a subscription's usage window is used up (Codex's usage_limit_reached)
	sigStoredState                   // a stored response, item or conversation the request names is not there
	numSignals
)

// textMarkers are lower-case substrings searched in the lower-cased error text. For each
// signal the first marker found is kept as evidence for the outcome's message. English and
// Chinese wording come from the reference systems and the providers' documented errors.
// Markers must be phrases, not bare words, where the bare word shows up in boilerplate: OpenAI's
// ordinary 429 ends with ".../account/billing", so "billing" alone would turn every rate limit
// into a credit exhaustion.
var textMarkers = []struct {
	sig     signal
	markers []string
}{
	{sigBanned, []string{
		"account_deactivated", "account_suspended", "account_disabled", "organization_deactivated",
		"verify your account to continue", "service has been disabled in this account",
		"封禁", "账号已被禁用", "账户已被禁用", "账号已被停用", "账户已被停用", "账号已停用", "账户已停用",
	}},
	{sigCredits, []string{
		"credit balance is too low", "insufficient credits", "insufficient_credits", "not enough credits",
		"out of credits", "credits exhausted", "credit limit", "insufficient balance", "insufficient_balance",
		"billing_hard_limit_reached", "billing hard limit", "billing_error", "billing account",
		"billing is not enabled", "billing not enabled", "billing_not_active", "billing has been disabled",
		"enable billing", "payment required", "tier has been exhausted", "余额不足", "欠费",
	}},
	{sigQuota, []string{
		"insufficient_quota", "exceeded your current quota", "quota exceeded", "quota_exceeded",
		"exceeded quota", "quota has been exceeded", "quota will reset", "out of quota",
		"hour quota", "daily quota", "today's quota", "weekly quota", "monthly quota",
		"usage limit", "usage_limit", "exhausted your capacity", "out of extra usage",
		"would exceed your account's rate limit",
		"额度不足", "额度已用完", "配额已用完", "配额不足", "用量已达上限",
	}},
	{sigPerDay, []string{
		"per day", "perday", "(rpd)", "daily limit", "daily quota", "today's quota", "try again tomorrow",
	}},
	{sigPerMinute, []string{"per min", "permin", "(rpm)", "(tpm)"}},
	{sigRateLimit, []string{
		"rate limit", "rate_limit", "ratelimit", "too many requests", "too_many_requests",
		"requests per min", "tokens per min", "slow down",
		"频繁", "频率限制", "频率过高", "频率超限", "限流", "速率限制", "限速", "请求过多", "请求次数过多",
	}},
	{sigCapacity, []string{
		"overloaded", "capacity", "high demand", "server is busy", "servers are busy",
		"服务器繁忙", "服务繁忙",
	}},
	{sigBadCredential, []string{
		"invalid api key", "invalid_api_key", "incorrect api key", "api key not valid", "api_key_invalid",
		"api key expired", "api_key_expired", "invalid x-api-key", "invalid authentication",
		"authentication failed", "unauthenticated", "invalid token", "invalid_token",
		"token expired", "token has expired", "token is expired",
		"无效的令牌", "令牌已过期",
	}},
	{sigModelAccess, []string{
		"not have access to model", "not have access to the model", "no access to model",
		"model not found", "model_not_found", "model does not exist", "does not exist or you do not have access",
		"not supported model", "unsupported model", "model is not supported", "model not supported",
		"is not a valid model", "invalid model", "unknown model", "no such model",
		"deployment_not_found", "deploymentnotfound", "not allowed to use model",
		"模型不存在", "无权访问", "不支持的模型", "模型不支持",
	}},
	{sigContextOverflow, []string{
		"context length", "context_length", "context window", "maximum context", "prompt is too long",
		"too many tokens", "input is too long", "input too long", "reduce the length of the messages",
		"上下文长度", "上下文窗口", "超出最大上下文",
	}},
	{sigRouteRestricted, []string{"not authorized for this route"}},
	{sigFingerprint, []string{
		"error code: 1010", "error 1010", "browser_signature_banned", `"retryable":false`, `"retryable": false`,
	}},
	{sigDegraded, []string{"degraded"}},
	// The Codex backend's usage wall of a ChatGPT account: its error type, which the answer
	// carries with the window's reset (resets_at, resets_in_seconds). usage_not_included is the
	// same answer for a plan without Codex.
	{sigUsageWindow, []string{"usage_limit_reached", "usage_not_included"}},
	// OpenAI keeps a Responses answer (store, the default) for the organisation and project of
	// the key that made it: another organisation's key answers 400 "Previous response with id
	// '…' not found." (previous_response_not_found) or 404 "Item with id '…' not found. Items
	// are not persisted when `store` is set to false. …". storedPhrase catches the sentences.
	{sigStoredState, []string{"previous_response_not_found", "items are not persisted when"}},
}

// storedPhrase is the not-found sentence of a stored response, item or conversation; it only
// runs when the text says "not found".
var storedPhrase = regexp.MustCompile(`\b(?:previous response|response|item|conversation) with id '[^']{1,200}' not found`)

// banPhrase catches account-deactivation sentences ("your account has been suspended", "this
// organization has been disabled", "API key is disabled") without taking bare words: "disabled"
// or "banned" alone also appear in harmless answers ("streaming is disabled for this model",
// "banned words", Cloudflare's browser_signature_banned) and a false ban is the costliest
// mistake a classifier can make here.
var banPhrase = regexp.MustCompile(`\b(?:account|organization|organisation|user|api key|key)\s+(?:has\s+been|have\s+been|had\s+been|was|is|got)\s+(?:permanently\s+|temporarily\s+)?(?:deactivated|disabled|suspended|banned|terminated)\b`)

// banVerbs is a cheap literal prefilter: banPhrase only runs when one of them is present.
var banVerbs = []string{"deactivated", "disabled", "suspended", "banned", "terminated"}

// errorCodes maps structured error codes and types (lower-cased) to a signal, and to the status
// an error hidden in a 200 is classified as when it carries no numeric status of its own.
var errorCodes = []struct {
	code   string
	sig    signal
	status int
}{
	{"rate_limit_exceeded", sigRateLimit, 429},
	{"rate_limit_error", sigRateLimit, 429},
	{"rate_limited", sigRateLimit, 429},
	{"too_many_requests", sigRateLimit, 429},
	{"resource_exhausted", sigRateLimit, 429},
	{"insufficient_quota", sigQuota, 429},
	{"quota_exceeded", sigQuota, 429},
	{"usage_limit_reached", sigUsageWindow, 429},
	{"usage_not_included", sigUsageWindow, 429},
	{"daily_limit_exceeded", sigPerDay, 429},
	{"overloaded_error", sigCapacity, 529},
	{"overloaded", sigCapacity, 529},
	{"server_overloaded", sigCapacity, 529},
	{"model_overloaded", sigCapacity, 529},
	{"authentication_error", sigBadCredential, 401},
	{"invalid_api_key", sigBadCredential, 401},
	{"invalid_authentication", sigBadCredential, 401},
	{"unauthenticated", sigBadCredential, 401},
	{"token_expired", sigBadCredential, 401},
	{"permission_error", sigPermission, 403},
	{"permission_denied", sigPermission, 403},
	{"not_found_error", sigModelAccess, 404},
	{"model_not_found", sigModelAccess, 404},
	{"deployment_not_found", sigModelAccess, 404},
	{"not_found", sigModelAccess, 404},
	{"billing_error", sigCredits, 402},
	{"billing_hard_limit_reached", sigCredits, 402},
	{"insufficient_credits", sigCredits, 402},
	{"insufficient_balance", sigCredits, 402},
	{"payment_required", sigCredits, 402},
	{"account_deactivated", sigBanned, 403},
	{"account_suspended", sigBanned, 403},
	{"account_disabled", sigBanned, 403},
	{"organization_deactivated", sigBanned, 403},
	{"previous_response_not_found", sigStoredState, 400},
	{"context_length_exceeded", sigContextOverflow, 400},
	{"request_too_large", sigContextOverflow, 413},
	{"invalid_request_error", sigNone, 400},
	{"invalid_argument", sigNone, 400},
	{"failed_precondition", sigNone, 400},
	{"api_error", sigNone, 500},
	{"server_error", sigNone, 500},
	{"internal_error", sigNone, 500},
	{"internal_server_error", sigNone, 500},
	{"unavailable", sigNone, 503},
	{"service_unavailable", sigNone, 503},
}

func lookupCode(code string) (signal, int, bool) {
	if code == "" {
		return sigNone, 0, false
	}
	for _, c := range errorCodes {
		if c.code == code {
			return c.sig, c.status, true
		}
	}
	return sigNone, 0, false
}

// quotaWindows are synthetic cooldowns for quota walls whose answer carries no reset hint, by
// the wording of the wall (first match wins, so the more specific windows come first). They are
// suggestions (FromUpstream=false): the cooldown engine still caps them at its configured max.
// A zero window means "until the next midnight in the location of Input.Now" (at most 24 h).
var quotaWindows = []struct {
	marker string
	window time.Duration
}{
	{"try again tomorrow", 0}, {"daily quota", 0}, {"today's quota", 0}, {"daily limit", 0},
	{"per day", 0}, {"perday", 0}, {"(rpd)", 0},
	{"weekly", 24 * time.Hour},
	{"5-hour", 5 * time.Hour}, {"5 hour", 5 * time.Hour}, {"five-hour", 5 * time.Hour},
	{"session limit", 5 * time.Hour},
	{"usage limit reached", time.Hour}, {"reached your usage limit", time.Hour},
	{"hit your usage limit", time.Hour}, {"usage_limit_reached", time.Hour},
	{"would exceed your account's rate limit", time.Hour}, {"out of extra usage", time.Hour},
	{"usage_not_included", 24 * time.Hour},
}

// quotaWindow returns the synthetic cooldown for a quota wall, or 0 to leave it to backoff.
func quotaWindow(text string, now time.Time) time.Duration {
	for _, q := range quotaWindows {
		if !strings.Contains(text, q.marker) {
			continue
		}
		if q.window > 0 {
			return q.window
		}
		y, m, d := now.Date()
		midnight := time.Date(y, m, d+1, 0, 0, 0, 0, now.Location())
		if until := midnight.Sub(now); until > 0 && until <= 24*time.Hour {
			return until
		}
		return 24 * time.Hour
	}
	return 0
}
