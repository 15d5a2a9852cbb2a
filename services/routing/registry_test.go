package routing

import (
	"slices"
	"testing"
)

func leafNames(ls []Leaf) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Target.String()+" via "+joinPath(l.Path))
	}
	return out
}

func joinPath(p []string) string {
	s := ""
	for i, n := range p {
		if i > 0 {
			s += ">"
		}
		s += n
	}
	return s
}

// TestExpand walks nested combos depth-first in listed order and stops at MaxDepth.
func TestExpand(t *testing.T) {
	pinned := Target{Provider: "b", Model: "m2", Connection: "key-1", Weight: 2}
	reg := NewRegistry([]Combo{
		combo("top", pt("a", "m1"), ct("mid"), pt("b", "m9")),
		combo("mid", ct("leaf"), pinned),
		combo("leaf", pt("a", "m3"), pt("a", "m4")),
	})
	x, ok := reg.Expand("top")
	if !ok || x.Depth != 1 || x.Combo.Name != "top" || len(x.Targets) != 3 {
		t.Fatalf("expansion %+v", x)
	}
	mid := x.Targets[1]
	if mid.Nested == nil || mid.Nested.Depth != 2 || mid.Index != 1 || mid.Nested.Targets[0].Nested.Depth != 3 {
		t.Fatalf("nested %+v", mid)
	}
	got := leafNames(x.Leaves())
	want := []string{"a/m1 via top", "a/m3 via top>mid>leaf", "a/m4 via top>mid>leaf", "b/m2@key-1 via top>mid", "b/m9 via top"}
	if !slices.Equal(got, want) {
		t.Fatalf("leaves\n%v\nwant\n%v", got, want)
	}
	if l := x.Leaves()[3]; l.Weight != 2 || !slices.Equal(l.Indexes, []int{1, 1}) {
		t.Fatalf("leaf %+v", l)
	}
	if _, ok := reg.Expand("nope"); ok {
		t.Fatal("an unknown combo expanded")
	}
	if got := reg.UsedBy("leaf"); !slices.Equal(got, []string{"mid"}) {
		t.Fatalf("used by %v", got)
	}
}

// TestExpandGuardsAgainstBadData: a chain deeper than MaxDepth or a cycle (which validation never
// saves) expands without looping, the offending target left without a nested expansion.
func TestExpandGuardsAgainstBadData(t *testing.T) {
	reg := NewRegistry([]Combo{
		combo("c1", ct("c2")), combo("c2", ct("c3")), combo("c3", ct("c4"), pt("a", "m")), combo("c4", pt("a", "deep")),
		combo("loop", pt("a", "x"), ct("loop2")), combo("loop2", ct("loop")),
	})
	x, _ := reg.Expand("c1")
	if got := leafNames(x.Leaves()); !slices.Equal(got, []string{"a/m via c1>c2>c3"}) {
		t.Fatalf("leaves %v", got)
	}
	if x.Targets[0].Nested.Targets[0].Nested.Targets[0].Nested != nil {
		t.Fatal("a fourth level was expanded")
	}
	l, _ := reg.Expand("loop")
	if got := leafNames(l.Leaves()); !slices.Equal(got, []string{"a/x via loop"}) {
		t.Fatalf("loop leaves %v", got)
	}
}

// TestRegistryIsACopy: changing the slices a registry was built from changes nothing in it.
func TestRegistryIsACopy(t *testing.T) {
	list := []Combo{combo("x", pt("a", "m"))}
	reg := NewRegistry(list)
	list[0].Targets[0].Model = "changed"
	if c, _ := reg.Combo("x"); c.Targets[0].Model != "m" {
		t.Fatal("the registry shares its input")
	}
}
