package resilience

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestParseCodexUsage(t *testing.T) {
	at := func(d time.Duration) string { return strconv.FormatInt(hintNow.Add(d).Unix(), 10) }
	tests := []struct {
		name        string
		h           http.Header
		five, seven *UsageWindow
	}{
		{name: "none", h: http.Header{}},
		{name: "both windows with reset-at",
			h: hintHeader("x-codex-primary-used-percent", "42.5", "x-codex-primary-window-minutes", "300",
				"x-codex-primary-reset-at", at(2*time.Hour),
				"x-codex-secondary-used-percent", "7", "x-codex-secondary-window-minutes", "10080",
				"x-codex-secondary-reset-at", at(72*time.Hour)),
			five:  &UsageWindow{Utilization: 42.5, ResetsAt: hintNow.Add(2 * time.Hour)},
			seven: &UsageWindow{Utilization: 7, ResetsAt: hintNow.Add(72 * time.Hour)}},
		{name: "relative resets",
			h: hintHeader("x-codex-primary-used-percent", "10", "x-codex-primary-reset-after-seconds", "3600",
				"x-codex-secondary-used-percent", "20", "x-codex-secondary-reset-after-seconds", "86400"),
			five:  &UsageWindow{Utilization: 10, ResetsAt: hintNow.Add(time.Hour)},
			seven: &UsageWindow{Utilization: 20, ResetsAt: hintNow.Add(24 * time.Hour)}},
		{name: "reset-at wins over reset-after-seconds",
			h: hintHeader("x-codex-primary-used-percent", "10", "x-codex-primary-reset-at", at(90*time.Minute),
				"x-codex-primary-reset-after-seconds", "60"),
			five: &UsageWindow{Utilization: 10, ResetsAt: hintNow.Add(90 * time.Minute)}},
		{name: "used percent clamped",
			h:    hintHeader("x-codex-primary-used-percent", "130", "x-codex-secondary-used-percent", "-3"),
			five: &UsageWindow{Utilization: 100}, seven: &UsageWindow{Utilization: 0}},
		{name: "only a weekly window, reported as the primary",
			h:     hintHeader("x-codex-primary-used-percent", "55", "x-codex-primary-window-minutes", "10080"),
			seven: &UsageWindow{Utilization: 55}},
		{name: "windows named the other way round",
			h: hintHeader("x-codex-primary-used-percent", "5", "x-codex-primary-window-minutes", "10080",
				"x-codex-secondary-used-percent", "60", "x-codex-secondary-window-minutes", "300"),
			five: &UsageWindow{Utilization: 60}, seven: &UsageWindow{Utilization: 5}},
		{name: "malformed values are left out",
			h: hintHeader("x-codex-primary-used-percent", "lots", "x-codex-secondary-used-percent", "NaN",
				"x-codex-secondary-reset-at", "soon")},
		{name: "malformed reset leaves the window without one",
			h:    hintHeader("x-codex-primary-used-percent", "1", "x-codex-primary-reset-at", "tomorrow"),
			five: &UsageWindow{Utilization: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			five, seven := ParseCodexUsage(tc.h, hintNow)
			checkWindow(t, "five", five, tc.five)
			checkWindow(t, "seven", seven, tc.seven)
		})
	}
}

func checkWindow(t *testing.T, name string, got, want *UsageWindow) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("%s: got %+v want %+v", name, got, want)
	}
	if got != nil && (got.Utilization != want.Utilization || !got.ResetsAt.Equal(want.ResetsAt)) {
		t.Fatalf("%s: got %+v want %+v", name, *got, *want)
	}
}

func TestParseCodexLimit(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		ok    bool
		want  CodexLimit
		reset time.Duration // from hintNow; 0 = none
	}{
		{name: "usage_limit_reached with resets_at and resets_in_seconds",
			body: `{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":` +
				hintEpochS(3*time.Hour) + `,"resets_in_seconds":10800}}`,
			ok: true, want: CodexLimit{Type: "usage_limit_reached", Plan: "plus"}, reset: 3 * time.Hour},
		{name: "resets_in_seconds alone",
			body: `{"error":{"type":"usage_limit_reached","resets_in_seconds":3600}}`,
			ok:   true, want: CodexLimit{Type: "usage_limit_reached"}, reset: time.Hour},
		{name: "resets_at as RFC 3339",
			body: `{"error":{"type":"usage_limit_reached","resets_at":"` + hintRFC3339(20*time.Minute) + `"}}`,
			ok:   true, want: CodexLimit{Type: "usage_limit_reached"}, reset: 20 * time.Minute},
		{name: "code instead of type",
			body: `{"error":{"code":"usage_limit_reached","resets_in_seconds":"120"}}`,
			ok:   true, want: CodexLimit{Type: "usage_limit_reached"}, reset: 2 * time.Minute},
		{name: "a stream's error event",
			body: `{"type":"error","code":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":90}`,
			ok:   true, want: CodexLimit{Type: "usage_limit_reached"}, reset: 90 * time.Second},
		{name: "usage_not_included has no reset",
			body: `{"error":{"type":"usage_not_included","plan_type":"free","message":"upgrade"}}`,
			ok:   true, want: CodexLimit{Type: "usage_not_included", Plan: "free"}},
		{name: "a reset in the past is none",
			body: `{"error":{"type":"usage_limit_reached","resets_at":` + hintEpochS(-time.Minute) + `}}`,
			ok:   true, want: CodexLimit{Type: "usage_limit_reached"}},
		{name: "another 429", body: `{"error":{"type":"rate_limit_exceeded","message":"usage_limit wording"}}`},
		{name: "not json", body: `usage_limit_reached`},
		{name: "empty", body: ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseCodexLimit([]byte(tc.body), hintNow)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			want := tc.want
			if tc.reset != 0 {
				want.ResetsAt = hintNow.Add(tc.reset)
			}
			if got.Type != want.Type || got.Plan != want.Plan || !got.ResetsAt.Equal(want.ResetsAt) {
				t.Fatalf("got %+v want %+v", got, want)
			}
		})
	}
}

func TestCodexLimitFull(t *testing.T) {
	reset := hintNow.Add(3 * time.Hour)
	limit := CodexLimit{Type: "usage_limit_reached", ResetsAt: reset}
	tests := []struct {
		name                  string
		l                     CodexLimit
		five, seven           *UsageWindow
		fiveFull, sevenFull   bool
		unchangedFiveAndSeven bool
	}{
		{name: "the window the headers show used up", l: limit,
			five:  &UsageWindow{Utilization: 40, ResetsAt: hintNow.Add(time.Hour)},
			seven: &UsageWindow{Utilization: 100, ResetsAt: hintNow.Add(5 * time.Hour)}, sevenFull: true},
		{name: "the window whose reset is the announced one", l: limit,
			five:  &UsageWindow{Utilization: 99, ResetsAt: hintNow.Add(30 * time.Minute)},
			seven: &UsageWindow{Utilization: 98, ResetsAt: reset}, sevenFull: true},
		{name: "five-hour by its reset", l: limit,
			five:  &UsageWindow{Utilization: 99, ResetsAt: reset.Add(-time.Second)},
			seven: &UsageWindow{Utilization: 20, ResetsAt: hintNow.Add(100 * time.Hour)}, fiveFull: true},
		{name: "no headers, reset within five hours", l: limit, fiveFull: true},
		{name: "no headers, reset days away", l: CodexLimit{Type: "usage_limit_reached", ResetsAt: hintNow.Add(50 * time.Hour)},
			sevenFull: true},
		{name: "no reset: nothing marked", l: CodexLimit{Type: "usage_limit_reached"},
			five: &UsageWindow{Utilization: 50}, unchangedFiveAndSeven: true},
		{name: "usage_not_included marks nothing", l: CodexLimit{Type: "usage_not_included", ResetsAt: reset},
			unchangedFiveAndSeven: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			five, seven := tc.l.Full(tc.five, tc.seven, hintNow)
			switch {
			case tc.unchangedFiveAndSeven:
				if five != tc.five || seven != tc.seven {
					t.Fatalf("windows changed: %+v %+v", five, seven)
				}
			case tc.fiveFull:
				checkWindow(t, "five", five, &UsageWindow{Utilization: 100, ResetsAt: tc.l.ResetsAt})
				if seven != tc.seven {
					t.Fatalf("seven changed: %+v", seven)
				}
			case tc.sevenFull:
				checkWindow(t, "seven", seven, &UsageWindow{Utilization: 100, ResetsAt: tc.l.ResetsAt})
				if five != tc.five {
					t.Fatalf("five changed: %+v", five)
				}
			}
		})
	}
}

func TestUsageObserved(t *testing.T) {
	clk := clockwork.NewFakeClockAt(hintNow)
	var stored []AccountUsage
	u := NewUsage(clk, func(a AccountUsage) { stored = append(stored, a) })

	if u.Observed(1, nil, nil) || len(stored) != 0 {
		t.Fatal("an answer without usage headers must record nothing")
	}
	reset := hintNow.Add(2 * time.Hour)
	if !u.Observed(1, &UsageWindow{Utilization: 30, ResetsAt: reset}, &UsageWindow{Utilization: 5}) {
		t.Fatal("first reading not recorded")
	}
	a, ok := u.Get(1)
	if !ok || a.FiveHour.Utilization != 30 || !a.FiveHour.ResetsAt.Equal(reset) || a.SevenDay.Utilization != 5 {
		t.Fatalf("reading: %+v", a)
	}
	if !a.UpdatedAt.Equal(hintNow) || !a.PolledAt.IsZero() {
		t.Fatalf("UpdatedAt %v PolledAt %v: an observation is no poll", a.UpdatedAt, a.PolledAt)
	}
	if len(stored) != 1 {
		t.Fatalf("persisted %d times, want 1", len(stored))
	}

	clk.Advance(time.Minute)
	if u.Observed(1, &UsageWindow{Utilization: 30, ResetsAt: reset}, nil) || len(stored) != 1 {
		t.Fatal("an unchanged reading must not be stored again")
	}
	// A reading without a reset keeps the known one; a window not reported stays as it was.
	if !u.Observed(1, &UsageWindow{Utilization: 35}, nil) {
		t.Fatal("changed reading not recorded")
	}
	a, _ = u.Get(1)
	if a.FiveHour.Utilization != 35 || !a.FiveHour.ResetsAt.Equal(reset) || a.SevenDay == nil || a.SevenDay.Utilization != 5 {
		t.Fatalf("after partial reading: %+v %+v", a.FiveHour, a.SevenDay)
	}
	if !a.UpdatedAt.Equal(hintNow.Add(time.Minute)) || len(stored) != 2 {
		t.Fatalf("UpdatedAt %v, persisted %d", a.UpdatedAt, len(stored))
	}

	// A window recorded full until its reset holds the account at the wall until then, exactly.
	wall := hintNow.Add(time.Hour)
	u.Observed(2, &UsageWindow{Utilization: 100, ResetsAt: wall}, nil)
	if at, until := u.AtWall(2, 100); !at || !until.Equal(wall) {
		t.Fatalf("AtWall = %v until %v, want until %v", at, until, wall)
	}
	clk.Advance(wall.Sub(clk.Now()))
	if at, _ := u.AtWall(2, 100); at {
		t.Fatal("still at the wall once the window reset")
	}
}
