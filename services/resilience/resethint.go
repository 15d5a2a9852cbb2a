package resilience

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxResetHint caps every reset parsed from an upstream answer. A verified upstream reset is
// honoured exactly up to this bound; anything further out (a typo, a bogus epoch, "resets in
// 9000h") is treated as 30 days so that no single answer can bench a connection forever.
const MaxResetHint = 30 * 24 * time.Hour

// Magnitude thresholds that tell the numeric reset forms apart. Both correspond to September
// 2001, so a current timestamp is always above them, while a relative wait that large (31 years
// in seconds) is meaningless anyway and would be capped at MaxResetHint.
const (
	// epochSecondsMin: a number of seconds at or above it is a Unix time in seconds.
	epochSecondsMin = 1e9
	// epochMillisMin: a number at or above it is a Unix time in milliseconds.
	epochMillisMin = 1e12
)

// bodyScanLimit bounds how much of a response body the text matchers read: error bodies are
// small, and a huge body must not make classification expensive.
const bodyScanLimit = 16 << 10

// ParseResetHint reports how long the upstream asked us to wait, from its headers or, failing
// that, from the error text. It returns ok=false when there is no usable hint, including hints
// that are zero, negative or already in the past. Every hint is capped at MaxResetHint.
//
// Precedence, most explicit first (the first source that yields a positive wait wins):
//
//  1. retry-after-ms: milliseconds, fractions allowed.
//  2. Retry-After: delta seconds (fractions allowed) or an HTTP-date. A number at or above 1e9 is
//     read as a Unix time (seconds, or milliseconds from 1e12) rather than a 31-year delay.
//  3. Rate-limit bucket resets: every x-ratelimit-reset* header (x-ratelimit-reset,
//     -reset-requests, -reset-tokens, …) and every anthropic-ratelimit-*-reset header. A value
//     may be a Unix time in milliseconds (≥ 1e12), a Unix time in seconds (≥ 1e9), a plain
//     number of seconds (< 1e9), a Go/OpenAI duration ("1m30s", "6m0s", "20ms", "2h3m4.5s",
//     also "1d 2h"), an RFC 3339 timestamp or an HTTP-date. When several buckets report a reset
//     we pick the longest among the exhausted ones (those whose matching *-remaining header is 0
//     or whose anthropic *-status is "rejected"); when no bucket says it is exhausted we pick the
//     longest of all. The longest wins because the request cannot succeed before every exhausted
//     bucket has refilled; a shorter pick only buys another 429.
//  4. The body: JSON fields (retry_after_ms, retry_after, resets_in_seconds, Gemini's
//     retryDelay, resets_at), then English phrases ("resets in 2h3m", "try again in 26.6s",
//     "reset after 1h 2m", "retry after 30 seconds", "quota will reset in 3 hours", "try again
//     at 2025-01-01T00:00:00Z") and Chinese ones ("请在 30 秒后重试", "额度将在 2 小时后重置").
//     Escaped JSON text (\u8bf7…) is decoded before matching.
func ParseResetHint(h http.Header, body string, now time.Time) (d time.Duration, ok bool) {
	ex, exOK := extractError(body)
	return resetHint(h, matchText(body, ex, exOK), now, true)
}

// resetHint is ParseResetHint on already lower-cased text. buckets=false skips the rate-limit
// bucket headers, which OpenAI-style upstreams send on every answer: on a 500 they say nothing
// about when the server recovers.
func resetHint(h http.Header, text string, now time.Time, buckets bool) (time.Duration, bool) {
	if v, ok := firstHeaderValue(h, "Retry-After-Ms"); ok {
		if f, ok := parseDecimal(cleanHeaderValue(v)); ok {
			if d, ok := fromNumber(f, time.Millisecond, now); ok {
				return d, true
			}
		}
	}
	if v, ok := firstHeaderValue(h, "Retry-After"); ok {
		if d, ok := parseRetryAfter(v, now); ok {
			return d, true
		}
	}
	if buckets {
		if d, ok := bucketReset(h, now); ok {
			return d, true
		}
	}
	return bodyReset(text, now)
}

// matchText is the lower-cased text the marker tables and body-hint patterns read: the start of
// the body, plus the decoded error message when the body hides its words behind \u escapes.
func matchText(body string, ex extracted, exOK bool) string {
	head := truncateUTF8(body, bodyScanLimit)
	text := strings.ToLower(head)
	if exOK && ex.msg != "" && strings.Contains(head, `\u`) {
		text += "\n" + strings.ToLower(truncateUTF8(ex.msg, bodyScanLimit))
	}
	return text
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// firstHeaderValue returns the first value of a header, also when the map was built by hand with
// non-canonical keys.
func firstHeaderValue(h http.Header, name string) (string, bool) {
	if vs := h.Values(name); len(vs) > 0 {
		return vs[0], true
	}
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, name) {
			return vs[0], true
		}
	}
	return "", false
}

func cleanHeaderValue(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = strings.TrimSpace(v[1 : len(v)-1])
	}
	return v
}

func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = cleanHeaderValue(v)
	if f, ok := parseDecimal(v); ok {
		return fromNumber(f, time.Second, now)
	}
	if t, err := http.ParseTime(v); err == nil {
		return clampHintDuration(t.Sub(now))
	}
	if t, ok := parseTimestamp(v); ok {
		return clampHintDuration(t.Sub(now))
	}
	return 0, false
}

// bucketReset implements step 3 of ParseResetHint.
func bucketReset(h http.Header, now time.Time) (time.Duration, bool) {
	var longest, longestExhausted time.Duration
	for name, vals := range h {
		if len(vals) == 0 {
			continue
		}
		exhausted, isBucket := bucketState(h, name)
		if !isBucket {
			continue
		}
		d, ok := parseResetValue(vals[0], now)
		if !ok {
			continue
		}
		longest = max(longest, d)
		if exhausted {
			longestExhausted = max(longestExhausted, d)
		}
	}
	if longestExhausted > 0 {
		return longestExhausted, true
	}
	return longest, longest > 0
}

const (
	openAIResetPrefix    = "x-ratelimit-reset"
	anthropicLimitPrefix = "anthropic-ratelimit-"
	anthropicResetSuffix = "-reset"
)

// bucketState tells whether a header is a rate-limit bucket reset and whether its bucket is
// reported as exhausted.
func bucketState(h http.Header, name string) (exhausted, isBucket bool) {
	switch {
	case hasPrefixFold(name, openAIResetPrefix):
		suffix := name[len(openAIResetPrefix):]
		return remainingIsZero(h, "x-ratelimit-remaining"+suffix), true
	case hasPrefixFold(name, anthropicLimitPrefix) &&
		len(name) > len(anthropicLimitPrefix)+len(anthropicResetSuffix) &&
		strings.EqualFold(name[len(name)-len(anthropicResetSuffix):], anthropicResetSuffix):
		base := name[:len(name)-len(anthropicResetSuffix)]
		if remainingIsZero(h, base+"-remaining") {
			return true, true
		}
		status, _ := firstHeaderValue(h, base+"-status")
		return strings.EqualFold(cleanHeaderValue(status), "rejected"), true
	}
	return false, false
}

func remainingIsZero(h http.Header, name string) bool {
	v, ok := firstHeaderValue(h, name)
	if !ok {
		return false
	}
	f, ok := parseDecimal(cleanHeaderValue(v))
	return ok && f <= 0
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// parseResetValue reads one bucket reset value (see ParseResetHint step 3).
func parseResetValue(v string, now time.Time) (time.Duration, bool) {
	v = cleanHeaderValue(v)
	if v == "" {
		return 0, false
	}
	if f, ok := parseDecimal(v); ok {
		return fromNumber(f, time.Second, now)
	}
	lower := strings.ToLower(v)
	if secs, end, ok := parseDurationPhrase(lower); ok && strings.TrimSpace(lower[end:]) == "" {
		return clampSeconds(secs)
	}
	if t, ok := parseTimestamp(v); ok {
		return clampHintDuration(t.Sub(now))
	}
	if t, err := http.ParseTime(v); err == nil {
		return clampHintDuration(t.Sub(now))
	}
	return 0, false
}

// parseDecimal accepts only plain decimal numbers ("30", "1.5", "-2"); strconv.ParseFloat alone
// would also take "NaN", "Inf", hex floats and exponents.
func parseDecimal(s string) (float64, bool) {
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		case (c == '-' || c == '+') && i == 0:
		default:
			return 0, false
		}
	}
	if digits == 0 || dots > 1 {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// fromNumber interprets a numeric hint by magnitude: ≥ 1e12 is Unix milliseconds, ≥ 1e9 is Unix
// seconds (only when the unit is seconds), anything smaller is a relative wait in unit.
func fromNumber(f float64, unit time.Duration, now time.Time) (time.Duration, bool) {
	switch {
	case f >= epochMillisMin:
		return clampSeconds(f/1e3 - unixSeconds(now))
	case f >= epochSecondsMin && unit == time.Second:
		return clampSeconds(f - unixSeconds(now))
	default:
		return clampSeconds(f * unit.Seconds())
	}
}

func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// clampSeconds turns a wait in seconds into a hint: not ok unless positive, capped at
// MaxResetHint, rounded to the nanosecond (26.6 stays 26.6 s, not 26.599999999 s).
func clampSeconds(s float64) (time.Duration, bool) {
	if !(s > 0) { // also rejects NaN
		return 0, false
	}
	if s >= MaxResetHint.Seconds() {
		return MaxResetHint, true
	}
	d := time.Duration(math.Round(s * 1e9))
	return d, d > 0
}

func clampHintDuration(d time.Duration) (time.Duration, bool) {
	if d <= 0 {
		return 0, false
	}
	return min(d, MaxResetHint), true
}

// timestampLayouts are the absolute forms accepted in headers and body text; a layout without a
// zone is read as UTC.
var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04",
}

func parseTimestamp(v string) (time.Time, bool) {
	v = strings.ToUpper(strings.TrimSpace(v))
	if strings.HasSuffix(v, " UTC") {
		v = strings.TrimSuffix(v, " UTC") + "Z"
	} else if strings.HasSuffix(v, "UTC") {
		v = strings.TrimSuffix(v, "UTC") + "Z"
	}
	if len(v) > 10 && v[10] == ' ' {
		v = v[:10] + "T" + v[11:]
	}
	for _, layout := range timestampLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// durationUnits maps the unit words of duration phrases to seconds. Lookups are exact on the
// lower-cased letter run that follows a number, so "m" is minutes and "ms" milliseconds.
var durationUnits = []struct {
	name    string
	seconds float64
}{
	{"ns", 1e-9}, {"us", 1e-6}, {"µs", 1e-6}, {"μs", 1e-6},
	{"ms", 1e-3}, {"msec", 1e-3}, {"msecs", 1e-3}, {"millisecond", 1e-3}, {"milliseconds", 1e-3},
	{"s", 1}, {"sec", 1}, {"secs", 1}, {"second", 1}, {"seconds", 1},
	{"m", 60}, {"min", 60}, {"mins", 60}, {"minute", 60}, {"minutes", 60},
	{"h", 3600}, {"hr", 3600}, {"hrs", 3600}, {"hour", 3600}, {"hours", 3600},
	{"d", 86400}, {"day", 86400}, {"days", 86400},
	{"w", 604800}, {"week", 604800}, {"weeks", 604800},
}

// parseDurationPhrase reads a duration at the start of lower-cased s: one or more
// number+unit parts, optionally separated by spaces, commas or "and" ("2h3m4.5s", "1h 2m",
// "26.6s", "3 hours", "4 days, 3 hours and 2 minutes"). It returns the total in seconds and
// the index just past the last part; ok is false when not even one part was read.
func parseDurationPhrase(s string) (secs float64, end int, ok bool) {
	parts := 0
	for {
		j := end
		if parts > 0 {
			j = skipJoiners(s, j)
		}
		numEnd := scanNumber(s, j)
		if numEnd == j {
			break
		}
		num, err := strconv.ParseFloat(s[j:numEnd], 64)
		if err != nil && !math.IsInf(num, 0) {
			break
		}
		k := numEnd
		for k < len(s) && s[k] == ' ' {
			k++
		}
		unitEnd := scanUnit(s, k)
		mult, known := unitSeconds(s[k:unitEnd])
		if !known {
			break
		}
		secs += num * mult
		parts++
		end = unitEnd
	}
	return secs, end, parts > 0
}

func skipJoiners(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == ',') {
		i++
	}
	if strings.HasPrefix(s[i:], "and ") {
		i += len("and ")
		for i < len(s) && s[i] == ' ' {
			i++
		}
	}
	return i
}

func scanNumber(s string, i int) int {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return i
	}
	if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
	}
	return j
}

func scanUnit(s string, i int) int {
	for i < len(s) {
		if c := s[i]; c >= 'a' && c <= 'z' {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != 'µ' && r != 'μ' {
			break
		}
		i += size
	}
	return i
}

func unitSeconds(name string) (float64, bool) {
	for _, u := range durationUnits {
		if u.name == name {
			return u.seconds, true
		}
	}
	return 0, false
}

// Body hint patterns, all matched against lower-cased text.
var (
	// bodyRetryAfterMs: {"retry_after_ms": 1500}
	bodyRetryAfterMs = regexp.MustCompile(`"retry_?after_?ms"\s*:\s*"?([0-9]+(?:\.[0-9]+)?)`)
	// bodyRetryAfterSecs: {"retry_after": 30}, {"resets_in_seconds": 3600} (Codex usage wall)
	bodyRetryAfterSecs = regexp.MustCompile(`"(?:retry_?after|retry_?after_?seconds|resets_in_seconds)"\s*:\s*"?([0-9]+(?:\.[0-9]+)?)`)
	// bodyRetryDelay: Gemini RetryInfo {"retryDelay": "26s"}
	bodyRetryDelay = regexp.MustCompile(`"retrydelay"\s*:\s*"([^"]{1,40})"`)
	// bodyResetsAt: {"resets_at": 1735689600} or an RFC 3339 string
	bodyResetsAt = regexp.MustCompile(`"resets?_at"\s*:\s*"?([^",}\s]{1,40})`)
	// bodyRelative introduces a duration phrase: "resets in", "reset after", "try again in",
	// "retry after", "retrying in", "wait".
	bodyRelative = regexp.MustCompile(`\b(?:(?:reset(?:s|ting)?|try(?:ing)?\s+again|retry(?:ing)?)\s+(?:in|after)|(?:please\s+)?wait(?:\s+for)?)\s+(?:about\s+|approximately\s+|roughly\s+|~\s*)?`)
	// bodyAbsolute: "try again at 2025-01-01T00:00:00Z", "resets at 2025-01-01 08:00 UTC"
	bodyAbsolute = regexp.MustCompile(`\b(?:reset(?:s|ting)?|try(?:ing)?\s+again|retry(?:ing)?|available(?:\s+again)?)\s+(?:at|after|on)\s+(\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2}|\s?utc)?)`)
	// bodyChinese: "请在 30 秒后重试", "额度将在 2 小时 30 分钟后重置", "请1分钟后再试"
	bodyChinese = regexp.MustCompile(`((?:\d+(?:\.\d+)?\s*(?:秒钟|秒|分钟|分|个小时|小时|天|日|周)\s*)+)(?:之后|以后|后)[^\d]{0,6}?(?:重试|再试|尝试|重置|恢复|刷新|解除|可用)`)
	// chineseParts splits bodyChinese's duration group into number+unit parts.
	chineseParts = regexp.MustCompile(`(\d+(?:\.\d+)?)\s*(秒钟|秒|分钟|分|个小时|小时|天|日|周)`)
)

// chineseUnits maps the units bodyChinese accepts to seconds.
var chineseUnits = []struct {
	name    string
	seconds float64
}{
	{"秒", 1}, {"秒钟", 1}, {"分", 60}, {"分钟", 60}, {"小时", 3600}, {"个小时", 3600},
	{"天", 86400}, {"日", 86400}, {"周", 604800},
}

// maxPhraseMatches bounds the phrase candidates tried per body.
const maxPhraseMatches = 8

// bodyReset implements step 4 of ParseResetHint on lower-cased text.
func bodyReset(text string, now time.Time) (time.Duration, bool) {
	// Literal prefilters keep the regular expressions off bodies that cannot match them.
	english := strings.Contains(text, "try") || strings.Contains(text, "reset") || // "try" covers "retry"
		strings.Contains(text, "wait") || strings.Contains(text, "available")
	chinese := strings.Contains(text, "后")
	if !english && !chinese {
		return 0, false
	}
	if english {
		if d, ok := bodyResetEnglish(text, now); ok {
			return d, true
		}
	}
	if chinese {
		for _, m := range bodyChinese.FindAllStringSubmatch(text, maxPhraseMatches) {
			if d, ok := clampSeconds(chineseSeconds(m[1])); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// bodyResetEnglish reads the JSON fields and English phrases of step 4.
func bodyResetEnglish(text string, now time.Time) (time.Duration, bool) {
	if m := bodyRetryAfterMs.FindStringSubmatch(text); m != nil {
		if f, ok := parseDecimal(m[1]); ok {
			if d, ok := fromNumber(f, time.Millisecond, now); ok {
				return d, true
			}
		}
	}
	if m := bodyRetryAfterSecs.FindStringSubmatch(text); m != nil {
		if f, ok := parseDecimal(m[1]); ok {
			if d, ok := fromNumber(f, time.Second, now); ok {
				return d, true
			}
		}
	}
	if m := bodyRetryDelay.FindStringSubmatch(text); m != nil {
		if d, ok := parseResetValue(m[1], now); ok {
			return d, true
		}
	}
	if m := bodyResetsAt.FindStringSubmatch(text); m != nil {
		if d, ok := parseResetValue(m[1], now); ok {
			return d, true
		}
	}
	for _, loc := range bodyRelative.FindAllStringIndex(text, maxPhraseMatches) {
		if secs, _, ok := parseDurationPhrase(text[loc[1]:]); ok {
			if d, ok := clampSeconds(secs); ok {
				return d, true
			}
		}
	}
	for _, m := range bodyAbsolute.FindAllStringSubmatch(text, maxPhraseMatches) {
		if t, ok := parseTimestamp(m[1]); ok {
			if d, ok := clampHintDuration(t.Sub(now)); ok {
				return d, true
			}
		}
	}
	return 0, false
}

func chineseSeconds(s string) float64 {
	var total float64
	for _, p := range chineseParts.FindAllStringSubmatch(s, -1) {
		num, err := strconv.ParseFloat(p[1], 64)
		if err != nil && !math.IsInf(num, 0) {
			continue
		}
		for _, u := range chineseUnits {
			if u.name == p[2] {
				total += num * u.seconds
				break
			}
		}
	}
	return total
}
