// Package names checks the names operators give to what they configure (providers, connections,
// client keys, combos). A name is shown on the dashboard, written to logs and Prometheus labels
// and read back by people, so it must be text a person can see: no control characters, no
// invisible characters that reorder or hide text (a bidirectional override can make
// "prod‮ved" read as "proddev"), no line breaks, no surrounding spaces.
package names

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"switchyard/services/errs"
)

// MaxLen is the most characters (not bytes) a name may have.
const MaxLen = 100

// Check says what is wrong with a name, if anything. Callers trim surrounding spaces first where
// a form or an API should forgive them; whatever is left must pass. The message's key is one of
// err.name_required (empty or longer than MaxLen), err.name_utf8, err.name_spaces and
// err.name_invisible (with the offending character as U+XXXX).
func Check(name string) (errs.Msg, bool) {
	switch {
	case name == "":
		return errs.M("err.name_required"), true
	case !utf8.ValidString(name):
		return errs.M("err.name_utf8"), true
	case utf8.RuneCountInString(name) > MaxLen:
		return errs.M("err.name_required"), true
	}
	if i := strings.IndexFunc(name, Invisible); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return errs.M("err.name_invisible", codePoint(r)), true
	}
	first, _ := utf8.DecodeRuneInString(name)
	last, _ := utf8.DecodeLastRuneInString(name)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return errs.M("err.name_spaces"), true
	}
	return errs.Msg{}, false
}

// CheckPattern says what is wrong with a pattern over provider/model names (or a key that may be
// one), if anything, before its syntax is checked: it must be 1–maxLen bytes of valid UTF-8 without
// spaces around it or invisible characters. emptyKey and longKey are the message keys of an empty
// and a too long text (the latter with maxLen); the others are err.name_utf8, err.name_spaces and
// keys.err.pattern_character (with the offending character as U+XXXX).
func CheckPattern(s string, maxLen int, emptyKey, longKey string) (errs.Msg, bool) {
	switch {
	case s == "":
		return errs.M(emptyKey), true
	case len(s) > maxLen:
		return errs.M(longKey, maxLen), true
	case !utf8.ValidString(s):
		return errs.M("err.name_utf8"), true
	case strings.TrimSpace(s) != s:
		return errs.M("err.name_spaces"), true
	}
	if i := strings.IndexFunc(s, Invisible); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return errs.M("keys.err.pattern_character", codePoint(r)), true
	}
	return errs.Msg{}, false
}

// Invisible reports whether r has no place in a name: a control character (Unicode category Cc:
// C0, DEL, C1), a line or paragraph separator (Zl, Zp), a bidirectional control (the embeddings,
// overrides and isolates U+202A–U+202E and U+2066–U+2069, the marks U+200E, U+200F and U+061C), or
// a zero-width character that only hides text (U+200B, U+2060, U+FEFF). The zero-width joiners
// U+200C and U+200D stay allowed: emoji sequences and several scripts need them.
func Invisible(r rune) bool {
	switch {
	case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	switch r {
	case 0x200E, 0x200F, 0x061C, 0x200B, 0x2060, 0xFEFF:
		return true
	}
	return false
}

// codePoint writes r as U+XXXX.
func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }
