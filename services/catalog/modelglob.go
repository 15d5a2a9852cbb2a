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
// It is compiled (by package glob, ignoring case) once, when the registry is built, so matching
// on the request path is a walk over the model id that allocates nothing.

// Bounds of responses_models.
const (
	// MaxResponsesModels bounds how many patterns a provider has.
	MaxResponsesModels = 50
	// MaxResponsesModelLen bounds one pattern, in characters.
	MaxResponsesModelLen = 200
)

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
