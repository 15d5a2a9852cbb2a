package handlers

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"switchyard/i18n"
	"switchyard/services/settings"
)

// chipList describes a list setting edited as chips.
type chipList struct {
	codes       bool // whole status codes ([]int); otherwise status patterns such as "5xx" ([]string)
	suggestions []string
}

// statusSuggestions are offered for the status pattern lists of retry and the breaker.
var statusSuggestions = []string{"408", "429", "500", "502", "503", "504", "522", "524", "529", "5xx", "4xx"}

// chipLists are the list settings shown as chips.
var chipLists = map[string]chipList{
	"model_lockout.error_codes":           {codes: true, suggestions: []string{"403", "404", "429", "500", "502", "503", "504", "529"}},
	"retry.retry_on_statuses":             {suggestions: statusSuggestions},
	"circuit_breaker.failure_on_statuses": {suggestions: statusSuggestions},
}

// selectOptions are the settings chosen from a fixed list; each option's label is the catalog
// key setting.<path>.option.<value>.
var selectOptions = map[string][]string{
	"circuit_breaker.scope": {"provider", "model"},
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

// read merges the posted chips (checked checkboxes, kept as they are for the settings service
// to judge) with what was typed into the add input (only statuses are taken from it; the rest
// comes back as bad). Duplicates are dropped; the order is kept.
func (l chipList) read(chips []string, adding string) (list, bad []string) {
	list = []string{}
	for _, v := range chips {
		if v = strings.ToLower(strings.TrimSpace(v)); v != "" && !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	for _, t := range splitTokens(adding) {
		switch {
		case !statusCodeRE.MatchString(t) && (l.codes || !statusClassRE.MatchString(t)):
			bad = append(bad, t)
		case !slices.Contains(list, t):
			list = append(list, t)
		}
	}
	return list, bad
}

// value is the list as the settings document holds it: numbers for codes (a chip that is not
// a whole number stays text, which the settings service refuses with its own message).
func (l chipList) value(list []string) any {
	if !l.codes {
		return list
	}
	out := make([]any, len(list))
	for i, v := range list {
		if n, err := strconv.Atoi(v); err == nil {
			out[i] = n
		} else {
			out[i] = v
		}
	}
	return out
}

func (l chipList) invalidKey() string {
	if l.codes {
		return "chips.invalid_code"
	}
	return "chips.invalid_status"
}

// textLeaf is a setting edited as lines of text.
type textLeaf struct {
	rows        int
	placeholder string
	format      func(r *settings.Resilience) string
	parse       func(ctx context.Context, text string) (value any, msg string)
	current     func(r *settings.Resilience) any
}

// textLeaves are the settings edited as text.
var textLeaves = map[string]textLeaf{
	"model_lockout.families": {
		rows:        4,
		placeholder: "anthropic: opus = claude-opus-*\nopenai: gpt-5 = gpt-5*, o3",
		format:      func(r *settings.Resilience) string { return formatFamilies(r.ModelLockout.Families) },
		parse: func(ctx context.Context, text string) (any, string) {
			fams, line := parseFamilies(text)
			if line > 0 {
				return nil, i18n.T(ctx, "err.families_line", line)
			}
			return fams, ""
		},
		current: func(r *settings.Resilience) any { return r.ModelLockout.Families },
	},
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

// parseFamilies reads the lines of formatFamilies (blank lines and # comments skipped; a
// family named twice gets the patterns of both lines). line is the first line it cannot read,
// 0 when all were read. Empty names and patterns are left for the settings service to refuse.
func parseFamilies(text string) (fams map[string]map[string][]string, line int) {
	fams = map[string]map[string][]string{}
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		provider, rest, ok1 := strings.Cut(l, ":")
		family, pats, ok2 := strings.Cut(rest, "=")
		if !ok1 || !ok2 {
			return nil, i + 1
		}
		provider, family = strings.TrimSpace(provider), strings.TrimSpace(family)
		if fams[provider] == nil {
			fams[provider] = map[string][]string{}
		}
		list := fams[provider][family]
		if list == nil {
			list = []string{}
		}
		for _, p := range strings.Split(pats, ",") {
			list = append(list, strings.TrimSpace(p))
		}
		if strings.TrimSpace(pats) == "" {
			list = list[:len(list)-1] // "p: f =" lists no pattern; the service says so
		}
		fams[provider][family] = list
	}
	return fams, 0
}

// serviceMessages maps the settings service's fixed messages to catalog keys.
var serviceMessages = map[string]string{
	"must not be empty": "err.not_empty",
	"needs at least one of statuses, body_markers or header_matches": "err.rule_condition",
	"header names must not be empty":                                 "err.header_empty",
	"markers must not be empty":                                      "err.marker_empty",
	"must be empty or one of: banned, expired, credits_exhausted":    "err.terminal",
	"must list at least one model pattern":                           "err.family_patterns",
	"provider names must not be empty":                               "err.family_provider_empty",
	"family names must not be empty":                                 "err.family_name_empty",
	"model patterns must not be empty":                               "err.pattern_empty",
	"must be a list of whole numbers":                                "err.codes_list",
}

var (
	codesRangeRE    = regexp.MustCompile(`^must contain only status codes between 100 and 599 \(got (-?[0-9]+)\)$`)
	statusPatternRE = regexp.MustCompile(`^"(.*)" is not a status: `)
	nameTakenRE     = regexp.MustCompile(`^"(.*)" is used by another rule$`)
	familyStarRE    = regexp.MustCompile(`^"(.*)": "\*" may only end a pattern`)
)

// settingsMessage puts a settings service message into the user's language: the messages of
// lists, rules and families here, the rest through translateMessage.
func settingsMessage(ctx context.Context, msg string, related func(name string) string) string {
	if key, ok := serviceMessages[msg]; ok {
		return i18n.T(ctx, key)
	}
	for re, key := range map[*regexp.Regexp]string{codesRangeRE: "err.codes_range", statusPatternRE: "err.status_pattern",
		nameTakenRE: "err.rule_name_taken", familyStarRE: "err.family_star"} {
		if m := re.FindStringSubmatch(msg); m != nil {
			return i18n.T(ctx, key, m[1])
		}
	}
	return translateMessage(ctx, msg, related)
}
