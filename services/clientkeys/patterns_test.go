package clientkeys

import (
	"path"
	"testing"
)

func TestModelPatternsMatch(t *testing.T) {
	cases := []struct {
		name     string
		patterns []string
		model    string
		want     bool
	}{
		{"no list allows everything", nil, "any/model", true},
		{"star alone allows everything", []string{"*"}, "openrouter/meta-llama/llama-4", true},
		{"exact provider/model", []string{"openai/gpt-5.4"}, "openai/gpt-5.4", true},
		{"exact is exact", []string{"openai/gpt-5.4"}, "openai/gpt-5.4-mini", false},
		{"case matters", []string{"openai/gpt-5.4"}, "OpenAI/gpt-5.4", false},
		{"provider prefix", []string{"ga/*"}, "ga/x", true},
		{"star crosses slashes", []string{"ga/*"}, "ga/x/y", true},
		{"prefix of another provider", []string{"ga/*"}, "gab/x", false},
		{"prefix needs the slash", []string{"ga/*"}, "ga", false},
		{"inner star", []string{"anthropic/claude-*-4-6"}, "anthropic/claude-sonnet-4-6", true},
		{"inner star misses", []string{"anthropic/claude-*-4-6"}, "anthropic/claude-sonnet-4-5", false},
		{"question mark is one character", []string{"p/m?"}, "p/m1", true},
		{"question mark is exactly one", []string{"p/m?"}, "p/m12", false},
		{"question mark crosses a slash", []string{"p?m"}, "p/m", true},
		{"class", []string{"p/gpt-[45]"}, "p/gpt-4", true},
		{"class misses", []string{"p/gpt-[45]"}, "p/gpt-3", false},
		{"range", []string{"p/v[0-9]"}, "p/v7", true},
		{"negated class", []string{"p/v[^0-9]"}, "p/vx", true},
		{"negated class misses", []string{"p/v[^0-9]"}, "p/v1", false},
		{"escaped star is literal", []string{`p/a\*`}, "p/a*", true},
		{"escaped star matches no other text", []string{`p/a\*`}, "p/ab", false},
		{"regexp characters are literal", []string{"p/a.b+(c)*"}, "p/a.b+(c)-x", true},
		{"regexp characters do not act", []string{"p/a.b*"}, "p/axb", false},
		{"combo name", []string{"resilient-chat"}, "resilient-chat", true},
		{"one of several", []string{"x/*", "resilient-chat", "y/m"}, "y/m", true},
		{"none of several", []string{"x/*", "resilient-chat", "y/m"}, "z/m", false},
		{"unicode literal", []string{"p/modèle-*"}, "p/modèle-1", true},
		{"newline in a model is no wildcard's problem", []string{"p/*"}, "p/a\nb", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := CompileModelPatterns(c.patterns)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Match(c.model); got != c.want {
				t.Fatalf("%v matches %q: %v, want %v", c.patterns, c.model, got, c.want)
			}
		})
	}
}

func TestCheckModelPattern(t *testing.T) {
	cases := []struct {
		pattern string
		bad     bool
		key     string
	}{
		{"openai/*", false, ""},
		{"*", false, ""},
		{`p/a\*`, false, ""},
		{"p/[a-z]", false, ""},
		{"", true, "keys.err.pattern_empty"},
		{" p/x", true, "err.name_spaces"},
		{"p/[", true, "keys.err.pattern_syntax"},
		{"p/[]a]", true, "keys.err.pattern_syntax"},
		{`p/a\`, true, "keys.err.pattern_syntax"},
		{"p/[a-]", true, "keys.err.pattern_syntax"},
		{"p/a\x00", true, "keys.err.pattern_character"},
		{"p/a\u202e", true, "keys.err.pattern_character"},
		{string(make([]byte, MaxPatternLen+1)), true, "keys.err.pattern_too_long"},
	}
	for _, c := range cases {
		m, bad := CheckModelPattern(c.pattern)
		if bad != c.bad || m.Key != c.key {
			t.Errorf("%q: bad %v (%s), want %v (%s)", c.pattern, bad, m.Key, c.bad, c.key)
		}
	}
}

// The translation to a regular expression agrees with path.Match wherever no slash is involved.
func TestGlobAgreesWithPathMatch(t *testing.T) {
	patterns := []string{"a*b", "?x?", "[a-c]*", "[^a]b", `\?a`, "a[\\]]b", "*.*", "x[*]y"}
	names := []string{"ab", "axxb", "axb", "bxb", "cz", "zb", "ab", "?a", "a]b", "a.b", "x*y", "xay", ""}
	for _, p := range patterns {
		mp, err := CompileModelPatterns([]string{p})
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		for _, n := range names {
			want, _ := pathMatch(p, n)
			if got := mp.Match(n); got != want {
				t.Errorf("%q on %q: %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}

func pathMatch(p, n string) (bool, error) { return path.Match(p, n) }
