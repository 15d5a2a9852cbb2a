package settings

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ValidationError reports every invalid field at once, keyed by dotted path
// (e.g. "model_lockout.max_cooldown_ms", "error_rules[0].reason"). The key "" stands for
// the document itself; environment errors are keyed by the variable name.
type ValidationError struct {
	Fields map[string]string
}

func (e *ValidationError) Error() string {
	return "invalid settings: " + fieldErrors(e.Fields).String()
}

// String renders the messages sorted by key.
func (e fieldErrors) String() string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(e)) {
		if i > 0 {
			b.WriteString("; ")
		}
		if k != "" {
			b.WriteString(k + ": ")
		}
		b.WriteString(e[k])
	}
	return b.String()
}

// Rule enums and limits.
var (
	ruleReasons   = []string{"rate_limit", "quota_exhausted", "model_capacity", "server_error", "auth_error", "not_found", "request_rejected", "unknown"}
	ruleScopes    = []string{"connection", "model", "provider", "none"}
	ruleTerminals = []string{"", "banned", "expired", "credits_exhausted"}
)

const (
	maxRules  = 1_000
	maxRuleMS = 30 * 24 * 3_600_000 // 30 days, the cap on honoured upstream hints
)

func oneOf(allowed []string) func(string) string {
	return func(v string) string {
		if slices.Contains(allowed, v) {
			return ""
		}
		return "must be one of: " + strings.Join(allowed, ", ")
	}
}

func checkStatusPatterns(list []string) string {
	for _, p := range list {
		if _, _, ok := parseStatusPattern(p); !ok {
			return fmt.Sprintf("%q is not a status: use a code such as \"429\" (100–599) or a class such as \"5xx\"", p)
		}
	}
	return ""
}

func checkCodes(codes []int) string {
	for _, c := range codes {
		if c < 100 || c > 599 {
			return fmt.Sprintf("must contain only status codes between 100 and 599 (got %d)", c)
		}
	}
	return ""
}

// ruleMatch holds the match conditions shared by error rules and restatements.
type ruleMatch struct {
	headers                 map[string]string
	markers, excludeMarkers []string
}

func (m ruleMatch) check(prefix string, errs fieldErrors) {
	for h := range m.headers {
		if strings.TrimSpace(h) == "" {
			errs.add(prefix+".header_matches", "header names must not be empty")
		}
	}
	if slices.Contains(m.markers, "") {
		errs.add(prefix+".body_markers", "markers must not be empty")
	}
	if slices.Contains(m.excludeMarkers, "") {
		errs.add(prefix+".exclude_markers", "markers must not be empty")
	}
}

func checkRuleList(path string, n int, name func(int) string, errs fieldErrors) {
	if n > maxRules {
		errs.add(path, fmt.Sprintf("must have at most %d rules", maxRules))
	}
	seen := map[string]bool{}
	for i := range n {
		key := fmt.Sprintf("%s[%d].name", path, i)
		switch nm := name(i); {
		case strings.TrimSpace(nm) == "":
			errs.add(key, "must not be empty")
		case seen[nm]:
			errs.add(key, fmt.Sprintf("%q is used by another rule", nm))
		default:
			seen[nm] = true
		}
	}
}

func checkErrorRules(path string, rules []ErrorRule, errs fieldErrors) {
	checkRuleList(path, len(rules), func(i int) string { return rules[i].Name }, errs)
	for i, r := range rules {
		p := fmt.Sprintf("%s[%d]", path, i)
		if msg := oneOf(ruleReasons)(r.Reason); msg != "" {
			errs.add(p+".reason", msg)
		}
		if msg := oneOf(ruleScopes)(r.Scope); msg != "" {
			errs.add(p+".scope", msg)
		}
		if msg := oneOf(ruleTerminals)(r.Terminal); msg != "" {
			errs.add(p+".terminal", `must be empty or one of: banned, expired, credits_exhausted`)
		}
		if msg := checkCodes(r.Statuses); msg != "" {
			errs.add(p+".statuses", msg)
		}
		if msg := between[int64](0, maxRuleMS)(r.CooldownMS); msg != "" {
			errs.add(p+".cooldown_ms", msg)
		}
		if len(r.Statuses) == 0 && len(r.BodyMarkers) == 0 && len(r.HeaderMatches) == 0 {
			errs.add(p, "needs at least one of statuses, body_markers or header_matches")
		}
		ruleMatch{r.HeaderMatches, r.BodyMarkers, r.ExcludeMarkers}.check(p, errs)
	}
}

func checkRestatements(path string, rules []StatusRestatement, errs fieldErrors) {
	checkRuleList(path, len(rules), func(i int) string { return rules[i].Name }, errs)
	for i, r := range rules {
		p := fmt.Sprintf("%s[%d]", path, i)
		if msg := between(100, 599)(r.FromStatus); msg != "" {
			errs.add(p+".from_status", msg)
		}
		if msg := between(100, 599)(r.ToStatus); msg != "" {
			errs.add(p+".to_status", msg)
		}
		if msg := between[int64](0, maxRuleMS)(r.RetryAfterMS); msg != "" {
			errs.add(p+".retry_after_ms", msg)
		}
		ruleMatch{r.HeaderMatches, r.BodyMarkers, r.ExcludeMarkers}.check(p, errs)
	}
}

// crossCheck is a rule spanning several leaves; its error is reported under key.
type crossCheck struct {
	key   string
	paths []string
	check func(r *Resilience) string
}

func atLeast(what string, lo, v int64) string {
	if v < lo {
		return fmt.Sprintf("must be at least %s (%d)", what, lo)
	}
	return ""
}

func atMost(what string, hi, v int64) string {
	if v > hi {
		return fmt.Sprintf("must not exceed %s (%d)", what, hi)
	}
	return ""
}

var crossChecks = []crossCheck{
	{"model_lockout.max_cooldown_ms", []string{"model_lockout.max_cooldown_ms", "model_lockout.base_cooldown_ms"},
		func(r *Resilience) string {
			return atLeast("base_cooldown_ms", r.ModelLockout.BaseCooldownMS, r.ModelLockout.MaxCooldownMS)
		}},
	{"retry.max_backoff_ms", []string{"retry.max_backoff_ms", "retry.initial_backoff_ms"},
		func(r *Resilience) string {
			return atLeast("initial_backoff_ms", r.Retry.InitialBackoffMS, r.Retry.MaxBackoffMS)
		}},
	{"connection_cooldown.oauth.base_cooldown_ms", []string{"connection_cooldown.oauth.base_cooldown_ms", "connection_cooldown.max_cooldown_ms"},
		func(r *Resilience) string {
			return atMost("max_cooldown_ms", r.ConnectionCooldown.MaxCooldownMS, r.ConnectionCooldown.OAuth.BaseCooldownMS)
		}},
	{"connection_cooldown.api_key.base_cooldown_ms", []string{"connection_cooldown.api_key.base_cooldown_ms", "connection_cooldown.max_cooldown_ms"},
		func(r *Resilience) string {
			return atMost("max_cooldown_ms", r.ConnectionCooldown.MaxCooldownMS, r.ConnectionCooldown.APIKey.BaseCooldownMS)
		}},
	{"combo_cooldown_wait.budget_ms", []string{"combo_cooldown_wait.budget_ms", "combo_cooldown_wait.max_wait_ms"},
		func(r *Resilience) string {
			return atLeast("max_wait_ms", r.ComboCooldownWait.MaxWaitMS, r.ComboCooldownWait.BudgetMS)
		}},
}

// checkCross adds the violated cross-field rules to errs, skipping rules whose leaves
// already have an error of their own. It returns the violated rules.
func checkCross(r *Resilience, errs fieldErrors) []crossCheck {
	var bad []crossCheck
	for _, c := range crossChecks {
		if slices.ContainsFunc(c.paths, func(p string) bool { _, ok := errs[p]; return ok }) {
			continue
		}
		if msg := c.check(r); msg != "" {
			errs.add(c.key, msg)
			bad = append(bad, c)
		}
	}
	return bad
}

// checkFamilies validates model_lockout.families: provider → family name → model patterns.
// Names must not be blank; a pattern is an exact model name or a prefix ending in one "*".
func checkFamilies(path string, fams map[string]map[string][]string, errs fieldErrors) {
	for _, provider := range slices.Sorted(maps.Keys(fams)) {
		pp := path + "." + provider
		if strings.TrimSpace(provider) == "" {
			errs.add(pp, "provider names must not be empty")
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(fams[provider])) {
			fp := pp + "." + name
			patterns := fams[provider][name]
			switch {
			case strings.TrimSpace(name) == "":
				errs.add(pp, "family names must not be empty")
			case len(patterns) == 0:
				errs.add(fp, "must list at least one model pattern")
			}
			for _, pat := range patterns {
				if msg := checkFamilyPattern(pat); msg != "" {
					errs.add(fp, msg)
					break
				}
			}
		}
	}
}

func checkFamilyPattern(p string) string {
	switch star := strings.IndexByte(p, '*'); {
	case strings.TrimSpace(p) == "":
		return "model patterns must not be empty"
	case star >= 0 && star != len(p)-1:
		return fmt.Sprintf("%q: \"*\" may only end a pattern (a prefix such as \"claude-opus-*\")", p)
	}
	return ""
}

// parseFamilies reads model_lockout.families from the environment as a JSON object.
func parseFamilies(s string) (map[string]map[string][]string, error) {
	v := map[string]map[string][]string{}
	err := strictUnmarshal([]byte(s), &v)
	return v, err
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
