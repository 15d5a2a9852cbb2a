// Package routing holds combos: named virtual models whose targets (provider/model pairs,
// optionally pinned to one connection, or other combos) are tried in the order a strategy
// chooses. It has the combo types and their validation, the strategies as pure functions, an
// immutable registry the engine reads on the hot path, and the service that stores combos.
package routing

import (
	"strconv"
	"strings"
)

// Strategy names how a combo orders its targets (and, with the same names, how a provider
// orders its connections).
type Strategy string

// The strategies. Order documents what each does.
const (
	Priority   Strategy = "priority"
	Weighted   Strategy = "weighted"
	RoundRobin Strategy = "round-robin"
	Random     Strategy = "random"
	LeastUsed  Strategy = "least-used"
	P2C        Strategy = "p2c"
	FillFirst  Strategy = "fill-first"
	Latency    Strategy = "latency"
	Headroom   Strategy = "headroom"
)

// Strategies lists every strategy in display order; Priority, the default, first.
var Strategies = []Strategy{Priority, Weighted, RoundRobin, Random, LeastUsed, P2C, FillFirst, Latency, Headroom}

// StrategyNames lists the strategies for messages: "priority, weighted, …".
func StrategyNames() string {
	out := make([]string, len(Strategies))
	for i, s := range Strategies {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// Valid reports whether s is a known strategy.
func (s Strategy) Valid() bool {
	for _, v := range Strategies {
		if s == v {
			return true
		}
	}
	return false
}

// Limits of a combo.
const (
	// MaxTargets is the most targets a combo may list.
	MaxTargets = 50
	// MaxDepth is the deepest nesting of combos: a combo naming a combo naming a combo is 3.
	MaxDepth = 3
	// MaxAttemptsCap is the most upstream attempts one client request may make through a
	// combo, whatever the nesting; a combo's own max_attempts (1–30) may only lower it.
	MaxAttemptsCap = 30
	// MinWeight, MaxWeight and DefaultWeight bound a target's weight.
	MinWeight, MaxWeight, DefaultWeight = 1, 100, 1
	// MinTargetTimeoutMS and MaxTargetTimeoutMS bound target_timeout_ms when it is not 0 (none).
	MinTargetTimeoutMS, MaxTargetTimeoutMS = 1_000, 3_600_000
	// MinWaitMS, MaxWaitMS and DefaultWaitMS bound wait_until_reset_max_ms.
	MinWaitMS, MaxWaitMS, DefaultWaitMS = 1_000, 3_600_000, 900_000
	// MaxModelBytes is the longest model name a target may give (the proxy's own limit).
	MaxModelBytes = 256
)

// Combo is a named virtual model: a client that sends its name as the model is served by one of
// its targets.
type Combo struct {
	ID       int64    `json:"id"`
	Name     string   `json:"name"`
	Strategy Strategy `json:"strategy"`
	// Targets are tried in the order Strategy chooses; 1–MaxTargets of them.
	Targets []Target `json:"targets"`
	// MaxAttempts caps the upstream attempts of one request through this combo; 0 = only the
	// global cap (MaxAttemptsCap).
	MaxAttempts int `json:"max_attempts"`
	// TargetTimeoutMS is each target's own deadline; 0 = none.
	TargetTimeoutMS int64 `json:"target_timeout_ms"`
	// WaitUntilReset holds a request while every target is out for a quota window with a known
	// reset, up to WaitUntilResetMaxMS (default 900,000), instead of answering 429. Off by default.
	WaitUntilReset      bool  `json:"wait_until_reset"`
	WaitUntilResetMaxMS int64 `json:"wait_until_reset_max_ms"`
	CreatedAt           int64 `json:"created_at"`
	UpdatedAt           int64 `json:"updated_at"`
}

// Target is one entry of a combo: a provider's model (optionally pinned to one of the
// provider's connections, by name) or another combo. Weight (1–100, default 1) is read by the
// weighted strategy.
type Target struct {
	Provider   string `json:"provider,omitempty"`
	Model      string `json:"model,omitempty"`
	Connection string `json:"connection,omitempty"`
	Combo      string `json:"combo,omitempty"`
	Weight     int    `json:"weight"`
}

// IsCombo reports whether the target is another combo.
func (t Target) IsCombo() bool { return t.Combo != "" }

// String names the target as operators read it: provider/model (with @connection when pinned),
// or the combo's name.
func (t Target) String() string {
	if t.IsCombo() {
		return t.Combo
	}
	s := t.Provider + "/" + t.Model
	if t.Connection != "" {
		s += "@" + t.Connection
	}
	return s
}

// key identifies a target for duplicate checks: the same model of the same provider on the
// same connection (or none), or the same combo, whatever the weight.
func (t Target) key() string {
	if t.IsCombo() {
		return "c\x00" + t.Combo
	}
	return "p\x00" + t.Provider + "\x00" + t.Model + "\x00" + t.Connection
}

// Key is a target's identity as a string forms can carry (to check that the target an operator
// moves is still where the page showed it).
func (t Target) Key() string { return strconv.Quote(t.key()) }

// NamesCombo reports whether the combo lists name among its targets.
func (c *Combo) NamesCombo(name string) bool {
	for _, t := range c.Targets {
		if t.Combo == name {
			return true
		}
	}
	return false
}

// NamesProvider reports whether the combo lists a target of the provider (connection "": any
// target of it; else one pinned to that connection).
func (c *Combo) NamesProvider(provider, connection string) bool {
	for _, t := range c.Targets {
		if t.IsCombo() || t.Provider != provider {
			continue
		}
		if connection == "" || t.Connection == connection {
			return true
		}
	}
	return false
}
