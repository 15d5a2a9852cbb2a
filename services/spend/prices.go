package spend

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// builtInJSON is the built-in price table: public list prices per million tokens, kept as the
// data file it was collected as (LiteLLM's open price table, MIT) so a refresh is a copy, not
// an edit of code.
//
//go:embed model-prices.json
var builtInJSON []byte

// SourceKind says which part of the price table a price came from.
type SourceKind uint8

// The parts of the price table, in the order Lookup asks them.
const (
	SourceNone     SourceKind = iota // no price: the model's tokens count, its cost is unknown
	SourceOverride                   // the operator's price for exactly this provider/model
	SourceGlob                       // the operator's price for a pattern over provider/model
	SourceBuiltIn                    // the built-in list price of the upstream model id
)

// String is the kind's name in the API ("override", "glob", "built_in", "none").
func (k SourceKind) String() string {
	switch k {
	case SourceOverride:
		return "override"
	case SourceGlob:
		return "glob"
	case SourceBuiltIn:
		return "built_in"
	}
	return "none"
}

// Source says where a price came from, for the dashboard and the API: the kind, and the
// override's key, the pattern, or the built-in entry's model id.
type Source struct {
	Kind SourceKind
	Name string
}

// familyOf is the price-table provider a provider type belongs to: the one whose models it
// serves first. Compatible types serve whatever their server hosts, so they only prefer it.
func familyOf(providerType string) string {
	switch {
	case strings.HasPrefix(providerType, "anthropic"):
		return "anthropic"
	case strings.HasPrefix(providerType, "openai"), providerType == "codex":
		return "openai"
	}
	return ""
}

// BuiltIn is the built-in price table, read once from the embedded data file (LoadBuiltIn) and
// immutable afterwards.
type BuiltIn struct {
	about   string
	entries []builtInEntry
	// index maps every id a model is asked for by (its own id, the bare alias of a dated
	// snapshot, the dotted spelling of a version) to its entries, best first.
	index map[string][]int32
}

type builtInEntry struct {
	id       string
	provider string // the table's "provider": anthropic, openai, gemini, …
	price    Price
}

// builtInFile is the data file's shape.
type builtInFile struct {
	About  string `json:"about"`
	Models map[string]struct {
		Provider               string   `json:"provider"`
		Mode                   string   `json:"mode"`
		InputPerMTok           *float64 `json:"input_per_mtok"`
		OutputPerMTok          *float64 `json:"output_per_mtok"`
		CacheWritePerMTok      float64  `json:"cache_write_per_mtok"`
		CacheReadPerMTok       float64  `json:"cache_read_per_mtok"`
		InputAbove200kPerMTok  float64  `json:"input_above_200k_per_mtok"`
		OutputAbove200kPerMTok float64  `json:"output_above_200k_per_mtok"`
	} `json:"models"`
}

// LoadBuiltIn reads the embedded price table.
func LoadBuiltIn() (*BuiltIn, error) { return ParseBuiltIn(builtInJSON) }

// ParseBuiltIn reads a price table in the data file's format. Only text models are kept: mode
// "chat", and "responses" (models OpenAI serves only on /v1/responses, which the gateway
// proxies too). An entry without an input or output price, or with a price that is negative
// or not finite, is an error: the file is ours, so a bad one must fail the tests, not bill 0.
func ParseBuiltIn(data []byte) (*BuiltIn, error) {
	var f builtInFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("built-in prices: %w", err)
	}
	b := &BuiltIn{about: f.About, index: map[string][]int32{}}
	for _, id := range slicesSortedKeys(f.Models) {
		m := f.Models[id]
		if m.Mode != "chat" && m.Mode != "responses" {
			continue
		}
		if m.InputPerMTok == nil || m.OutputPerMTok == nil {
			return nil, fmt.Errorf("built-in prices: %s has no input or output price", id)
		}
		p := Price{InputPerMTok: *m.InputPerMTok, OutputPerMTok: *m.OutputPerMTok, CacheWritePerMTok: m.CacheWritePerMTok,
			CacheReadPerMTok: m.CacheReadPerMTok, InputAbove200kPerMTok: m.InputAbove200kPerMTok, OutputAbove200kPerMTok: m.OutputAbove200kPerMTok}
		if !p.valid(math.Inf(1)) {
			return nil, fmt.Errorf("built-in prices: %s has a negative or non-finite price", id)
		}
		b.entries = append(b.entries, builtInEntry{id: strings.ToLower(id), provider: m.Provider, price: p})
	}
	b.buildIndex()
	return b, nil
}

// slicesSortedKeys returns a map's keys in order, so the table is built the same every time.
func slicesSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// valid reports whether every price is in [0, max] (which also refuses NaN).
func (p Price) valid(max float64) bool {
	for _, v := range []float64{p.InputPerMTok, p.OutputPerMTok, p.CacheWritePerMTok, p.CacheReadPerMTok,
		p.InputAbove200kPerMTok, p.OutputAbove200kPerMTok} {
		if !(v >= 0 && v <= max) {
			return false
		}
	}
	return true
}

// buildIndex files every entry under the ids it may be asked for. An entry's own id ranks
// first; the bare alias of a dated snapshot (claude-sonnet-4 for claude-sonnet-4-20250514)
// ranks after any entry that has that id itself, newest snapshot first. Each id is also filed
// with its versions dotted (claude-sonnet-4.5 for claude-sonnet-4-5), as OpenRouter and
// Copilot spell them.
func (b *BuiltIn) buildIndex() {
	type cand struct {
		i    int32
		rank int // 0: the entry's own id, 1: its dotted spelling, 2: an alias of a snapshot
	}
	cands := map[string][]cand{}
	add := func(key string, i int, rank int) {
		for _, c := range cands[key] {
			if c.i == int32(i) {
				return
			}
		}
		cands[key] = append(cands[key], cand{int32(i), rank})
	}
	for i, e := range b.entries {
		add(e.id, i, 0)
		add(dotted(e.id), i, 1)
		if bare := stripDate(e.id); bare != e.id {
			add(bare, i, 2)
			add(dotted(bare), i, 2)
		}
	}
	for key, list := range cands {
		slices.SortStableFunc(list, func(x, y cand) int {
			if x.rank != y.rank {
				return x.rank - y.rank
			}
			return strings.Compare(b.entries[y.i].id, b.entries[x.i].id) // newest snapshot first
		})
		idx := make([]int32, len(list))
		for j, c := range list {
			idx[j] = c.i
		}
		b.index[key] = idx
	}
}

// Len is the number of models the built-in table prices.
func (b *BuiltIn) Len() int { return len(b.entries) }

// About says where the built-in prices come from and how old they are.
func (b *BuiltIn) About() string { return b.about }

// find returns the built-in price of an upstream model id, tolerating what upstreams do to
// ids: a path before the id (openai/gpt-4o, models/gemini-pro-latest), a :latest tag, a
// dated snapshot instead of the bare alias or the other way round (-20250514, -2025-04-14,
// @20250514), -latest for the newest snapshot, a version written with a dot, upper case.
// Entries of the provider type's family are preferred over equal ids of other providers.
func (b *BuiltIn) find(family, model string) (*builtInEntry, bool) {
	m := model
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	m = strings.TrimSuffix(m, ":latest")
	if hasUpper(m) {
		m = strings.ToLower(m) // the one allocation, for the rare id in capitals
	}
	keys := [3]string{m, stripDate(m), strings.TrimSuffix(m, "-latest")}
	for pass := 0; pass < 2; pass++ {
		for k, key := range keys {
			if key == "" || (k > 0 && (key == keys[0] || key == keys[k-1])) {
				continue
			}
			for _, i := range b.index[key] {
				if e := &b.entries[i]; pass == 1 || family == "" || e.provider == family {
					return e, true
				}
			}
		}
		if family == "" {
			break // the first pass already took any entry
		}
	}
	return nil, false
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// stripDate removes a snapshot date from the end of a model id: -YYYYMMDD, @YYYYMMDD (Vertex)
// or -YYYY-MM-DD. Anything else is returned as it is.
func stripDate(id string) string {
	n := len(id)
	if n > 9 && (id[n-9] == '-' || id[n-9] == '@') && isDate8(id[n-8:]) {
		return id[:n-9]
	}
	if n > 11 && id[n-11] == '-' && id[n-6] == '-' && id[n-3] == '-' &&
		isDigits(id[n-10:n-6]) && isDigits(id[n-5:n-3]) && isDigits(id[n-2:]) && id[n-10:n-8] == "20" {
		return id[:n-11]
	}
	return id
}

// isDate8 reports whether s is eight digits that start like a year of this century.
func isDate8(s string) bool { return len(s) == 8 && s[:2] == "20" && isDigits(s) }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// dotted writes the versions in an id with a dot: every single digit, dash, single digit
// (claude-sonnet-4-5 → claude-sonnet-4.5, claude-3-7-sonnet → claude-3.7-sonnet). Longer
// numbers (a date, 0613) are left alone.
func dotted(id string) string {
	digit := func(i int) bool { return i >= 0 && i < len(id) && id[i] >= '0' && id[i] <= '9' }
	var b []byte
	for i := 1; i+1 < len(id); i++ {
		if id[i] == '-' && digit(i-1) && !digit(i-2) && digit(i+1) && !digit(i+2) {
			if b == nil {
				b = []byte(id)
			}
			b[i] = '.'
		}
	}
	if b == nil {
		return id
	}
	return string(b)
}

// pmKey is an exact provider/model, as a map key that needs no string built to look up.
type pmKey struct{ provider, model string }

// Table is the price table the gateway bills with: the operator's prices per provider/model,
// then their patterns, then the built-in list prices. It is immutable; a save builds a new one.
type Table struct {
	builtIn *BuiltIn
	exact   map[pmKey]priced
	// byProvider holds the patterns that name their provider literally (openai/gpt-4o*), by
	// that provider; anyProvider the others (*/llama-*). Each list is in precedence order, and
	// rank is a pattern's place in the order of all of them.
	byProvider  map[string][]*pattern
	anyProvider []*pattern
}

// priced is an operator's price with its source, built once so Lookup allocates nothing.
type priced struct {
	price  Price
	source Source
}

// NewTable builds a table from the built-in prices and the operator's prices by key
// (provider/model, or a pattern over it); the keys must have passed CheckPriceKey.
func NewTable(b *BuiltIn, overrides map[string]Price) (*Table, error) {
	t := &Table{builtIn: b, exact: map[pmKey]priced{}, byProvider: map[string][]*pattern{}}
	var pats []*pattern
	for key, p := range overrides {
		if !isPattern(key) {
			provider, model, _ := strings.Cut(key, "/")
			t.exact[pmKey{provider, model}] = priced{p, Source{SourceOverride, key}}
			continue
		}
		pat, err := compilePattern(key)
		if err != nil {
			return nil, err
		}
		pat.priced = priced{p, Source{SourceGlob, key}}
		pats = append(pats, pat)
	}
	// The most specific pattern wins: the most literal characters, then the first in order.
	slices.SortFunc(pats, func(x, y *pattern) int {
		if x.literals != y.literals {
			return y.literals - x.literals
		}
		return strings.Compare(x.text, y.text)
	})
	for i, pat := range pats {
		pat.rank = i
		if pat.provider != "" {
			t.byProvider[pat.provider] = append(t.byProvider[pat.provider], pat)
		} else {
			t.anyProvider = append(t.anyProvider, pat)
		}
	}
	return t, nil
}

// Lookup is the price of a request delivered by provider (its name; providerType its wire type
// from the catalog) for the upstream model id. ok is false when nothing prices it: the caller
// counts the tokens and shows "no price", never 0 USD. It runs on the request path: map
// lookups and a few comparisons, no allocation for lower-case ids.
func (t *Table) Lookup(provider, providerType, model string) (Price, Source, bool) {
	if p, ok := t.exact[pmKey{provider, model}]; ok {
		return p.price, p.source, true
	}
	if pat := t.matchPattern(provider, model); pat != nil {
		return pat.price, pat.source, true
	}
	if e, ok := t.builtIn.find(familyOf(providerType), model); ok {
		return e.price, Source{SourceBuiltIn, e.id}, true
	}
	return Price{}, Source{}, false
}

// matchPattern is the operator's pattern that prices provider/model, nil when none does.
func (t *Table) matchPattern(provider, model string) *pattern {
	var best *pattern
	for _, p := range t.byProvider[provider] {
		if p.match(provider, model) {
			best = p
			break
		}
	}
	for _, p := range t.anyProvider {
		if best != nil && p.rank > best.rank {
			break
		}
		if p.match(provider, model) {
			return p
		}
	}
	return best
}

// BuiltIn is the table's built-in part.
func (t *Table) BuiltIn() *BuiltIn { return t.builtIn }
