package resilience

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// hintNow is the fixed clock of every hint and classification test.
var hintNow = time.Date(2025, time.June, 1, 12, 0, 0, 0, time.UTC)

// hintHeader builds a header from name/value pairs through Add, so keys are canonical.
func hintHeader(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func hintEpochS(d time.Duration) string  { return strconv.FormatInt(hintNow.Add(d).Unix(), 10) }
func hintEpochMs(d time.Duration) string { return strconv.FormatInt(hintNow.Add(d).UnixMilli(), 10) }
func hintRFC3339(d time.Duration) string { return hintNow.Add(d).Format(time.RFC3339) }
func hintHTTPDate(d time.Duration) string {
	return hintNow.Add(d).UTC().Format(http.TimeFormat)
}

func TestParseResetHint(t *testing.T) {
	const escapedChinese = `{"error": {"message": "\u8bf7\u6c42\u8fc7\u4e8e\u9891\u7e41\uff0c\u8bf7\u5728 30 \u79d2\u540e\u91cd\u8bd5", "type": "rate_limit"}}`
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   time.Duration
		wantOK bool
	}{
		// Retry-After and retry-after-ms
		{name: "retry-after seconds", header: hintHeader("Retry-After", "30"), want: 30 * time.Second, wantOK: true},
		{name: "retry-after fractional", header: hintHeader("Retry-After", "1.5"), want: 1500 * time.Millisecond, wantOK: true},
		{name: "retry-after padded", header: hintHeader("Retry-After", "  12 "), want: 12 * time.Second, wantOK: true},
		{name: "retry-after http-date", header: hintHeader("Retry-After", hintHTTPDate(90*time.Second)), want: 90 * time.Second, wantOK: true},
		{name: "retry-after http-date past", header: hintHeader("Retry-After", hintHTTPDate(-time.Minute))},
		{name: "retry-after zero", header: hintHeader("Retry-After", "0")},
		{name: "retry-after negative", header: hintHeader("Retry-After", "-5")},
		{name: "retry-after garbage", header: hintHeader("Retry-After", "soon")},
		{name: "retry-after NaN is not a number", header: hintHeader("Retry-After", "NaN")},
		{name: "retry-after epoch seconds by magnitude", header: hintHeader("Retry-After", hintEpochS(2*time.Minute)), want: 2 * time.Minute, wantOK: true},
		{name: "retry-after huge delta capped", header: hintHeader("Retry-After", "99999999"), want: MaxResetHint, wantOK: true},
		{name: "retry-after-ms", header: hintHeader("Retry-After-Ms", "1500"), want: 1500 * time.Millisecond, wantOK: true},
		{name: "retry-after-ms fractional", header: hintHeader("retry-after-ms", "20.5"), want: 20500 * time.Microsecond, wantOK: true},
		{name: "retry-after-ms beats retry-after", header: hintHeader("Retry-After", "2", "Retry-After-Ms", "1500"), want: 1500 * time.Millisecond, wantOK: true},
		{name: "retry-after-ms zero falls through to retry-after", header: hintHeader("Retry-After", "2", "Retry-After-Ms", "0"), want: 2 * time.Second, wantOK: true},
		{name: "non-canonical header map", header: http.Header{"retry-after": {"7"}}, want: 7 * time.Second, wantOK: true},

		// x-ratelimit-reset*
		{name: "x-ratelimit-reset epoch seconds", header: hintHeader("X-Ratelimit-Reset", hintEpochS(2*time.Minute)), want: 2 * time.Minute, wantOK: true},
		{name: "x-ratelimit-reset epoch ms", header: hintHeader("X-Ratelimit-Reset", hintEpochMs(1500*time.Millisecond)), want: 1500 * time.Millisecond, wantOK: true},
		{name: "x-ratelimit-reset relative seconds", header: hintHeader("X-Ratelimit-Reset", "45"), want: 45 * time.Second, wantOK: true},
		{name: "x-ratelimit-reset epoch in the past", header: hintHeader("X-Ratelimit-Reset", hintEpochS(-time.Hour))},
		{name: "x-ratelimit-reset epoch beyond 30 days capped", header: hintHeader("X-Ratelimit-Reset", hintEpochS(60*24*time.Hour)), want: MaxResetHint, wantOK: true},
		{name: "x-ratelimit-reset-requests duration", header: hintHeader("X-Ratelimit-Reset-Requests", "1m30s"), want: 90 * time.Second, wantOK: true},
		{name: "x-ratelimit-reset-tokens 6m0s", header: hintHeader("X-Ratelimit-Reset-Tokens", "6m0s"), want: 6 * time.Minute, wantOK: true},
		{name: "x-ratelimit-reset-tokens 20ms", header: hintHeader("X-Ratelimit-Reset-Tokens", "20ms"), want: 20 * time.Millisecond, wantOK: true},
		{name: "x-ratelimit-reset compound duration", header: hintHeader("X-Ratelimit-Reset", "2h3m4.5s"), want: 2*time.Hour + 3*time.Minute + 4500*time.Millisecond, wantOK: true},
		{name: "x-ratelimit-reset with days", header: hintHeader("X-Ratelimit-Reset", "1d2h"), want: 26 * time.Hour, wantOK: true},
		{name: "x-ratelimit-reset-after any suffix", header: hintHeader("X-Ratelimit-Reset-After", "3"), want: 3 * time.Second, wantOK: true},
		{name: "x-ratelimit-reset hintRFC3339", header: hintHeader("X-Ratelimit-Reset", hintRFC3339(time.Minute)), want: time.Minute, wantOK: true},
		{name: "x-ratelimit-reset zero", header: hintHeader("X-Ratelimit-Reset", "0s")},
		{name: "x-ratelimit-reset trailing junk", header: hintHeader("X-Ratelimit-Reset", "5s later")},
		{name: "longest bucket wins", header: hintHeader(
			"X-Ratelimit-Reset-Requests", "2m59.56s",
			"X-Ratelimit-Reset-Tokens", "7.66s",
		), want: 2*time.Minute + 59560*time.Millisecond, wantOK: true},
		{name: "exhausted bucket beats a longer full one", header: hintHeader(
			"X-Ratelimit-Reset-Requests", "1s", "X-Ratelimit-Remaining-Requests", "0",
			"X-Ratelimit-Reset-Tokens", "6m0s", "X-Ratelimit-Remaining-Tokens", "5000",
		), want: time.Second, wantOK: true},
		{name: "retry-after beats buckets", header: hintHeader("Retry-After", "5", "X-Ratelimit-Reset", "600"), want: 5 * time.Second, wantOK: true},
		{name: "invalid retry-after falls through to buckets", header: hintHeader("Retry-After", "later", "X-Ratelimit-Reset", "600"), want: 10 * time.Minute, wantOK: true},

		// anthropic-ratelimit-*-reset
		{name: "anthropic hintRFC3339", header: hintHeader("Anthropic-Ratelimit-Requests-Reset", hintRFC3339(30*time.Second)), want: 30 * time.Second, wantOK: true},
		{name: "anthropic fractional hintRFC3339", header: hintHeader("Anthropic-Ratelimit-Tokens-Reset", hintNow.Add(1500*time.Millisecond).Format(time.RFC3339Nano)), want: 1500 * time.Millisecond, wantOK: true},
		{name: "anthropic exhausted bucket chosen", header: hintHeader(
			"Anthropic-Ratelimit-Requests-Reset", hintRFC3339(10*time.Second), "Anthropic-Ratelimit-Requests-Remaining", "0",
			"Anthropic-Ratelimit-Tokens-Reset", hintRFC3339(50*time.Second), "Anthropic-Ratelimit-Tokens-Remaining", "90000",
		), want: 10 * time.Second, wantOK: true},
		{name: "anthropic longest without remaining info", header: hintHeader(
			"Anthropic-Ratelimit-Input-Tokens-Reset", hintRFC3339(10*time.Second),
			"Anthropic-Ratelimit-Output-Tokens-Reset", hintRFC3339(50*time.Second),
		), want: 50 * time.Second, wantOK: true},
		{name: "anthropic unified epoch with rejected status", header: hintHeader(
			"Anthropic-Ratelimit-Unified-Reset", hintEpochS(3*time.Hour), "Anthropic-Ratelimit-Unified-Status", "rejected",
			"Anthropic-Ratelimit-Unified-7d-Reset", hintEpochS(72*time.Hour), "Anthropic-Ratelimit-Unified-7d-Status", "allowed",
		), want: 3 * time.Hour, wantOK: true},
		{name: "anthropic past reset", header: hintHeader("Anthropic-Ratelimit-Requests-Reset", hintRFC3339(-time.Second))},
		{name: "unrelated header ignored", header: hintHeader("X-Request-Id", "123", "Anthropic-Ratelimit-Requests-Limit", "50")},

		// body text
		{name: "body resets in", body: "Usage limit reached. Resets in 2h3m.", want: 2*time.Hour + 3*time.Minute, wantOK: true},
		{name: "body try again in fractional", body: "Rate limit reached for gpt-4o. Please try again in 26.6s.", want: 26600 * time.Millisecond, wantOK: true},
		{name: "body please try again in 1m30s", body: "Please try again in 1m30s", want: 90 * time.Second, wantOK: true},
		{name: "body reset after spaced parts", body: "quota exhausted, reset after 1h 2m", want: time.Hour + 2*time.Minute, wantOK: true},
		{name: "body retry after words", body: "Too many requests, retry after 30 seconds", want: 30 * time.Second, wantOK: true},
		{name: "body quota will reset in hours", body: "Your quota will reset in 3 hours.", want: 3 * time.Hour, wantOK: true},
		{name: "body joined words", body: "resets in 4 days, 3 hours and 2 minutes", want: 99*time.Hour + 2*time.Minute, wantOK: true},
		{name: "body antigravity long reset", body: "You have exhausted your capacity on this model. Resets in 164h12m", want: 164*time.Hour + 12*time.Minute, wantOK: true},
		{name: "body reset beyond 30 days capped", body: "resets in 900h", want: MaxResetHint, wantOK: true},
		{name: "body try again at iso", body: "Limit reached; try again at 2025-06-01T13:00:00Z.", want: time.Hour, wantOK: true},
		{name: "body resets at iso with utc", body: "resets at 2025-06-01 12:30 UTC", want: 30 * time.Minute, wantOK: true},
		{name: "body try again at past", body: "try again at 2025-06-01T11:00:00Z"},
		{name: "body chinese seconds", body: "请求过于频繁，请在 30 秒后重试", want: 30 * time.Second, wantOK: true},
		{name: "body chinese compound", body: "今日额度已用完，额度将在 2 小时 30 分钟后重置", want: 2*time.Hour + 30*time.Minute, wantOK: true},
		{name: "body chinese no space", body: "请1分钟后再试", want: time.Minute, wantOK: true},
		{name: "body chinese without a retry verb", body: "请求在30秒后超时"},
		{name: "body escaped chinese json", body: escapedChinese, want: 30 * time.Second, wantOK: true},
		{name: "body gemini retryDelay", body: `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`, want: 26 * time.Second, wantOK: true},
		{name: "body codex resets_in_seconds", body: `{"error":{"type":"usage_limit_reached","resets_in_seconds":3600}}`, want: time.Hour, wantOK: true},
		{name: "body resets_at epoch", body: `{"error":{"type":"usage_limit_reached","resets_at":` + hintEpochS(2*time.Hour) + `}}`, want: 2 * time.Hour, wantOK: true},
		{name: "body retry_after_ms field", body: `{"error":"slow down","retry_after_ms":250}`, want: 250 * time.Millisecond, wantOK: true},
		{name: "body without a unit is no hint", body: "retry after 30"},
		{name: "body try again later is no hint", body: "Please try again later."},
		{name: "body zero is no hint", body: "try again in 0s"},
		{name: "header beats body", header: hintHeader("Retry-After", "5"), body: "try again in 10 minutes", want: 5 * time.Second, wantOK: true},
		{name: "nothing", header: hintHeader("Content-Type", "application/json"), body: `{"error":{"message":"boom"}}`},
		{name: "nil header empty body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseResetHint(tc.header, tc.body, hintNow)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("ParseResetHint = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestParseDurationPhrase(t *testing.T) {
	tests := []struct {
		in      string
		secs    float64
		end     int
		wantOK  bool
		comment string
	}{
		{in: "1m30s", secs: 90, end: 5, wantOK: true},
		{in: "2h3m4.5s rest", secs: 7384.5, end: 8, wantOK: true},
		{in: "20ms", secs: 0.02, end: 4, wantOK: true},
		{in: "5 more minutes", wantOK: false},
		{in: "1h and then", secs: 3600, end: 2, wantOK: true},
		{in: "120µs", secs: 120e-6, end: len("120µs"), wantOK: true},
		{in: "abc", wantOK: false},
	}
	for _, tc := range tests {
		secs, end, ok := parseDurationPhrase(tc.in)
		if ok != tc.wantOK || (ok && (end != tc.end || absFloat(secs-tc.secs) > 1e-9)) {
			t.Errorf("parseDurationPhrase(%q) = %v, %d, %v; want %v, %d, %v", tc.in, secs, end, ok, tc.secs, tc.end, tc.wantOK)
		}
	}
}

func absFloat(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func FuzzParseResetHint(f *testing.F) {
	seeds := []struct {
		name, value, body string
		now               int64
	}{
		{"Retry-After", "30", "", hintNow.Unix()},
		{"Retry-After", hintHTTPDate(time.Minute), "", hintNow.Unix()},
		{"Retry-After", "1e400", "", hintNow.Unix()},
		{"Retry-After-Ms", "99999999999999999999999", "", hintNow.Unix()},
		{"X-Ratelimit-Reset", hintEpochMs(time.Minute), "", hintNow.Unix()},
		{"X-Ratelimit-Reset-Tokens", "2h3m4.5s", "", hintNow.Unix()},
		{"X-Ratelimit-Reset", "9999999999999999999h", "", hintNow.Unix()},
		{"Anthropic-Ratelimit-Tokens-Reset", hintRFC3339(time.Minute), "", hintNow.Unix()},
		{"", "", "resets in 2h3m", hintNow.Unix()},
		{"", "", "try again in 999999999999999999999999999999 days", hintNow.Unix()},
		{"", "", "请在 30 秒后重试", hintNow.Unix()},
		{"", "", `{"error":{"retryDelay":"26s","resets_at":"2025-06-01T13:00:00Z"}}`, hintNow.Unix()},
		{"", "", "try again at 9999-12-31T23:59:59Z", 0},
		{"X-Ratelimit-Reset", "1", "", -62135596800},
	}
	for _, s := range seeds {
		f.Add(s.name, s.value, s.body, s.now)
	}
	f.Fuzz(func(t *testing.T, name, value, body string, nowUnix int64) {
		h := http.Header{}
		if name != "" {
			h[name] = []string{value}
			h.Add(name, value)
		}
		now := time.Unix(nowUnix, 0)
		d, ok := ParseResetHint(h, body, now)
		if d < 0 || d > MaxResetHint {
			t.Fatalf("hint %v outside [0, %v]", d, MaxResetHint)
		}
		if ok != (d > 0) {
			t.Fatalf("ok=%v with hint %v", ok, d)
		}
	})
}
