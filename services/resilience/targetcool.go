package resilience

import (
	"sort"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"
)

// A combo told to *cool* after a failure (combo_routing.on_failure) rests the target it just
// tried on the connection that failed: a provider's model that is not there, or an account whose
// quota is used up, is then passed over by every combo's next requests before they call it,
// instead of being called and failing again each time. The rest is the upstream's reset hint
// when it gave one, else base × 2^level (the level rises with each cooling within max of the last rest's end), capped at
// max; a success of the target on that connection ends it. Rests end by themselves when their
// time passes (lazy recovery) and are persisted behind the request path like every other state.

// MaxTargetCooldowns bounds the table; past it the rest that ends soonest makes room.
const MaxTargetCooldowns = 10_000

// TargetCooldown is one rested target.
type TargetCooldown struct {
	Provider     string    `json:"provider"`
	Model        string    `json:"model"`
	ConnectionID int64     `json:"connection_id"`
	Reason       string    `json:"reason"`
	Level        int       `json:"level"`
	Until        time.Time `json:"until"`
}

// Key identifies the rest (provider, model and connection).
func (t TargetCooldown) Key() string {
	return t.Provider + "\x00" + t.Model + "\x00" + strconv.FormatInt(t.ConnectionID, 10)
}

// TargetCooldowns is the table of rested targets. Its persist hook receives every change; a zero
// Until means the rest ended (delete it).
type TargetCooldowns struct {
	stateTable[string, TargetCooldown]
}

// NewTargetCooldowns builds an empty table; persist may be nil.
func NewTargetCooldowns(clock clockwork.Clock, persist func(TargetCooldown)) *TargetCooldowns {
	return &TargetCooldowns{newStateTable[string](clock, persist)}
}

// Load restores saved rests; those already over are dropped.
func (t *TargetCooldowns) Load(list []TargetCooldown) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range list {
		if c.Until.After(now) {
			c := c
			t.m[c.Key()] = &c
		} else {
			t.persist(TargetCooldown{Provider: c.Provider, Model: c.Model, ConnectionID: c.ConnectionID})
		}
	}
}

// Cool rests the target on the connection: for hint when the upstream gave one, else for
// base × 2^level, capped at max (a hint above max is honoured up to MaxResetHint). A running
// rest is never shortened. It returns the rest now in force.
func (t *TargetCooldowns) Cool(provider, model string, connID int64, reason string, hint, base, max time.Duration) TargetCooldown {
	now := t.clock.Now()
	k := TargetCooldown{Provider: provider, Model: model, ConnectionID: connID}.Key()
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.m[k]
	level := 0
	if prev != nil && now.Before(prev.Until.Add(max)) { // a rest long over starts the doubling anew
		level = prev.Level + 1
	}
	d := base
	for i := 0; i < level && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	if hint > 0 {
		d = min(hint, MaxResetHint)
	}
	until := now.Add(d)
	if prev != nil && prev.Until.After(until) {
		until = prev.Until
	}
	if prev == nil && len(t.m) >= MaxTargetCooldowns {
		t.makeRoomLocked(now, true)
	}
	c := &TargetCooldown{Provider: provider, Model: model, ConnectionID: connID, Reason: reason, Level: level, Until: until}
	t.m[k] = c
	t.persist(*c)
	return *c
}

// Apply installs a rest as another replica recorded it, without persisting it: a zero Until
// ends the rest here too. A rest already over when it arrives is not installed (the rest held
// here, if any, ends by its own time). Past MaxTargetCooldowns room is made as Cool makes it,
// but what is dropped only leaves this replica's memory: the rows belong to every replica.
func (t *TargetCooldowns) Apply(c TargetCooldown) {
	k := c.Key()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.Until.IsZero() {
		delete(t.m, k)
		return
	}
	now := t.clock.Now()
	if !c.Until.After(now) {
		return
	}
	if t.m[k] == nil && len(t.m) >= MaxTargetCooldowns {
		t.makeRoomLocked(now, false)
	}
	t.m[k] = &c
}

// makeRoomLocked drops ended rests, else the one that ends soonest; with persist the drops are
// handed to the persist hook.
func (t *TargetCooldowns) makeRoomLocked(now time.Time, persist bool) {
	var soonest string
	var at time.Time
	dropped := func(c *TargetCooldown) {
		if persist {
			t.persist(TargetCooldown{Provider: c.Provider, Model: c.Model, ConnectionID: c.ConnectionID})
		}
	}
	for k, c := range t.m {
		if !c.Until.After(now) {
			delete(t.m, k)
			dropped(c)
			continue
		}
		if soonest == "" || c.Until.Before(at) {
			soonest, at = k, c.Until
		}
	}
	if len(t.m) >= MaxTargetCooldowns && soonest != "" {
		c := t.m[soonest]
		delete(t.m, soonest)
		dropped(c)
	}
}

// Check reports whether the target rests on the connection now, and the rest.
func (t *TargetCooldowns) Check(provider, model string, connID int64) (bool, TargetCooldown) {
	t.mu.RLock()
	if len(t.m) == 0 {
		t.mu.RUnlock()
		return false, TargetCooldown{}
	}
	c := t.m[TargetCooldown{Provider: provider, Model: model, ConnectionID: connID}.Key()]
	var out TargetCooldown
	if c != nil {
		out = *c
	}
	t.mu.RUnlock()
	if c == nil || !out.Until.After(t.clock.Now()) {
		return false, TargetCooldown{}
	}
	return true, out
}

// Success ends the target's rest on the connection, and the escalation with it.
func (t *TargetCooldowns) Success(provider, model string, connID int64) {
	t.mu.RLock()
	empty := len(t.m) == 0
	t.mu.RUnlock()
	if empty {
		return
	}
	k := TargetCooldown{Provider: provider, Model: model, ConnectionID: connID}.Key()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.m[k]; c != nil {
		delete(t.m, k)
		t.persist(TargetCooldown{Provider: c.Provider, Model: c.Model, ConnectionID: c.ConnectionID})
	}
}

// Clear ends every rest of a provider's model (model "" = every model), as an operator asks.
func (t *TargetCooldowns) Clear(provider, model string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, c := range t.m {
		if c.Provider == provider && (model == "" || c.Model == model) {
			delete(t.m, k)
			t.persist(TargetCooldown{Provider: c.Provider, Model: c.Model, ConnectionID: c.ConnectionID})
			n++
		}
	}
	return n
}

// ForgetConnection drops the rests of a deleted connection.
func (t *TargetCooldowns) ForgetConnection(connID int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, c := range t.m {
		if c.ConnectionID == connID {
			delete(t.m, k)
		}
	}
}

// List returns the running rests, by provider, model and connection.
func (t *TargetCooldowns) List() []TargetCooldown {
	now := t.clock.Now()
	t.mu.RLock()
	out := make([]TargetCooldown, 0, len(t.m))
	for _, c := range t.m {
		if c.Until.After(now) {
			out = append(out, *c)
		}
	}
	t.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Provider != out[j].Provider {
			return out[i].Provider < out[j].Provider
		}
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].ConnectionID < out[j].ConnectionID
	})
	return out
}
