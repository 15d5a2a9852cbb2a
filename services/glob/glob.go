// Package glob matches model names against patterns of path.Match's syntax (`*` any text, `?`
// one character, `[a-z]` one of, `[^x]` none of, `\` to escape) that match the whole name, with
// one difference from path.Match: `*` and `?` also match `/` (some upstream model ids have
// slashes of their own). A pattern is compiled once, when the table that holds it is built, so
// matching on the request path is a walk over the name that allocates nothing.
package glob

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pattern is a compiled pattern: chunks separated by stars.
type Pattern struct {
	chunks []chunk
	// fold: the pattern ignores case (its literals are stored lower-cased).
	fold bool
	// literals counts the pattern's literal characters.
	literals int
}

// chunk is a run of single-character tokens, preceded by a star unless it opens the pattern.
type chunk struct {
	star bool
	toks []token
	// lit is the chunk's text when every token is a literal (most chunks are) and case counts:
	// it is then compared and searched for as a string.
	lit string
}

// token matches one character: a literal, any character, or a class.
type token struct {
	kind tokenKind
	// r is a literal's character, lower-cased when the pattern ignores case.
	r rune
	// ranges and negate are a class's.
	ranges [][2]rune
	negate bool
}

type tokenKind uint8

const (
	tokLiteral tokenKind = iota
	tokAny
	tokClass
)

// Compile compiles a pattern; fold makes it ignore case. The error is path.Match's when the
// syntax is not valid.
func Compile(src string, fold bool) (*Pattern, error) {
	if _, err := path.Match(src, ""); err != nil {
		return nil, err
	}
	p := &Pattern{fold: fold}
	literal := func(r rune) token {
		p.literals++
		if fold {
			r = lower(r)
		}
		return token{kind: tokLiteral, r: r}
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
			cur.toks = append(cur.toks, literal(r))
			i += 1 + n
		default:
			r, n := utf8.DecodeRuneInString(src[i:])
			cur.toks = append(cur.toks, literal(r))
			i += n
		}
	}
	p.chunks = append(p.chunks, cur)
	if fold {
		// Case-insensitive chunks are matched a character at a time: a literal's lower case
		// is not always the lower case of the same bytes (the Kelvin sign lowers to "k").
		return p, nil
	}
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

// Literals counts the pattern's literal characters: the more, the more specific.
func (p *Pattern) Literals() int { return p.literals }

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

// Match reports whether the pattern matches the whole of name.
func (p *Pattern) Match(name string) bool {
	j := joined{a: name}
	return p.match(&j)
}

// MatchJoined reports whether the pattern matches a + "/" + b, without building it.
func (p *Pattern) MatchJoined(a, b string) bool {
	j := joined{a: a, b: b, sep: 1}
	return p.match(&j)
}

// joined is a, then "/" when sep is 1, then b: one name read from its parts.
type joined struct {
	a, b string
	sep  int
}

func (j *joined) len() int { return len(j.a) + j.sep + len(j.b) }

// runeAt decodes the character at byte offset i. The loops of match read an ASCII character of
// a themselves and call it only for the others: a call for every character costs more than the
// rest of the walk.
func (j *joined) runeAt(i int) (rune, int) {
	switch {
	case i < len(j.a):
		return utf8.DecodeRuneInString(j.a[i:])
	case i == len(j.a) && j.sep == 1:
		return '/', 1
	}
	bi := i - len(j.a) - j.sep
	if c := j.b[bi]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(j.b[bi:])
}

// hasPrefixAt reports whether lit appears at byte offset i.
func (j *joined) hasPrefixAt(i int, lit string) bool {
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
	if i == la && j.sep == 1 {
		if lit[k] != '/' {
			return false
		}
		k, i = k+1, i+1
	}
	bi := i - la - j.sep
	return j.b[bi:bi+len(lit)-k] == lit[k:]
}

// index is the first offset at or after from where lit appears, -1 if none.
func (j *joined) index(lit string, from int) int {
	la := len(j.a)
	if from <= la {
		if from < la {
			if i := strings.Index(j.a[from:], lit); i >= 0 {
				return from + i
			}
		}
		if j.sep == 0 {
			return -1
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

func (p *Pattern) match(j *joined) bool {
	n := j.len()
	pos := 0
	for ci := range p.chunks {
		c, last := &p.chunks[ci], ci == len(p.chunks)-1
		switch {
		case !c.star:
			end, ok := p.matchAt(c, j, pos)
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
		first := &c.toks[0]
		for at := pos; at < n; {
			// Most chunks open with a literal: the places it does not take are passed over
			// here.
			r, w := rune(0), 1
			if at < len(j.a) && j.a[at] < utf8.RuneSelf {
				r = rune(j.a[at])
			} else {
				r, w = j.runeAt(at)
			}
			if first.kind == tokLiteral {
				if p.fold {
					r = lower(r)
				}
				if r != first.r {
					at += w
					continue
				}
			}
			if end, ok := p.matchAt(c, j, at); ok && (!last || end == n) {
				pos, found = end, true
				break
			}
			at += w
		}
		if !found {
			return false
		}
	}
	return pos == n
}

// matchAt matches the chunk's tokens at byte offset i and returns where they end.
func (p *Pattern) matchAt(c *chunk, j *joined, i int) (int, bool) {
	if c.lit != "" {
		return i + len(c.lit), j.hasPrefixAt(i, c.lit)
	}
	n := j.len()
	for k := range c.toks {
		if i >= n {
			return 0, false
		}
		r, w := rune(0), 1
		if i < len(j.a) && j.a[i] < utf8.RuneSelf {
			r = rune(j.a[i])
		} else {
			r, w = j.runeAt(i)
		}
		if t := &c.toks[k]; t.kind == tokLiteral {
			if p.fold {
				r = lower(r)
			}
			if r != t.r {
				return 0, false
			}
		} else if !t.matches(r, p.fold) {
			return 0, false
		}
		i += w
	}
	return i, true
}

// matches reports whether a `?` or a class takes the character r; with fold, in any case.
// (matchAt compares a literal itself.)
func (t *token) matches(r rune, fold bool) bool {
	if t.kind == tokAny {
		return true
	}
	in := t.inRanges(r)
	if !in && fold {
		if l := lower(r); l != r {
			in = t.inRanges(l)
		} else if u := unicode.ToUpper(r); u != r {
			in = t.inRanges(u)
		}
	}
	return in != t.negate
}

func (t *token) inRanges(r rune) bool {
	for _, rg := range t.ranges {
		if rg[0] <= r && r <= rg[1] {
			return true
		}
	}
	return false
}

// lower lower-cases one character, ASCII without a table lookup.
func lower(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(r)
}
