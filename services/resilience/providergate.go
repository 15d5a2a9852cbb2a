package resilience

import (
	"sort"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/settings"
)

// ProviderGate is the optional provider cooldown window gate (off by default): a provider cools
// down for a fixed time only after N failures inside a sliding window, N and the window taken
// from the auth type of the failing connection's profile; a success clears the window. Unlike
// the breaker it never probes: the cooldown simply runs out. State is in memory only.
type ProviderGate struct {
	clock clockwork.Clock

	mu     sync.RWMutex
	states map[string]*gateState // by provider; only providers with something to remember
}

// gateState keeps the last failure times in a ring of at most the threshold's size: the
// threshold-th most recent failure decides whether the window is full.
type gateState struct {
	auth          AuthType
	ring          []time.Time
	next, n       int // next write position, filled slots
	window        time.Duration
	until         time.Time
	lastFailureAt time.Time
}

// ProviderGateState is what an operator sees of one provider's gate.
type ProviderGateState struct {
	Provider string
	// AuthType is the profile of the last recorded failure.
	AuthType AuthType
	// Failures is the number of failures inside the current window.
	Failures  int
	Threshold int
	Window    time.Duration
	// CoolingUntil is the end of a running cooldown; zero when none.
	CoolingUntil  time.Time
	LastFailureAt time.Time
}

// NewProviderGate builds an empty gate.
func NewProviderGate(clock clockwork.Clock) *ProviderGate {
	return &ProviderGate{clock: clock, states: map[string]*gateState{}}
}

// profile picks the window of an auth type; anything but OAuth uses the API-key profile.
func profile(cfg *settings.ProviderCooldown, auth AuthType) settings.ProviderCooldownProfile {
	if auth == AuthOAuth {
		return cfg.OAuth
	}
	return cfg.APIKey
}

// Check reports whether provider may take requests, else the cooldown time left. A cooldown
// whose time has passed is over (lazy recovery). cfg is the current setting: when the gate is
// disabled everything is allowed and whatever it remembered is forgotten, so switching it off
// ends running cooldowns at once.
func (p *ProviderGate) Check(provider string, cfg settings.ProviderCooldown) (ok bool, remaining time.Duration) {
	if !cfg.Enabled {
		p.clearIfAny()
		return true, 0
	}
	p.mu.RLock()
	s := p.states[provider]
	var until time.Time
	if s != nil {
		until = s.until
	}
	p.mu.RUnlock()
	if until.IsZero() {
		return true, 0
	}
	if left := until.Sub(p.clock.Now()); left > 0 {
		return false, left
	}
	return true, 0
}

// RecordFailure counts a failure of provider by a connection of auth type auth and starts the
// profile's cooldown when the window holds its threshold of failures; it reports whether it
// did. Failures during a running cooldown (requests already in flight) are ignored. Disabled:
// nothing is recorded.
func (p *ProviderGate) RecordFailure(provider string, auth AuthType, cfg settings.ProviderCooldown) (tripped bool) {
	if !cfg.Enabled {
		p.clearIfAny()
		return false
	}
	prof := profile(&cfg, auth)
	threshold := max(prof.FailureThreshold, 1)
	window := time.Duration(prof.FailureWindowMS) * time.Millisecond
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.states[provider]
	if s == nil {
		s = &gateState{}
		p.states[provider] = s
	}
	s.auth, s.window, s.lastFailureAt = auth, window, now
	if now.Before(s.until) {
		return false
	}
	s.resize(threshold)
	s.ring[s.next] = now
	s.next = (s.next + 1) % threshold
	s.n = min(s.n+1, threshold)
	// When the ring is full, the slot to be overwritten next holds the oldest of the last
	// threshold failures.
	if s.n < threshold || now.Sub(s.ring[s.next]) > window {
		return false
	}
	s.until = now.Add(time.Duration(prof.CooldownMS) * time.Millisecond)
	s.next, s.n = 0, 0
	return true
}

// resize makes the ring hold threshold slots, keeping the newest failures.
func (s *gateState) resize(threshold int) {
	if len(s.ring) == threshold {
		return
	}
	kept := min(s.n, threshold)
	ring := make([]time.Time, threshold)
	for i := range kept {
		// newest first: position next-1, next-2, …
		ring[kept-1-i] = s.ring[(s.next-1-i+2*len(s.ring))%len(s.ring)]
	}
	s.ring, s.n, s.next = ring, kept, kept%threshold
}

// RecordSuccess clears provider's failure window; a running cooldown keeps running.
func (p *ProviderGate) RecordSuccess(provider string) {
	p.mu.RLock()
	s := p.states[provider]
	clean := s == nil || s.n == 0
	p.mu.RUnlock()
	if clean {
		return // the common case: nothing to clear, no lock contention
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s = p.states[provider]; s == nil {
		return
	}
	s.n, s.next = 0, 0
	if !p.clock.Now().Before(s.until) {
		delete(p.states, provider)
	}
}

// Reset forgets provider's window and ends its cooldown (the operator's reset).
func (p *ProviderGate) Reset(provider string) {
	p.mu.Lock()
	delete(p.states, provider)
	p.mu.Unlock()
}

func (p *ProviderGate) clearIfAny() {
	p.mu.RLock()
	empty := len(p.states) == 0
	p.mu.RUnlock()
	if empty {
		return
	}
	p.mu.Lock()
	clear(p.states)
	p.mu.Unlock()
}

// States returns every provider the gate remembers, by name; providers whose cooldown ended
// and whose window is empty are dropped.
func (p *ProviderGate) States() []ProviderGateState {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProviderGateState, 0, len(p.states))
	for name, s := range p.states {
		st := ProviderGateState{Provider: name, AuthType: s.auth, Threshold: len(s.ring), Window: s.window,
			LastFailureAt: s.lastFailureAt}
		if now.Before(s.until) {
			st.CoolingUntil = s.until
		}
		for i := range s.n {
			if now.Sub(s.ring[(s.next-1-i+2*len(s.ring))%len(s.ring)]) <= s.window {
				st.Failures++
			}
		}
		if st.CoolingUntil.IsZero() && st.Failures == 0 {
			delete(p.states, name)
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out
}
