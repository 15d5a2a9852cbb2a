package clientkeys

import (
	"fmt"
	"path"
	"strings"

	"switchyard/services/errs"
	"switchyard/services/glob"
	"switchyard/services/names"
)

// MaxPatternLen bounds one allowed_models pattern, in bytes (a model name is at most 256).
const MaxPatternLen = 300

// MaxPatterns bounds how many allowed_models patterns a key has.
const MaxPatterns = 200

// ModelPatterns is a key's allowed_models, compiled once when the keys are loaded so the check on
// the request path is a map lookup, a few prefix comparisons and, for the rare pattern that needs
// one, a compiled glob (services/glob, the matcher of price patterns and responses_models too). A
// nil or empty list allows every model.
//
// Patterns have path.Match's syntax (`*`, `?`, `[a-z]`, `[^x]`, `\` to escape) and match the
// whole model string as the client wrote it (provider/model or a combo name), case-sensitively,
// with one difference: `*` and `?` also match `/`. So `openrouter/*` allows every model of
// openrouter, `openrouter/meta-llama/llama-4` included (whose upstream id has a slash itself), `*`
// alone allows everything, and `anthropic/claude-*` every Claude model of that provider.
type ModelPatterns struct {
	all      bool                // some pattern is "*"
	exact    map[string]struct{} // patterns without wildcards
	prefixes []string            // patterns whose only wildcard is one trailing "*"
	globs    []*glob.Pattern     // everything else
	source   []string
}

// CompileModelPatterns compiles allowed_models; the patterns must have passed CheckModelPattern.
func CompileModelPatterns(list []string) (*ModelPatterns, error) {
	if len(list) == 0 {
		return nil, nil
	}
	p := &ModelPatterns{exact: map[string]struct{}{}, source: list}
	for _, s := range list {
		if _, bad := CheckModelPattern(s); bad {
			return nil, fmt.Errorf("invalid model pattern %q", s)
		}
		switch {
		case s == "*":
			p.all = true
		case !strings.ContainsAny(s, `*?[\`):
			p.exact[s] = struct{}{}
		case strings.IndexAny(s, `*?[\`) == len(s)-1 && s[len(s)-1] == '*':
			p.prefixes = append(p.prefixes, s[:len(s)-1])
		default:
			g, err := glob.Compile(s, false)
			if err != nil {
				return nil, fmt.Errorf("model pattern %q: %w", s, err)
			}
			p.globs = append(p.globs, g)
		}
	}
	return p, nil
}

// Match reports whether a model may be addressed. A nil list allows everything.
func (p *ModelPatterns) Match(model string) bool {
	if p == nil || p.all {
		return true
	}
	if _, ok := p.exact[model]; ok {
		return true
	}
	for _, pre := range p.prefixes {
		if strings.HasPrefix(model, pre) {
			return true
		}
	}
	for _, g := range p.globs {
		if g.Match(model) {
			return true
		}
	}
	return false
}

// Patterns returns the patterns as written.
func (p *ModelPatterns) Patterns() []string {
	if p == nil {
		return nil
	}
	return p.source
}

// CheckModelPattern says what is wrong with one allowed_models pattern, if anything: it must be
// 1–MaxPatternLen bytes of printable UTF-8 without spaces around it, and valid path.Match syntax.
func CheckModelPattern(s string) (errs.Msg, bool) {
	if m, bad := names.CheckPattern(s, MaxPatternLen, "keys.err.pattern_empty", "keys.err.pattern_too_long"); bad {
		return m, true
	}
	if _, err := path.Match(s, ""); err != nil { // path.Match checks the whole pattern
		return errs.M("keys.err.pattern_syntax", s), true
	}
	return errs.Msg{}, false
}
