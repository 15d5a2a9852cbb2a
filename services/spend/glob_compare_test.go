package spend_test

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"

	"switchyard/services/clientkeys"
	"switchyard/services/spend"
)

// A price pattern matches exactly what the same allowed_models pattern of a client key
// matches (its syntax is documented as the same), on random patterns and names.
func TestPricePatternsMatchLikeKeyPatterns(t *testing.T) {
	empty, err := spend.ParseBuiltIn([]byte(`{"models":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(parts []string, n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		return b.String()
	}
	patParts := []string{"a", "b", "/", "*", "?", "[ab]", "[^a]", `\*`, "é", "[a-c]"}
	nameParts := []string{"a", "b", "c", "/", "*", "é"}
	checked := 0
	for range 20000 {
		pat := "*" + pick(patParts, 1+rng.IntN(6))
		if rng.IntN(2) == 0 {
			pat = "a/" + pick(patParts, rng.IntN(6))
		}
		if _, err := path.Match(pat, ""); err != nil {
			continue
		}
		provider, model := pick([]string{"a", "b", "ab"}, 1), pick(nameParts, rng.IntN(6))
		keys, err := clientkeys.CompileModelPatterns([]string{pat})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := spend.NewTable(empty, map[string]spend.Price{pat: {InputPerMTok: 1}})
		if err != nil {
			t.Fatal(err)
		}
		_, _, got := tb.Lookup(provider, "", model)
		if want := keys.Match(provider + "/" + model); got != want {
			t.Fatalf("%q on %s/%s: %v, a key's pattern says %v", pat, provider, model, got, want)
		}
		checked++
	}
	if checked < 10000 {
		t.Fatalf("only %d cases", checked)
	}
}
