package settings

import "slices"

// SessionLifetimes is the document of the dashboard sessions' lifetimes (GET/PATCH
// /api/settings/sessions). services/sessions keeps, validates and applies it; its entries here
// describe each lifetime once (default, range, label), for that service and for the settings card.
type SessionLifetimes struct {
	Sessions struct {
		AbsoluteLifetimeMS int64
		IdleTimeoutMS      int64
	}
}

const (
	minute = 60_000
	day    = 24 * 60 * minute
)

var sessionRegistry = []*Setting{
	ms("sessions.absolute_lifetime_ms", 7*day, 5*minute, 90*day, func(d *SessionLifetimes) *int64 { return &d.Sessions.AbsoluteLifetimeMS }),
	ms("sessions.idle_timeout_ms", day, minute, 30*day, func(d *SessionLifetimes) *int64 { return &d.Sessions.IdleTimeoutMS }),
}

var sessionByPath, _ = indexRegistry(sessionRegistry)

// SessionSettings returns the session lifetimes, in card order.
func SessionSettings() []*Setting { return slices.Clone(sessionRegistry) }
