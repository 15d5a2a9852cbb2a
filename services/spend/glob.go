package spend

import (
	"fmt"
	"strings"

	"switchyard/services/glob"
)

// A price pattern has the syntax of a client key's allowed_models pattern: path.Match's (`*`
// any text, `?` one character, `[a-z]`, `[^x]`, `\` to escape), matched against the whole
// provider/model, case-sensitively, except that `*` and `?` also match `/`. It is matched
// against the provider and the model as they come, without joining them into one string, so
// the request path allocates nothing.

// isPattern reports whether a price key is a pattern rather than one provider/model.
func isPattern(key string) bool { return strings.ContainsAny(key, `*?[\`) }

// pattern is a compiled price pattern.
type pattern struct {
	text string
	// provider is the provider the pattern names literally (the text before its first "/" when
	// no wildcard comes before it), "" when it may match several.
	provider string
	glob     *glob.Pattern
	// literals counts the pattern's literal characters: the more, the more specific.
	literals int
	rank     int
	priced
}

// compilePattern compiles a pattern that passed path.Match's syntax check.
func compilePattern(src string) (*pattern, error) {
	g, err := glob.Compile(src, false)
	if err != nil {
		return nil, fmt.Errorf("price pattern %q: %w", src, err)
	}
	p := &pattern{text: src, glob: g, literals: g.Literals()}
	if i := strings.IndexByte(src, '/'); i > 0 && !isPattern(src[:i]) {
		p.provider = src[:i]
	}
	return p, nil
}

// match reports whether the pattern matches provider/model.
func (p *pattern) match(provider, model string) bool { return p.glob.MatchJoined(provider, model) }
