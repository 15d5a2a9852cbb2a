package spend

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func newTestLimiter(t *testing.T, start time.Time, loc *time.Location) (*Limiter, *clockwork.FakeClock, *[]Crossing) {
	t.Helper()
	clk := clockwork.NewFakeClockAt(start)
	var mu sync.Mutex
	var crossed []Crossing
	l := NewLimiter(clk.Now, loc, func(c Crossing) {
		mu.Lock()
		crossed = append(crossed, c)
		mu.Unlock()
	})
	return l, clk, &crossed
}

// mustAdmit fails the test when the key's request is refused; what says which request.
func mustAdmit(t *testing.T, l *Limiter, key int64, lim Limits, what string) {
	t.Helper()
	if r := l.Admit(key, lim); r != nil {
		t.Fatalf("%s: %+v", what, r)
	}
}

func TestRequestsPerMinuteSlide(t *testing.T) {
	l, clk, _ := newTestLimiter(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), nil)
	lim := Limits{RPM: 3}
	for i := range 3 {
		mustAdmit(t, l, 1, lim, fmt.Sprintf("request %d refused", i))
		l.Finish(1, lim, Usage{}, 0)
		clk.Advance(10 * time.Second)
	}
	// Requests at 0 s, 10 s, 20 s; now 30 s: the first leaves the window at 60 s.
	r := l.Admit(1, lim)
	if r == nil || r.Code != CodeRateLimited || r.RetryAfter != 30*time.Second || r.Final() {
		t.Fatalf("4th request: %+v, want key_rate_limited retry after 30s", r)
	}
	// Another key is not affected.
	mustAdmit(t, l, 2, lim, "other key refused")
	clk.Advance(30 * time.Second)
	mustAdmit(t, l, 1, lim, "after the reset")
}

func TestTokensPerMinute(t *testing.T) {
	l, clk, _ := newTestLimiter(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), nil)
	lim := Limits{TPM: 1000}
	mustAdmit(t, l, 1, lim, "refused")
	clk.Advance(5 * time.Second)
	l.Finish(1, lim, Usage{Input: 700, Output: 400}, 0)
	clk.Advance(time.Second)
	r := l.Admit(1, lim)
	if r == nil || r.Code != CodeTokenLimited || r.RetryAfter != 59*time.Second {
		t.Fatalf("over the tokens: %+v", r)
	}
	if u := l.Use(1, lim); u.Tokens != 1100 || u.Requests != 1 || u.Parallel != 0 {
		t.Fatalf("use %+v", u)
	}
	clk.Advance(59 * time.Second)
	mustAdmit(t, l, 1, lim, "after the window")
}

func TestParallel(t *testing.T) {
	l, _, _ := newTestLimiter(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), nil)
	lim := Limits{MaxParallel: 2}
	for range 2 {
		mustAdmit(t, l, 1, lim, "refused")
	}
	if r := l.Admit(1, lim); r == nil || r.Code != CodeParallelLimited || r.RetryAfter != time.Second {
		t.Fatalf("third at once: %+v", r)
	}
	l.Finish(1, lim, Usage{}, 0)
	mustAdmit(t, l, 1, lim, "after one finished")
}

// The day and the month run in the configured zone: in Berlin (UTC+1 in winter) the day of
// 2026-12-31 ends at 23:00 UTC, and the month with it.
func TestBudgetsRollOverInTheirZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 31, 22, 0, 0, 0, time.UTC) // 23:00 in Berlin
	l, clk, crossed := newTestLimiter(t, start, berlin)
	lim := Limits{DailyUSD: 5, MonthlyUSD: 20}
	l.Seed(nil, map[int64]float64{1: 14}) // spent earlier this month
	mustAdmit(t, l, 1, lim, "refused")
	l.Finish(1, lim, Usage{Input: 10, Output: 10}, 5.5)
	r := l.Admit(1, lim)
	if r == nil || r.Code != CodeBudgetExceeded || r.Budget != "daily" || !r.Final() || r.RetryAfter != time.Hour {
		t.Fatalf("after the day's budget: %+v (want daily, retry after 1h: midnight in Berlin)", r)
	}
	// 80 % and 100 % of the daily budget were crossed by one request, and 80 % of the month's
	// (19.5 of 20).
	if len(*crossed) != 3 || (*crossed)[0].Threshold != 80 || (*crossed)[1].Threshold != 100 || (*crossed)[0].Budget != "daily" ||
		(*crossed)[2].Budget != "monthly" || (*crossed)[2].Threshold != 80 {
		t.Fatalf("crossings %+v", *crossed)
	}
	if want := time.Date(2027, 1, 1, 0, 0, 0, 0, berlin); !(*crossed)[0].ResetsAt.Equal(want) {
		t.Fatalf("resets at %v, want %v", (*crossed)[0].ResetsAt, want)
	}
	// 59 minutes later it is still the old day.
	clk.Advance(59 * time.Minute)
	if r := l.Admit(1, lim); r == nil || r.RetryAfter != time.Minute {
		t.Fatalf("a minute before midnight: %+v", r)
	}
	// Midnight in Berlin (23:00 UTC): a new day and a new month; both budgets are free again.
	clk.Advance(time.Minute)
	mustAdmit(t, l, 1, lim, "after midnight in Berlin")
	if u := l.Use(1, lim); u.DaySpend != 0 || u.MonthSpend != 0 {
		t.Fatalf("use after the roll-over %+v", u)
	}
	l.Finish(1, lim, Usage{}, 1)
	if u := l.Use(1, lim); u.DaySpend != 1 || u.MonthSpend != 1 {
		t.Fatalf("use after a charge %+v", u)
	}
}

func TestMonthlyBudgetRetryAfterIsTheMonthsEnd(t *testing.T) {
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	start := time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)
	l, _, crossed := newTestLimiter(t, start, tokyo)
	lim := Limits{MonthlyUSD: 10}
	l.Seed(nil, map[int64]float64{1: 7})
	_ = l.Admit(1, lim)
	l.Finish(1, lim, Usage{}, 1.5) // 8.5: crosses 80 % once
	_ = l.Admit(1, lim)
	l.Finish(1, lim, Usage{}, 0.5) // 9: no new crossing
	if len(*crossed) != 1 || (*crossed)[0].Threshold != 80 || (*crossed)[0].Budget != "monthly" {
		t.Fatalf("crossings %+v", *crossed)
	}
	_ = l.Admit(1, lim)
	l.Finish(1, lim, Usage{}, 2)
	r := l.Admit(1, lim)
	want := time.Date(2027, 1, 1, 0, 0, 0, 0, tokyo).Sub(start)
	if r == nil || r.Budget != "monthly" || r.RetryAfter != want {
		t.Fatalf("monthly: %+v, want retry after %v", r, want)
	}
	if len(*crossed) != 2 || (*crossed)[1].Threshold != 100 {
		t.Fatalf("crossings %+v", *crossed)
	}
}

// Keys seeded over their budget at start do not announce it again.
func TestSeedDoesNotAnnounceAgain(t *testing.T) {
	l, _, crossed := newTestLimiter(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), nil)
	lim := Limits{DailyUSD: 1}
	l.Seed(map[int64]float64{1: 0.9}, map[int64]float64{1: 0.9})
	_ = l.Admit(1, lim)
	l.Finish(1, lim, Usage{}, 0.05)
	if len(*crossed) != 0 {
		t.Fatalf("crossings %+v", *crossed)
	}
	_ = l.Admit(1, lim)
	l.Finish(1, lim, Usage{}, 0.05)
	if len(*crossed) != 1 || (*crossed)[0].Threshold != 100 {
		t.Fatalf("crossings %+v", *crossed)
	}
}

// Requests running when the budget is reached overshoot it by their own cost, no more.
func TestConcurrentOvershootIsBoundedByTheRunning(t *testing.T) {
	l, _, _ := newTestLimiter(t, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), nil)
	lim := Limits{DailyUSD: 1}
	l.Seed(map[int64]float64{1: 0.95}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 20 {
		wg.Go(func() {
			if l.Admit(1, lim) == nil {
				mu.Lock()
				admitted++
				mu.Unlock()
				l.Finish(1, lim, Usage{}, 0.02)
			}
		})
	}
	wg.Wait()
	u := l.Use(1, lim)
	if u.DaySpend > 1+0.02*float64(admitted)+1e-9 || u.DaySpend < 0.95+0.02*float64(admitted)-1e-9 {
		t.Fatalf("spend %.4f after %d admitted", u.DaySpend, admitted)
	}
	if r := l.Admit(1, lim); u.DaySpend >= 1 && r == nil {
		t.Fatal("admitted over the budget")
	}
}

func BenchmarkAdmitFinish(b *testing.B) {
	l := NewLimiter(time.Now, time.UTC, nil)
	lim := Limits{RPM: 1 << 40, TPM: 1 << 40, DailyUSD: 1e6, MonthlyUSD: 1e6, MaxParallel: 1 << 20}
	b.ReportAllocs()
	for b.Loop() {
		if l.Admit(7, lim) == nil {
			l.Finish(7, lim, Usage{Input: 100, Output: 50}, 0.001)
		}
	}
}

// BenchmarkAccountRequest is what the gateway adds to one request for spend and limits: the
// key's limit check, the price look-up of the answer's model, its cost, and counting the use
// (the request path's whole share; the target is under 2 µs and no allocation).
func BenchmarkAccountRequest(b *testing.B) {
	tb := benchTable(b)
	l := NewLimiter(time.Now, time.UTC, nil)
	lim := Limits{RPM: 1 << 40, TPM: 1 << 40, DailyUSD: 1e9, MonthlyUSD: 1e9, MaxParallel: 1 << 20}
	u := Usage{Input: 12000, Output: 800, CacheRead: 9000, Reasoning: 300}
	b.ReportAllocs()
	for b.Loop() {
		if l.Admit(7, lim) != nil {
			b.Fatal("refused")
		}
		p, _, ok := tb.Lookup("anthropic", "anthropic", "claude-sonnet-4-5-20250929")
		cost := 0.0
		if ok {
			cost = p.Cost(u)
		}
		l.Finish(7, lim, u, cost)
	}
}
