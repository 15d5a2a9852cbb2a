package spend

import (
	"strings"
	"testing"
)

func builtIn(t testing.TB) *BuiltIn {
	t.Helper()
	b, err := LoadBuiltIn()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func table(t testing.TB, overrides map[string]Price) *Table {
	t.Helper()
	for k := range overrides {
		if m, bad := CheckPriceKey(k); bad {
			t.Fatalf("key %q: %s", k, m)
		}
	}
	tb, err := NewTable(builtIn(t), overrides)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// The embedded file is read whole: every chat model of it, with its about text, and prices
// that are what the providers publish.
func TestBuiltInTable(t *testing.T) {
	b := builtIn(t)
	if b.Len() < 150 {
		t.Fatalf("the built-in table prices %d models; the data file has over 150 chat models", b.Len())
	}
	if !strings.Contains(b.About(), "per million tokens") {
		t.Fatalf("about %q", b.About())
	}
	p, src, ok := table(t, nil).Lookup("anthropic", "anthropic", "claude-sonnet-4-5")
	want := Price{InputPerMTok: 3, OutputPerMTok: 15, CacheWritePerMTok: 3.75, CacheReadPerMTok: 0.3,
		InputAbove200kPerMTok: 6, OutputAbove200kPerMTok: 22.5}
	if !ok || p != want || src != (Source{SourceBuiltIn, "claude-sonnet-4-5"}) {
		t.Fatalf("claude-sonnet-4-5: %+v %+v %v", p, src, ok)
	}
	// Models OpenAI serves only on /v1/responses are priced too.
	if _, src, ok := table(t, nil).Lookup("openai", "openai", "gpt-5-codex"); !ok || src.Name != "gpt-5-codex" {
		t.Fatalf("gpt-5-codex: %+v %v", src, ok)
	}
}

// Entries that are no text model, and broken entries, never enter the table.
func TestParseBuiltIn(t *testing.T) {
	b, err := ParseBuiltIn([]byte(`{"about":"x","models":{
		"embed-1":{"provider":"openai","mode":"embedding","input_per_mtok":0.1,"output_per_mtok":0},
		"chat-1":{"provider":"openai","mode":"chat","input_per_mtok":1,"output_per_mtok":2}}}`))
	if err != nil || b.Len() != 1 {
		t.Fatalf("%v, %d entries", err, b.Len())
	}
	for name, doc := range map[string]string{
		"no output price": `{"models":{"a":{"provider":"openai","mode":"chat","input_per_mtok":1}}}`,
		"negative":        `{"models":{"a":{"provider":"openai","mode":"chat","input_per_mtok":-1,"output_per_mtok":2}}}`,
		"not json":        `{"models":`,
	} {
		if _, err := ParseBuiltIn([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLookupBuiltIn(t *testing.T) {
	tb := table(t, nil)
	for _, c := range []struct {
		name, provider, typ, model string
		want                       string // built-in entry, "" for no price
	}{
		{"exact id", "anthropic", "anthropic", "claude-haiku-4-5-20251001", "claude-haiku-4-5-20251001"},
		{"unknown snapshot of a known alias", "anthropic", "anthropic", "claude-sonnet-4-5-20991231", "claude-sonnet-4-5"},
		{"alias of the only snapshot", "anthropic", "anthropic", "claude-sonnet-4", "claude-sonnet-4-20250514"},
		{"-latest names the newest snapshot", "anthropic", "anthropic", "claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219"},
		{"dashed date", "openai", "openai", "gpt-4.1-2099-01-31", "gpt-4.1"},
		{"dashed date of a listed snapshot", "openai", "openai", "gpt-4o-2024-05-13", "gpt-4o-2024-05-13"},
		{"vertex date", "vertex", "openai-compatible", "claude-opus-4-1@20250805", "claude-opus-4-1"},
		{"vertex date of a model without an alias", "vertex", "openai-compatible", "claude-3-opus@20240229", "claude-3-opus-20240229"},
		{"provider prefix", "openrouter", "openai-compatible", "openai/gpt-4o-mini", "gpt-4o-mini"},
		{"models/ prefix", "gemini", "openai-compatible", "models/gemini-pro-latest", "gemini-pro-latest"},
		{":latest tag", "ollama", "openai-compatible", "gpt-4o:latest", "gpt-4o"},
		{"dotted version", "openrouter", "openai-compatible", "anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"},
		{"dotted version with a date", "openrouter", "openai-compatible", "claude-3.7-sonnet-20250219", "claude-3-7-sonnet-20250219"},
		{"capitals", "azure", "openai-compatible", "GPT-4o", "gpt-4o"},
		{"another family's model on a compatible provider", "deepseek", "anthropic-compatible", "deepseek-chat", "deepseek-chat"},
		{"another family's model on an openai provider", "xai", "openai", "grok-4.3", "grok-4.3"},
		{"unknown type", "x", "", "o3", "o3"},
		{"unknown model", "vllm", "openai-compatible", "llama-3.3-70b-instruct", ""},
		{"a four-digit suffix is no date", "openai", "openai", "gpt-4o-0806", ""},
		{"empty", "openai", "openai", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, src, ok := tb.Lookup(c.provider, c.typ, c.model)
			if c.want == "" {
				if ok || src.Kind != SourceNone || p != (Price{}) {
					t.Fatalf("%s priced: %+v %+v", c.model, p, src)
				}
				return
			}
			if !ok || src != (Source{SourceBuiltIn, c.want}) {
				t.Fatalf("%s: %+v %v, want built-in %s", c.model, src, ok, c.want)
			}
			if p.InputPerMTok <= 0 || p.OutputPerMTok <= 0 {
				t.Fatalf("%s: price %+v", c.model, p)
			}
		})
	}
	// The price is the entry's own: the 2024-05-13 snapshot of gpt-4o cost more than gpt-4o.
	if p, _, _ := tb.Lookup("openai", "openai", "gpt-4o-2024-05-13"); p.InputPerMTok != 5 {
		t.Fatalf("gpt-4o-2024-05-13 input %v", p.InputPerMTok)
	}
	if p, _, _ := tb.Lookup("openai", "openai", "gpt-4o-2099-01-01"); p.InputPerMTok != 2.5 {
		t.Fatalf("an unknown snapshot of gpt-4o input %v, want gpt-4o's 2.5", p.InputPerMTok)
	}
}

// Where one id names entries of several providers, the provider type's family wins; a
// provider of another type still gets a price.
func TestLookupPrefersTheFamily(t *testing.T) {
	b, err := ParseBuiltIn([]byte(`{"models":{
		"twin-20250101":{"provider":"anthropic","mode":"chat","input_per_mtok":1,"output_per_mtok":1},
		"twin-20250601":{"provider":"openai","mode":"chat","input_per_mtok":2,"output_per_mtok":2},
		"solo":{"provider":"gemini","mode":"chat","input_per_mtok":3,"output_per_mtok":3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := NewTable(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ typ, model, want string }{
		{"anthropic", "twin", "twin-20250101"},
		{"anthropic-compatible", "twin", "twin-20250101"},
		{"openai", "twin", "twin-20250601"},
		{"openai-compatible", "twin", "twin-20250601"},
		{"", "twin", "twin-20250601"}, // no family: the newest snapshot
		{"anthropic", "solo", "solo"},
		{"openai-compatible", "solo", "solo"},
	} {
		if _, src, ok := tb.Lookup("p", c.typ, c.model); !ok || src.Name != c.want {
			t.Errorf("%s %s: %+v %v, want %s", c.typ, c.model, src, ok, c.want)
		}
	}
}

func TestLookupOverrides(t *testing.T) {
	p := func(in float64) Price { return Price{InputPerMTok: in, OutputPerMTok: in * 2} }
	tb := table(t, map[string]Price{
		"anthropic/claude-sonnet-4-5": p(1),
		"rp/sim-small":                p(2),
		"openai/*":                    p(3),
		"openai/gpt-4o*":              p(4),
		"*/gpt-4o-mini":               p(5), // 12 literals: openai/gpt-4o* has 13
		"*":                           p(6),
		"vllm/llama-?-70b":            p(7),
		"openrouter/meta-llama/*":     p(8),
		"*/[dD]eep*":                  p(9),
	})
	for _, c := range []struct {
		provider, model string
		in              float64
		src             Source
	}{
		{"anthropic", "claude-sonnet-4-5", 1, Source{SourceOverride, "anthropic/claude-sonnet-4-5"}},
		{"rp", "sim-small", 2, Source{SourceOverride, "rp/sim-small"}},
		{"openai", "o3", 3, Source{SourceGlob, "openai/*"}},
		{"openai", "gpt-4o", 4, Source{SourceGlob, "openai/gpt-4o*"}},
		{"openai", "gpt-4o-mini", 4, Source{SourceGlob, "openai/gpt-4o*"}},
		{"azure", "gpt-4o-mini", 5, Source{SourceGlob, "*/gpt-4o-mini"}},
		{"vllm", "llama-3-70b", 7, Source{SourceGlob, "vllm/llama-?-70b"}},
		{"vllm", "llama-33-70b", 6, Source{SourceGlob, "*"}},
		{"openrouter", "meta-llama/llama-4", 8, Source{SourceGlob, "openrouter/meta-llama/*"}},
		{"x", "DeepSeek", 9, Source{SourceGlob, "*/[dD]eep*"}},
		// an exact override of one provider leaves the others to the table
		{"anthropic", "claude-haiku-4-5", 6, Source{SourceGlob, "*"}},
	} {
		got, src, ok := tb.Lookup(c.provider, "openai-compatible", c.model)
		if !ok || got.InputPerMTok != c.in || src != c.src {
			t.Errorf("%s/%s: %v %+v %v, want %v from %+v", c.provider, c.model, got.InputPerMTok, src, ok, c.in, c.src)
		}
	}
	// Without the catch-all, the built-in table answers what no override prices.
	tb = table(t, map[string]Price{"anthropic/claude-sonnet-4-5": p(1), "openai/gpt-4o*": p(4)})
	if _, src, ok := tb.Lookup("anthropic", "anthropic", "claude-haiku-4-5"); !ok || src.Kind != SourceBuiltIn {
		t.Fatalf("claude-haiku-4-5: %+v", src)
	}
	// An override is exact: another provider's same model is the built-in price.
	if got, src, _ := tb.Lookup("anthropic-eu", "anthropic", "claude-sonnet-4-5"); got.InputPerMTok != 3 || src.Kind != SourceBuiltIn {
		t.Fatalf("anthropic-eu/claude-sonnet-4-5: %+v %+v", got, src)
	}
}

// Among patterns of equal specificity the first in sort order wins, whichever list holds it
// (patterns that name their provider are kept apart from those that don't).
func TestPatternTies(t *testing.T) {
	tb := table(t, map[string]Price{
		"a/bq*": {InputPerMTok: 1}, // 4 literals
		"*/b*":  {InputPerMTok: 2}, // 2 literals, sorts before a/*
		"a/*":   {InputPerMTok: 3}, // 2 literals
		"?/bc*": {InputPerMTok: 4}, // 3 literals
		"b/c":   {InputPerMTok: 5},
	})
	for _, c := range []struct {
		provider, model string
		want            float64
	}{
		{"a", "bq", 1}, {"a", "bc", 4}, {"a", "b", 2}, {"z", "b", 2}, {"a", "x", 3}, {"b", "c", 5}, {"b", "cc", 0},
	} {
		if got, _, _ := tb.Lookup(c.provider, "", c.model); got.InputPerMTok != c.want {
			t.Errorf("%s/%s: %v, want %v", c.provider, c.model, got.InputPerMTok, c.want)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, provider, model string
		want                     bool
	}{
		{"*", "a", "b", true},
		{"a/b", "a", "b", true},
		{"a/b", "a", "bb", false},
		{"a/*", "a", "x/y/z", true},
		{"a*", "ab", "c", true}, // a star crosses the slash
		{"a?c", "a", "c", true}, // so does ?
		{"*/c", "a", "b/c", true},
		{"*/c", "a", "b/cd", false},
		{"*b*d", "a", "bcd", true},
		{"*b*d", "a", "bcde", false},
		{"*x*x*", "a", "xyx", true},
		{"*x*x*", "a", "xy", false},
		{"a/[^0-9]*", "a", "x1", true},
		{"a/[^0-9]*", "a", "1x", false},
		{"a/[a-c]", "a", "b", true},
		{`a/\*`, "a", "*", true},
		{`a/\*`, "a", "x", false},
		{"a/?", "a", "é", true}, // one character, two bytes
		{"a/é*", "a", "éa", true},
		{"a/b?", "a", "b", false},
		{"", "a", "b", false},
		{"*a/b*", "xa", "by", true}, // a literal across the slash
		{"*a/b*", "xa", "cb", false},
		{"*c/d", "abc", "d", true},
		{"*/c", "a", "c", true},
		{"*ab*", "a", "b", false},
		{"x*y*z", "x", "ayz", true},
		{"x*y*z", "x", "azy", false},
		{"*[ab]/c", "xa", "c", true},
		{"*a?c*", "a", "xabc", true},
		{"*a?c", "a", "xabcd", false},
	} {
		p, err := compilePattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.match(c.provider, c.model); got != c.want {
			t.Errorf("%q on %s/%s: %v, want %v", c.pattern, c.provider, c.model, got, c.want)
		}
	}
}

func TestCheckPriceKey(t *testing.T) {
	for key, want := range map[string]string{
		"rp/sim-small":                  "",
		"openrouter/meta-llama/llama-4": "",
		"openai/*":                      "",
		"*":                             "",
		"*gpt-4o*":                      "",
		"":                              "prices.err.key_empty",
		strings.Repeat("a", 201):        "prices.err.key_too_long",
		" rp/x":                         "err.name_spaces",
		"rp/x\u200b":                    "keys.err.pattern_character",
		"sim-small":                     "prices.err.key_shape",
		"rp/":                           "prices.err.key_shape",
		"RP/x":                          "prices.err.key_provider",
		"gpt-4o*":                       "prices.err.pattern_no_provider",
		"rp/[x":                         "keys.err.pattern_syntax",
		"rp/x\xff":                      "err.name_utf8",
	} {
		m, bad := CheckPriceKey(key)
		if bad != (want != "") || m.Key != want {
			t.Errorf("%q: %v %q, want %q", key, bad, m.Key, want)
		}
	}
}

// Lookup runs once per delivered request: no allocation, whatever answers.
func TestLookupAllocatesNothing(t *testing.T) {
	tb := benchTable(t)
	for _, c := range lookupCases {
		if n := testing.AllocsPerRun(100, func() { tb.Lookup(c[0], c[1], c[2]) }); n != 0 {
			t.Errorf("%v: %v allocations", c, n)
		}
	}
}

var lookupCases = [][3]string{
	{"anthropic", "anthropic", "claude-sonnet-4-5-20250929"}, // built-in, exact
	{"anthropic", "anthropic", "claude-sonnet-4-5-20991231"}, // built-in, via the alias
	{"openrouter", "openai-compatible", "anthropic/claude-sonnet-4.5"},
	{"rp", "openai-compatible", "sim-small"},                  // override
	{"vllm", "openai-compatible", "llama-3-70b"},              // pattern
	{"vllm", "openai-compatible", "mistral-large-instruct-2"}, // no price
}

// benchTable has overrides and patterns like a busy installation's.
func benchTable(t testing.TB) *Table {
	o := map[string]Price{"rp/sim-small": {InputPerMTok: 1}, "vllm/llama-*": {InputPerMTok: 1}, "*/qwen*": {InputPerMTok: 1},
		"openrouter/meta-llama/*": {InputPerMTok: 1}, "azure/gpt-4o*": {InputPerMTok: 1}}
	for i := range 40 {
		o["p"+string(rune('a'+i%26))+"/model-"+strings.Repeat("x", i)] = Price{InputPerMTok: 2}
		o["q"+string(rune('a'+i%26))+"/m*"+strings.Repeat("y", i)] = Price{InputPerMTok: 2}
	}
	return table(t, o)
}

func BenchmarkLookup(b *testing.B) {
	tb := benchTable(b)
	for _, c := range lookupCases {
		b.Run(c[0]+"/"+c[2], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tb.Lookup(c[0], c[1], c[2])
			}
		})
	}
}
