package resilience

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// classifyWant is the golden part of an Outcome; Message is only checked for being non-empty.
// status 0 means "same as the input status".
type classifyWant struct {
	reason     Reason
	scope      Scope
	terminal   Terminal
	failover   bool
	cooldown   time.Duration
	upstream   bool
	status     int
	retryAfter time.Duration
	rule       string
	restated   string
	untilReset bool
}

type classifyCase struct {
	name string
	in   Input
	want classifyWant
}

func checkOutcome(t *testing.T, in Input, got Outcome, want classifyWant) {
	t.Helper()
	if want.status == 0 {
		want.status = in.Status
	}
	gotE := classifyWant{
		reason: got.Reason, scope: got.Scope, terminal: got.Terminal, failover: got.Failover,
		cooldown: got.Cooldown, upstream: got.FromUpstream, status: got.Status,
		retryAfter: got.RetryAfter, rule: got.Rule, restated: got.Restatement, untilReset: got.UntilReset,
	}
	if gotE != want {
		t.Errorf("Classify mismatch\n got: %+v\nwant: %+v\n msg: %s", gotE, want, got.Message)
	}
	if got.Message == "" {
		t.Errorf("Classify gave an empty message")
	}
}

func runClassify(t *testing.T, cases []classifyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.Now.IsZero() {
				in.Now = hintNow
			}
			checkOutcome(t, in, Classify(in), tc.want)
		})
	}
}

const (
	openAIQuotaBody = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAIRateBody  = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500, Used 500.","type":"requests","code":"rate_limit_exceeded"}}`
	anthropicRate   = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}}`
	anthropicOver   = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	openAIRealRPM   = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2.5s. Visit https://platform.openai.com/account/rate-limits to learn more. You can increase your rate limit by adding a payment method to your account at https://platform.openai.com/account/billing.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	geminiPerMinute = `{"error":{"code":429,"message":"Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 15. Please retry in 26.6s.","status":"RESOURCE_EXHAUSTED","details":[{"violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]}]}}`
	geminiPerDay    = `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}`
)

func TestClassifyRateLimitAndQuota(t *testing.T) {
	runClassify(t, []classifyCase{
		{name: "429 plain rate limit", in: Input{Status: 429, Body: openAIRateBody},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "429 retry-after is an upstream cooldown", in: Input{Status: 429, Header: hintHeader("Retry-After", "20")},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, cooldown: 20 * time.Second, upstream: true, retryAfter: 20 * time.Second}},
		{name: "429 bucket headers", in: Input{Status: 429, Body: openAIRateBody, Header: hintHeader(
			"X-Ratelimit-Reset-Requests", "1m30s", "X-Ratelimit-Remaining-Requests", "0",
			"X-Ratelimit-Reset-Tokens", "6m0s", "X-Ratelimit-Remaining-Tokens", "10000")},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, cooldown: 90 * time.Second, upstream: true, retryAfter: 90 * time.Second}},
		{name: "429 anthropic with hintRFC3339 reset", in: Input{Status: 429, Body: anthropicRate, Header: hintHeader(
			"Anthropic-Ratelimit-Input-Tokens-Reset", hintRFC3339(40*time.Second), "Anthropic-Ratelimit-Input-Tokens-Remaining", "0")},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, cooldown: 40 * time.Second, upstream: true, retryAfter: 40 * time.Second}},
		{name: "429 openai boilerplate billing url is no credit signal", in: Input{Status: 429, Body: openAIRealRPM, AuthType: AuthOAuth},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, cooldown: 2500 * time.Millisecond, upstream: true, retryAfter: 2500 * time.Millisecond}},
		{name: "429 insufficient_quota on api key", in: Input{Status: 429, Body: openAIQuotaBody, AuthType: AuthAPIKey},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "429 insufficient_quota on unknown auth", in: Input{Status: 429, Body: openAIQuotaBody},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "429 insufficient_quota on oauth stays a quota wall", in: Input{Status: 429, Body: openAIQuotaBody, AuthType: AuthOAuth},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "429 credit wording on oauth is terminal", in: Input{Status: 429, Body: "Your credit balance is too low", AuthType: AuthOAuth},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: true}},
		{name: "429 credit wording on api key is a cooldown", in: Input{Status: 429, Body: "Your credit balance is too low", AuthType: AuthAPIKey},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "429 codex usage wall with resets_in_seconds", in: Input{Status: 429, AuthType: AuthOAuth,
			Body: `{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":7200}}`},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 2 * time.Hour, upstream: true, retryAfter: 2 * time.Hour, untilReset: true}},
		{name: "429 codex usage wall: the body's resets_at wins over Retry-After", in: Input{Status: 429, AuthType: AuthOAuth,
			Header: hintHeader("Retry-After", "30"),
			Body:   `{"error":{"type":"usage_limit_reached","plan_type":"plus","resets_at":` + hintEpochS(3*time.Hour) + `}}`},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 3 * time.Hour, upstream: true, retryAfter: 3 * time.Hour, untilReset: true}},
		{name: "429 codex usage wall as a code, with credit words", in: Input{Status: 429, AuthType: AuthOAuth,
			Body: `{"error":{"code":"usage_limit_reached","message":"Out of credits for this window","resets_in_seconds":600}}`},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 10 * time.Minute, upstream: true, retryAfter: 10 * time.Minute, untilReset: true}},
		{name: "429 codex usage wall without a reset gets the 1h window", in: Input{Status: 429, AuthType: AuthOAuth,
			Body: `{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached"}}`},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: time.Hour}},
		{name: "429 codex plan without codex", in: Input{Status: 429, AuthType: AuthOAuth,
			Body: `{"error":{"type":"usage_not_included","plan_type":"free"}}`},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 24 * time.Hour}},
		{name: "codex usage wall in a failed stream (hidden 200)", in: Input{Status: 200, AuthType: AuthOAuth,
			Body: `{"error":{"code":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":60}}`},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: time.Minute, upstream: true, retryAfter: time.Minute, untilReset: true, status: 502}},
		{name: "operator rule over a codex usage wall is the operator's cooldown", in: Input{Status: 429, AuthType: AuthOAuth,
			Body:  `{"error":{"type":"usage_limit_reached","resets_in_seconds":7200}}`,
			Rules: []Rule{{Name: "codex-short", BodyMarkers: []string{"usage_limit_reached"}, Cooldown: time.Minute}}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: time.Minute, retryAfter: 2 * time.Hour, rule: "codex-short"}},
		{name: "429 usage wall without hint gets 1h window", in: Input{Status: 429, Body: "You've reached your usage limit."},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: time.Hour}},
		{name: "429 daily quota until midnight", in: Input{Status: 429, Body: "You have exceeded your daily quota."},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 12 * time.Hour}},
		{name: "429 weekly cap", in: Input{Status: 429, Body: "Weekly usage limit reached for this plan."},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 24 * time.Hour}},
		{name: "429 quota text with reset", in: Input{Status: 429, Body: "Your quota will reset after 2h3m"},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 2*time.Hour + 3*time.Minute, upstream: true, retryAfter: 2*time.Hour + 3*time.Minute}},
		{name: "429 bare quota word", in: Input{Status: 429, Body: "Quota limit hit for project"},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "429 gemini per-minute quota is a rate limit", in: Input{Status: 429, Body: geminiPerMinute},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, cooldown: 26600 * time.Millisecond, upstream: true, retryAfter: 26600 * time.Millisecond}},
		{name: "429 gemini per-day quota", in: Input{Status: 429, Body: geminiPerDay},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 12 * time.Hour}},
		{name: "429 claude subscription wall", in: Input{Status: 429, AuthType: AuthOAuth,
			Body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}`},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: time.Hour}},
		{name: "429 chinese rate limit", in: Input{Status: 429, Body: "请求过于频繁，请稍后再试"},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "429 chinese with reset", in: Input{Status: 429, Body: "请求过于频繁，请在 30 秒后重试"},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, cooldown: 30 * time.Second, upstream: true, retryAfter: 30 * time.Second}},
		{name: "429 escaped chinese json", in: Input{Status: 429, Body: `{"error":{"message":"\u8bf7\u6c42\u8fc7\u4e8e\u9891\u7e41\uff0c\u8bf7\u5728 30 \u79d2\u540e\u91cd\u8bd5"}}`},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, cooldown: 30 * time.Second, upstream: true, retryAfter: 30 * time.Second}},
		{name: "400 english rate limit", in: Input{Status: 400, Body: "Rate limit exceeded, slow down"},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "400 too many requests", in: Input{Status: 400, Body: `{"error":{"message":"Too many requests"}}`},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "400 chinese 请求过于频繁", in: Input{Status: 400, Body: `{"error":{"message":"请求过于频繁"}}`},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "400 chinese 频率限制", in: Input{Status: 400, Body: "触发频率限制"},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "400 chinese 限流", in: Input{Status: 400, Body: "当前模型已限流"},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "400 structured rate_limit_exceeded", in: Input{Status: 400, ErrorCode: "rate_limit_exceeded"},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "403 quota wording", in: Input{Status: 403, Body: "Quota exceeded for quota metric 'Requests'"},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
	})
}

func TestClassifyCapacityAndServerErrors(t *testing.T) {
	runClassify(t, []classifyCase{
		{name: "529 overloaded_error", in: Input{Status: 529, Body: anthropicOver},
			want: classifyWant{reason: ReasonModelCapacity, scope: ScopeModel, failover: true}},
		{name: "529 without body", in: Input{Status: 529},
			want: classifyWant{reason: ReasonModelCapacity, scope: ScopeModel, failover: true}},
		{name: "503 model is overloaded", in: Input{Status: 503, Body: "The model is overloaded. Please try again later."},
			want: classifyWant{reason: ReasonModelCapacity, scope: ScopeModel, failover: true}},
		{name: "429 no capacity available for model", in: Input{Status: 429, Body: "No capacity available for model claude-sonnet-4"},
			want: classifyWant{reason: ReasonModelCapacity, scope: ScopeModel, failover: true}},
		{name: "500 server error", in: Input{Status: 500, Body: `{"error":{"message":"The server had an error","type":"server_error"}}`},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true}},
		{name: "503 retry-after", in: Input{Status: 503, Body: "Service Unavailable", Header: hintHeader("Retry-After", "120")},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true, cooldown: 2 * time.Minute, upstream: true, retryAfter: 2 * time.Minute}},
		{name: "502 ignores rate-limit bucket headers", in: Input{Status: 502, Header: hintHeader("X-Ratelimit-Reset-Tokens", "6m0s")},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true}},
		{name: "500 with account wording stays a server error", in: Input{Status: 500, Body: "billing service: account has been disabled"},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true}},
		{name: "transport error", in: Input{Status: 0},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true}},
		{name: "408 request timeout", in: Input{Status: 408},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true}},
		{name: "other 4xx is unknown", in: Input{Status: 409, Body: "conflict"},
			want: classifyWant{reason: ReasonUnknown, scope: ScopeConnection, failover: true}},
	})
}

func TestClassifyAuthAndTerminal(t *testing.T) {
	runClassify(t, []classifyCase{
		{name: "401 expired", in: Input{Status: 401, Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalExpired, failover: true}},
		{name: "401 retry-after gives no cooldown on a terminal", in: Input{Status: 401, Header: hintHeader("Retry-After", "30")},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalExpired, failover: true, retryAfter: 30 * time.Second}},
		{name: "400 bad api key", in: Input{Status: 400, Body: `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalExpired, failover: true}},
		{name: "402 credits", in: Input{Status: 402, Body: "Payment Required"},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: true}},
		{name: "400 credit balance too low", in: Input{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: true}},
		{name: "403 insufficient credits", in: Input{Status: 403, Body: "Insufficient credits for this request"},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: true}},
		{name: "400 billing_error type", in: Input{Status: 400, ErrorType: "billing_error"},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: true}},
		{name: "403 chinese balance", in: Input{Status: 403, Body: "账户余额不足"},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: true}},
		{name: "403 account suspended", in: Input{Status: 403, Body: "Your account has been suspended."},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalBanned, failover: true}},
		{name: "401 organization disabled", in: Input{Status: 401, Body: "This organization has been disabled."},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalBanned, failover: true}},
		{name: "401 account deactivated", in: Input{Status: 401, Body: "The account has been deactivated"},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalBanned, failover: true}},
		{name: "403 key banned", in: Input{Status: 403, Body: "api key has been permanently banned"},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalBanned, failover: true}},
		{name: "account_deactivated code", in: Input{Status: 401, ErrorCode: "account_deactivated"},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalBanned, failover: true}},
		{name: "403 chinese ban", in: Input{Status: 403, Body: "该账号已被封禁"},
			want: classifyWant{reason: ReasonAuthError, scope: ScopeConnection, terminal: TerminalBanned, failover: true}},
		{name: "plain 403 is a rejection, never a ban", in: Input{Status: 403, AuthType: AuthOAuth,
			Body: `{"type":"error","error":{"type":"permission_error","message":"Request not allowed"}}`},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeConnection, failover: true}},
		{name: "403 forbidden oauth is not a ban", in: Input{Status: 403, AuthType: AuthOAuth, Body: "Forbidden"},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeConnection, failover: true}},
		{name: "403 cloudflare browser signature", in: Input{Status: 403, Body: "error code: 1010 browser_signature_banned"},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: true}},
		{name: "403 route restriction", in: Input{Status: 403, Body: "Your key is not authorized for this route"},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: false}},
		{name: "403 model access", in: Input{Status: 403, Body: "You do not have access to model gpt-5"},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeModel, failover: true}},
		{name: "400 banned words is not a ban", in: Input{Status: 400, Body: "Your prompt contains banned words"},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: false}},
		{name: "400 streaming disabled is not a ban", in: Input{Status: 400, Body: "Streaming is disabled for this model"},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: false}},
	})
}

func TestClassifyNotFoundAndBadRequest(t *testing.T) {
	runClassify(t, []classifyCase{
		{name: "404 not found", in: Input{Status: 404, Body: `{"error":{"message":"The model does not exist","code":"model_not_found"}}`},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeModel, failover: true}},
		{name: "404 anthropic not_found_error", in: Input{Status: 404, Body: `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeModel, failover: true}},
		{name: "410 gone", in: Input{Status: 410},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeModel, failover: true}},
		{name: "400 context length", in: Input{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}`},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: true}},
		{name: "400 prompt is too long", in: Input{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: true}},
		{name: "400 too many tokens", in: Input{Status: 400, Body: "too many tokens in request"},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: true}},
		{name: "400 context overflow ignores retry-after for cooldown", in: Input{Status: 400, Body: "maximum context exceeded", Header: hintHeader("Retry-After", "9")},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: true, retryAfter: 9 * time.Second}},
		{name: "413 request_too_large", in: Input{Status: 413, Body: `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: true}},
		{name: "413 plain", in: Input{Status: 413},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: true}},
		{name: "400 model access", in: Input{Status: 400, Body: "The model `gpt-5` does not exist or you do not have access to it."},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeNone, failover: true}},
		{name: "400 not supported model", in: Input{Status: 400, Body: "not supported model: foo"},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeNone, failover: true}},
		{name: "400 unsupported model", in: Input{Status: 400, Body: "Unsupported model"},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeNone, failover: true}},
		{name: "400 structured not_found_error", in: Input{Status: 400, ErrorType: "not_found_error"},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeNone, failover: true}},
		{name: "400 function degraded", in: Input{Status: 400, Body: "Function 'abc': DEGRADED"},
			want: classifyWant{reason: ReasonModelCapacity, scope: ScopeNone, failover: true}},
		{name: "400 plain", in: Input{Status: 400, Body: `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error"}}`},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: false}},
		{name: "422 plain", in: Input{Status: 422, Body: "unprocessable"},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: false}},
	})
}

func TestClassifyHiddenErrors(t *testing.T) {
	runClassify(t, []classifyCase{
		{name: "200 with embedded 429", in: Input{Status: 200, Body: `{"error":{"code":429,"message":"Rate limit exceeded"}}`},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, status: 429}},
		{name: "200 without status is 502", in: Input{Status: 200, Body: `{"error":{"message":"Internal error"}}`},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true, status: 502}},
		{name: "200 with string error is 502", in: Input{Status: 200, Body: `{"error":"upstream exploded"}`},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true, status: 502}},
		{name: "200 anthropic type without status keeps 502 but reads the type", in: Input{Status: 200, Body: anthropicRate},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, status: 502}},
		{name: "200 embedded overloaded", in: Input{Status: 200, Body: anthropicOver},
			want: classifyWant{reason: ReasonModelCapacity, scope: ScopeModel, failover: true, status: 502}},
	})
}

// A redirect is never followed: every 3xx is the upstream's failure, a server error whose
// effective status is 502 (so breakers, lockouts and retries treat it as one), whatever its body
// says; an operator's rule or restatement for 502 applies to it.
func TestClassifyRedirects(t *testing.T) {
	server := classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true, status: 502}
	cases := []classifyCase{}
	for _, st := range []int{301, 302, 303, 307, 308} {
		cases = append(cases, classifyCase{name: http.StatusText(st), in: Input{Status: st, Header: http.Header{"Location": {"http://10.0.0.1/"}}}, want: server})
	}
	cases = append(cases,
		classifyCase{name: "words in the body don't matter", in: Input{Status: 307, Body: `{"error":{"message":"Your credit balance is too low; account deactivated"}}`},
			want: server},
		classifyCase{name: "a rule for 502 applies", in: Input{Status: 302, Rules: []Rule{{Name: "gw", Statuses: []int{502}, Reason: ReasonModelCapacity, Scope: ScopeModel}}},
			want: classifyWant{reason: ReasonModelCapacity, scope: ScopeModel, failover: true, status: 502, rule: "gw"}},
		classifyCase{name: "a restatement of 502 applies", in: Input{Status: 308, Restatements: []Restatement{{Name: "r", FromStatus: 502, ToStatus: 503}}},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true, status: 503, rule: "r", restated: "r"}},
	)
	runClassify(t, cases)
	if out := Classify(Input{Status: 307, Now: hintNow}); !strings.Contains(out.Message, "307") || !strings.Contains(out.Message, "redirect") {
		t.Fatalf("message %q names neither the status nor the redirect", out.Message)
	}
}

func TestClassifyOperatorRules(t *testing.T) {
	openRouter402 := Rule{Name: "openrouter-402", Provider: "OpenRouter", Statuses: []int{402},
		Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 2 * time.Minute}
	maintenance := Rule{Name: "maintenance", Statuses: []int{500}, BodyMarkers: []string{"Maintenance"},
		Reason: ReasonServerError, Scope: ScopeProvider, Cooldown: 10 * time.Minute}
	modelQuotaHeader := Rule{Name: "minimax-model-quota", HeaderMatches: map[string]string{"x-model-quota-remaining": "m=0"},
		Reason: ReasonQuotaExhausted, Scope: ScopeModel}
	excluded := Rule{Name: "quota-but-not-access", Statuses: []int{403}, BodyMarkers: []string{"quota"},
		ExcludeMarkers: []string{"NO ACCESS"}, Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: time.Minute}
	first := Rule{Name: "first", BodyMarkers: []string{"busy"}, Reason: ReasonModelCapacity, Scope: ScopeModel, Cooldown: 5 * time.Second}
	second := Rule{Name: "second", BodyMarkers: []string{"busy"}, Reason: ReasonServerError, Scope: ScopeProvider, Cooldown: time.Hour}

	runClassify(t, []classifyCase{
		{name: "provider filter matches", in: Input{Status: 402, Provider: "openrouter", Rules: []Rule{openRouter402}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 2 * time.Minute, rule: "openrouter-402"}},
		{name: "provider filter skips other providers", in: Input{Status: 402, Provider: "openai", Rules: []Rule{openRouter402}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, terminal: TerminalCreditsExhausted, failover: true}},
		{name: "status filter matches", in: Input{Status: 500, Body: "scheduled maintenance", Rules: []Rule{maintenance}},
			want: classifyWant{reason: ReasonServerError, scope: ScopeProvider, failover: true, cooldown: 10 * time.Minute, rule: "maintenance"}},
		{name: "status filter skips other statuses", in: Input{Status: 503, Body: "scheduled maintenance", Rules: []Rule{maintenance}},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true}},
		{name: "body marker required", in: Input{Status: 500, Body: "oops", Rules: []Rule{maintenance}},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true}},
		{name: "header match case-insensitive", in: Input{Status: 429, Header: hintHeader("X-Model-Quota-Remaining", "M=0"), Rules: []Rule{modelQuotaHeader}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeModel, failover: true, rule: "minimax-model-quota"}},
		{name: "header match missing header", in: Input{Status: 429, Rules: []Rule{modelQuotaHeader}},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "header match wrong value", in: Input{Status: 429, Header: hintHeader("X-Model-Quota-Remaining", "m=5"), Rules: []Rule{modelQuotaHeader}},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true}},
		{name: "rule without cooldown keeps the upstream hint", in: Input{Status: 429, Header: hintHeader("X-Model-Quota-Remaining", "m=0", "Retry-After", "30"), Rules: []Rule{modelQuotaHeader}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeModel, failover: true, cooldown: 30 * time.Second, upstream: true, retryAfter: 30 * time.Second, rule: "minimax-model-quota"}},
		{name: "rule cooldown beats the upstream hint", in: Input{Status: 402, Provider: "openrouter", Header: hintHeader("Retry-After", "30"), Rules: []Rule{openRouter402}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 2 * time.Minute, retryAfter: 30 * time.Second, rule: "openrouter-402"}},
		{name: "exclude marker blocks the rule", in: Input{Status: 403, Body: "quota reached: no access to this resource", Rules: []Rule{excluded}},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeConnection, failover: true}},
		{name: "rule matches without exclude marker", in: Input{Status: 403, Body: "quota reached", Rules: []Rule{excluded}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: time.Minute, rule: "quota-but-not-access"}},
		{name: "first rule wins", in: Input{Status: 503, Body: "servers busy", Rules: []Rule{first, second}},
			want: classifyWant{reason: ReasonModelCapacity, scope: ScopeModel, failover: true, cooldown: 5 * time.Second, rule: "first"}},
		{name: "rules fire for 400", in: Input{Status: 400, Body: "region busy", Rules: []Rule{second}},
			want: classifyWant{reason: ReasonServerError, scope: ScopeProvider, failover: true, cooldown: time.Hour, rule: "second"}},
		{name: "rule cooldown capped at 30 days", in: Input{Status: 500, Body: "busy", Rules: []Rule{{Name: "long", Cooldown: 1000 * 24 * time.Hour}}},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true, cooldown: MaxResetHint, rule: "long"}},
		{name: "rule can declare a terminal state", in: Input{Status: 403, Body: "I can't help with that", Rules: []Rule{{Name: "ban", BodyMarkers: []string{"can't help"}, Terminal: TerminalBanned}}},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeConnection, terminal: TerminalBanned, failover: true, rule: "ban"}},
		{name: "rule rejecting the request stops failover", in: Input{Status: 429, Body: "content policy", Rules: []Rule{{Name: "policy", BodyMarkers: []string{"content policy"}, Reason: ReasonRequestRejected, Scope: ScopeNone}}},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: false, rule: "policy"}},
		{name: "invalid rule reason is ignored", in: Input{Status: 429, Rules: []Rule{{Name: "typo", Reason: "ratelimit", Scope: ScopeModel}}},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeModel, failover: true, rule: "typo"}},
		{name: "empty markers are no condition", in: Input{Status: 500, Rules: []Rule{{Name: "any", BodyMarkers: []string{""}, ExcludeMarkers: []string{""}, Scope: ScopeProvider}}},
			want: classifyWant{reason: ReasonServerError, scope: ScopeProvider, failover: true, rule: "any"}},
	})
}

func TestClassifyRestatement(t *testing.T) {
	agentrouter := Restatement{Name: "agentrouter-quota", Provider: "agentrouter", FromStatus: 403,
		BodyMarkers: []string{"额度不足"}, ExcludeMarkers: []string{"无权访问"}, ToStatus: 429, RetryAfter: 60 * time.Second}
	english := Restatement{Name: "gateway-quota", FromStatus: 403, BodyMarkers: []string{"Quota Exceeded"},
		ExcludeMarkers: []string{"no access"}, ToStatus: 429, RetryAfter: 60 * time.Second}
	groq := Restatement{Name: "groq-tpm", Provider: "groq", FromStatus: 413, BodyMarkers: []string{"tokens per minute"}, ToStatus: 429}

	runClassify(t, []classifyCase{
		{name: "403 with marker becomes 429 with 60s retry-after", in: Input{Status: 403, Provider: "AgentRouter", Body: `{"error":{"message":"用户额度不足"}}`, Restatements: []Restatement{agentrouter}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: time.Minute, upstream: true, status: 429, retryAfter: time.Minute, rule: "agentrouter-quota", restated: "agentrouter-quota"}},
		{name: "english marker restated", in: Input{Status: 403, Body: "quota exceeded for this key", Restatements: []Restatement{english}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: time.Minute, upstream: true, status: 429, retryAfter: time.Minute, rule: "gateway-quota", restated: "gateway-quota"}},
		{name: "exclude marker keeps 403", in: Input{Status: 403, Body: "quota exceeded or no access to model x", Restatements: []Restatement{english}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "chinese exclude marker keeps permanent 403", in: Input{Status: 403, Provider: "agentrouter", Body: "额度不足，无权访问模型", Restatements: []Restatement{agentrouter}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "provider filter", in: Input{Status: 403, Provider: "other", Body: "用户额度不足", Restatements: []Restatement{agentrouter}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "status filter", in: Input{Status: 400, Provider: "agentrouter", Body: "用户额度不足", Restatements: []Restatement{agentrouter}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true}},
		{name: "restatement without retry-after passes the upstream hint", in: Input{Status: 413, Provider: "groq", Body: "Request too large on tokens per minute (TPM)", Header: hintHeader("Retry-After", "15"), Restatements: []Restatement{groq}},
			want: classifyWant{reason: ReasonRateLimit, scope: ScopeConnection, failover: true, cooldown: 15 * time.Second, upstream: true, status: 429, retryAfter: 15 * time.Second, rule: "groq-tpm", restated: "groq-tpm"}},
		{name: "rules see the restated status", in: Input{Status: 403, Body: "quota exceeded", Restatements: []Restatement{english},
			Rules: []Rule{{Name: "quota-429", Statuses: []int{429}, Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 90 * time.Second}}},
			want: classifyWant{reason: ReasonQuotaExhausted, scope: ScopeConnection, failover: true, cooldown: 90 * time.Second, status: 429, retryAfter: time.Minute, rule: "quota-429", restated: "gateway-quota"}},
		{name: "invalid to-status is skipped", in: Input{Status: 403, Body: "x", Restatements: []Restatement{{Name: "bad", FromStatus: 403, ToStatus: 999}}},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeConnection, failover: true}},
		{name: "from-status 0 never matches", in: Input{Status: 403, Body: "x", Restatements: []Restatement{{Name: "zero", ToStatus: 429}}},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeConnection, failover: true}},
	})
}

func TestClassifyMessageNamesEvidence(t *testing.T) {
	out := Classify(Input{Status: 429, Body: openAIQuotaBody, Now: hintNow})
	if !strings.Contains(out.Message, "429") || !strings.Contains(out.Message, "insufficient_quota") {
		t.Errorf("message %q should name the status and the marker", out.Message)
	}
	out = Classify(Input{Status: 403, Body: "用户额度不足", Now: hintNow, Restatements: []Restatement{{Name: "r", FromStatus: 403, ToStatus: 429, BodyMarkers: []string{"额度不足"}}}})
	if !strings.HasPrefix(out.Message, `restated 403 as 429 by "r"`) {
		t.Errorf("message %q should name the restatement", out.Message)
	}
}

func TestEnumsValid(t *testing.T) {
	for _, r := range []Reason{ReasonRateLimit, ReasonQuotaExhausted, ReasonModelCapacity, ReasonServerError,
		ReasonAuthError, ReasonNotFound, ReasonRequestRejected, ReasonUnknown} {
		if !r.Valid() {
			t.Errorf("%q should be valid", r)
		}
	}
	if Reason("").Valid() || Scope("").Valid() || Terminal("gone").Valid() {
		t.Error("empty reason/scope and unknown terminal must be invalid")
	}
	if !ReasonRateLimit.Transient() || ReasonQuotaExhausted.Transient() || ReasonNotFound.Transient() {
		t.Error("Transient: rate limits are, quota walls and not-found are not")
	}
	if RejectionsBeforeBan != 3 {
		t.Errorf("RejectionsBeforeBan = %d, want 3", RejectionsBeforeBan)
	}
}

func BenchmarkClassify(b *testing.B) {
	in := Input{Status: 429, Body: openAIRateBody, Now: hintNow, Header: hintHeader(
		"X-Ratelimit-Reset-Requests", "1m30s", "X-Ratelimit-Remaining-Requests", "0", "Content-Type", "application/json")}
	for b.Loop() {
		Classify(in)
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(429, "Retry-After", "30", openAIRateBody, "openai", "api_key", "", "")
	f.Add(429, "X-Ratelimit-Reset", "99999999999999", openAIQuotaBody, "openai", "oauth", "", "")
	f.Add(403, "", "", "用户额度不足 fuzzmarker", "agentrouter", "", "", "")
	f.Add(200, "", "", `{"error":{"code":"429","message":"x","metadata":{"raw":"quota"}}}`, "", "", "", "")
	f.Add(200, "", "", `[{"error":{"status":"RESOURCE_EXHAUSTED"}}]`, "", "", "", "")
	f.Add(400, "Retry-After", "-1", "prompt is too long", "anthropic", "oauth", "invalid_request_error", "")
	f.Add(0, "", "", "", "", "", "", "")
	f.Add(529, "", "", anthropicOver, "anthropic", "api_key", "", "overloaded_error")
	f.Add(401, "Anthropic-Ratelimit-Tokens-Reset", "2025-06-01T13:00:00Z", "account has been disabled", "", "", "", "")
	f.Add(-7, "", "", `{"error":`, "", "", "", "")
	f.Fuzz(func(t *testing.T, status int, hName, hValue, body, provider, auth, code, typ string) {
		h := http.Header{}
		if hName != "" {
			h[hName] = []string{hValue}
		}
		in := Input{Status: status, Header: h, Body: body, Provider: provider, AuthType: AuthType(auth),
			ErrorCode: code, ErrorType: typ, Now: hintNow,
			Rules: []Rule{{Name: "fuzz", BodyMarkers: []string{"fuzzmarker"}, Cooldown: 1000 * 24 * time.Hour}},
			Restatements: []Restatement{{Name: "fuzz", FromStatus: 403, BodyMarkers: []string{"额度不足"},
				ToStatus: 429, RetryAfter: 90 * 24 * time.Hour}}}
		out := Classify(in)
		if out.Cooldown < 0 || out.Cooldown > MaxResetHint {
			t.Fatalf("cooldown %v outside [0, %v]", out.Cooldown, MaxResetHint)
		}
		if out.RetryAfter < 0 || out.RetryAfter > MaxResetHint {
			t.Fatalf("retry-after %v outside [0, %v]", out.RetryAfter, MaxResetHint)
		}
		if !out.Reason.Valid() || !out.Scope.Valid() || !out.Terminal.Valid() {
			t.Fatalf("invalid outcome %+v", out)
		}
		if (out.Terminal != TerminalNone || out.Scope == ScopeNone) && out.Cooldown != 0 {
			t.Fatalf("terminal or scope-none outcome with cooldown: %+v", out)
		}
		if out.FromUpstream && out.Cooldown == 0 {
			t.Fatalf("FromUpstream without a cooldown: %+v", out)
		}
		if out.Message == "" {
			t.Fatal("empty message")
		}
	})
}

// OpenAI keeps stored Responses state per organisation: another organisation's key answers "not
// found", which is neither the model's nor the connection's fault, and another connection of the
// provider may hold it.
func TestClassifyStoredStateElsewhere(t *testing.T) {
	const (
		prevBody = `{"error":{"message":"Previous response with id 'resp_68a1f0c2d4e88190b1' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`
		itemBody = `{"error":{"message":"Item with id 'rs_037db69c59ceb65f0169c774068f0c81918788deadface5709' not found. Items are not persisted when ` +
			"`store`" + ` is set to false. Try again with ` + "`store`" + ` set to true, or remove this item from your input.","type":"invalid_request_error","param":"input","code":null}}`
		convBody = `{"error":{"message":"Conversation with id 'conv_689667905b048191b4740501625afd940c7533ace33a2dab' not found.","type":"invalid_request_error","param":null,"code":null}}`
	)
	stored := classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: true}
	cases := []classifyCase{
		{name: "400 previous_response_not_found", in: Input{Status: 400, Body: prevBody}, want: stored},
		{name: "400 previous_response_not_found by its code alone", in: Input{Status: 400, ErrorCode: "previous_response_not_found"}, want: stored},
		{name: "404 item not found", in: Input{Status: 404, Body: itemBody}, want: stored},
		{name: "404 conversation not found", in: Input{Status: 404, Body: convBody}, want: stored},
	}
	runClassify(t, cases)
	for _, tc := range cases {
		tc.in.Now = hintNow
		if out := Classify(tc.in); out.Code != CodeStoredStateMissing || !strings.Contains(out.Message, "stored") {
			t.Errorf("%s: code %q, message %q; want %q and a message about stored state", tc.name, out.Code, out.Message, CodeStoredStateMissing)
		}
	}

	// Other not-found and bad-request answers keep their verdicts and carry no code.
	others := []classifyCase{
		{name: "404 model not found", in: Input{Status: 404, Body: `{"error":{"message":"The model does not exist","code":"model_not_found"}}`},
			want: classifyWant{reason: ReasonNotFound, scope: ScopeModel, failover: true}},
		{name: "400 about an item, not a missing one", in: Input{Status: 400, Body: `{"error":{"message":"Item with id 'fc_1' has an invalid call_id.","type":"invalid_request_error","code":null}}`},
			want: classifyWant{reason: ReasonRequestRejected, scope: ScopeNone, failover: false}},
		{name: "500 that mentions a missing item", in: Input{Status: 500, Body: itemBody},
			want: classifyWant{reason: ReasonServerError, scope: ScopeConnection, failover: true}},
	}
	runClassify(t, others)
	for _, tc := range others {
		tc.in.Now = hintNow
		if out := Classify(tc.in); out.Code != "" {
			t.Errorf("%s: code %q, want none", tc.name, out.Code)
		}
	}

	// An operator rule is the verdict: it names its own failure.
	in := Input{Status: 404, Body: itemBody, Now: hintNow, Rules: []Rule{{Name: "items", BodyMarkers: []string{"item with id"}, Reason: ReasonNotFound, Scope: ScopeModel}}}
	if out := Classify(in); out.Code != "" || out.Rule != "items" || out.Scope != ScopeModel {
		t.Errorf("operator rule: code %q rule %q scope %q; want no code, rule items, scope model", out.Code, out.Rule, out.Scope)
	}
}
