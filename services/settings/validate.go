package settings

import (
	"maps"
	"slices"
	"strings"

	"switchyard/services/errs"
)

// fieldErrors collects messages keyed by dotted path (e.g. "model_lockout.max_cooldown_ms",
// "error_rules[0].reason"); the key "" stands for the document itself, and environment problems
// are keyed by the variable's name. The first message for a key wins.
type fieldErrors map[string]errs.Msg

func (fe fieldErrors) add(key string, m errs.Msg) {
	if _, ok := fe[key]; !ok {
		fe[key] = m
	}
}

// merge adds every message of other whose key has none yet.
func (fe fieldErrors) merge(other fieldErrors) {
	for _, k := range slices.Sorted(maps.Keys(other)) {
		fe.add(k, other[k])
	}
}

// err is the collected messages as one Invalid error, or nil when there are none.
func (fe fieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	return errs.Fields(maps.Clone(fe))
}

// Rule enums and limits.
var (
	ruleReasons   = []string{"rate_limit", "quota_exhausted", "model_capacity", "server_error", "auth_error", "not_found", "request_rejected", "unknown"}
	ruleScopes    = []string{"connection", "model", "provider", "none"}
	ruleTerminals = []string{"", "banned", "expired", "credits_exhausted"}
)

// RuleOptions are the values an error rule's reason, scope and terminal state may take (the
// terminal state "" = none first).
func RuleOptions() (reasons, scopes, terminals []string) {
	return slices.Clone(ruleReasons), slices.Clone(ruleScopes), slices.Clone(ruleTerminals)
}

// maxRuleMS is 30 days, the cap on honoured upstream hints. (How many rules a list may hold is
// bounded for every list of every document: MaxEntries.)
const maxRuleMS = 30 * 24 * 3_600_000

func oneOf(allowed []string) func(string) *errs.Msg {
	return func(v string) *errs.Msg {
		if slices.Contains(allowed, v) {
			return nil
		}
		return msg("err.one_of", strings.Join(allowed, ", "))
	}
}

func checkStatusPatterns(list []string) *errs.Msg {
	for _, p := range list {
		if _, _, ok := parseStatusPattern(p); !ok {
			return msg("err.status_pattern", p)
		}
	}
	return nil
}

func checkCodes(codes []int) *errs.Msg {
	for _, c := range codes {
		if c < 100 || c > 599 {
			return msg("err.codes_range", c)
		}
	}
	return nil
}

// ruleMatch holds the match conditions shared by error rules and restatements.
type ruleMatch struct {
	headers                 map[string]string
	markers, excludeMarkers []string
}

func (m ruleMatch) check(prefix string, fe fieldErrors) {
	for h := range m.headers {
		if strings.TrimSpace(h) == "" {
			fe.add(prefix+".header_matches", errs.M("err.header_empty"))
		}
	}
	if slices.Contains(m.markers, "") {
		fe.add(prefix+".body_markers", errs.M("err.marker_empty"))
	}
	if slices.Contains(m.excludeMarkers, "") {
		fe.add(prefix+".exclude_markers", errs.M("err.marker_empty"))
	}
}

func checkRuleList(path string, n int, name func(int) string, fe fieldErrors) {
	seen := map[string]bool{}
	for i := range n {
		key := ruleKey(path, i) + ".name"
		switch nm := name(i); {
		case strings.TrimSpace(nm) == "":
			fe.add(key, errs.M("err.not_empty"))
		case seen[nm]:
			fe.add(key, errs.M("err.rule_name_taken", nm))
		default:
			seen[nm] = true
		}
	}
}

// ruleKey names rule i of the list at path in error keys: "error_rules[2]".
func ruleKey(path string, i int) string { return path + "[" + formatNumber(i) + "]" }

// check puts the message of a single-message validator, if any, under key.
func (fe fieldErrors) check(key string, m *errs.Msg) {
	if m != nil {
		fe.add(key, *m)
	}
}

func checkErrorRules(path string, rules []ErrorRule, fe fieldErrors) {
	checkRuleList(path, len(rules), func(i int) string { return rules[i].Name }, fe)
	for i, r := range rules {
		p := ruleKey(path, i)
		fe.check(p+".reason", oneOf(ruleReasons)(r.Reason))
		fe.check(p+".scope", oneOf(ruleScopes)(r.Scope))
		if !slices.Contains(ruleTerminals, r.Terminal) {
			fe.add(p+".terminal", errs.M("err.terminal"))
		}
		fe.check(p+".statuses", checkCodes(r.Statuses))
		fe.check(p+".cooldown_ms", between[int64](0, maxRuleMS)(r.CooldownMS))
		if len(r.Statuses) == 0 && len(r.BodyMarkers) == 0 && len(r.HeaderMatches) == 0 {
			fe.add(p, errs.M("err.rule_condition"))
		}
		ruleMatch{r.HeaderMatches, r.BodyMarkers, r.ExcludeMarkers}.check(p, fe)
	}
}

func checkRestatements(path string, rules []StatusRestatement, fe fieldErrors) {
	checkRuleList(path, len(rules), func(i int) string { return rules[i].Name }, fe)
	for i, r := range rules {
		p := ruleKey(path, i)
		fe.check(p+".from_status", between(100, 599)(r.FromStatus))
		fe.check(p+".to_status", between(100, 599)(r.ToStatus))
		fe.check(p+".retry_after_ms", between[int64](0, maxRuleMS)(r.RetryAfterMS))
		ruleMatch{r.HeaderMatches, r.BodyMarkers, r.ExcludeMarkers}.check(p, fe)
	}
}

// crossCheck is a rule spanning several settings; its message is reported under key.
type crossCheck struct {
	key   string
	paths []string
	check func(r *Resilience) *errs.Msg
}

// atLeast says that a value must be at least the one of the setting at other (lo).
func atLeast(other string, lo, v int64) *errs.Msg {
	if v < lo {
		return msg("err.at_least", errs.M("setting."+other), lo)
	}
	return nil
}

// atMost says that a value must not exceed the one of the setting at other (hi).
func atMost(other string, hi, v int64) *errs.Msg {
	if v > hi {
		return msg("err.at_most", errs.M("setting."+other), hi)
	}
	return nil
}

var crossChecks = []crossCheck{
	{"model_lockout.max_cooldown_ms", []string{"model_lockout.max_cooldown_ms", "model_lockout.base_cooldown_ms"},
		func(r *Resilience) *errs.Msg {
			return atLeast("model_lockout.base_cooldown_ms", r.ModelLockout.BaseCooldownMS, r.ModelLockout.MaxCooldownMS)
		}},
	{"retry.max_backoff_ms", []string{"retry.max_backoff_ms", "retry.initial_backoff_ms"},
		func(r *Resilience) *errs.Msg {
			return atLeast("retry.initial_backoff_ms", r.Retry.InitialBackoffMS, r.Retry.MaxBackoffMS)
		}},
	{"connection_cooldown.oauth.base_cooldown_ms", []string{"connection_cooldown.oauth.base_cooldown_ms", "connection_cooldown.max_cooldown_ms"},
		func(r *Resilience) *errs.Msg {
			return atMost("connection_cooldown.max_cooldown_ms", r.ConnectionCooldown.MaxCooldownMS, r.ConnectionCooldown.OAuth.BaseCooldownMS)
		}},
	{"connection_cooldown.api_key.base_cooldown_ms", []string{"connection_cooldown.api_key.base_cooldown_ms", "connection_cooldown.max_cooldown_ms"},
		func(r *Resilience) *errs.Msg {
			return atMost("connection_cooldown.max_cooldown_ms", r.ConnectionCooldown.MaxCooldownMS, r.ConnectionCooldown.APIKey.BaseCooldownMS)
		}},
	{"combo_cooldown_wait.budget_ms", []string{"combo_cooldown_wait.budget_ms", "combo_cooldown_wait.max_wait_ms"},
		func(r *Resilience) *errs.Msg {
			return atLeast("combo_cooldown_wait.max_wait_ms", r.ComboCooldownWait.MaxWaitMS, r.ComboCooldownWait.BudgetMS)
		}},
}

// checkCross adds the violated cross-field rules to fe, skipping rules whose settings already
// have a problem of their own. It returns the violated rules.
func checkCross(r *Resilience, fe fieldErrors) []crossCheck {
	var bad []crossCheck
	for _, c := range crossChecks {
		if slices.ContainsFunc(c.paths, func(p string) bool { _, ok := fe[p]; return ok }) {
			continue
		}
		if m := c.check(r); m != nil {
			fe.add(c.key, *m)
			bad = append(bad, c)
		}
	}
	return bad
}

// checkFamilies validates model_lockout.families: provider → family name → model patterns.
// Names must not be blank; a pattern is an exact model name or a prefix ending in one "*".
func checkFamilies(path string, fams map[string]map[string][]string, fe fieldErrors) {
	for _, provider := range slices.Sorted(maps.Keys(fams)) {
		pp := path + "." + provider
		if strings.TrimSpace(provider) == "" {
			fe.add(pp, errs.M("err.family_provider_empty"))
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(fams[provider])) {
			fp := pp + "." + name
			patterns := fams[provider][name]
			switch {
			case strings.TrimSpace(name) == "":
				fe.add(pp, errs.M("err.family_name_empty"))
			case len(patterns) == 0:
				fe.add(fp, errs.M("err.family_patterns"))
			}
			for _, pat := range patterns {
				if m := checkFamilyPattern(pat); m != nil {
					fe.add(fp, *m)
					break
				}
			}
		}
	}
}

func checkFamilyPattern(p string) *errs.Msg {
	switch star := strings.IndexByte(p, '*'); {
	case strings.TrimSpace(p) == "":
		return msg("err.pattern_empty")
	case star >= 0 && star != len(p)-1:
		return msg("err.family_star", p)
	}
	return nil
}

func cloneFamilies(m map[string]map[string][]string) map[string]map[string][]string {
	out := make(map[string]map[string][]string, len(m))
	for p, fams := range m {
		c := make(map[string][]string, len(fams))
		for name, pats := range fams {
			c[name] = slices.Clone(pats)
		}
		out[p] = c
	}
	return out
}
