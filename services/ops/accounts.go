package ops

import (
	"time"

	"switchyard/services/catalog"
	"switchyard/services/oauth"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// TokenStates reports the token of a subscription account (oauth.Service).
type TokenStates interface {
	State(id int64) (oauth.TokenState, bool)
}

// OAuthSettings gives the OAuth client settings.
type OAuthSettings interface {
	Snapshot() *settings.OAuthSnapshot
}

// UsageState is a Claude or ChatGPT account's 5-hour and weekly windows.
type UsageState struct {
	FiveHour *Window `json:"five_hour"`
	SevenDay *Window `json:"seven_day"`
	// SkippedUntil is set while the account is at or above the usage threshold and left out
	// (reason quota_window); DeferredUntil while it is tried only after the others (its lane or a
	// limit reset can still serve it).
	SkippedUntil  *time.Time `json:"skipped_until,omitempty"`
	DeferredUntil *time.Time `json:"deferred_until,omitempty"`
	PolledAt      *time.Time `json:"polled_at,omitempty"`
	PollError     string     `json:"poll_error,omitempty"`
}

// Window is one usage window: the share used, in percent, and when it resets.
type Window struct {
	Utilization float64    `json:"utilization"`
	ResetsAt    *time.Time `json:"resets_at"`
}

// TokenState is a subscription account's access token: when it expires, when it was last
// refreshed, and the failed refreshes in a row (three make the account expired). SetupToken marks
// a credential without a refresh token: a Claude setup token, or a GitHub token that does not
// expire.
type TokenState struct {
	SetupToken  bool       `json:"setup_token"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	LastRefresh *time.Time `json:"last_refresh,omitempty"`
	Strikes     int        `json:"strikes"`
	LastError   string     `json:"last_error,omitempty"`
	RetryAt     *time.Time `json:"retry_at,omitempty"`
	Refreshing  bool       `json:"refreshing"`
}

// LaneState is a Claude account's low-priority lane: its toggles, whether it is accepted (and
// until when), requests waiting for a slot, and how the last lane ended.
type LaneState struct {
	Enabled    bool `json:"enabled"`
	LimitReset bool `json:"limit_reset"`
	// State is off, idle, accepted, waiting, cooling_off or budget_exhausted.
	State                string     `json:"state"`
	AcceptedUntil        *time.Time `json:"accepted_until,omitempty"`
	Waiting              int        `json:"waiting"`
	WaitUntil            *time.Time `json:"wait_until,omitempty"`
	EndedAt              *time.Time `json:"ended_at,omitempty"`
	EndReason            string     `json:"end_reason,omitempty"`
	CoolOffUntil         *time.Time `json:"cool_off_until,omitempty"`
	BudgetExhaustedUntil *time.Time `json:"budget_exhausted_until,omitempty"`
	ResetResult          string     `json:"reset_result,omitempty"`
	ResetAt              *time.Time `json:"reset_at,omitempty"`
	ResetNextAvailable   *time.Time `json:"reset_next_available,omitempty"`
}

// account fills in the subscription account parts of an OAuth connection's state, as far as its
// kind has them: every kind its token; Claude and ChatGPT accounts their 5-hour and weekly
// windows (Claude's polled, ChatGPT's read off the Codex backend's answers) and whether they are
// skipped at their wall; Claude accounts their low-priority lane.
func (s *Service) account(v *ConnectionState, c *catalog.ConnEntry, now time.Time) {
	if c.AuthType != catalog.AuthOAuth {
		return
	}
	v.AccountKind = c.ProviderType
	if s.Accounts != nil {
		if t, ok := s.Accounts.State(c.ID); ok {
			v.Token = &TokenState{SetupToken: t.SetupToken, ExpiresAt: stamp(t.ExpiresAt), LastRefresh: stamp(t.RefreshedAt),
				Strikes: t.Strikes, LastError: t.LastError, Refreshing: t.Refreshing}
			if t.RetryAt.After(now) {
				v.Token.RetryAt = stamp(t.RetryAt)
			}
		}
	}
	if c.ProviderType != catalog.TypeAnthropic && c.ProviderType != catalog.TypeCodex {
		return // Copilot reports no usage windows
	}
	claude := c.ProviderType == catalog.TypeAnthropic
	if s.Usage != nil {
		u, _ := s.Usage.Get(c.ID)
		v.Usage = &UsageState{FiveHour: window(u.FiveHour), SevenDay: window(u.SevenDay), PolledAt: stamp(u.PolledAt), PollError: u.PollError}
		if s.OAuthSettings != nil {
			snap := s.OAuthSettings.Snapshot()
			threshold := snap.Claude().UsageThreshold
			if !claude {
				threshold = snap.Codex().UsageThreshold
			}
			if at, until := s.Usage.AtWall(c.ID, threshold); at {
				if claude && s.Lanes != nil && s.Lanes.CanTakeWall(c.ID, c.LowPriorityLane, c.LimitReset) {
					v.Usage.DeferredUntil = stamp(until)
				} else {
					v.Usage.SkippedUntil = stamp(until)
				}
			}
		}
	}
	if claude && s.Lanes != nil {
		v.Lane = laneState(s.Lanes, c, now)
	}
}

// laneState is a Claude account's low-priority lane now.
func laneState(lanes *resilience.Lanes, c *catalog.ConnEntry, now time.Time) *LaneState {
	l, _ := lanes.Get(c.ID)
	lv := &LaneState{Enabled: c.LowPriorityLane, LimitReset: c.LimitReset, Waiting: l.Waiting, EndReason: l.EndReason,
		EndedAt: stamp(l.EndedAt), ResetResult: l.ResetResult, ResetAt: stamp(l.ResetAt)}
	if l.ResetNextAvailable.After(now) {
		lv.ResetNextAvailable = stamp(l.ResetNextAvailable)
	}
	if l.Waiting > 0 {
		lv.WaitUntil = stamp(l.WaitUntil)
	}
	switch {
	case !c.LowPriorityLane:
		lv.State = "off"
	case l.Waiting > 0 && l.Active(now):
		lv.State, lv.AcceptedUntil = "waiting", stamp(l.Until)
	case l.Active(now):
		lv.State, lv.AcceptedUntil = "accepted", stamp(l.Until)
	case l.BudgetExhaustedUntil.After(now):
		lv.State, lv.BudgetExhaustedUntil = "budget_exhausted", stamp(l.BudgetExhaustedUntil)
	case l.CoolOffUntil.After(now):
		lv.State, lv.CoolOffUntil = "cooling_off", stamp(l.CoolOffUntil)
	default:
		lv.State = "idle"
	}
	return lv
}

func window(w *resilience.UsageWindow) *Window {
	if w == nil {
		return nil
	}
	return &Window{Utilization: w.Utilization, ResetsAt: stamp(w.ResetsAt)}
}

// stamp is t in UTC, nil for the zero time.
func stamp(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
