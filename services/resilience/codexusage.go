package resilience

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The usage of a ChatGPT account as the Codex backend reports it. Every answer, errors included,
// carries the account's two windows in x-codex-* headers: the primary (the 5-hour window) and
// the secondary (the weekly one), each as the share used, the window's length and its reset:
//
//	x-codex-primary-used-percent: 42.5
//	x-codex-primary-window-minutes: 300
//	x-codex-primary-reset-at: 1767225600          (unix seconds; current Codex CLI reads this)
//	x-codex-primary-reset-after-seconds: 3600     (older backends)
//	x-codex-secondary-…                           (the same for the weekly window)
//
// When a window is used up the backend answers 429 with the reset in its body:
//
//	{"error":{"type":"usage_limit_reached","message":"…","plan_type":"plus",
//	          "resets_at":1767225600,"resets_in_seconds":3600}}
//
// (usage_not_included instead when the plan has no Codex at all).

// codexDayMinutes: a window longer than a day is the weekly one, whichever header named it.
const codexDayMinutes = 24 * 60

// ParseCodexUsage reads the x-codex-* usage headers of a Codex backend answer: the 5-hour and the
// weekly window, nil for a window the answer does not report. now turns a relative reset
// (reset-after-seconds) into a time. The primary window is the 5-hour one and the secondary the
// weekly one, unless their window-minutes say otherwise (a plan with only a weekly window
// reports it as the primary).
func ParseCodexUsage(h http.Header, now time.Time) (five, seven *UsageWindow) {
	p, pMin := codexWindow(h, "X-Codex-Primary-", now)
	s, sMin := codexWindow(h, "X-Codex-Secondary-", now)
	pWeekly, sWeekly := pMin > codexDayMinutes, sMin > 0 && sMin <= codexDayMinutes
	if p != nil && s != nil && pWeekly && sWeekly {
		return s, p // the backend named them the other way round
	}
	if p != nil && pWeekly && s == nil {
		return nil, p
	}
	if s != nil && sWeekly && p == nil {
		return s, nil
	}
	return p, s
}

// codexWindow reads one window of the usage headers (prefix names it) and its length in minutes
// (0 when not given); nil when the answer gave no share used.
func codexWindow(h http.Header, prefix string, now time.Time) (*UsageWindow, int64) {
	used, err := strconv.ParseFloat(strings.TrimSpace(h.Get(prefix+"Used-Percent")), 64)
	if err != nil || math.IsNaN(used) || math.IsInf(used, 0) {
		return nil, 0
	}
	w := &UsageWindow{Utilization: min(max(used, 0), 100)}
	if at, err := strconv.ParseInt(strings.TrimSpace(h.Get(prefix+"Reset-At")), 10, 64); err == nil && at >= epochSecondsMin && at < epochMillisMin {
		w.ResetsAt = time.Unix(at, 0)
	} else if d := seconds(strings.TrimSpace(h.Get(prefix + "Reset-After-Seconds"))); d > 0 {
		w.ResetsAt = now.Add(d).Truncate(time.Second)
	}
	minutes, err := strconv.ParseInt(strings.TrimSpace(h.Get(prefix+"Window-Minutes")), 10, 64)
	if err != nil || minutes < 0 {
		minutes = 0
	}
	return w, minutes
}

// CodexLimit is the Codex backend's answer that an account's usage is used up.
type CodexLimit struct {
	// Type is usage_limit_reached (a window is used up) or usage_not_included (the plan has no
	// Codex).
	Type string
	// Plan is the account's plan as the answer names it ("plus", "pro", …).
	Plan string
	// ResetsAt is when the window that was hit resets; zero when the answer does not say.
	ResetsAt time.Time
}

// ParseCodexLimit reads a Codex backend error body ({"error":{…}}, or a stream's error event with
// the fields at its top): ok when it is the usage wall. The reset is resets_at (unix seconds or
// RFC 3339), else resets_in_seconds from now.
func ParseCodexLimit(body []byte, now time.Time) (CodexLimit, bool) {
	if !strings.Contains(string(body), "usage_") {
		return CodexLimit{}, false
	}
	type fields struct {
		Type            string          `json:"type"`
		Code            string          `json:"code"`
		PlanType        string          `json:"plan_type"`
		ResetsAt        json.RawMessage `json:"resets_at"`
		ResetsInSeconds json.RawMessage `json:"resets_in_seconds"`
	}
	var doc struct {
		fields
		Error *fields `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return CodexLimit{}, false
	}
	e := doc.fields // a stream's error event carries its fields at the top
	if doc.Error != nil {
		e = *doc.Error
	}
	kind := ""
	for _, k := range []string{e.Type, e.Code} {
		if k == "usage_limit_reached" || k == "usage_not_included" {
			kind = k
			break
		}
	}
	if kind == "" {
		return CodexLimit{}, false
	}
	l := CodexLimit{Type: kind, Plan: e.PlanType}
	at := jsonScalar(e.ResetsAt)
	if f, ok := parseDecimal(at); ok && f >= epochSecondsMin && f < epochMillisMin {
		l.ResetsAt = time.Unix(int64(f), 0)
	} else if t, ok := parseTimestamp(at); ok {
		l.ResetsAt = t
	} else if d := seconds(jsonScalar(e.ResetsInSeconds)); d > 0 {
		l.ResetsAt = now.Add(d)
	}
	if !l.ResetsAt.IsZero() && !l.ResetsAt.After(now) {
		l.ResetsAt = time.Time{} // a reset already past says nothing about the window
	}
	return l, true
}

// Full is the usage an account has after the wall l: the window that was hit (five or seven, as
// the same answer's headers reported them, nil when they did not) full until l's reset. The
// window hit is the one the headers show used up, else the one whose reset is the announced one
// (nearest to it), else, without headers, the 5-hour window when the reset is within five
// hours and the weekly one otherwise. Without a reset nothing is marked.
func (l CodexLimit) Full(five, seven *UsageWindow, now time.Time) (*UsageWindow, *UsageWindow) {
	if l.Type != "usage_limit_reached" || l.ResetsAt.IsZero() {
		return five, seven
	}
	full := &UsageWindow{Utilization: 100, ResetsAt: l.ResetsAt}
	if codexHitFiveHour(five, seven, l.ResetsAt, now) {
		return full, seven
	}
	return five, full
}

func codexHitFiveHour(five, seven *UsageWindow, reset, now time.Time) bool {
	usedUp := func(w *UsageWindow) bool { return w != nil && w.Utilization >= 100 }
	switch {
	case usedUp(five) != usedUp(seven):
		return usedUp(five)
	case five != nil && seven != nil && !five.ResetsAt.IsZero() && !seven.ResetsAt.IsZero():
		return absDuration(five.ResetsAt.Sub(reset)) <= absDuration(seven.ResetsAt.Sub(reset))
	}
	return reset.Sub(now) <= 5*time.Hour
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// jsonScalar is a JSON number or string as text ("" for anything else).
func jsonScalar(raw json.RawMessage) string {
	v := strings.TrimSpace(string(raw))
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		var str string
		if json.Unmarshal(raw, &str) == nil {
			return strings.TrimSpace(str)
		}
		return ""
	}
	if v == "null" {
		return ""
	}
	return v
}
