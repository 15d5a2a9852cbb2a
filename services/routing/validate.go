package routing

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"switchyard/services/errs"
	"switchyard/services/names"
)

// Input is a create or a partial update of a combo; absent (nil) fields are left as they are.
// Targets, when given, replace the whole list.
type Input struct {
	Name                *string        `json:"name"`
	Strategy            *string        `json:"strategy"`
	Targets             *[]TargetInput `json:"targets"`
	MaxAttempts         *int           `json:"max_attempts"`
	TargetTimeoutMS     *int64         `json:"target_timeout_ms"`
	WaitUntilReset      *bool          `json:"wait_until_reset"`
	WaitUntilResetMaxMS *int64         `json:"wait_until_reset_max_ms"`
}

// TargetInput is one target as a client writes it: {"provider", "model", "connection"?,
// "weight"?} or {"combo", "weight"?}. A missing weight is DefaultWeight.
type TargetInput struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Connection string `json:"connection"`
	Combo      string `json:"combo"`
	Weight     *int   `json:"weight"`
}

// NewCombo is a combo with every default: the priority strategy, no limits of its own, no wait
// until reset (with its default cap).
func NewCombo() Combo {
	return Combo{Strategy: Priority, WaitUntilResetMaxMS: DefaultWaitMS}
}

// Apply writes in onto c. Surrounding spaces of names are trimmed; a missing weight is
// DefaultWeight. It does not validate: Validate does.
func (in Input) Apply(c *Combo) {
	if in.Name != nil {
		c.Name = strings.TrimSpace(*in.Name)
	}
	if in.Strategy != nil {
		c.Strategy = Strategy(strings.TrimSpace(*in.Strategy))
	}
	if in.Targets != nil {
		c.Targets = make([]Target, len(*in.Targets))
		for i, t := range *in.Targets {
			w := DefaultWeight
			if t.Weight != nil {
				w = *t.Weight
			}
			c.Targets[i] = Target{Provider: strings.TrimSpace(t.Provider), Model: strings.TrimSpace(t.Model),
				Connection: strings.TrimSpace(t.Connection), Combo: strings.TrimSpace(t.Combo), Weight: w}
		}
	}
	if in.MaxAttempts != nil {
		c.MaxAttempts = *in.MaxAttempts
	}
	if in.TargetTimeoutMS != nil {
		c.TargetTimeoutMS = *in.TargetTimeoutMS
	}
	if in.WaitUntilReset != nil {
		c.WaitUntilReset = *in.WaitUntilReset
	}
	if in.WaitUntilResetMaxMS != nil {
		c.WaitUntilResetMaxMS = *in.WaitUntilResetMaxMS
	}
}

// Lookup is what validating a combo needs to know of the rest of the configuration.
type Lookup struct {
	// Providers maps every provider's name to the set of its connections' names.
	Providers map[string]map[string]bool
	// Combos are the other saved combos by name (without the one being validated).
	Combos map[string]*Combo
}

// Validate checks a combo and returns a message per field that is wrong (empty when the combo
// is valid). Fields are named as the admin API writes them: "name", "strategy", "targets",
// "targets[2]" (the target as a whole), "targets[2].combo", "max_attempts", …
//
// Besides each value's range it checks the references: a provider target's provider exists and
// has the pinned connection; a combo target's combo exists, is not this combo or one that
// reaches back to it (a cycle), and the nesting stays within MaxDepth levels — counted from
// the top of every combo that (through others) names this one, so a change deep down cannot
// push a combo above over the limit.
func Validate(c *Combo, l Lookup) map[string]errs.Msg {
	f := map[string]errs.Msg{}
	if m, bad := names.Check(c.Name); bad {
		f["name"] = m
	} else if strings.Contains(c.Name, "/") {
		f["name"] = errs.M("err.combo_name_slash")
	} else if _, ok := l.Providers[c.Name]; ok {
		f["name"] = errs.M("err.combo_name_provider")
	}
	if !c.Strategy.Valid() {
		f["strategy"] = errs.M("err.one_of", strategyList())
	}
	switch {
	case len(c.Targets) == 0:
		f["targets"] = errs.M("err.combo_targets", MaxTargets)
	case len(c.Targets) > MaxTargets:
		f["targets"] = errs.M("err.combo_targets", MaxTargets)
	default:
		validateTargets(c, l, f)
	}
	if c.MaxAttempts != 0 && (c.MaxAttempts < 1 || c.MaxAttempts > MaxAttemptsCap) {
		f["max_attempts"] = errs.M("err.combo_max_attempts", MaxAttemptsCap)
	}
	if c.TargetTimeoutMS != 0 && (c.TargetTimeoutMS < MinTargetTimeoutMS || c.TargetTimeoutMS > MaxTargetTimeoutMS) {
		f["target_timeout_ms"] = errs.M("err.combo_target_timeout", MinTargetTimeoutMS, MaxTargetTimeoutMS)
	}
	if c.WaitUntilResetMaxMS < MinWaitMS || c.WaitUntilResetMaxMS > MaxWaitMS {
		f["wait_until_reset_max_ms"] = errs.M("err.between", MinWaitMS, MaxWaitMS)
	}
	return f
}

func strategyList() string {
	s := make([]string, len(Strategies))
	for i, v := range Strategies {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// validateTargets checks every target's shape and references.
func validateTargets(c *Combo, l Lookup, f map[string]errs.Msg) {
	seen := map[string]int{}
	for i, t := range c.Targets {
		at := fmt.Sprintf("targets[%d]", i)
		if t.Weight < MinWeight || t.Weight > MaxWeight {
			f[at+".weight"] = errs.M("err.between", MinWeight, MaxWeight)
		}
		switch {
		case t.Combo != "" && (t.Provider != "" || t.Model != ""):
			f[at] = errs.M("err.target_both")
			continue
		case t.Combo == "" && t.Provider == "" && t.Model == "":
			f[at] = errs.M("err.target_empty")
			continue
		}
		if first, dup := seen[t.key()]; dup {
			f[at] = errs.M("err.target_duplicate", first)
			continue
		}
		seen[t.key()] = i
		if t.IsCombo() {
			if t.Connection != "" {
				f[at+".connection"] = errs.M("err.target_connection_combo")
			}
			if m, bad := checkComboRef(c, i, l); bad {
				f[at+".combo"] = m
			}
			continue
		}
		if t.Provider == "" {
			f[at+".provider"] = errs.M("err.required")
		} else if conns, ok := l.Providers[t.Provider]; !ok {
			f[at+".provider"] = errs.M("err.no_provider_named", t.Provider)
		} else if t.Connection != "" && !conns[t.Connection] {
			f[at+".connection"] = errs.M("err.no_connection_named", t.Provider, t.Connection)
		}
		if m, bad := checkModel(t.Model); bad {
			f[at+".model"] = m
		}
	}
}

// checkModel says what is wrong with a target's model name: it is sent upstream as it is, so
// it must be printable text of at most MaxModelBytes bytes.
func checkModel(m string) (errs.Msg, bool) {
	switch {
	case m == "":
		return errs.M("err.required"), true
	case len(m) > MaxModelBytes || !utf8.ValidString(m):
		return errs.M("err.model_name", MaxModelBytes), true
	}
	if i := strings.IndexFunc(m, func(r rune) bool { return names.Invisible(r) || unicode.IsSpace(r) }); i >= 0 {
		return errs.M("err.model_name", MaxModelBytes), true
	}
	return errs.Msg{}, false
}

// checkComboRef checks the combo named by c.Targets[i]: it exists, closes no cycle, and keeps
// every chain of combos through c within MaxDepth.
func checkComboRef(c *Combo, i int, l Lookup) (errs.Msg, bool) {
	name := c.Targets[i].Combo
	if name == c.Name {
		return errs.M("err.combo_cycle", c.Name+" → "+c.Name), true
	}
	if _, ok := l.Combos[name]; !ok {
		return errs.M("err.no_combo", name), true
	}
	g := graph{self: c, others: l.Combos}
	if path := g.pathTo(name, c.Name, map[string]bool{}); path != nil {
		return errs.M("err.combo_cycle", strings.Join(append([]string{c.Name}, path...), " → ")), true
	}
	below := g.deepest(name, map[string]bool{})
	above := g.highest(c.Name, map[string]bool{})
	chain := append(append(above, c.Name), below...)
	if len(chain) <= MaxDepth {
		return errs.Msg{}, false
	}
	if len(above) == 0 {
		return errs.M("err.combo_depth", len(chain), strings.Join(chain, " → "), MaxDepth), true
	}
	return errs.M("err.combo_depth_above", chain[0], len(chain), strings.Join(chain, " → "), MaxDepth), true
}

// graph is the combos as they would be after saving self.
type graph struct {
	self   *Combo
	others map[string]*Combo
}

func (g graph) get(name string) *Combo {
	if name == g.self.Name {
		return g.self
	}
	return g.others[name]
}

// pathTo returns the names from from to to (both included) along combo targets, or nil.
func (g graph) pathTo(from, to string, seen map[string]bool) []string {
	if from == to {
		return []string{to}
	}
	if seen[from] {
		return nil
	}
	seen[from] = true
	c := g.get(from)
	if c == nil {
		return nil
	}
	for _, t := range c.Targets {
		if t.IsCombo() {
			if p := g.pathTo(t.Combo, to, seen); p != nil {
				return append([]string{from}, p...)
			}
		}
	}
	return nil
}

// deepest returns the longest chain of combos starting at name (name first).
func (g graph) deepest(name string, onPath map[string]bool) []string {
	c := g.get(name)
	if c == nil || onPath[name] {
		return []string{name}
	}
	onPath[name] = true
	defer delete(onPath, name)
	var best []string
	for _, t := range c.Targets {
		if t.IsCombo() {
			if p := g.deepest(t.Combo, onPath); len(p) > len(best) {
				best = p
			}
		}
	}
	return append([]string{name}, best...)
}

// highest returns the longest chain of combos that lead to name (topmost first, name
// excluded).
func (g graph) highest(name string, onPath map[string]bool) []string {
	if onPath[name] {
		return nil
	}
	onPath[name] = true
	defer delete(onPath, name)
	var best []string
	for _, o := range g.others {
		if o.NamesCombo(name) {
			// The longest chain, and of equals the first by name: the message must not depend
			// on the map's order.
			p := append(g.highest(o.Name, onPath), o.Name)
			if len(p) > len(best) || len(p) == len(best) && strings.Join(p, "\x00") < strings.Join(best, "\x00") {
				best = p
			}
		}
	}
	return best
}
