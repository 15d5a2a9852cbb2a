package handlers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/settings"
	"switchyard/views"
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
	reasons, scopes, terminals := settings.RuleOptions()
	return views.ErrorRulesCardModel{
		Meta:               views.CardMeta{ID: rulesCardID},
		RulesSource:        snap.Source(errorRulesPath),
		RestatementsSource: snap.Source(restatementsPath),
		NewRule:            views.ErrorRuleForm{Prefix: newRulePrefix, Reason: "rate_limit", Scope: "connection"},
		NewRestatement:     views.RestatementForm{Prefix: newRestatePrefix},
		Reasons:            reasons, Scopes: scopes, Terminals: terminals,
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
		HeaderMatches: settings.FormatHeaders(r.HeaderMatches), Reason: r.Reason, Scope: r.Scope,
		CooldownMS: msText(r.CooldownMS), Terminal: r.Terminal}
}

func restatementForm(prefix string, r settings.StatusRestatement) views.RestatementForm {
	return views.RestatementForm{Prefix: prefix, Name: r.Name, Provider: r.Provider, FromStatus: strconv.Itoa(r.FromStatus),
		BodyMarkers: strings.Join(r.BodyMarkers, "\n"), ExcludeMarkers: strings.Join(r.ExcludeMarkers, "\n"),
		HeaderMatches: settings.FormatHeaders(r.HeaderMatches), ToStatus: strconv.Itoa(r.ToStatus), RetryAfterMS: msText(r.RetryAfterMS)}
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

// ruleKeyRE reads a rule error key of the settings service: error_rules[2].reason, or one inside
// a field (error_rules[2].body_markers[0], error_rules[2].header_matches.x-name), which is shown at
// that field.
var ruleKeyRE = regexp.MustCompile(`^(error_rules|status_restatements)\[([0-9]+)\](?:\.([a-z_]+)(?:\[[0-9]+\]|\..*)?)?$`)

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

// ruleReader reads the inputs of one rule (named prefix.field) with the settings' field
// decoding; a field it cannot read is a problem keyed like the settings service's messages,
// by the rule's place in the list that is saved (key.field, e.g. error_rules[1].statuses).
type ruleReader struct {
	form     url.Values
	prefix   string
	key      string
	problems map[string]errs.Msg
}

func newRuleReader(form url.Values, prefix, key string) ruleReader {
	return ruleReader{form: form, prefix: prefix, key: key, problems: map[string]errs.Msg{}}
}

func (r ruleReader) text(field string) string {
	return strings.TrimSpace(r.form.Get(r.prefix + "." + field))
}

// lines keeps the text of a textarea with its line ends normalised.
func (r ruleReader) lines(field string) string {
	return strings.TrimSpace(strings.ReplaceAll(r.form.Get(r.prefix+"."+field), "\r\n", "\n"))
}

func (r ruleReader) fail(field string, m *errs.Msg) {
	if m != nil {
		r.problems[r.key+"."+field] = *m
	}
}

// codes reads "403, 429"; a word that is no whole number is the field's problem.
func (r ruleReader) codes(field, text string) []int {
	codes, m := settings.ParseCodes(text)
	r.fail(field, m)
	return codes
}

// number reads a whole number; an empty field is 0 unless required.
func (r ruleReader) number(field, text string, required bool) int64 {
	if text == "" && !required {
		return 0
	}
	n, m := settings.ParseWhole(text)
	r.fail(field, m)
	return n
}

func readErrorRule(rd ruleReader) (views.ErrorRuleForm, settings.ErrorRule) {
	f := views.ErrorRuleForm{Prefix: rd.prefix, Name: rd.text("name"), Provider: rd.text("provider"), Statuses: rd.text("statuses"),
		BodyMarkers: rd.lines("body_markers"), ExcludeMarkers: rd.lines("exclude_markers"), HeaderMatches: rd.lines("header_matches"),
		Reason: rd.text("reason"), Scope: rd.text("scope"), CooldownMS: rd.text("cooldown_ms"), Terminal: rd.text("terminal"),
		Errors: views.FieldErrors{}}
	r := settings.ErrorRule{Name: f.Name, Provider: f.Provider, Statuses: rd.codes("statuses", f.Statuses),
		HeaderMatches: settings.ParseHeaders(f.HeaderMatches), BodyMarkers: settings.ParseLines(f.BodyMarkers),
		ExcludeMarkers: settings.ParseLines(f.ExcludeMarkers), Reason: f.Reason, Scope: f.Scope,
		CooldownMS: rd.number("cooldown_ms", f.CooldownMS, false), Terminal: f.Terminal}
	return f, r
}

func readRestatement(rd ruleReader) (views.RestatementForm, settings.StatusRestatement) {
	f := views.RestatementForm{Prefix: rd.prefix, Name: rd.text("name"), Provider: rd.text("provider"), FromStatus: rd.text("from_status"),
		BodyMarkers: rd.lines("body_markers"), ExcludeMarkers: rd.lines("exclude_markers"), HeaderMatches: rd.lines("header_matches"),
		ToStatus: rd.text("to_status"), RetryAfterMS: rd.text("retry_after_ms"), Errors: views.FieldErrors{}}
	r := settings.StatusRestatement{Name: f.Name, Provider: f.Provider,
		FromStatus: int(rd.number("from_status", f.FromStatus, true)), BodyMarkers: settings.ParseLines(f.BodyMarkers),
		ExcludeMarkers: settings.ParseLines(f.ExcludeMarkers), HeaderMatches: settings.ParseHeaders(f.HeaderMatches),
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
	return copyEach(rules, func(r *settings.ErrorRule) {
		r.Statuses = nonNil(r.Statuses)
		r.BodyMarkers, r.ExcludeMarkers, r.HeaderMatches = nonNil(r.BodyMarkers), nonNil(r.ExcludeMarkers), nonNilMap(r.HeaderMatches)
	})
}

func normalRestatements(rules []settings.StatusRestatement) []settings.StatusRestatement {
	return copyEach(rules, func(r *settings.StatusRestatement) {
		r.BodyMarkers, r.ExcludeMarkers, r.HeaderMatches = nonNil(r.BodyMarkers), nonNil(r.ExcludeMarkers), nonNilMap(r.HeaderMatches)
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func nonNilMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

func (errorRulesCard) save(s *Settings, c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	snap := s.Svc.Snapshot()
	cur := snap.Resilience()
	m := rulesFrame(snap)
	ch := settings.NewChanges()
	keep := func(rd ruleReader) {
		for _, k := range slices.Sorted(maps.Keys(rd.problems)) {
			ch.Fail(k, rd.problems[k])
		}
	}

	// Read both lists; rulesAt and restatesAt map a list index of the patch to its form.
	post := postedRules{form: form, deleted: form.Get("delete"), added: form.Get("add"), keep: keep}
	rules, rulesAt := readPostedRules(post, errorRulesPath, newRulePrefix, &m.Rules, &m.NewRule, readErrorRule,
		func(f views.ErrorRuleForm) bool {
			return blankRule(f.Name, f.Provider, f.Statuses, f.BodyMarkers, f.ExcludeMarkers, f.HeaderMatches, f.CooldownMS)
		})
	restates, restatesAt := readPostedRules(post, restatementsPath, newRestatePrefix, &m.Restatements, &m.NewRestatement,
		readRestatement, func(f views.RestatementForm) bool {
			return blankRule(f.Name, f.Provider, f.FromStatus, f.BodyMarkers, f.ExcludeMarkers, f.HeaderMatches, f.ToStatus, f.RetryAfterMS)
		})

	// "Fill in the example" shows the example in the new restatement and saves nothing.
	if form.Get("example") == restatementExampleID {
		m.NewRestatement = exampleRestatement()
		return s.renderCustom(c, http.StatusOK, rulesCardID, views.ErrorRulesCard(m))
	}

	// Only a list that changed is saved, so an untouched list keeps its layer.
	if rules := normalRules(rules); !reflect.DeepEqual(rules, normalRules(cur.ErrorRules)) {
		ch.Set(errorRulesPath, rules)
	}
	if restates := normalRestatements(restates); !reflect.DeepEqual(restates, normalRestatements(cur.StatusRestatements)) {
		ch.Set(restatementsPath, restates)
	}
	saved, err := s.Svc.Apply(ctx(c), ch)
	if err == nil {
		return renderSaved(c, rulesCardID, "", func() (templ.Component, error) {
			m := rulesModel(saved)
			m.Meta.Saved = true
			return views.ErrorRulesCard(m), nil
		})
	}
	if !placeRuleErrors(ctx(c), err, rulesAt, restatesAt, &m.Meta) {
		return err
	}
	m.Meta.Failed = true
	return s.renderCustom(c, http.StatusUnprocessableEntity, rulesCardID, views.ErrorRulesCard(m))
}

// postedRules is a posted rules card: the row its delete button names ("" = none), the list its
// add button names, and what takes each row's problems.
type postedRules struct {
	form    url.Values
	deleted string
	added   string
	keep    func(ruleReader)
}

// readPostedRules reads one list of the card (error rules or restatements) into rows and its
// new row into newRow: the list for the patch, and at, by the patch's index, the form each of
// its rules came from. The deleted row is left out; the new row joins when it was added or is
// not blank.
func readPostedRules[F, R any](p postedRules, list, newPrefix string, rows *[]F, newRow *F,
	read func(ruleReader) (F, R), blank func(F) bool) (items []R, at []*F) {
	for _, i := range postedIndices(p.form, list) {
		prefix := fmt.Sprintf("%s[%d]", list, i)
		if prefix == p.deleted {
			continue
		}
		rd := newRuleReader(p.form, prefix, fmt.Sprintf("%s[%d]", list, len(items)))
		f, r := read(rd)
		p.keep(rd)
		*rows = append(*rows, f)
		items = append(items, r)
	}
	for i := range *rows {
		at = append(at, &(*rows)[i])
	}
	rd := newRuleReader(p.form, newPrefix, fmt.Sprintf("%s[%d]", list, len(items)))
	if f, r := read(rd); p.added == list || !blank(f) {
		p.keep(rd)
		*newRow = f
		items = append(items, r)
		at = append(at, newRow)
	}
	return items, at
}

// placeRuleErrors puts each message of a refused save at the rule and field it names (the
// first one per field), and the rest at the top of the card. It reports false for an internal
// error.
func placeRuleErrors(ctx context.Context, err error, rules []*views.ErrorRuleForm,
	restates []*views.RestatementForm, meta *views.CardMeta) bool {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code == errs.Internal {
		return false
	}
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		msg := Text(ctx, e.Fields[k])
		if m := ruleKeyRE.FindStringSubmatch(k); m != nil {
			i, _ := strconv.Atoi(m[2])
			var fe views.FieldErrors
			switch {
			case m[1] == errorRulesPath && i < len(rules):
				fe = rules[i].Errors
			case m[1] == restatementsPath && i < len(restates):
				fe = restates[i].Errors
			}
			if fe != nil {
				if _, taken := fe[m[3]]; !taken {
					fe[m[3]] = msg
				}
				continue
			}
		}
		meta.Errors = append(meta.Errors, labelled(ctx, strings.SplitN(k, "[", 2)[0], msg))
	}
	if len(e.Fields) == 0 {
		meta.Errors = append(meta.Errors, Text(ctx, e.Msg))
	}
	return true
}
