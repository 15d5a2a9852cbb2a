package resilience

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// The Claude usage wall (PRODUCT.md §3.9, the German original "Claude-OAuth-Nutzungslimit"):
// when a subscription account hits its 5-hour limit Anthropic answers 429 with
// anthropic-ratelimit-unified-status: rejected. A connection with limit reset on first asks
// whether the weekly reset of the session limit is available and claims it; a connection with
// the low-priority lane on then accepts the slow offer and retries on the same account with
// anthropic-usage-limit: slow until the announced reset + 60 s. The state machine below decides;
// the engine does the calls and the waits.

// Lane protocol constants. The defaults of the waits are settings (LaneConfig).
const (
	// LaneGrace keeps the lane past the announced reset.
	LaneGrace = 60 * time.Second
	// SlowRetryAfterMin and SlowRetryAfterMax clamp the wait after slot_busy or 529.
	SlowRetryAfterMin = 5 * time.Second
	SlowRetryAfterMax = 600 * time.Second
	// SlowJitter spreads the waits by ± this fraction.
	SlowJitter = 0.3
	// SlowMaxWaitMin and SlowMaxWaitMax clamp the time one request may wait in the lane.
	SlowMaxWaitMin = time.Minute
	SlowMaxWaitMax = 6 * time.Hour
	// DeadlineMargin is kept free of the request's own deadline, so the lane ends properly
	// (max_wait and cool-off) instead of the request timing out in the middle of a wait.
	DeadlineMargin = 5 * time.Second
	// BudgetMemory caps how long a budget_exhausted is remembered.
	BudgetMemory = 8 * 24 * time.Hour
	// LimitResetInterval is how long a used or unavailable limit reset is not asked for again
	// when the server names no time (it is offered once a week).
	LimitResetInterval = 7 * 24 * time.Hour
)

// Why a lane ended.
const (
	LaneEndMaxWait         = "max_wait"
	LaneEndWeeklyLimit     = "weekly_limit"
	LaneEndBudgetExhausted = "budget_exhausted"
	LaneEndOff             = "off"
	LaneEndIneligible      = "ineligible"
	LaneEndNewWindow       = "new_window"
	LaneEndExtraUsage      = "extra_usage"
)

// Limit reset results (the reset call's result, or error).
const (
	ResetDone        = "reset"
	ResetNotLimited  = "not_limited"
	ResetAlreadyUsed = "already_used"
	ResetNotOffered  = "not_offered"
	ResetError       = "error"
)

// LaneConfig are the settings of claude_low_priority.
type LaneConfig struct {
	SlowRetryAfterDefault  time.Duration // 20 s
	SlowMaxWaitDefault     time.Duration // 20 min
	CoolOff                time.Duration // 10 min
	LimitResetErrorBackoff time.Duration // 15 min
}

// LaneState is one connection's lane and limit-reset memory; it is persisted.
type LaneState struct {
	ConnectionID int64 `json:"connection_id"`
	// AcceptedAt and Until: the lane is active while Until is in the future.
	AcceptedAt time.Time `json:"accepted_at,omitzero"`
	Until      time.Time `json:"until,omitzero"`
	// Window is the 5-hour reset the lane was accepted in; a later one is a new window.
	Window time.Time `json:"window,omitzero"`
	// EndedAt and EndReason say when and why the last lane ended.
	EndedAt   time.Time `json:"ended_at,omitzero"`
	EndReason string    `json:"end_reason,omitempty"`
	// CoolOffUntil: no lane is accepted before (after a max_wait end).
	CoolOffUntil time.Time `json:"cool_off_until,omitzero"`
	// BudgetExhaustedUntil: the lane's own allowance is spent until then.
	BudgetExhaustedUntil time.Time `json:"budget_exhausted_until,omitzero"`
	// LastSlowStatus is the slow status of the last response in the lane.
	LastSlowStatus string `json:"last_slow_status,omitempty"`

	// ResetAt and ResetResult: the last limit reset tried and its result.
	ResetAt     time.Time `json:"reset_at,omitzero"`
	ResetResult string    `json:"reset_result,omitempty"`
	// ResetNextAvailable: a used or unavailable reset is not asked for before.
	ResetNextAvailable time.Time `json:"reset_next_available,omitzero"`
	// ResetRetryAt: after a failed reset, not before.
	ResetRetryAt time.Time `json:"reset_retry_at,omitzero"`
}

// Active reports whether requests on the connection carry anthropic-usage-limit: slow at now.
func (s LaneState) Active(now time.Time) bool { return now.Before(s.Until) }

// Empty reports whether the state has nothing left to remember.
func (s LaneState) Empty() bool {
	return s.Until.IsZero() && s.EndReason == "" && s.CoolOffUntil.IsZero() && s.BudgetExhaustedUntil.IsZero() &&
		s.ResetResult == "" && s.ResetNextAvailable.IsZero() && s.ResetRetryAt.IsZero()
}

// LaneAction is what the engine does with an answer.
type LaneAction int

// The actions.
const (
	// LaneNormal: the answer takes the normal path (delivered, or classified, cooled and
	// failed over).
	LaneNormal LaneAction = iota
	// LaneRetry: send the request again on the same connection now (with the slow header when
	// the lane is active, at full speed otherwise).
	LaneRetry
	// LaneWait: wait Wait, then send it again on the same connection.
	LaneWait
	// LaneTryReset: check and claim the limit reset, then report it with ResetOutcome.
	LaneTryReset
)

// LaneDecision is the state machine's answer.
type LaneDecision struct {
	Action LaneAction
	Wait   time.Duration
	// Why names the step for logs and the attempt chain: accepted, reset, slot_busy,
	// ended:<reason>, or "" for nothing to say.
	Why string
}

// LaneInput is one upstream answer on a connection, as the state machine needs it.
type LaneInput struct {
	Status   int // the upstream status
	Signal   Unified
	SentSlow bool // the request carried anthropic-usage-limit: slow
	// Lane and LimitReset are the connection's toggles.
	Lane, LimitReset bool
	// Waited is what this request already spent waiting for lane capacity; Deadline the time
	// left of its own deadline (0 = none).
	Waited, Deadline time.Duration
	// ResetTried is set once this request has run a limit reset.
	ResetTried bool
}

// Decide applies one answer to the lane state and says what to do with it. now and rnd
// (uniform in [0,1)) are injected so every branch can be tested.
func Decide(s *LaneState, in LaneInput, cfg LaneConfig, now time.Time, rnd func() float64) LaneDecision {
	sig := in.Signal
	if !s.Until.IsZero() && !now.Before(s.Until) {
		s.end(now, LaneEndNewWindow, time.Time{}) // the announced reset (+ grace) passed
	}
	if s.Active(now) {
		switch {
		case sig.OverageInUse:
			return s.endNormal(now, LaneEndExtraUsage, time.Time{})
		case sig.SlowStatus == "weekly_limit", sig.SlowStatus == "off", sig.SlowStatus == "ineligible":
			return s.endNormal(now, sig.SlowStatus, time.Time{})
		case sig.SlowStatus == "budget_exhausted":
			until := now.Add(BudgetMemory)
			if !sig.BudgetReset.IsZero() && sig.BudgetReset.Before(until) {
				until = sig.BudgetReset
			}
			return s.endNormal(now, LaneEndBudgetExhausted, until)
		case !sig.FiveHour.ResetsAt.IsZero() && !s.Window.IsZero() && sig.FiveHour.ResetsAt.After(s.Window.Add(LaneGrace)):
			return s.endNormal(now, LaneEndNewWindow, time.Time{})
		}
		if sig.SlowStatus != "" {
			s.LastSlowStatus = sig.SlowStatus
		}
		if !in.SentSlow && in.Status == 429 && sig.Rejected() {
			// Sent before another request accepted the lane: join it.
			return LaneDecision{Action: LaneRetry, Why: "joined"}
		}
		if in.SentSlow && (in.Status == 429 && sig.SlowStatus == "slot_busy" || in.Status == 529) {
			return s.slotWait(in, cfg, now, rnd)
		}
		return LaneDecision{}
	}
	if in.Status != 429 || !sig.Rejected() {
		return LaneDecision{}
	}
	// The wall.
	if in.LimitReset && !in.ResetTried && sig.FiveHourClaim() && !now.Before(s.ResetNextAvailable) && !now.Before(s.ResetRetryAt) {
		return LaneDecision{Action: LaneTryReset, Why: "limit_reset"}
	}
	return s.accept(in, now)
}

// accept takes the slow offer when the connection has the lane on and may enter it now.
func (s *LaneState) accept(in LaneInput, now time.Time) LaneDecision {
	sig := in.Signal
	if !in.Lane || sig.SlowOffer != "treatment" || now.Before(s.CoolOffUntil) || now.Before(s.BudgetExhaustedUntil) {
		return LaneDecision{}
	}
	reset := sig.Reset
	if reset.IsZero() {
		reset = sig.FiveHour.ResetsAt
	}
	if !reset.After(now) {
		reset = now.Add(5 * time.Hour) // a wall without a reset: the longest a 5-hour window can last
	}
	window := sig.FiveHour.ResetsAt
	if window.IsZero() {
		window = reset
	}
	s.AcceptedAt, s.Until, s.Window = now, reset.Add(LaneGrace), window
	s.EndedAt, s.EndReason, s.LastSlowStatus = time.Time{}, "", ""
	return LaneDecision{Action: LaneRetry, Why: "accepted"}
}

// slotWait is the wait after slot_busy or 529: the server's slow-retry-after (or the default),
// clamped and jittered, as long as this request's waits stay within the max wait and its own
// deadline (less the margin); past either the lane ends with a cool-off.
func (s *LaneState) slotWait(in LaneInput, cfg LaneConfig, now time.Time, rnd func() float64) LaneDecision {
	d := in.Signal.SlowRetryAfter
	if d <= 0 {
		d = cfg.SlowRetryAfterDefault
	}
	d = min(max(d, SlowRetryAfterMin), SlowRetryAfterMax)
	d = time.Duration(float64(d) * (1 + SlowJitter*(2*rnd()-1)))
	maxWait := in.Signal.SlowMaxWait
	if maxWait <= 0 {
		maxWait = cfg.SlowMaxWaitDefault
	}
	maxWait = min(max(maxWait, SlowMaxWaitMin), SlowMaxWaitMax)
	if in.Waited+d > maxWait || (in.Deadline > 0 && d > in.Deadline-DeadlineMargin) {
		s.end(now, LaneEndMaxWait, time.Time{})
		s.CoolOffUntil = now.Add(cfg.CoolOff)
		return LaneDecision{Why: "ended:" + LaneEndMaxWait}
	}
	return LaneDecision{Action: LaneWait, Wait: d, Why: "slot_busy"}
}

func (s *LaneState) end(now time.Time, reason string, budgetUntil time.Time) {
	s.Until, s.EndedAt, s.EndReason = time.Time{}, now, reason
	if !budgetUntil.IsZero() {
		s.BudgetExhaustedUntil = budgetUntil
	}
}

func (s *LaneState) endNormal(now time.Time, reason string, budgetUntil time.Time) LaneDecision {
	s.end(now, reason, budgetUntil)
	return LaneDecision{Why: "ended:" + reason}
}

// ResetOutcome is what the limit reset came to: the reset call's result (or ResetError) and the
// time the server names for the next one, if any.
type ResetOutcome struct {
	Result        string
	NextAvailable time.Time
}

// AfterReset applies a limit reset's outcome for the wall answer in: a reset (or nothing left to
// reset) retries at full speed; a reset already used or not offered is remembered until it is
// available again (a week when the server names no time), a failure backs off; both then go on
// to the lane.
func AfterReset(s *LaneState, in LaneInput, out ResetOutcome, cfg LaneConfig, now time.Time) LaneDecision {
	s.ResetAt, s.ResetResult = now, out.Result
	next := out.NextAvailable
	if !next.After(now) {
		next = now.Add(LimitResetInterval)
	}
	switch out.Result {
	case ResetDone, ResetNotLimited:
		s.ResetNextAvailable = next
		return LaneDecision{Action: LaneRetry, Why: "reset"}
	case ResetAlreadyUsed, ResetNotOffered:
		s.ResetNextAvailable = next
	default:
		s.ResetResult, s.ResetRetryAt = ResetError, now.Add(cfg.LimitResetErrorBackoff)
	}
	in.ResetTried = true
	return s.accept(in, now)
}

// LaneLive is a lane's state with what is happening in it now: requests waiting for a slot and
// when the longest wait ends.
type LaneLive struct {
	LaneState
	Waiting   int
	WaitUntil time.Time
}

// Lanes holds every connection's lane state; changes go to a persist hook.
type Lanes struct {
	clock   clockwork.Clock
	persist func(LaneState)
	rnd     func() float64

	mu      sync.Mutex
	m       map[int64]*LaneState
	waiting map[int64]int
	until   map[int64]time.Time
}

// NewLanes builds the table; persist (may be nil) must not block.
func NewLanes(clock clockwork.Clock, persist func(LaneState)) *Lanes {
	return &Lanes{clock: clock, persist: orDrop(persist), rnd: rand.Float64, m: map[int64]*LaneState{},
		waiting: map[int64]int{}, until: map[int64]time.Time{}}
}

// Load installs states read at start.
func (l *Lanes) Load(list []LaneState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range list {
		l.m[s.ConnectionID] = &s
	}
}

// Apply installs a connection's lane state as another replica recorded it (an Empty state
// deletes it), without persisting it. Requests waiting here are this replica's own and stay.
func (l *Lanes) Apply(st LaneState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st.Empty() {
		delete(l.m, st.ConnectionID)
		return
	}
	l.m[st.ConnectionID] = &st
}

// Active reports whether requests on the connection carry the slow header now.
func (l *Lanes) Active(id int64) bool {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[id]
	return s != nil && s.Active(now)
}

// CanTakeWall reports whether a connection at its usage wall may still serve (its lane is active
// or could be accepted, or a limit reset could be claimed), so the picker tries it after the
// others instead of leaving it out.
func (l *Lanes) CanTakeWall(id int64, lane, limitReset bool) bool {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[id]
	if s == nil {
		return lane || limitReset
	}
	if s.Active(now) {
		return true
	}
	laneOK := lane && !now.Before(s.CoolOffUntil) && !now.Before(s.BudgetExhaustedUntil)
	resetOK := limitReset && !now.Before(s.ResetNextAvailable) && !now.Before(s.ResetRetryAt)
	return laneOK || resetOK
}

// Decide applies an answer on connection id (see Decide) and persists what changed.
func (l *Lanes) Decide(id int64, in LaneInput, cfg LaneConfig) LaneDecision {
	return l.apply(id, func(s *LaneState, now time.Time) LaneDecision { return Decide(s, in, cfg, now, l.rnd) })
}

// AfterReset applies a limit reset's outcome (see AfterReset) and persists it.
func (l *Lanes) AfterReset(id int64, in LaneInput, out ResetOutcome, cfg LaneConfig) LaneDecision {
	return l.apply(id, func(s *LaneState, now time.Time) LaneDecision { return AfterReset(s, in, out, cfg, now) })
}

func (l *Lanes) apply(id int64, f func(*LaneState, time.Time) LaneDecision) LaneDecision {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[id]
	if s == nil {
		s = &LaneState{ConnectionID: id}
	}
	before := *s
	d := f(s, now)
	if *s != before {
		l.m[id] = s
		l.persist(*s)
	}
	return d
}

// Wait marks a request waiting for a lane slot until until; the returned func ends the mark.
func (l *Lanes) Wait(id int64, until time.Time) (done func()) {
	l.mu.Lock()
	l.waiting[id]++
	if until.After(l.until[id]) {
		l.until[id] = until
	}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.waiting[id]--; l.waiting[id] <= 0 {
			delete(l.waiting, id)
			delete(l.until, id)
		}
	}
}

// Get returns a connection's lane with what is happening in it now.
func (l *Lanes) Get(id int64) (LaneLive, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.m[id]
	if !ok && l.waiting[id] == 0 {
		return LaneLive{LaneState: LaneState{ConnectionID: id}}, false
	}
	out := LaneLive{Waiting: l.waiting[id], WaitUntil: l.until[id]}
	if s != nil {
		out.LaneState = *s
	}
	return out, true
}

// Forget drops a deleted connection's lane.
func (l *Lanes) Forget(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
}

// Clear forgets a connection's lane and limit-reset memory (new credentials: a new account).
func (l *Lanes) Clear(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.m[id]; ok {
		delete(l.m, id)
		l.persist(LaneState{ConnectionID: id})
	}
}

// Now is the table's clock.
func (l *Lanes) Now() time.Time { return l.clock.Now() }
