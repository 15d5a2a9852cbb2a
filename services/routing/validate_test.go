package routing

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// lookupOf builds a Lookup of providers (name → connection names) and saved combos.
func lookupOf(provs map[string][]string, combos ...Combo) Lookup {
	l := Lookup{Providers: map[string]map[string]bool{}, Combos: map[string]*Combo{}}
	for p, conns := range provs {
		l.Providers[p] = map[string]bool{}
		for _, c := range conns {
			l.Providers[p][c] = true
		}
	}
	for i := range combos {
		l.Combos[combos[i].Name] = &combos[i]
	}
	return l
}

func pt(provider, model string) Target { return Target{Provider: provider, Model: model, Weight: 1} }
func ct(name string) Target            { return Target{Combo: name, Weight: 1} }

func combo(name string, targets ...Target) Combo {
	c := NewCombo()
	c.Name, c.Targets = name, targets
	return c
}

var provs = map[string][]string{"a": {"main", "spare"}, "b": {"key-1"}}

func TestValidate(t *testing.T) {
	long := make([]Target, MaxTargets+1)
	for i := range long {
		long[i] = pt("a", "m"+strings.Repeat("x", i))
	}
	cases := []struct {
		name  string
		c     Combo
		saved []Combo
		// want maps each field expected to fail to its message key.
		want map[string]string
	}{
		{"valid", combo("chat", pt("a", "m"), Target{Provider: "a", Model: "m", Connection: "spare", Weight: 100}, pt("b", "m")), nil, nil},
		{"name rules", combo("", pt("a", "m")), nil, map[string]string{"name": "err.name_required"}},
		{"name with a slash", combo("x/y", pt("a", "m")), nil, map[string]string{"name": "err.combo_name_slash"}},
		{"name of a provider", combo("a", pt("b", "m")), nil, map[string]string{"name": "err.combo_name_provider"}},
		{"name with a direction mark", combo("chat\u202e", pt("a", "m")), nil, map[string]string{"name": "err.name_invisible"}},
		{"unknown strategy", func() Combo { c := combo("x", pt("a", "m")); c.Strategy = "fastest"; return c }(), nil,
			map[string]string{"strategy": "err.one_of"}},
		{"no targets", combo("x"), nil, map[string]string{"targets": "err.combo_targets"}},
		{"too many targets", combo("x", long...), nil, map[string]string{"targets": "err.combo_targets"}},
		{"both kinds", combo("x", Target{Combo: "y", Provider: "a", Model: "m", Weight: 1}), nil, map[string]string{"targets[0]": "err.target_both"}},
		{"empty target", combo("x", pt("a", "m"), Target{Weight: 1}), nil, map[string]string{"targets[1]": "err.target_empty"}},
		{"model without provider", combo("x", Target{Model: "m", Weight: 1}), nil, map[string]string{"targets[0].provider": "err.required"}},
		{"provider without model", combo("x", Target{Provider: "a", Weight: 1}), nil, map[string]string{"targets[0].model": "err.required"}},
		{"model with a line break", combo("x", pt("a", "m\nx")), nil, map[string]string{"targets[0].model": "err.model_name"}},
		{"model too long", combo("x", pt("a", strings.Repeat("m", MaxModelBytes+1))), nil, map[string]string{"targets[0].model": "err.model_name"}},
		{"missing provider", combo("x", pt("a", "m"), pt("a", "n"), pt("zzz", "m")), nil,
			map[string]string{"targets[2].provider": "err.no_provider_named"}},
		{"missing connection", combo("x", Target{Provider: "b", Model: "m", Connection: "main", Weight: 1}), nil,
			map[string]string{"targets[0].connection": "err.no_connection_named"}},
		{"weights", combo("x", Target{Provider: "a", Model: "m", Weight: 0}, Target{Provider: "a", Model: "n", Weight: 101}), nil,
			map[string]string{"targets[0].weight": "err.between", "targets[1].weight": "err.between"}},
		{"duplicate target", combo("x", pt("a", "m"), pt("b", "m"), Target{Provider: "a", Model: "m", Weight: 5}), nil,
			map[string]string{"targets[2]": "err.target_duplicate"}},
		{"same model on two connections is fine", combo("x", Target{Provider: "a", Model: "m", Connection: "main", Weight: 1},
			Target{Provider: "a", Model: "m", Connection: "spare", Weight: 1}), nil, nil},
		{"connection on a combo target", combo("x", Target{Combo: "y", Connection: "main", Weight: 1}), []Combo{combo("y", pt("a", "m"))},
			map[string]string{"targets[0].connection": "err.target_connection_combo"}},
		{"missing combo", combo("x", pt("a", "m"), pt("b", "m"), ct("nope")), nil, map[string]string{"targets[2].combo": "err.no_combo"}},
		{"itself", combo("x", ct("x")), nil, map[string]string{"targets[0].combo": "err.combo_cycle"}},
		{"cycle through others", combo("x", pt("a", "m"), ct("y")), []Combo{combo("y", ct("z")), combo("z", ct("x"))},
			map[string]string{"targets[1].combo": "err.combo_cycle"}},
		{"depth 3 is fine", combo("x", ct("y")), []Combo{combo("y", ct("z")), combo("z", pt("a", "m"))}, nil},
		{"depth 4 below", combo("x", ct("y")), []Combo{combo("y", ct("z")), combo("z", ct("w")), combo("w", pt("a", "m"))},
			map[string]string{"targets[0].combo": "err.combo_depth"}},
		// y is named by top → mid → y: giving y a nested combo makes top 4 deep.
		{"depth 4 through a combo above", combo("y", ct("leaf")), []Combo{combo("top", ct("mid")), combo("mid", ct("y")),
			combo("leaf", pt("a", "m"))}, map[string]string{"targets[0].combo": "err.combo_depth_above"}},
		{"limits", func() Combo {
			c := combo("x", pt("a", "m"))
			c.MaxAttempts, c.TargetTimeoutMS, c.WaitUntilResetMaxMS = 31, 999, 3_600_001
			return c
		}(), nil, map[string]string{"max_attempts": "err.combo_max_attempts", "target_timeout_ms": "err.combo_target_timeout",
			"wait_until_reset_max_ms": "err.between"}},
		{"limits at their edges", func() Combo {
			c := combo("x", pt("a", "m"))
			c.MaxAttempts, c.TargetTimeoutMS, c.WaitUntilResetMaxMS = 30, 3_600_000, 1_000
			return c
		}(), nil, nil},
		{"negative limits", func() Combo {
			c := combo("x", pt("a", "m"))
			c.MaxAttempts, c.TargetTimeoutMS = -1, -5
			return c
		}(), nil, map[string]string{"max_attempts": "err.combo_max_attempts", "target_timeout_ms": "err.combo_target_timeout"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Validate(&c.c, lookupOf(provs, c.saved...))
			if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(c.want))) {
				t.Fatalf("fields %v, want %v", got, c.want)
			}
			for k, key := range c.want {
				if got[k].Key != key {
					t.Errorf("%s: %s, want %s", k, got[k].Key, key)
				}
			}
		})
	}
}

// TestValidateMessagesNameTheChain: the cycle and depth messages say which combos are involved.
func TestValidateMessagesNameTheChain(t *testing.T) {
	c := combo("x", pt("a", "m"), ct("y"))
	got := Validate(&c, lookupOf(provs, combo("y", ct("z")), combo("z", ct("x"))))["targets[1].combo"].String()
	if !strings.Contains(got, "x → y → z → x") {
		t.Fatalf("cycle message %q", got)
	}
	c = combo("y", ct("leaf"))
	got = Validate(&c, lookupOf(provs, combo("top", ct("mid")), combo("mid", ct("y")), combo("leaf", pt("a", "m"))))["targets[0].combo"].String()
	if !strings.Contains(got, "top → mid → y → leaf") || !strings.Contains(got, "top") {
		t.Fatalf("depth message %q", got)
	}
}

// TestApplyDefaults: a missing weight is 1, an explicit one stays (and is validated), names are
// trimmed, and a partial input leaves the rest alone.
func TestApplyDefaults(t *testing.T) {
	zero, five := 0, 5
	name := "  chat "
	c := NewCombo()
	Input{Name: &name, Targets: &[]TargetInput{{Provider: " a ", Model: "m "}, {Combo: "y", Weight: &five}, {Provider: "a", Model: "n", Weight: &zero}}}.Apply(&c)
	if c.Name != "chat" || c.Strategy != Priority || c.WaitUntilResetMaxMS != DefaultWaitMS {
		t.Fatalf("combo %+v", c)
	}
	want := []Target{{Provider: "a", Model: "m", Weight: 1}, {Combo: "y", Weight: 5}, {Provider: "a", Model: "n", Weight: 0}}
	if !slices.Equal(c.Targets, want) {
		t.Fatalf("targets %+v", c.Targets)
	}
	attempts := 4
	Input{MaxAttempts: &attempts}.Apply(&c)
	if c.MaxAttempts != 4 || c.Name != "chat" || len(c.Targets) != 3 {
		t.Fatalf("partial update changed more: %+v", c)
	}
}
