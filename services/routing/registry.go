package routing

import "sort"

// Registry is an immutable snapshot of every combo, swapped whole after a save commits, so the
// engine reads combos without a lock and never from SQLite. Its combos and expansions are shared:
// readers must not modify them.
type Registry struct {
	byName   map[string]*Combo
	ordered  []*Combo
	expanded map[string]*Expansion
}

// NewRegistry builds a registry of combos (each combo is copied).
func NewRegistry(combos []Combo) *Registry {
	r := &Registry{byName: make(map[string]*Combo, len(combos)), expanded: make(map[string]*Expansion, len(combos))}
	for _, c := range combos {
		c.Targets = append([]Target(nil), c.Targets...)
		r.byName[c.Name] = &c
		r.ordered = append(r.ordered, &c)
	}
	sort.Slice(r.ordered, func(i, j int) bool { return r.ordered[i].Name < r.ordered[j].Name })
	for _, c := range r.ordered {
		r.expanded[c.Name] = Expand(c.Name, r.Combo)
	}
	return r
}

// Combo returns the combo with this name.
func (r *Registry) Combo(name string) (*Combo, bool) {
	c, ok := r.byName[name]
	return c, ok
}

// Combos returns every combo ordered by name.
func (r *Registry) Combos() []*Combo { return r.ordered }

// Expand returns the combo with this name with its nested combos expanded (computed once, when
// the registry was built).
func (r *Registry) Expand(name string) (*Expansion, bool) {
	x, ok := r.expanded[name]
	return x, ok
}

// UsedBy returns, ordered by name, the combos that list name as a target.
func (r *Registry) UsedBy(name string) []string {
	var out []string
	for _, c := range r.ordered {
		if c.NamesCombo(name) {
			out = append(out, c.Name)
		}
	}
	return out
}

// Expansion is a combo with its nested combos expanded: the tree an executor walks, applying
// each level's own strategy to that level's targets.
type Expansion struct {
	Combo *Combo
	// Depth is the level of this combo: 1 for the combo asked for, 2 for a combo it names, …
	Depth   int
	Targets []ExpandedTarget
}

// ExpandedTarget is one target of an expanded combo, in the combo's order.
type ExpandedTarget struct {
	Target
	// Index is the target's position in its combo's targets.
	Index int
	// Nested is the named combo expanded, for a combo target. It is nil for a combo target that
	// cannot be expanded: missing, deeper than MaxDepth or closing a cycle (saved combos never
	// are; such a target has nothing to offer).
	Nested *Expansion
}

// Leaf is one provider target of an expanded combo.
type Leaf struct {
	Target
	// Path names the combos the leaf is reached through, outermost first.
	Path []string
	// Indexes are the target positions along Path (Indexes[i] in the combo Path[i]).
	Indexes []int
}

// Expand expands the combo name, looking combos up with get, depth-first in listed order and at
// most MaxDepth levels deep; nil when get does not know name.
func Expand(name string, get func(string) (*Combo, bool)) *Expansion {
	return expand(name, get, 1, map[string]bool{})
}

func expand(name string, get func(string) (*Combo, bool), depth int, onPath map[string]bool) *Expansion {
	c, ok := get(name)
	if !ok || depth > MaxDepth || onPath[name] {
		return nil
	}
	onPath[name] = true
	defer delete(onPath, name)
	x := &Expansion{Combo: c, Depth: depth, Targets: make([]ExpandedTarget, len(c.Targets))}
	for i, t := range c.Targets {
		x.Targets[i] = ExpandedTarget{Target: t, Index: i}
		if t.IsCombo() {
			x.Targets[i].Nested = expand(t.Combo, get, depth+1, onPath)
		}
	}
	return x
}

// Leaves lists the provider targets under x depth-first in listed order (a target a combo
// reaches twice, through two of its combos, is listed twice, once per path).
func (x *Expansion) Leaves() []Leaf {
	var out []Leaf
	x.leaves(nil, nil, &out)
	return out
}

func (x *Expansion) leaves(path []string, idx []int, out *[]Leaf) {
	path = append(path[:len(path):len(path)], x.Combo.Name)
	for _, t := range x.Targets {
		at := append(idx[:len(idx):len(idx)], t.Index)
		switch {
		case t.Nested != nil:
			t.Nested.leaves(path, at, out)
		case !t.IsCombo():
			*out = append(*out, Leaf{Target: t.Target, Path: path, Indexes: at})
		}
	}
}
