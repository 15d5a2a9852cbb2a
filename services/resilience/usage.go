package resilience

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
)

// Unified is what one Anthropic response says about a subscription account's usage wall, read
// from its anthropic-ratelimit-unified-* headers. Times are the announced resets; utilisations
// are percent (the headers give fractions 0–1).
type Unified struct {
	// Present is set when the response carried any unified header.
	Present bool
	// Status is anthropic-ratelimit-unified-status: allowed, allowed_warning or rejected.
	Status string
	// Reset is anthropic-ratelimit-unified-reset: when the limit that applies resets.
	Reset time.Time
	// Claim is anthropic-ratelimit-unified-representative-claim: five_hour, seven_day, …
	Claim              string
	FiveHour, SevenDay WindowReading
	// SlowOffer is -slow-offer (treatment: the account may enter the low-priority lane).
	SlowOffer string
	// SlowStatus is -slow-status: active, not_needed, slot_busy, weekly_limit,
	// budget_exhausted, ineligible or off.
	SlowStatus string
	// SlowRetryAfter and SlowMaxWait are -slow-retry-after and -slow-max-wait; 0 = not given.
	SlowRetryAfter, SlowMaxWait time.Duration
	// BudgetReset is -slow-budget-reset: when the lane's own allowance resets.
	BudgetReset time.Time
	// OverageInUse is -overage-in-use: paid extra usage is serving the account.
	OverageInUse bool
}

// WindowReading is one usage window as a response reported it.
type WindowReading struct {
	Known       bool // the response gave a utilisation for the window
	Utilization float64
	ResetsAt    time.Time
	Status      string // -5h-status / -7d-status
}

// Rejected reports whether the response is the usage wall: the unified status is rejected.
func (u Unified) Rejected() bool { return strings.EqualFold(u.Status, "rejected") }

// FiveHourClaim reports whether the limit hit is the 5-hour one (the representative claim, or,
// without one, the 5-hour window's own status).
func (u Unified) FiveHourClaim() bool {
	if u.Claim != "" {
		return u.Claim == "five_hour"
	}
	return strings.EqualFold(u.FiveHour.Status, "rejected") || !strings.EqualFold(u.SevenDay.Status, "rejected")
}

const unifiedPrefix = "Anthropic-Ratelimit-Unified-"

// ParseUnified reads the unified headers of a response; anything malformed is left out.
func ParseUnified(h http.Header) Unified {
	var u Unified
	get := func(name string) string {
		v := strings.TrimSpace(h.Get(unifiedPrefix + name))
		if v != "" {
			u.Present = true
		}
		return v
	}
	u.Status = get("Status")
	u.Reset = epoch(get("Reset"))
	u.Claim = get("Representative-Claim")
	u.FiveHour = window(get("5h-Utilization"), get("5h-Reset"), get("5h-Status"))
	u.SevenDay = window(get("7d-Utilization"), get("7d-Reset"), get("7d-Status"))
	u.SlowOffer = get("Slow-Offer")
	u.SlowStatus = get("Slow-Status")
	u.SlowRetryAfter = seconds(get("Slow-Retry-After"))
	u.SlowMaxWait = seconds(get("Slow-Max-Wait"))
	u.BudgetReset = epoch(get("Slow-Budget-Reset"))
	u.OverageInUse = strings.EqualFold(get("Overage-In-Use"), "true")
	return u
}

func window(util, reset, status string) WindowReading {
	w := WindowReading{ResetsAt: epoch(reset), Status: status}
	if f, err := strconv.ParseFloat(util, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
		w.Known, w.Utilization = true, math.Min(f, 1)*100
	}
	return w
}

// epoch reads unix seconds (the unified headers' timestamps); zero when absent or malformed.
func epoch(s string) time.Time {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 1e12 {
		return time.Time{}
	}
	return time.UnixMilli(int64(f * 1000))
}

func seconds(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e7 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// UsageWindow is one window of a subscription account: the share used (percent) and when it
// resets.
type UsageWindow struct {
	Utilization float64   `json:"utilization"`
	ResetsAt    time.Time `json:"resets_at,omitzero"`
}

// AccountUsage is what is known of an account's 5-hour and weekly windows, from the usage API
// and from the unified headers of its responses (whichever came last).
type AccountUsage struct {
	ConnectionID int64        `json:"connection_id"`
	FiveHour     *UsageWindow `json:"five_hour,omitempty"`
	SevenDay     *UsageWindow `json:"seven_day,omitempty"`
	// UpdatedAt is when a reading last arrived; PolledAt when the usage API last answered.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	PolledAt  time.Time `json:"polled_at,omitzero"`
	// PollError is why the last poll failed; "" after a good one.
	PollError string `json:"poll_error,omitempty"`
}

// Usage holds every subscription account's usage windows in memory; changes go to a persist
// hook (the state store), so a restart still knows which account is at its wall.
type Usage struct {
	stateTable[int64, AccountUsage]
	// readings counts, per account, the readings its answers brought (Observed), guarded by mu:
	// a poll notes the count when it asks (Readings), so that what answers tell while it is
	// under way is not undone by its older news (PolledAfter).
	readings map[int64]uint64
}

// NewUsage builds the table; persist (may be nil) must not block.
func NewUsage(clock clockwork.Clock, persist func(AccountUsage)) *Usage {
	return &Usage{stateTable: newStateTable[int64](clock, persist), readings: map[int64]uint64{}}
}

// Readings is the count of readings an account's answers have brought so far: a poll notes it
// before it asks the usage API, and hands it to PolledAfter.
func (u *Usage) Readings(id int64) uint64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.readings[id]
}

// Load installs readings read at start.
func (u *Usage) Load(list []AccountUsage) {
	u.load(list, func(a *AccountUsage) int64 { return a.ConnectionID })
}

// Apply installs an account's readings as another replica recorded them, without persisting
// them. A reading that knows nothing (no window, no poll, no error) deletes the account's.
func (u *Usage) Apply(a AccountUsage) {
	if a.FiveHour == nil && a.SevenDay == nil && a.UpdatedAt.IsZero() && a.PolledAt.IsZero() && a.PollError == "" {
		u.apply(a.ConnectionID, nil)
		return
	}
	u.apply(a.ConnectionID, &a)
	u.mu.Lock()
	u.readings[a.ConnectionID]++ // newer than a poll under way here
	u.mu.Unlock()
}

func (u *Usage) entry(id int64) *AccountUsage {
	a := u.m[id]
	if a == nil {
		a = &AccountUsage{ConnectionID: id}
		u.m[id] = a
	}
	return a
}

// Polled records an answer of the usage API (nil for a window it did not report) to a poll that
// asked just now.
func (u *Usage) Polled(id int64, five, seven *UsageWindow) {
	u.PolledAfter(id, u.Readings(id), five, seven)
}

// PolledAfter records an answer of the usage API to a poll that asked when the account's
// answers had brought readings readings (Readings). When an answer brought one since — the
// wall's 429 while the poll was under way — the windows it set are newer than the poll's: they
// stay, and the poll only fills the windows nothing has reported.
func (u *Usage) PolledAfter(id int64, readings uint64, five, seven *UsageWindow) {
	now := u.clock.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	a := u.entry(id)
	if u.readings[id] == readings {
		a.FiveHour, a.SevenDay, a.UpdatedAt = five, seven, now
	} else {
		if a.FiveHour == nil && five != nil {
			a.FiveHour, a.UpdatedAt = five, now
		}
		if a.SevenDay == nil && seven != nil {
			a.SevenDay, a.UpdatedAt = seven, now
		}
	}
	a.PolledAt, a.PollError = now, ""
	u.persist(*a)
}

// PollFailed records why the usage API could not be read; the last readings stay.
func (u *Usage) PollFailed(id int64, why string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	a := u.entry(id)
	if a.PollError == why {
		return
	}
	a.PollError = why
	u.persist(*a)
}

// Observe applies the unified headers of a response: each window the response reports, and on
// the wall (status rejected) the claimed window as full until the announced reset. It reports
// whether anything changed.
func (u *Usage) Observe(id int64, s Unified) bool {
	if !s.Present {
		return false
	}
	reading := func(r WindowReading) *UsageWindow {
		if !r.Known {
			return nil
		}
		return &UsageWindow{Utilization: r.Utilization, ResetsAt: r.ResetsAt}
	}
	five, seven := reading(s.FiveHour), reading(s.SevenDay)
	if s.Rejected() && !s.Reset.IsZero() {
		full := &UsageWindow{Utilization: 100, ResetsAt: s.Reset}
		if s.FiveHourClaim() {
			five = full
		} else {
			seven = full
		}
	}
	return u.Observed(id, five, seven)
}

// Observed records the windows an answer reported of its account (a ChatGPT account's x-codex-*
// headers, ParseCodexUsage); nil leaves a window as it was. A reading without a reset keeps the
// reset known before. Unlike Polled it leaves PolledAt: no usage API was asked. It reports
// whether anything changed; only a change is stored.
func (u *Usage) Observed(id int64, five, seven *UsageWindow) bool {
	if five == nil && seven == nil {
		return false
	}
	now := u.clock.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.readings[id]++
	a := u.entry(id)
	before := *a
	set := func(dst **UsageWindow, w *UsageWindow) {
		if w == nil {
			return
		}
		c := *w
		if c.ResetsAt.IsZero() && *dst != nil {
			c.ResetsAt = (*dst).ResetsAt
		}
		*dst = &c
	}
	set(&a.FiveHour, five)
	set(&a.SevenDay, seven)
	if sameWindow(before.FiveHour, a.FiveHour) && sameWindow(before.SevenDay, a.SevenDay) {
		return false
	}
	a.UpdatedAt = now
	u.persist(*a)
	return true
}

func sameWindow(a, b *UsageWindow) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Utilization == b.Utilization && a.ResetsAt.Equal(b.ResetsAt)
}

// Get returns an account's usage as it stands now: a window whose reset has passed starts again
// at 0 %.
func (u *Usage) Get(id int64) (AccountUsage, bool) {
	now := u.clock.Now()
	u.mu.RLock()
	defer u.mu.RUnlock()
	a, ok := u.m[id]
	if !ok {
		return AccountUsage{ConnectionID: id}, false
	}
	out := *a
	out.FiveHour, out.SevenDay = current(a.FiveHour, now), current(a.SevenDay, now)
	return out, true
}

func current(w *UsageWindow, now time.Time) *UsageWindow {
	if w == nil {
		return nil
	}
	if !w.ResetsAt.IsZero() && !now.Before(w.ResetsAt) {
		return &UsageWindow{}
	}
	c := *w
	return &c
}

// AtWall reports whether an account has used threshold percent or more of a window that has not
// reset yet, and until when it stays there. An account without known resets is never held.
func (u *Usage) AtWall(id int64, threshold float64) (bool, time.Time) {
	now := u.clock.Now()
	u.mu.RLock()
	defer u.mu.RUnlock()
	a, ok := u.m[id]
	if !ok {
		return false, time.Time{}
	}
	var until time.Time
	for _, w := range []*UsageWindow{a.FiveHour, a.SevenDay} {
		if w != nil && w.Utilization >= threshold && now.Before(w.ResetsAt) && w.ResetsAt.After(until) {
			until = w.ResetsAt
		}
	}
	return !until.IsZero(), until
}

// Forget drops a deleted connection's readings.
func (u *Usage) Forget(id int64) {
	u.mu.Lock()
	delete(u.m, id)
	delete(u.readings, id)
	u.mu.Unlock()
}

// Now is the table's clock.
func (u *Usage) Now() time.Time { return u.clock.Now() }
