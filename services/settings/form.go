package settings

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"switchyard/services/errs"
)

// Input is a setting as a form holds it: the text of its input (for a switch "true" when on),
// or the entries of a list with the text left in the list's add input.
type Input struct {
	Text   string
	List   []string
	Adding string
}

// AddSuffix ends the name of the input that adds entries to a list: the list's chips are posted
// under the setting's path, what was typed to add under path + AddSuffix.
const AddSuffix = ".add"

// FormInput reads the setting's input from a posted form (url.Values): the field named by its
// path and, for a list, the checked entries under that name plus the add input.
func (s *Setting) FormInput(form map[string][]string) Input {
	first := func(name string) string {
		if v := form[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	switch s.kind {
	case KindStatuses, KindCodes:
		return Input{List: slices.Clone(form[s.path]), Adding: first(s.path + AddSuffix)}
	case KindFamilies:
		return Input{Text: strings.ReplaceAll(first(s.path), "\r\n", "\n")}
	}
	return Input{Text: first(s.path)}
}

// Input is the value v of the setting as a form shows it.
func (s *Setting) Input(v any) Input {
	if s.input == nil || v == nil || !s.accepts(v) {
		return Input{}
	}
	return s.input(v)
}

// Parse reads a form's input into a value of the setting, or says why it cannot. shown is the
// input as the form should show it again (a list with the typed entries taken in, what could
// not be read left in the add input). The value is not yet validated: ranges, options and
// cross-field rules are Service.Apply's.
func (s *Setting) Parse(in Input) (v any, shown Input, problem *errs.Msg) {
	if s.parse == nil {
		return nil, in, msg("err.internal")
	}
	return s.parse(in)
}

// Values are a document's effective values by path (*Snapshot, *OAuthSnapshot).
type Values interface {
	Value(path string) any
}

// ReadForm reads the settings at paths from a posted form into changes: each value that
// differs from the effective one in snap (a value left alone keeps its layer), and a problem
// for each field that cannot be read. inputs holds each field as the form should show it again.
func ReadForm(snap Values, paths []string, form map[string][]string) (ch *Changes, inputs map[string]Input) {
	ch, inputs = NewChanges(), make(map[string]Input, len(paths))
	for _, p := range paths {
		s, ok := Lookup(p)
		if !ok {
			ch.Fail(p, errs.M("err.unknown_setting"))
			continue
		}
		v, shown, problem := s.Parse(s.FormInput(form))
		inputs[p] = shown
		switch {
		case problem != nil:
			ch.Fail(p, *problem)
		case !sameValue(v, snap.Value(p)):
			ch.Set(p, v)
		}
	}
	return ch, inputs
}

// sameValue reports whether two values of a setting are equal (lists compared by content).
func sameValue(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// numberRE accepts what a person types for a number: digits with an optional fraction after a
// point or a comma.
var numberRE = regexp.MustCompile(`^-?[0-9]+([.,][0-9]+)?$`)

// parseNumber reads a typed number ("007" is 7, "0,5" is 0.5); an empty field is required.
func parseNumber[T number](text string) (T, *errs.Msg) {
	var zero T
	text = strings.TrimSpace(text)
	if text == "" {
		return zero, msg("err.required")
	}
	if _, isFloat := any(zero).(float64); !isFloat {
		n, m := ParseWhole(text)
		if m != nil || int64(T(n)) != n {
			return zero, msg("err.whole_number")
		}
		return T(n), nil
	}
	if !numberRE.MatchString(text) {
		return zero, msg("err.number")
	}
	f, err := strconv.ParseFloat(strings.Replace(text, ",", ".", 1), 64)
	if err != nil {
		return zero, msg("err.number")
	}
	return T(f), nil
}

// ParseWhole reads a typed whole number; an empty field is required.
func ParseWhole(text string) (int64, *errs.Msg) {
	text = strings.TrimSpace(text)
	if text == "" {
		return 0, msg("err.required")
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, msg("err.whole_number")
	}
	return n, nil
}

// formatNumber writes a number as a form shows it: whole numbers without a fraction.
func formatNumber[T number](v T) string {
	switch v := any(v).(type) {
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// parseToggle reads a switch: a checked checkbox posts "true", an unchecked one nothing; a
// select of on/off posts "true" or "false".
func parseToggle(in Input) (bool, Input, *errs.Msg) {
	switch strings.TrimSpace(in.Text) {
	case "true":
		return true, Input{Text: "true"}, nil
	case "", "false":
		return false, Input{Text: "false"}, nil
	}
	return false, in, msg("err.bool")
}

var (
	tokenSepRE    = regexp.MustCompile(`[\s,;]+`)
	statusCodeRE  = regexp.MustCompile(`^[1-5][0-9][0-9]$`)
	statusClassRE = regexp.MustCompile(`^[1-5]xx$`)
)

// splitTokens splits "403, 418 5xx" into its entries, lower-cased.
func splitTokens(s string) []string {
	var out []string
	for _, t := range tokenSepRE.Split(strings.ToLower(s), -1) {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// readChips merges the posted entries of a list (kept as they are, for validation to judge)
// with what was typed into its add input: statuses are taken in, anything else comes back as
// bad. Duplicates are dropped; the order is kept.
func readChips(in Input, codesOnly bool) (list, bad []string) {
	list = []string{}
	for _, v := range in.List {
		if v = strings.ToLower(strings.TrimSpace(v)); v != "" && !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	for _, t := range splitTokens(in.Adding) {
		switch {
		case !statusCodeRE.MatchString(t) && (codesOnly || !statusClassRE.MatchString(t)):
			bad = append(bad, t)
		case !slices.Contains(list, t):
			list = append(list, t)
		}
	}
	return list, bad
}

func parseStatuses(in Input) ([]string, Input, *errs.Msg) {
	list, bad := readChips(in, false)
	shown := Input{List: list, Adding: strings.Join(bad, ", ")}
	if len(bad) > 0 {
		return nil, shown, msg("chips.invalid_status", shown.Adding)
	}
	return list, shown, nil
}

func parseCodeChips(in Input) ([]int, Input, *errs.Msg) {
	list, bad := readChips(in, true)
	shown := Input{List: list, Adding: strings.Join(bad, ", ")}
	codes, notCodes := make([]int, 0, len(list)), []string{}
	for _, v := range list {
		n, err := strconv.Atoi(v)
		if err != nil {
			notCodes = append(notCodes, v)
			continue
		}
		codes = append(codes, n)
	}
	if bad = append(notCodes, bad...); len(bad) > 0 {
		return nil, shown, msg("chips.invalid_code", strings.Join(bad, ", "))
	}
	return codes, shown, nil
}

// ParseCodes reads "403, 429" into status codes; a word that is no whole number is refused.
// Their range is the validation's.
func ParseCodes(text string) ([]int, *errs.Msg) {
	out := []int{}
	var bad []string
	for _, t := range splitTokens(text) {
		n, err := strconv.Atoi(t)
		if err != nil {
			bad = append(bad, t)
			continue
		}
		out = append(out, n)
	}
	if len(bad) > 0 {
		return out, msg("chips.invalid_code", strings.Join(bad, ", "))
	}
	return out, nil
}

// ParseLines is the non-empty lines of a text area, trimmed.
func ParseLines(text string) []string {
	out := []string{}
	for l := range strings.SplitSeq(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// ParseHeaders reads "name: substring" lines; a line without a colon only requires the header.
func ParseHeaders(text string) map[string]string {
	out := map[string]string{}
	for _, l := range ParseLines(text) {
		name, sub, _ := strings.Cut(l, ":")
		out[strings.TrimSpace(name)] = strings.TrimSpace(sub)
	}
	return out
}

// FormatHeaders writes header matches as ParseHeaders reads them, sorted by name.
func FormatHeaders(h map[string]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if h[k] == "" {
			lines = append(lines, k)
		} else {
			lines = append(lines, k+": "+h[k])
		}
	}
	return strings.Join(lines, "\n")
}

// formatFamilies writes quota families one per line: "provider: family = pattern, pattern".
func formatFamilies(fams map[string]map[string][]string) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(fams)) {
		for _, f := range slices.Sorted(maps.Keys(fams[p])) {
			fmt.Fprintf(&b, "%s: %s = %s\n", p, f, strings.Join(fams[p][f], ", "))
		}
	}
	return b.String()
}

// parseFamilies reads the lines of formatFamilies (blank lines and # comments skipped; a family
// named twice gets the patterns of both lines). The first line it cannot read is the problem.
// Empty names and patterns are left for validation to refuse.
func parseFamilies(in Input) (map[string]map[string][]string, Input, *errs.Msg) {
	fams := map[string]map[string][]string{}
	for i, l := range strings.Split(in.Text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		provider, rest, ok1 := strings.Cut(l, ":")
		family, pats, ok2 := strings.Cut(rest, "=")
		if !ok1 || !ok2 {
			return nil, in, msg("err.families_line", i+1)
		}
		provider, family = strings.TrimSpace(provider), strings.TrimSpace(family)
		if fams[provider] == nil {
			fams[provider] = map[string][]string{}
		}
		list := fams[provider][family]
		if list == nil {
			list = []string{}
		}
		if strings.TrimSpace(pats) != "" { // "p: f =" lists no pattern; validation says so
			for p := range strings.SplitSeq(pats, ",") {
				list = append(list, strings.TrimSpace(p))
			}
		}
		fams[provider][family] = list
	}
	return fams, in, nil
}
