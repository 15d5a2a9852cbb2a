package glob

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"
)

// On random patterns and names: a name read from two parts matches as the joined name does,
// both agree with path.Match where no slash is involved, and a pattern that ignores case matches
// an upper-cased name as it matches the name.
func TestMatchAgreesWithPathMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pick := func(parts []string, n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		return b.String()
	}
	patParts := []string{"a", "b", "ab", "/", "*", "?", "[ab]", "[^a]", `\*`, "é", "[a-c]", "[^/]"}
	nameParts := []string{"a", "b", "c", "/", "*", "é", "ab"}
	checked := 0
	for range 20000 {
		pat := pick(patParts, rng.IntN(7))
		if _, err := path.Match(pat, ""); err != nil {
			continue
		}
		p, err := Compile(pat, false)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Compile(pat, true)
		if err != nil {
			t.Fatal(err)
		}
		a, b := pick(nameParts, rng.IntN(4)), pick(nameParts, rng.IntN(5))
		name := a + "/" + b
		got := p.MatchJoined(a, b)
		if whole := p.Match(name); got != whole {
			t.Fatalf("%q on %q/%q: %v, on %q: %v", pat, a, b, got, name, whole)
		}
		if up := f.Match(strings.ToUpper(name)); got != up {
			t.Fatalf("%q on %q: %v, ignoring case %v", pat, strings.ToUpper(name), got, up)
		}
		if !strings.Contains(pat, "/") && !strings.Contains(a, "/") {
			want, _ := path.Match(pat, a)
			if got := p.Match(a); got != want {
				t.Fatalf("%q on %q: %v, path.Match says %v", pat, a, got, want)
			}
		}
		checked++
	}
	if checked < 10000 {
		t.Fatalf("only %d cases", checked)
	}
}
