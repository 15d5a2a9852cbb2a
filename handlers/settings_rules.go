package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/settings"
	"switchyard/views"
)

// The values the rule selects offer; the settings service checks them (validate.go).
var (
	ruleReasons   = []string{"rate_limit", "quota_exhausted", "model_capacity", "server_error", "auth_error", "not_found", "request_rejected", "unknown"}
	ruleScopes    = []string{"connection", "model", "provider", "none"}
	ruleTerminals = []string{"", "banned", "expired", "credits_exhausted"}
)

const (
	rulesCardID          = "error-rules"
	errorRulesPath       = "error_rules"
	restatementsPath     = "status_restatements"
	newRulePrefix        = errorRulesPath + "[new]"
	newRestatePrefix     = restatementsPath + "[new]"
	restatementExampleID = "restatement"
)

// errorRulesCard edits error_rules and status_restatements as lists: each rule has its own
// inputs (named like the settings service's error keys, error_rules[2].reason), a delete
// button, and each list an empty rule that is added when filled in. Saving sends both lists
// whole (only those that changed).
type errorRulesCard struct{}

func (errorRulesCard) page(s *Settings, c echo.Context, saved bool) (templ.Component, error) {
	m := rulesModel(s.Svc.Snapshot())
	m.Meta.Saved = saved
	if c.QueryParam("example") == restatementExampleID {
		m.NewRestatement = exampleRestatement()
	}
	return views.ErrorRulesCard(m), nil
}

// rulesModel draws the card from the effective settings.
func rulesModel(snap *settings.Snapshot) views.ErrorRulesCardModel {
	r := snap.Resilience()
	m := rulesFrame(snap)
	for i, rule := range r.ErrorRules {
		m.Rules = append(m.Rules, errorRuleForm(fmt.Sprintf("%s[%d]", errorRulesPath, i), rule))
	}
	for i, rule := range r.StatusRestatements {
		m.Restatements = append(m.Restatements, restatementForm(fmt.Sprintf("%s[%d]", restatementsPath, i), rule))
	}
	return m
}

// rulesFrame is the card without rules: sources, options and the empty new rules.
func rulesFrame(snap *settings.Snapshot) views.ErrorRulesCardModel {
	return views.ErrorRulesCardModel{
		Meta:               views.CardMeta{ID: rulesCardID},
		RulesSource:        snap.Source(errorRulesPath),
		RestatementsSource: snap.Source(restatementsPath),
		NewRule:            views.ErrorRuleForm{Prefix: newRulePrefix, Reason: "rate_limit", Scope: "connection"},
		NewRestatement:     views.RestatementForm{Prefix: newRestatePrefix},
		Reasons:            ruleReasons, Scopes: ruleScopes, Terminals: ruleTerminals,
	}
}

// exampleRestatement is the card's example, filled into the new restatement: a gateway that
// reports quota exhaustion as 403 "quota exceeded" is restated to 429 with a 60 s Retry-After,
// unless the body says "no access".
func exampleRestatement() views.RestatementForm {
	return views.RestatementForm{Prefix: newRestatePrefix, Name: "gateway-quota-403", Provider: "my-gateway", FromStatus: "403",
		BodyMarkers: "quota exceeded", ExcludeMarkers: "no access", ToStatus: "429", RetryAfterMS: "60000"}
}

func errorRuleForm(prefix string, r settings.ErrorRule) views.ErrorRuleForm {
	return views.ErrorRuleForm{Prefix: prefix, Name: r.Name, Provider: r.Provider, Statuses: joinInts(r.Statuses),
		BodyMarkers: strings.Join(r.BodyMarkers, "\n"), ExcludeMarkers: strings.Join(r.ExcludeMarkers, "\n"),
		HeaderMatches: formatHeaders(r.HeaderMatches), Reason: r.Reason, Scope: r.Scope,
		CooldownMS: msText(r.CooldownMS), Terminal: r.Terminal}
}

func restatementForm(prefix string, r settings.StatusRestatement) views.RestatementForm {
	return views.RestatementForm{Prefix: prefix, Name: r.Name, Provider: r.Provider, FromStatus: strconv.Itoa(r.FromStatus),
		BodyMarkers: strings.Join(r.BodyMarkers, "\n"), ExcludeMarkers: strings.Join(r.ExcludeMarkers, "\n"),
		HeaderMatches: formatHeaders(r.HeaderMatches), ToStatus: strconv.Itoa(r.ToStatus), RetryAfterMS: msText(r.RetryAfterMS)}
}

// msText shows an optional duration: 0 (none) as an empty field.
func msText(ms int64) string {
	if ms == 0 {
		return ""
	}
	return strconv.FormatInt(ms, 10)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// formatHeaders writes header matches one per line: "name: substring", or just "name" when
// the header only has to be present.
func formatHeaders(h map[string]string) string {
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

// ruleKeyRE reads a rule error key of the settings service: error_rules[2].reason.
var ruleKeyRE = regexp.MustCompile(`^(error_rules|status_restatements)\[([0-9]+)\](?:\.([a-z_]+))?$`)

// postedIndices lists the rule indices of one list present in the form, in order.
func postedIndices(form url.Values, list string) []int {
	var idx []int
	for k := range form {
		if m := ruleKeyRE.FindStringSubmatch(k); m != nil && m[1] == list && m[3] == "name" {
			n, _ := strconv.Atoi(m[2])
			idx = append(idx, n)
		}
	}
	slices.Sort(idx)
	return idx
}

// ruleReader reads rule inputs, collecting each field's error in the rule's form.
type ruleReader struct {
	ctx    context.Context
	form   url.Values
	prefix string
	errs   views.FieldErrors
}

func (r ruleReader) text(field string) string {
	return strings.TrimSpace(r.form.Get(r.prefix + "." + field))
}

// lines keeps the text of a textarea with its line ends normalised.
func (r ruleReader) lines(field string) string {
	return strings.TrimSpace(strings.ReplaceAll(r.form.Get(r.prefix+"."+field), "\r\n", "\n"))
}

// codes reads "403, 429"; a word that is no whole number is the field's error.
func (r ruleReader) codes(field, text string) []int {
	out := []int{}
	for _, t := range splitTokens(text) {
		n, err := strconv.Atoi(t)
		if err != nil {
			r.errs[field] = i18n.T(r.ctx, "chips.invalid_code", t)
			return out
		}
		out = append(out, n)
	}
	return out
}

// number reads a whole number; an empty field is 0 unless required.
func (r ruleReader) number(field, text string, required bool) int64 {
	if text == "" {
		if required {
			r.errs[field] = i18n.T(r.ctx, "err.required")
		}
		return 0
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		r.errs[field] = i18n.T(r.ctx, "err.whole_number")
	}
	return n
}

// splitLines is the non-empty lines of a textarea.
func splitLines(s string) []string {
	out := []string{}
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// parseHeaders reads "name: substring" lines; a line without a colon only requires the header.
func parseHeaders(s string) map[string]string {
	out := map[string]string{}
	for _, l := range splitLines(s) {
		name, sub, _ := strings.Cut(l, ":")
		out[strings.TrimSpace(name)] = strings.TrimSpace(sub)
	}
	return out
}

func readErrorRule(ctx context.Context, form url.Values, prefix string) (views.ErrorRuleForm, settings.ErrorRule) {
	rd := ruleReader{ctx: ctx, form: form, prefix: prefix, errs: views.FieldErrors{}}
	f := views.ErrorRuleForm{Prefix: prefix, Name: rd.text("name"), Provider: rd.text("provider"), Statuses: rd.text("statuses"),
		BodyMarkers: rd.lines("body_markers"), ExcludeMarkers: rd.lines("exclude_markers"), HeaderMatches: rd.lines("header_matches"),
		Reason: rd.text("reason"), Scope: rd.text("scope"), CooldownMS: rd.text("cooldown_ms"), Terminal: rd.text("terminal"),
		Errors: rd.errs}
	r := settings.ErrorRule{Name: f.Name, Provider: f.Provider, Statuses: rd.codes("statuses", f.Statuses),
		HeaderMatches: parseHeaders(f.HeaderMatches), BodyMarkers: splitLines(f.BodyMarkers), ExcludeMarkers: splitLines(f.ExcludeMarkers),
		Reason: f.Reason, Scope: f.Scope, CooldownMS: rd.number("cooldown_ms", f.CooldownMS, false), Terminal: f.Terminal}
	return f, r
}

func readRestatement(ctx context.Context, form url.Values, prefix string) (views.RestatementForm, settings.StatusRestatement) {
	rd := ruleReader{ctx: ctx, form: form, prefix: prefix, errs: views.FieldErrors{}}
	f := views.RestatementForm{Prefix: prefix, Name: rd.text("name"), Provider: rd.text("provider"), FromStatus: rd.text("from_status"),
		BodyMarkers: rd.lines("body_markers"), ExcludeMarkers: rd.lines("exclude_markers"), HeaderMatches: rd.lines("header_matches"),
		ToStatus: rd.text("to_status"), RetryAfterMS: rd.text("retry_after_ms"), Errors: rd.errs}
	r := settings.StatusRestatement{Name: f.Name, Provider: f.Provider,
		FromStatus: int(rd.number("from_status", f.FromStatus, true)), BodyMarkers: splitLines(f.BodyMarkers),
		ExcludeMarkers: splitLines(f.ExcludeMarkers), HeaderMatches: parseHeaders(f.HeaderMatches),
		ToStatus: int(rd.number("to_status", f.ToStatus, true)), RetryAfterMS: rd.number("retry_after_ms", f.RetryAfterMS, false)}
	return f, r
}

// blankRule reports whether nobody typed into a new rule (its selects always post a value).
func blankRule(texts ...string) bool {
	return !slices.ContainsFunc(texts, func(s string) bool { return s != "" })
}

// normalRules gives every list and map of the rules a non-nil value, so that equal rule lists
// encode alike and the saved document has [] and {} rather than null.
func normalRules(rules []settings.ErrorRule) []settings.ErrorRule {
	out := make([]settings.ErrorRule, len(rules))
	for i, r := range rules {
		r.Statuses = nonNil(r.Statuses)
		r.BodyMarkers, r.ExcludeMarkers = nonNil(r.BodyMarkers), nonNil(r.ExcludeMarkers)
		if r.HeaderMatches == nil {
			r.HeaderMatches = map[string]string{}
		}
		out[i] = r
	}
	return out
}

func normalRestatements(rules []settings.StatusRestatement) []settings.StatusRestatement {
	out := make([]settings.StatusRestatement, len(rules))
	for i, r := range rules {
		r.BodyMarkers, r.ExcludeMarkers = nonNil(r.BodyMarkers), nonNil(r.ExcludeMarkers)
		if r.HeaderMatches == nil {
			r.HeaderMatches = map[string]string{}
		}
		out[i] = r
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (errorRulesCard) save(s *Settings, c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	snap := s.Svc.Snapshot()
	cur := snap.Resilience()
	m := rulesFrame(snap)
	deleted, add := form.Get("delete"), form.Get("add")

	// Read both lists; rulesAt and restatesAt map a list index of the patch to its form.
	var rules []settings.ErrorRule
	var rulesAt []*views.ErrorRuleForm
	for _, i := range postedIndices(form, errorRulesPath) {
		prefix := fmt.Sprintf("%s[%d]", errorRulesPath, i)
		if prefix == deleted {
			continue
		}
		f, r := readErrorRule(ctx(c), form, prefix)
		m.Rules = append(m.Rules, f)
		rules = append(rules, r)
	}
	for i := range m.Rules {
		rulesAt = append(rulesAt, &m.Rules[i])
	}
	if f, r := readErrorRule(ctx(c), form, newRulePrefix); add == errorRulesPath ||
		!blankRule(f.Name, f.Provider, f.Statuses, f.BodyMarkers, f.ExcludeMarkers, f.HeaderMatches, f.CooldownMS) {
		m.NewRule = f
		rules = append(rules, r)
		rulesAt = append(rulesAt, &m.NewRule)
	}
	var restates []settings.StatusRestatement
	var restatesAt []*views.RestatementForm
	for _, i := range postedIndices(form, restatementsPath) {
		prefix := fmt.Sprintf("%s[%d]", restatementsPath, i)
		if prefix == deleted {
			continue
		}
		f, r := readRestatement(ctx(c), form, prefix)
		m.Restatements = append(m.Restatements, f)
		restates = append(restates, r)
	}
	for i := range m.Restatements {
		restatesAt = append(restatesAt, &m.Restatements[i])
	}
	if f, r := readRestatement(ctx(c), form, newRestatePrefix); add == restatementsPath ||
		!blankRule(f.Name, f.Provider, f.FromStatus, f.BodyMarkers, f.ExcludeMarkers, f.HeaderMatches, f.ToStatus, f.RetryAfterMS) {
		m.NewRestatement = f
		restates = append(restates, r)
		restatesAt = append(restatesAt, &m.NewRestatement)
	}

	// "Fill in the example" shows the example in the new restatement and saves nothing.
	if form.Get("example") == restatementExampleID {
		m.NewRestatement = exampleRestatement()
		return s.renderCustom(c, http.StatusOK, rulesCardID, views.ErrorRulesCard(m))
	}

	local := false
	for _, f := range rulesAt {
		local = local || len(f.Errors) > 0
	}
	for _, f := range restatesAt {
		local = local || len(f.Errors) > 0
	}
	if !local {
		patch := map[string]any{}
		if rules, old := normalRules(rules), normalRules(cur.ErrorRules); !sameJSON(rules, old) {
			patch[errorRulesPath] = rules
		}
		if restates, old := normalRestatements(restates), normalRestatements(cur.StatusRestatements); !sameJSON(restates, old) {
			patch[restatementsPath] = restates
		}
		raw, err := json.Marshal(patch)
		if err != nil {
			return err
		}
		snap, err := s.Svc.Patch(ctx(c), raw)
		var ve *settings.ValidationError
		switch {
		case err == nil:
			if !isHTMX(c) {
				return c.Redirect(http.StatusSeeOther, "/settings?saved="+rulesCardID+"#card-"+rulesCardID)
			}
			m := rulesModel(snap)
			m.Meta.Saved = true
			return Render(c, http.StatusOK, views.ErrorRulesCard(m))
		case errors.As(err, &ve):
			placeRuleErrors(ctx(c), ve.Fields, rulesAt, restatesAt, &m.Meta)
		default:
			return err
		}
	}
	m.Meta.Failed = true
	return s.renderCustom(c, http.StatusUnprocessableEntity, rulesCardID, views.ErrorRulesCard(m))
}

// placeRuleErrors puts each message of the settings service at the rule and field it names.
func placeRuleErrors(ctx context.Context, fields map[string]string, rules []*views.ErrorRuleForm,
	restates []*views.RestatementForm, meta *views.CardMeta) {
	for _, k := range sortedKeys(fields) {
		msg := settingsMessage(ctx, fields[k], nil)
		if m := ruleKeyRE.FindStringSubmatch(k); m != nil {
			i, _ := strconv.Atoi(m[2])
			var errs views.FieldErrors
			switch {
			case m[1] == errorRulesPath && i < len(rules):
				errs = rules[i].Errors
			case m[1] == restatementsPath && i < len(restates):
				errs = restates[i].Errors
			}
			if errs != nil {
				if _, taken := errs[m[3]]; !taken {
					errs[m[3]] = msg
				}
				continue
			}
		}
		if k != "" {
			msg = i18n.T(ctx, "setting."+strings.SplitN(k, "[", 2)[0]) + ": " + msg
		}
		meta.Errors = append(meta.Errors, msg)
	}
}

// renderCustom answers a custom card's post that saved nothing: the card alone for htmx, the
// whole page with the card as shown otherwise.
func (s *Settings) renderCustom(c echo.Context, status int, id string, card templ.Component) error {
	if isHTMX(c) {
		return Render(c, status, card)
	}
	return s.renderSettingsPage(c, status, id, card)
}
