package spend

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// A price pattern has the syntax of a client key's allowed_models pattern: path.Match's (`*`
// any text, `?` one character, `[a-z]`, `[^x]`, `\` to escape), matched against the whole
// provider/model, case-sensitively, except that `*` and `?` also match `/`. It is matched
// against the provider and the model as they come, without joining them into one string, so
// the request path allocates nothing.

// isPattern reports whether a price key is a pattern rather than one provider/model.
func isPattern(key string) bool { return strings.ContainsAny(key, `*?[\`) }

// pattern is a compiled price pattern: chunks separated by stars.
type pattern struct {
	text string
	// provider is the provider the pattern names literally (the text before its first "/" when
	// no wildcard comes before it), "" when it may match several.
	provider string
	chunks   []chunk
	// literals counts the pattern's literal characters: the more, the more specific.
	literals int
	rank     int
	priced
}

// chunk is a run of single-character tokens, preceded by a star unless it opens the pattern.
type chunk struct {
	star bool
	toks []token
	// lit is the chunk's text when every token is a literal (most chunks are): it is then
	// compared and searched for as a string.
	lit string
}

// token matches one character: a literal, any character, or a class.
type token struct {
	kind   tokenKind
	r      rune
	ranges [][2]rune
	negate bool
}

type tokenKind uint8

const (
	tokLiteral tokenKind = iota
	tokAny
	tokClass
)

// compilePattern compiles a pattern that passed path.Match's syntax check.
func compilePattern(src string) (*pattern, error) {
	if _, err := path.Match(src, ""); err != nil {
		return nil, fmt.Errorf("price pattern %q: %w", src, err)
	}
	p := &pattern{text: src}
	if i := strings.IndexByte(src, '/'); i > 0 && !isPattern(src[:i]) {
		p.provider = src[:i]
	}
	cur := chunk{}
	for i := 0; i < len(src); {
		switch c := src[i]; c {
		case '*':
			if cur.star || len(cur.toks) > 0 || i > 0 {
				p.chunks = append(p.chunks, cur)
			}
			for i < len(src) && src[i] == '*' {
				i++
			}
			cur = chunk{star: true}
		case '?':
			cur.toks = append(cur.toks, token{kind: tokAny})
			i++
		case '[':
			t, n := parseClass(src[i:])
			cur.toks = append(cur.toks, t)
			i += n
		case '\\':
			r, n := utf8.DecodeRuneInString(src[i+1:])
			cur.toks = append(cur.toks, token{kind: tokLiteral, r: r})
			p.literals++
			i += 1 + n
		default:
			r, n := utf8.DecodeRuneInString(src[i:])
			cur.toks = append(cur.toks, token{kind: tokLiteral, r: r})
			p.literals++
			i += n
		}
	}
	p.chunks = append(p.chunks, cur)
	for i := range p.chunks {
		c := &p.chunks[i]
		var b strings.Builder
		for _, t := range c.toks {
			if t.kind != tokLiteral {
				b.Reset()
				break
			}
			b.WriteRune(t.r)
		}
		if b.Len() > 0 {
			c.lit = b.String()
		}
	}
	return p, nil
}

// parseClass reads a [...] class at the start of s (valid path.Match syntax) and returns it
// with the bytes it took.
func parseClass(s string) (token, int) {
	t := token{kind: tokClass}
	i := 1
	if s[i] == '^' {
		t.negate = true
		i++
	}
	read := func() rune {
		if s[i] == '\\' {
			i++
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		return r
	}
	for s[i] != ']' {
		lo := read()
		hi := lo
		if s[i] == '-' {
			i++
			hi = read()
		}
		t.ranges = append(t.ranges, [2]rune{lo, hi})
	}
	return t, i + 1
}

// joined is provider + "/" + model without building it.
type joined struct{ a, b string }

func (j joined) len() int { return len(j.a) + 1 + len(j.b) }

// runeAt decodes the character at byte offset i.
func (j joined) runeAt(i int) (rune, int) {
	switch {
	case i < len(j.a):
		if c := j.a[i]; c < utf8.RuneSelf {
			return rune(c), 1
		}
		return utf8.DecodeRuneInString(j.a[i:])
	case i == len(j.a):
		return '/', 1
	}
	if c := j.b[i-len(j.a)-1]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(j.b[i-len(j.a)-1:])
}

// hasPrefixAt reports whether lit appears at byte offset i.
func (j joined) hasPrefixAt(i int, lit string) bool {
	if i < 0 || i+len(lit) > j.len() {
		return false
	}
	la, k := len(j.a), 0
	if i < la {
		n := min(la-i, len(lit))
		if j.a[i:i+n] != lit[:n] {
			return false
		}
		k, i = n, i+n
	}
	if k == len(lit) {
		return true
	}
	if i == la {
		if lit[k] != '/' {
			return false
		}
		k, i = k+1, i+1
	}
	bi := i - la - 1
	return j.b[bi:bi+len(lit)-k] == lit[k:]
}

// index is the first offset at or after from where lit appears, -1 if none.
func (j joined) index(lit string, from int) int {
	la := len(j.a)
	if from <= la {
		if from < la {
			if i := strings.Index(j.a[from:], lit); i >= 0 {
				return from + i
			}
		}
		for p := max(from, la-len(lit)+1); p <= la; p++ { // across the slash
			if j.hasPrefixAt(p, lit) {
				return p
			}
		}
	}
	bfrom := max(from, la+1) - la - 1
	if i := strings.Index(j.b[bfrom:], lit); i >= 0 {
		return la + 1 + bfrom + i
	}
	return -1
}

// match reports whether the pattern matches provider/model.
func (p *pattern) match(provider, model string) bool {
	j := joined{provider, model}
	n := j.len()
	pos := 0
	for ci, c := range p.chunks {
		last := ci == len(p.chunks)-1
		switch {
		case !c.star:
			end, ok := c.matchAt(j, pos)
			if !ok {
				return false
			}
			pos = end
			continue
		case len(c.toks) == 0: // a trailing star takes the rest
			return true
		case last && c.lit != "": // the last chunk ends where the name ends
			at := n - len(c.lit)
			return at >= pos && j.hasPrefixAt(at, c.lit)
		case c.lit != "":
			// The leftmost place a chunk matches leaves the most for the chunks after it.
			at := j.index(c.lit, pos)
			if at < 0 {
				return false
			}
			pos = at + len(c.lit)
			continue
		}
		found := false
		for at := pos; at < n; {
			if end, ok := c.matchAt(j, at); ok && (!last || end == n) {
				pos, found = end, true
				break
			}
			_, w := j.runeAt(at)
			at += w
		}
		if !found {
			return false
		}
	}
	return pos == n
}

// matchAt matches the chunk's tokens at byte offset i and returns where they end.
func (c chunk) matchAt(j joined, i int) (int, bool) {
	if c.lit != "" {
		return i + len(c.lit), j.hasPrefixAt(i, c.lit)
	}
	n := j.len()
	for k := range c.toks {
		if i >= n {
			return 0, false
		}
		r, w := j.runeAt(i)
		if !c.toks[k].matches(r) {
			return 0, false
		}
		i += w
	}
	return i, true
}

func (t *token) matches(r rune) bool {
	switch t.kind {
	case tokLiteral:
		return r == t.r
	case tokAny:
		return true
	}
	in := false
	for _, rg := range t.ranges {
		if rg[0] <= r && r <= rg[1] {
			in = true
			break
		}
	}
	return in != t.negate
}
