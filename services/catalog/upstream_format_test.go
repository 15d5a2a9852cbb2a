package catalog

import (
	"encoding/json"
	"io"
	"log/slog"
	"path"
	"strings"
	"testing"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/glob"
)

// entry builds a provider the way the registry does, from a stored row.
func entry(t testing.TB, typ, format string, patterns ...string) *ProviderEntry {
	t.Helper()
	raw := "[]"
	if patterns != nil {
		b, _ := json.Marshal(patterns)
		raw = string(b)
	}
	reg := buildRegistry([]db.Provider{{ID: 1, Name: "p", Type: typ, BaseURL: "https://x/v1", Resilience: "{}",
		Strategy: "priority", UpstreamFormat: format, ResponsesModels: raw}}, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	p, ok := reg.Provider("p")
	if !ok {
		t.Fatal("no provider")
	}
	return p
}

func TestSendsResponses(t *testing.T) {
	defaults := DefaultResponsesModels(TypeOpenAI)
	cases := []struct {
		name     string
		typ      string
		format   string
		patterns []string
		model    string
		want     bool
	}{
		{"openai default: gpt-5-codex", TypeOpenAI, "chat", defaults, "gpt-5-codex", true},
		{"openai default: codex-mini-latest", TypeOpenAI, "chat", defaults, "codex-mini-latest", true},
		{"openai default: gpt-5.1-codex-max", TypeOpenAI, "chat", defaults, "gpt-5.1-codex-max", true},
		{"openai default: o3-pro", TypeOpenAI, "chat", defaults, "o3-pro", true},
		{"openai default: o1-pro dated", TypeOpenAI, "chat", defaults, "o1-pro-2025-03-19", true},
		{"openai default: case ignored", TypeOpenAI, "chat", defaults, "GPT-5-CODEX", true},
		{"openai default: gpt-4o stays chat", TypeOpenAI, "chat", defaults, "gpt-4o", false},
		{"openai default: o3 stays chat", TypeOpenAI, "chat", defaults, "o3", false},
		{"openai default: o3-mini stays chat", TypeOpenAI, "chat", defaults, "o3-mini", false},
		{"openai default: o1-preview stays chat", TypeOpenAI, "chat", defaults, "o1-preview", false},
		{"openai default: prefix is anchored", TypeOpenAI, "chat", defaults, "my-o3-pro", false},
		{"openai default: empty model", TypeOpenAI, "chat", defaults, "", false},
		{"openai: cleared list", TypeOpenAI, "chat", []string{}, "gpt-5-codex", false},
		{"openai: format responses sends everything", TypeOpenAI, "responses", []string{}, "gpt-4o", true},
		{"openai: exact pattern", TypeOpenAI, "chat", []string{"gpt-5-pro"}, "gpt-5-pro", true},
		{"openai: exact pattern is whole", TypeOpenAI, "chat", []string{"gpt-5-pro"}, "gpt-5-pro-1", false},
		{"openai: pattern case ignored", TypeOpenAI, "chat", []string{"GPT-5-Pro*"}, "gpt-5-pro-2025", true},
		{"openai: ? is one character", TypeOpenAI, "chat", []string{"o?-pro"}, "o4-pro", true},
		{"openai: ? not zero characters", TypeOpenAI, "chat", []string{"o?-pro"}, "o-pro", false},
		{"openai: class", TypeOpenAI, "chat", []string{"o[1-3]-pro"}, "o2-pro", true},
		{"openai: class excludes", TypeOpenAI, "chat", []string{"o[1-3]-pro"}, "o4-pro", false},
		{"openai: class ignores case", TypeOpenAI, "chat", []string{"[A-C]x"}, "bx", true},
		{"openai: negated class ignores case", TypeOpenAI, "chat", []string{"[^a]x"}, "Ax", false},
		{"openai: escaped star is literal", TypeOpenAI, "chat", []string{`a\*b`}, "a*b", true},
		{"openai: escaped star matches only a star", TypeOpenAI, "chat", []string{`a\*b`}, "axb", false},
		{"openai: star crosses a slash", TypeOpenAI, "chat", []string{"ft:*"}, "ft:org/model", true},
		{"openai: star backtracks", TypeOpenAI, "chat", []string{"*-pro-*x"}, "a-pro-b-pro-cx", true},
		{"openai: second pattern", TypeOpenAI, "chat", []string{"nope", "gpt-5*"}, "gpt-5", true},
		{"openai: unicode folded", TypeOpenAI, "chat", []string{"modell-ä*"}, "MODELL-Ä-1", true},
		{"compatible: patterns do not count", TypeOpenAICompatible, "chat", defaults, "gpt-5-codex", false},
		{"compatible: format responses", TypeOpenAICompatible, "responses", nil, "llama-3", true},
		{"anthropic: chat", TypeAnthropic, "chat", nil, "claude-opus-4", false},
		{"anthropic: patterns never count", TypeAnthropic, "", defaults, "gpt-5-codex", false},
		{"empty format is chat", TypeOpenAI, "", []string{}, "gpt-4o", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := entry(t, c.typ, c.format, c.patterns...)
			if got := p.SendsResponses(c.model); got != c.want {
				t.Errorf("SendsResponses(%q) = %v, want %v", c.model, got, c.want)
			}
		})
	}
}

// The entry implies the Responses API of a provider whose upstream format is responses.
func TestUpstreamFormatResponsesServesResponses(t *testing.T) {
	if p := entry(t, TypeOpenAICompatible, "responses"); !p.ResponsesAPI || p.UpstreamFormat != UpstreamResponses {
		t.Fatalf("entry %+v", p)
	}
	if p := entry(t, TypeOpenAICompatible, "chat"); p.ResponsesAPI || p.UpstreamFormat != UpstreamChat {
		t.Fatalf("entry %+v", p)
	}
}

// The compiled glob agrees with path.Match (on lower-cased text, where neither has a slash)
// for every pattern and name of a small alphabet.
func TestModelGlobAgreesWithPathMatch(t *testing.T) {
	patterns := []string{"", "*", "**", "a", "a*", "*a", "*a*", "a*b", "a*b*c", "?", "??", "a?b", "*?", "?*a",
		"[ab]", "[^ab]*", "[a-c]?", "*[b-c]", `\*`, `a\?`, "a**b", "*ab*ab*", "b*a*"}
	names := []string{"", "a", "b", "c", "ab", "ba", "aab", "abab", "abc", "acb", "bca", "*", "a?", "aa", "cab", "abcab"}
	for _, pat := range patterns {
		g, err := glob.Compile(pat, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			want, _ := path.Match(pat, n)
			if got := g.Match(n); got != want {
				t.Errorf("%q on %q: %v, path.Match says %v", pat, n, got, want)
			}
			if got := g.Match(strings.ToUpper(n)); got != want {
				t.Errorf("%q on %q: %v, want %v (case ignored)", pat, strings.ToUpper(n), got, want)
			}
		}
	}
}

func TestSendsResponsesAllocatesNothing(t *testing.T) {
	p := entry(t, TypeOpenAI, "chat", append(DefaultResponsesModels(TypeOpenAI), "o[1-4]-deep-research*", "gpt-?-pro")...)
	for _, m := range []string{"gpt-4o-mini-2024-07-18", "gpt-5.1-codex", "O3-PRO", "o4-deep-research-2025", "gpt-5-pro"} {
		if n := testing.AllocsPerRun(100, func() { p.SendsResponses(m) }); n != 0 {
			t.Errorf("%s: %v allocations", m, n)
		}
	}
}

func BenchmarkSendsResponses(b *testing.B) {
	p := entry(b, TypeOpenAI, "chat", DefaultResponsesModels(TypeOpenAI)...)
	for _, m := range []string{"gpt-4o-mini-2024-07-18", "gpt-5.1-codex-max", "o3-pro-2025-06-10"} {
		b.Run(m, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.SendsResponses(m)
			}
		})
	}
}

// applyProvider's rules for upstream_format and responses_models, field by field.
func TestApplyUpstreamFormat(t *testing.T) {
	str := func(s string) *string { return &s }
	list := func(s ...string) *[]string { return &s }
	base := func(typ string) ProviderInput {
		return ProviderInput{Name: str("p"), Type: str(typ), BaseURL: str("https://x.example/v1")}
	}
	long := strings.Repeat("é", MaxResponsesModelLen)
	many := make([]string, MaxResponsesModels+1)
	for i := range many {
		many[i] = "m" + strings.Repeat("x", i)
	}
	cases := []struct {
		name       string
		stored     *db.Provider // nil: a create
		in         ProviderInput
		wantFormat string
		wantModels string
		badFields  []string
	}{
		{name: "openai defaults", in: base(TypeOpenAI), wantFormat: "chat", wantModels: `["*codex*","o1-pro*","o3-pro*"]`},
		{name: "compatible defaults", in: base(TypeOpenAICompatible), wantFormat: "chat", wantModels: `[]`},
		{name: "anthropic defaults", in: base(TypeAnthropic), wantFormat: "chat", wantModels: `[]`},
		{name: "compatible responses", in: withFormat(base(TypeOpenAICompatible), "responses"), wantFormat: "responses", wantModels: `[]`},
		{name: "anthropic responses refused", in: withFormat(base(TypeAnthropic), "responses"), badFields: []string{"upstream_format"}},
		{name: "anthropic-compatible responses refused", in: withFormat(base(TypeAnthropicCompatible), "responses"),
			badFields: []string{"upstream_format"}},
		{name: "unknown format", in: withFormat(base(TypeOpenAI), "messages"), badFields: []string{"upstream_format"}},
		{name: "own list, trimmed, deduplicated", in: withModels(base(TypeOpenAI), list(" gpt-5-pro ", "o*-pro", "gpt-5-pro")),
			wantFormat: "chat", wantModels: `["gpt-5-pro","o*-pro"]`},
		{name: "longest pattern", in: withModels(base(TypeOpenAI), list(long)), wantFormat: "chat", wantModels: `["` + long + `"]`},
		{name: "pattern too long", in: withModels(base(TypeOpenAI), list(long+"x")), badFields: []string{"responses_models[0]"}},
		{name: "empty pattern", in: withModels(base(TypeOpenAI), list("ok", " ")), badFields: []string{"responses_models[1]"}},
		{name: "bad syntax", in: withModels(base(TypeOpenAI), list("[a")), badFields: []string{"responses_models[0]"}},
		{name: "control character", in: withModels(base(TypeOpenAI), list("a\tb")), badFields: []string{"responses_models[0]"}},
		{name: "too many", in: withModels(base(TypeOpenAI), &many), badFields: []string{"responses_models"}},
		{name: "patterns on compatible refused", in: withModels(base(TypeOpenAICompatible), list("*codex*")),
			badFields: []string{"responses_models"}},
		{name: "empty list on compatible is fine", in: withModels(base(TypeOpenAICompatible), list()), wantFormat: "chat", wantModels: `[]`},
		{name: "patch keeps the list", stored: stored(TypeOpenAI, "chat", `["x*"]`), in: ProviderInput{BaseURL: str("https://y.example/v1")},
			wantFormat: "chat", wantModels: `["x*"]`},
		{name: "patch clears the list", stored: stored(TypeOpenAI, "chat", `["x*"]`), in: ProviderInput{ResponsesModels: list()},
			wantFormat: "chat", wantModels: `[]`},
		{name: "patch keeps the format", stored: stored(TypeOpenAICompatible, "responses", `[]`), in: ProviderInput{Name: str("q")},
			wantFormat: "responses", wantModels: `[]`},
		{name: "same type keeps the list", stored: stored(TypeOpenAI, "chat", `["x*"]`), in: ProviderInput{Type: str(TypeOpenAI)},
			wantFormat: "chat", wantModels: `["x*"]`},
		{name: "type change resets the list", stored: stored(TypeOpenAI, "chat", `["x*"]`), in: ProviderInput{Type: str(TypeOpenAICompatible)},
			wantFormat: "chat", wantModels: `[]`},
		{name: "type change to openai takes the default", stored: stored(TypeOpenAICompatible, "chat", `[]`),
			in: ProviderInput{Type: str(TypeOpenAI)}, wantFormat: "chat", wantModels: `["*codex*","o1-pro*","o3-pro*"]`},
		{name: "type change to anthropic with responses refused", stored: stored(TypeOpenAICompatible, "responses", `[]`),
			in: ProviderInput{Type: str(TypeAnthropic)}, badFields: []string{"upstream_format"}},
		{name: "type change to anthropic with chat", stored: stored(TypeOpenAICompatible, "responses", `[]`),
			in: ProviderInput{Type: str(TypeAnthropic), UpstreamFormat: str("chat")}, wantFormat: "chat", wantModels: `[]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p db.Provider
			if c.stored != nil {
				p = *c.stored
			}
			err := applyProvider(&p, c.in, c.stored == nil, nil)
			if len(c.badFields) > 0 {
				if err == nil {
					t.Fatalf("accepted: %+v", p)
				}
				e := errs.As(err)
				if e.Code != errs.Invalid {
					t.Fatalf("accepted: %+v", p)
				}
				for _, f := range c.badFields {
					if _, ok := e.Fields[f]; !ok {
						t.Errorf("no message for %s: %v", f, e.Fields)
					}
				}
				if len(e.Fields) != len(c.badFields) {
					t.Errorf("fields %v, want only %v", e.Fields, c.badFields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.UpstreamFormat != c.wantFormat || p.ResponsesModels != c.wantModels {
				t.Fatalf("got %q %s, want %q %s", p.UpstreamFormat, p.ResponsesModels, c.wantFormat, c.wantModels)
			}
		})
	}
}

func withFormat(in ProviderInput, f string) ProviderInput { in.UpstreamFormat = &f; return in }

func withModels(in ProviderInput, l *[]string) ProviderInput { in.ResponsesModels = l; return in }

func stored(typ, format, models string) *db.Provider {
	return &db.Provider{ID: 7, Name: "p", Type: typ, BaseURL: "https://x.example/v1", Resilience: "{}", Strategy: "priority",
		UpstreamFormat: format, ResponsesModels: models}
}
