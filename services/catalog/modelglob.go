package catalog

import (
	"fmt"
	"path"
	"unicode"
	"unicode/utf8"

	"switchyard/services/errs"
	"switchyard/services/names"
)

// A responses_models pattern has path.Match's syntax (`*` any text, `?` one character, `[a-z]`
// one of, `[^x]` none of, `\` to escape) and matches the whole upstream model id (without the
// "provider/" a client writes before it), case-insensitively, with one difference from
// path.Match: `*` and `?` also match `/` (some upstream model ids have slashes of their own).
// It is compiled once, when the registry is built, so matching on the request path is a walk
// over the model id that allocates nothing.

// Bounds of responses_models.
const (
	// MaxResponsesModels bounds how many patterns a provider has.
	MaxResponsesModels = 50
	// MaxResponsesModelLen bounds one pattern, in characters.
	MaxResponsesModelLen = 200
)

// modelGlob is a compiled responses_models pattern: a sequence of single-character tokens and
// stars, matched with the classic backtracking-to-the-last-star walk (linear in practice; a
// star never needs more than the one backtrack point because every other token takes exactly
// one character).
type modelGlob struct {
	toks []globTok
}

type globKind uint8

const (
	globLiteral globKind = iota // one character, compared case-insensitively
	globAny                     // ?
	globStar                    // *
	globClass                   // [...]
)

// globTok is one token of a pattern.
type globTok struct {
	kind globKind
	// r is a literal's character, lower-cased.
	r rune
	// ranges and negate are a class's.
	ranges [][2]rune
	negate bool
}

// compileModelGlob compiles a pattern that passed checkResponsesModel.
func compileModelGlob(src string) (modelGlob, error) {
	if _, err := path.Match(src, ""); err != nil {
		return modelGlob{}, fmt.Errorf("model pattern %q: %w", src, err)
	}
	var g modelGlob
	for i := 0; i < len(src); {
		switch c := src[i]; c {
		case '*':
			for i < len(src) && src[i] == '*' {
				i++
			}
			g.toks = append(g.toks, globTok{kind: globStar})
		case '?':
			g.toks = append(g.toks, globTok{kind: globAny})
			i++
		case '[':
			t, n := parseGlobClass(src[i:])
			g.toks = append(g.toks, t)
			i += n
		case '\\':
			r, n := utf8.DecodeRuneInString(src[i+1:])
			g.toks = append(g.toks, globTok{kind: globLiteral, r: lower(r)})
			i += 1 + n
		default:
			r, n := utf8.DecodeRuneInString(src[i:])
			g.toks = append(g.toks, globTok{kind: globLiteral, r: lower(r)})
			i += n
		}
	}
	return g, nil
}

// parseGlobClass reads a [...] class at the start of s (valid path.Match syntax) and returns it
// with the bytes it took.
func parseGlobClass(s string) (globTok, int) {
	t := globTok{kind: globClass}
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

// match reports whether the pattern matches the whole of model, ignoring case.
func (g *modelGlob) match(model string) bool {
	toks := g.toks
	ti, si := 0, 0
	starTi, starSi := -1, 0
	for si < len(model) {
		r, w := rune(model[si]), 1
		if r >= utf8.RuneSelf {
			r, w = utf8.DecodeRuneInString(model[si:])
		}
		if ti < len(toks) {
			switch t := &toks[ti]; t.kind {
			case globStar:
				// Let the star take nothing for now; come back here to give it one more
				// character when what follows fails.
				starTi, starSi = ti, si
				ti++
				continue
			case globAny:
				ti, si = ti+1, si+w
				continue
			case globLiteral:
				if lower(r) == t.r {
					ti, si = ti+1, si+w
					continue
				}
			case globClass:
				if t.classMatches(r) {
					ti, si = ti+1, si+w
					continue
				}
			}
		}
		if starTi < 0 {
			return false
		}
		_, sw := utf8.DecodeRuneInString(model[starSi:])
		starSi += sw
		if next := starTi + 1; next < len(toks) && toks[next].kind == globLiteral {
			// Skip to where the literal after the star can start.
			for starSi < len(model) {
				r, w := utf8.DecodeRuneInString(model[starSi:])
				if lower(r) == toks[next].r {
					break
				}
				starSi += w
			}
		}
		ti, si = starTi+1, starSi
	}
	for ti < len(toks) && toks[ti].kind == globStar {
		ti++
	}
	return ti == len(toks)
}

// classMatches reports whether a character is in the class, in any case.
func (t *globTok) classMatches(r rune) bool {
	in := t.inRanges(r)
	if !in {
		if l := lower(r); l != r {
			in = t.inRanges(l)
		} else if u := unicode.ToUpper(r); u != r {
			in = t.inRanges(u)
		}
	}
	return in != t.negate
}

func (t *globTok) inRanges(r rune) bool {
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

// checkResponsesModel says what is wrong with one responses_models pattern, if anything: it
// must be 1–MaxResponsesModelLen characters of printable UTF-8 (the caller trims surrounding
// spaces) and valid path.Match syntax.
func checkResponsesModel(s string) (errs.Msg, bool) {
	switch {
	case s == "":
		return errs.M("err.pattern_empty"), true
	case !utf8.ValidString(s):
		return errs.M("err.name_utf8"), true
	case utf8.RuneCountInString(s) > MaxResponsesModelLen:
		return errs.M("err.responses_model_too_long", MaxResponsesModelLen), true
	}
	for _, r := range s {
		if unicode.IsControl(r) || names.Invisible(r) {
			return errs.M("err.responses_model_character", fmt.Sprintf("U+%04X", r)), true
		}
	}
	if _, err := path.Match(s, ""); err != nil { // path.Match checks the whole pattern
		return errs.M("err.responses_model_syntax", s), true
	}
	return errs.Msg{}, false
}
