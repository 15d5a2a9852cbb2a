package glob

import (
	"path"
	"strings"
	"testing"
)

// strs is every concatenation of up to n of parts.
func strs(parts []string, n int) []string {
	out, last := []string{""}, []string{""}
	for range n {
		var next []string
		for _, s := range last {
			for _, p := range parts {
				next = append(next, s+p)
			}
		}
		out, last = append(out, next...), next
	}
	return out
}

// For every pattern and name of a small alphabet: a name read from two parts matches as the
// joined name does, both agree with path.Match where no slash is involved, and a pattern that
// ignores case matches an upper-cased name as it matches the name.
func TestMatchAgreesWithPathMatch(t *testing.T) {
	halves := strs([]string{"a", "b", "/", "é"}, 2)
	for _, pat := range strs([]string{"a", "b", "/", "*", "?", "[ab]", "[^a]", `\*`, "é", "[^/]"}, 3) {
		p, err := Compile(pat, false)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Compile(pat, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range halves {
			for _, b := range halves {
				name := a + "/" + b
				got := p.MatchJoined(a, b)
				if whole := p.Match(name); got != whole {
					t.Fatalf("%q on %q/%q: %v, on %q: %v", pat, a, b, got, name, whole)
				}
				if up := f.Match(strings.ToUpper(name)); got != up {
					t.Fatalf("%q on %q: %v, ignoring case %v", pat, strings.ToUpper(name), got, up)
				}
			}
			if !strings.Contains(pat, "/") && !strings.Contains(a, "/") {
				want, _ := path.Match(pat, a)
				if got := p.Match(a); got != want {
					t.Fatalf("%q on %q: %v, path.Match says %v", pat, a, got, want)
				}
			}
		}
	}
}
