package resilience

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

var (
	laneNow = time.Unix(1_800_000_000, 0)
	laneCfg = LaneConfig{SlowRetryAfterDefault: 20 * time.Second, SlowMaxWaitDefault: 20 * time.Minute,
		CoolOff: 10 * time.Minute, LimitResetErrorBackoff: 15 * time.Minute}
)

func mid() float64 { return 0.5 } // no jitter

// wallHeader is the 5-hour wall as Anthropic answers it, with extra headers.
func wallHeader(resetIn time.Duration, kv ...string) http.Header {
	h := http.Header{}
	h.Set("anthropic-ratelimit-unified-status", "rejected")
	h.Set("anthropic-ratelimit-unified-reset", epochOf(laneNow.Add(resetIn)))
	h.Set("anthropic-ratelimit-unified-representative-claim", "five_hour")
	h.Set("anthropic-ratelimit-unified-5h-reset", epochOf(laneNow.Add(resetIn)))
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func slowHeader(kv ...string) http.Header {
	h := http.Header{}
	h.Set("anthropic-ratelimit-unified-status", "allowed")
	h.Set("anthropic-ratelimit-unified-5h-reset", epochOf(laneNow.Add(time.Hour)))
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func epochOf(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// active is a lane accepted at the wall of a window resetting in an hour.
func active() LaneState {
	return LaneState{ConnectionID: 1, AcceptedAt: laneNow.Add(-time.Minute), Until: laneNow.Add(time.Hour + LaneGrace),
		Window: laneNow.Add(time.Hour)}
}

func TestLaneDecisions(t *testing.T) {
	offer := "anthropic-ratelimit-unified-slow-offer"
	status := "anthropic-ratelimit-unified-slow-status"
	retryAfter := "anthropic-ratelimit-unified-slow-retry-after"
	maxWait := "anthropic-ratelimit-unified-slow-max-wait"
	tests := []struct {
		name   string
		state  LaneState
		in     LaneInput
		rnd    func() float64
		want   LaneDecision
		check  func(t *testing.T, s LaneState)
		active bool // the lane is active afterwards
	}{
		{name: "a 429 without unified headers takes the normal path",
			in:   LaneInput{Status: 429, Lane: true, Signal: ParseUnified(http.Header{"Retry-After": {"30"}})},
			want: LaneDecision{}},
		{name: "the wall without lane or reset takes the normal path",
			in:   LaneInput{Status: 429, Signal: ParseUnified(wallHeader(time.Hour, offer, "treatment"))},
			want: LaneDecision{}},
		{name: "the wall with the lane on and the offer is accepted until the reset + 60 s",
			in:   LaneInput{Status: 429, Lane: true, Signal: ParseUnified(wallHeader(time.Hour, offer, "treatment"))},
			want: LaneDecision{Action: LaneRetry, Why: "accepted"}, active: true,
			check: func(t *testing.T, s LaneState) {
				if !s.Until.Equal(laneNow.Add(time.Hour+LaneGrace)) || !s.AcceptedAt.Equal(laneNow) || !s.Window.Equal(laneNow.Add(time.Hour)) {
					t.Fatalf("state %+v", s)
				}
			}},
		{name: "without the offer (control arm, ineligible account) the wall takes the normal path",
			in:   LaneInput{Status: 429, Lane: true, Signal: ParseUnified(wallHeader(time.Hour, offer, "control"))},
			want: LaneDecision{}},
		{name: "no acceptance during the cool-off",
			state: LaneState{ConnectionID: 1, CoolOffUntil: laneNow.Add(time.Minute)},
			in:    LaneInput{Status: 429, Lane: true, Signal: ParseUnified(wallHeader(time.Hour, offer, "treatment"))},
			want:  LaneDecision{}},
		{name: "no acceptance while the budget is exhausted",
			state: LaneState{ConnectionID: 1, BudgetExhaustedUntil: laneNow.Add(48 * time.Hour)},
			in:    LaneInput{Status: 429, Lane: true, Signal: ParseUnified(wallHeader(time.Hour, offer, "treatment"))},
			want:  LaneDecision{}},
		{name: "active: a success in the lane keeps it",
			state: active(), in: LaneInput{Status: 200, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "active"))},
			want: LaneDecision{}, active: true,
			check: func(t *testing.T, s LaneState) {
				if s.LastSlowStatus != "active" {
					t.Fatalf("last slow status %q", s.LastSlowStatus)
				}
			}},
		{name: "active: not_needed keeps it",
			state: active(), in: LaneInput{Status: 200, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "not_needed"))},
			want: LaneDecision{}, active: true},
		{name: "active: slot_busy waits the announced retry-after",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true,
				Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "30"))},
			want: LaneDecision{Action: LaneWait, Wait: 30 * time.Second, Why: "slot_busy"}, active: true},
		{name: "active: slot_busy without retry-after waits the default",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "slot_busy"))},
			want: LaneDecision{Action: LaneWait, Wait: 20 * time.Second, Why: "slot_busy"}, active: true},
		{name: "active: a retry-after below 5 s is raised to 5 s",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "1"))},
			want: LaneDecision{Action: LaneWait, Wait: 5 * time.Second, Why: "slot_busy"}, active: true},
		{name: "active: a retry-after above 600 s is cut to 600 s",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "5000"))},
			want: LaneDecision{Action: LaneWait, Wait: 600 * time.Second, Why: "slot_busy"}, active: true},
		{name: "active: jitter takes 30 % off at most",
			state: active(), rnd: func() float64 { return 0 },
			in:   LaneInput{Status: 429, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "20"))},
			want: LaneDecision{Action: LaneWait, Wait: 14 * time.Second, Why: "slot_busy"}, active: true},
		{name: "active: jitter adds 30 % at most",
			state: active(), rnd: func() float64 { return 1 },
			in:   LaneInput{Status: 429, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "20"))},
			want: LaneDecision{Action: LaneWait, Wait: 26 * time.Second, Why: "slot_busy"}, active: true},
		{name: "active: a 529 waits like slot_busy",
			state: active(), in: LaneInput{Status: 529, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(retryAfter, "10"))},
			want: LaneDecision{Action: LaneWait, Wait: 10 * time.Second, Why: "slot_busy"}, active: true},
		{name: "active: past the max wait the lane ends with a cool-off",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Waited: 19*time.Minute + 50*time.Second,
				Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "20"))},
			want: LaneDecision{Why: "ended:max_wait"},
			check: func(t *testing.T, s LaneState) {
				if s.EndReason != LaneEndMaxWait || !s.CoolOffUntil.Equal(laneNow.Add(10*time.Minute)) || !s.Until.IsZero() {
					t.Fatalf("state %+v", s)
				}
			}},
		{name: "active: the announced max wait counts (clamped to 1 min)",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Waited: 45 * time.Second,
				Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "20", maxWait, "10"))},
			want: LaneDecision{Why: "ended:max_wait"}},
		{name: "active: the announced max wait counts (clamped to 6 h)",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Waited: 5 * time.Hour,
				Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "20", maxWait, "100000"))},
			want: LaneDecision{Action: LaneWait, Wait: 20 * time.Second, Why: "slot_busy"}, active: true},
		{name: "active: the request's own deadline less 5 s bounds the wait",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Deadline: 24 * time.Second,
				Signal: ParseUnified(slowHeader(status, "slot_busy", retryAfter, "20"))},
			want: LaneDecision{Why: "ended:max_wait"},
			check: func(t *testing.T, s LaneState) {
				if s.CoolOffUntil.IsZero() {
					t.Fatal("no cool-off")
				}
			}},
		{name: "active: weekly_limit ends the lane",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "weekly_limit"))},
			want: LaneDecision{Why: "ended:weekly_limit"},
			check: func(t *testing.T, s LaneState) {
				if s.EndReason != LaneEndWeeklyLimit || !s.CoolOffUntil.IsZero() {
					t.Fatalf("state %+v", s)
				}
			}},
		{name: "active: budget_exhausted ends the lane until the budget resets",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true,
				Signal: ParseUnified(slowHeader(status, "budget_exhausted", "anthropic-ratelimit-unified-slow-budget-reset", epochOf(laneNow.Add(50*time.Hour))))},
			want: LaneDecision{Why: "ended:budget_exhausted"},
			check: func(t *testing.T, s LaneState) {
				if !s.BudgetExhaustedUntil.Equal(laneNow.Add(50 * time.Hour)) {
					t.Fatalf("budget until %v", s.BudgetExhaustedUntil)
				}
			}},
		{name: "active: budget_exhausted is remembered at most 8 days",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true,
				Signal: ParseUnified(slowHeader(status, "budget_exhausted", "anthropic-ratelimit-unified-slow-budget-reset", epochOf(laneNow.Add(30*24*time.Hour))))},
			want: LaneDecision{Why: "ended:budget_exhausted"},
			check: func(t *testing.T, s LaneState) {
				if !s.BudgetExhaustedUntil.Equal(laneNow.Add(BudgetMemory)) {
					t.Fatalf("budget until %v", s.BudgetExhaustedUntil)
				}
			}},
		{name: "active: off ends the lane",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "off"))},
			want: LaneDecision{Why: "ended:off"}},
		{name: "active: ineligible ends the lane",
			state: active(), in: LaneInput{Status: 200, SentSlow: true, Lane: true, Signal: ParseUnified(slowHeader(status, "ineligible"))},
			want: LaneDecision{Why: "ended:ineligible"}},
		{name: "active: overage in use ends the lane whatever the status",
			state: active(), in: LaneInput{Status: 429, SentSlow: true, Lane: true,
				Signal: ParseUnified(slowHeader(status, "slot_busy", "anthropic-ratelimit-unified-overage-in-use", "true"))},
			want: LaneDecision{Why: "ended:extra_usage"}},
		{name: "active: a new 5-hour window ends the lane",
			state: active(), in: LaneInput{Status: 200, SentSlow: true, Lane: true,
				Signal: ParseUnified(slowHeader("anthropic-ratelimit-unified-5h-reset", epochOf(laneNow.Add(6*time.Hour))))},
			want: LaneDecision{Why: "ended:new_window"}},
		{name: "the lane ends by itself once the reset + 60 s passed; the next wall is accepted again",
			state: LaneState{ConnectionID: 1, Until: laneNow.Add(-time.Second), Window: laneNow.Add(-time.Minute)},
			in:    LaneInput{Status: 429, Lane: true, Signal: ParseUnified(wallHeader(5*time.Hour, offer, "treatment"))},
			want:  LaneDecision{Action: LaneRetry, Why: "accepted"}, active: true},
		{name: "active: a request sent before the lane was accepted joins it",
			state: active(), in: LaneInput{Status: 429, Lane: true, Signal: ParseUnified(wallHeader(time.Hour, offer, "treatment"))},
			want: LaneDecision{Action: LaneRetry, Why: "joined"}, active: true},
		{name: "limit reset on: the 5-hour wall tries the reset first",
			in:   LaneInput{Status: 429, Lane: true, LimitReset: true, Signal: ParseUnified(wallHeader(time.Hour, offer, "treatment"))},
			want: LaneDecision{Action: LaneTryReset, Why: "limit_reset"}},
		{name: "limit reset on: not for the weekly claim",
			in: LaneInput{Status: 429, Lane: true, LimitReset: true,
				Signal: ParseUnified(wallHeader(time.Hour, offer, "treatment", "anthropic-ratelimit-unified-representative-claim", "seven_day"))},
			want: LaneDecision{Action: LaneRetry, Why: "accepted"}, active: true},
		{name: "limit reset on: not while a used reset is remembered",
			state: LaneState{ConnectionID: 1, ResetNextAvailable: laneNow.Add(time.Hour)},
			in:    LaneInput{Status: 429, LimitReset: true, Signal: ParseUnified(wallHeader(time.Hour))},
			want:  LaneDecision{}},
		{name: "limit reset on: not during the error back-off",
			state: LaneState{ConnectionID: 1, ResetRetryAt: laneNow.Add(time.Minute)},
			in:    LaneInput{Status: 429, LimitReset: true, Signal: ParseUnified(wallHeader(time.Hour))},
			want:  LaneDecision{}},
		{name: "limit reset on: once per request",
			in:   LaneInput{Status: 429, LimitReset: true, ResetTried: true, Signal: ParseUnified(wallHeader(time.Hour))},
			want: LaneDecision{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.state
			if s.ConnectionID == 0 {
				s.ConnectionID = 1
			}
			rnd := tc.rnd
			if rnd == nil {
				rnd = mid
			}
			got := Decide(&s, tc.in, laneCfg, laneNow, rnd)
			if got != tc.want {
				t.Fatalf("decision %+v, want %+v", got, tc.want)
			}
			if s.Active(laneNow) != tc.active {
				t.Fatalf("active %v, want %v (state %+v)", s.Active(laneNow), tc.active, s)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestAfterReset(t *testing.T) {
	wall := LaneInput{Status: 429, Lane: true, LimitReset: true,
		Signal: ParseUnified(wallHeader(time.Hour, "anthropic-ratelimit-unified-slow-offer", "treatment"))}
	next := laneNow.Add(3 * 24 * time.Hour)
	tests := []struct {
		name     string
		lane     bool
		out      ResetOutcome
		want     LaneDecision
		nextWant time.Time
		retryAt  time.Time
		active   bool
	}{
		{name: "reset: retry at full speed, next one in a week", lane: true, out: ResetOutcome{Result: ResetDone},
			want: LaneDecision{Action: LaneRetry, Why: "reset"}, nextWant: laneNow.Add(LimitResetInterval)},
		{name: "not_limited: retry at full speed", lane: true, out: ResetOutcome{Result: ResetNotLimited, NextAvailable: next},
			want: LaneDecision{Action: LaneRetry, Why: "reset"}, nextWant: next},
		{name: "already_used: remembered, then the lane", lane: true, out: ResetOutcome{Result: ResetAlreadyUsed, NextAvailable: next},
			want: LaneDecision{Action: LaneRetry, Why: "accepted"}, nextWant: next, active: true},
		{name: "not_offered: remembered a week, without the lane the normal path", out: ResetOutcome{Result: ResetNotOffered},
			want: LaneDecision{}, nextWant: laneNow.Add(LimitResetInterval)},
		{name: "error: backs off, then the lane", lane: true, out: ResetOutcome{Result: ResetError},
			want: LaneDecision{Action: LaneRetry, Why: "accepted"}, retryAt: laneNow.Add(15 * time.Minute), active: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := LaneState{ConnectionID: 1}
			in := wall
			in.Lane = tc.lane
			if d := Decide(&s, in, laneCfg, laneNow, mid); d.Action != LaneTryReset {
				t.Fatalf("the wall did not try the reset: %+v", d)
			}
			got := AfterReset(&s, in, tc.out, laneCfg, laneNow)
			if got != tc.want || !s.ResetNextAvailable.Equal(tc.nextWant) || !s.ResetRetryAt.Equal(tc.retryAt) || s.Active(laneNow) != tc.active {
				t.Fatalf("decision %+v state %+v", got, s)
			}
			in.ResetTried = false
			if d := Decide(&s, in, laneCfg, laneNow.Add(time.Second), mid); d.Action == LaneTryReset {
				t.Fatal("the reset is tried again at once")
			}
		})
	}
}

func TestLanesTable(t *testing.T) {
	clk := clockwork.NewFakeClockAt(laneNow)
	var persisted []LaneState
	l := NewLanes(clk, func(s LaneState) { persisted = append(persisted, s) })
	l.rnd = mid
	if !l.CanTakeWall(1, true, false) || l.CanTakeWall(1, false, false) {
		t.Fatal("a connection without state: only the toggles count")
	}
	wall := LaneInput{Status: 429, Lane: true, Signal: ParseUnified(wallHeader(time.Hour, "anthropic-ratelimit-unified-slow-offer", "treatment"))}
	if d := l.Decide(1, wall, laneCfg); d.Action != LaneRetry || !l.Active(1) {
		t.Fatalf("not accepted: %+v", d)
	}
	if len(persisted) != 1 {
		t.Fatalf("persisted %d times", len(persisted))
	}
	l.Decide(1, LaneInput{Status: 500, SentSlow: true, Lane: true}, laneCfg) // changes nothing
	if len(persisted) != 1 {
		t.Fatal("an unchanged state was persisted")
	}
	done := l.Wait(1, laneNow.Add(20*time.Second))
	if live, _ := l.Get(1); live.Waiting != 1 || !live.WaitUntil.Equal(laneNow.Add(20*time.Second)) {
		t.Fatalf("live %+v", live)
	}
	done()
	if live, _ := l.Get(1); live.Waiting != 0 || !live.WaitUntil.IsZero() {
		t.Fatalf("live after the wait %+v", live)
	}
	clk.Advance(time.Hour + LaneGrace)
	if l.Active(1) {
		t.Fatal("the lane outlived its reset")
	}
	l.Clear(1)
	if _, ok := l.Get(1); ok || persisted[len(persisted)-1] != (LaneState{ConnectionID: 1}) {
		t.Fatal("Clear did not forget and persist the empty state")
	}
}

func TestParseUnifiedAndUsage(t *testing.T) {
	h := http.Header{}
	h.Set("anthropic-ratelimit-unified-status", "allowed_warning")
	h.Set("anthropic-ratelimit-unified-5h-utilization", "0.92")
	h.Set("anthropic-ratelimit-unified-5h-reset", epochOf(laneNow.Add(2*time.Hour)))
	h.Set("anthropic-ratelimit-unified-7d-utilization", "0.3")
	h.Set("anthropic-ratelimit-unified-7d-reset", epochOf(laneNow.Add(72*time.Hour)))
	h.Set("anthropic-ratelimit-unified-slow-retry-after", "12.5")
	u := ParseUnified(h)
	if !u.Present || u.Rejected() || !u.FiveHour.Known || u.FiveHour.Utilization < 91.99 || u.FiveHour.Utilization > 92.01 ||
		!u.SevenDay.ResetsAt.Equal(laneNow.Add(72*time.Hour)) || u.SlowRetryAfter != 12500*time.Millisecond {
		t.Fatalf("parsed %+v", u)
	}
	if ParseUnified(http.Header{"Content-Type": {"x"}}).Present {
		t.Fatal("no unified header reads as present")
	}

	clk := clockwork.NewFakeClockAt(laneNow)
	usage := NewUsage(clk, nil)
	if !usage.Observe(7, u) {
		t.Fatal("readings not taken")
	}
	if at, _ := usage.AtWall(7, 90); !at {
		t.Fatal("92 % is at a 90 % threshold")
	}
	if at, _ := usage.AtWall(7, 100); at {
		t.Fatal("92 % is not at the wall")
	}
	// The wall marks the claimed window full until the announced reset.
	usage.Observe(7, ParseUnified(wallHeader(90*time.Minute)))
	at, until := usage.AtWall(7, 100)
	if !at || !until.Equal(laneNow.Add(90*time.Minute)) {
		t.Fatalf("at wall %v until %v", at, until)
	}
	clk.Advance(90 * time.Minute)
	if at, _ := usage.AtWall(7, 100); at {
		t.Fatal("still at the wall after the reset")
	}
	got, _ := usage.Get(7)
	if got.FiveHour == nil || got.FiveHour.Utilization != 0 || got.SevenDay.Utilization < 29.9 {
		t.Fatalf("after the reset %+v %+v", got.FiveHour, got.SevenDay)
	}
	usage.Polled(7, &UsageWindow{Utilization: 100, ResetsAt: clk.Now().Add(time.Hour)}, nil)
	if at, _ := usage.AtWall(7, 100); !at {
		t.Fatal("a polled full window is the wall")
	}
}

// A poll's answer is older than what an answer's headers told while the poll was under way:
// the wall's 429 stays, and the poll only fills the window nothing reported. A poll with
// nothing newer in between replaces the readings.
func TestPollDoesNotUndoNewerReadings(t *testing.T) {
	clk := clockwork.NewFakeClockAt(laneNow)
	usage := NewUsage(clk, nil)
	asked := usage.Readings(7) // the account's first poll asks
	usage.Observe(7, ParseUnified(wallHeader(90*time.Minute)))
	usage.PolledAfter(7, asked, &UsageWindow{Utilization: 0}, &UsageWindow{Utilization: 12, ResetsAt: laneNow.Add(72 * time.Hour)})
	if at, until := usage.AtWall(7, 100); !at || !until.Equal(laneNow.Add(90*time.Minute)) {
		t.Fatalf("the poll asked before the wall undid it: at wall %v until %v", at, until)
	}
	if got, _ := usage.Get(7); got.SevenDay == nil || got.SevenDay.Utilization != 12 || got.PolledAt.IsZero() {
		t.Fatalf("the poll's weekly window was not taken: %+v", got)
	}
	usage.PolledAfter(7, usage.Readings(7), &UsageWindow{Utilization: 40, ResetsAt: laneNow.Add(time.Hour)}, nil)
	if at, _ := usage.AtWall(7, 100); at {
		t.Fatal("a poll asked after the wall did not replace it")
	}
}
