package handlers

import (
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/settings"
	"switchyard/views"
)

// settingsCard is one card of the settings page: its id (its URL /settings/<id> and element
// #card-<id>; texts card.<id>.title, .lead and optional .note and .explain) and the section of
// the settings document it edits: every registry setting of that section, in registry order
// (paths, filled in at start). Every field is drawn and read back from its registry entry
// (settings.Setting), so a new setting joins its section's card by its registry line alone. A
// card that is more than a set of fields (rule lists, per-provider overrides) brings its own
// page and save.
type settingsCard struct {
	id      string
	section string
	paths   []string // the section's settings; a custom card names its own
	// link is where the card's explanation links to (text card.<id>.link); "" for none.
	link   string
	custom customCard
	// oauth marks a card of the OAuth client settings document (PATCH /api/settings/oauth)
	// rather than the resilience one.
	oauth bool
}

// settingValues are a document's effective values and their layers (*settings.Snapshot,
// *settings.OAuthSnapshot).
type settingValues interface {
	Value(path string) any
	Source(path string) string
}

// values is the snapshot of the document a card edits.
func (s *Settings) values(card settingsCard) settingValues {
	if card.oauth {
		return s.OAuth.Snapshot()
	}
	return s.Svc.Snapshot()
}

// apply saves a card's changes to its document and returns the values after the save.
func (s *Settings) apply(c echo.Context, card settingsCard, ch *settings.Changes) (settingValues, error) {
	if card.oauth {
		snap, err := s.OAuth.Apply(ctx(c), ch)
		if err != nil {
			return nil, err
		}
		return snap, nil
	}
	snap, err := s.Svc.Apply(ctx(c), ch)
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// customCard draws and saves a card that the generic one cannot.
type customCard interface {
	// page draws the card for GET /settings; saved marks the redirect after a plain-form save.
	page(s *Settings, c echo.Context, saved bool) (templ.Component, error)
	// save answers POST /settings/<id> like the generic cards: 200 or 422 with the card for
	// htmx, 303 or the page with 422 otherwise.
	save(s *Settings, c echo.Context) error
}

// settingsCards are the cards of the settings page, in page order: the reference's order for
// the cards it has (request queue, connection cooldown, circuit breaker, combo cooldown wait,
// quota-share, provider cooldown, model lockout), ours next to their closest kin.
var settingsCards = withPaths([]settingsCard{
	{id: "request-queue", section: "request_queue"},
	{id: "connection-cooldown", section: "connection_cooldown"},
	{id: "retry", section: "retry"},
	{id: "circuit-breaker", section: "circuit_breaker"},
	{id: overridesCardID, custom: providerOverridesCard{}},
	{id: "combo-routing", section: "combo_routing", link: "/combos"},
	{id: "combo-cooldown-wait", section: "combo_cooldown_wait", link: "/combos"},
	{id: "quota-share", section: "quota_share_concurrency", link: "/providers"},
	{id: "provider-cooldown", section: "provider_cooldown"},
	{id: "model-lockout", section: "model_lockout"},
	{id: "session-affinity", section: "session_affinity_ttl_ms", link: "/providers"},
	{id: "claude-low-priority", section: "claude_low_priority", link: "/providers#add-claude"},
	{id: "claude-oauth", section: "claude", oauth: true, link: "/providers#add-claude"},
	{id: "codex-oauth", section: "codex", oauth: true, link: "/providers#add-codex"},
	{id: "copilot-oauth", section: "copilot", oauth: true, link: "/providers#add-copilot"},
	{id: "streams", section: "streams"},
	{id: "discovery", section: "discovery"},
	{id: sessionsCardID, custom: sessionsCard{}},
	{id: rulesCardID, paths: []string{errorRulesPath, restatementsPath}, custom: errorRulesCard{}},
	{id: pricesCardID, custom: pricesCard{}},
})

// withPaths fills each card's paths from its section.
func withPaths(cards []settingsCard) []settingsCard {
	for i := range cards {
		if cards[i].section != "" {
			cards[i].paths = settings.Section(cards[i].section)
		}
	}
	return cards
}

// SettingsPage answers GET /settings. ?saved=<card id> marks that card as just saved (the
// redirect after a save without JavaScript).
func (s *Settings) SettingsPage(c echo.Context) error {
	saved := c.QueryParam("saved")
	for _, card := range settingsCards {
		if card.id != saved {
			continue
		}
		if card.custom != nil {
			comp, err := card.custom.page(s, c, true)
			if err != nil {
				return err
			}
			return s.renderSettingsPage(c, http.StatusOK, card.id, comp)
		}
		m := s.cardModel(card, s.values(card), nil, nil)
		m.Meta.Saved = true
		return s.renderSettingsPage(c, http.StatusOK, card.id, views.SettingsCard(m))
	}
	return s.renderSettingsPage(c, http.StatusOK, "", nil)
}

// renderSettingsPage draws the whole page; the card with id shown is drawn as given (a card
// just saved or refused), every other from the effective settings.
func (s *Settings) renderSettingsPage(c echo.Context, status int, shown string, comp templ.Component) error {
	m := views.SettingsModel{Shell: pageShell(c, nil, "settings", i18n.T(ctx(c), "settings.title"), "/settings")}
	for _, card := range settingsCards {
		m.CardIDs = append(m.CardIDs, card.id)
		switch {
		case card.id == shown && comp != nil:
			m.Cards = append(m.Cards, comp)
		case card.custom != nil:
			cc, err := card.custom.page(s, c, false)
			if err != nil {
				return err
			}
			m.Cards = append(m.Cards, cc)
		default:
			m.Cards = append(m.Cards, views.SettingsCard(s.cardModel(card, s.values(card), nil, nil)))
		}
	}
	return Render(c, status, views.SettingsPage(m))
}

// saveCard answers POST /settings/<card id>: the card's fields are read through the registry
// and applied by the settings service (the same strict validation as PATCH
// /api/settings/resilience); every field that cannot be read or is invalid is reported at once.
// htmx gets the card back: 200 saved, or 422 with the field errors and nothing saved. A plain
// form is redirected back (303) or gets the whole page with the errors (422).
func (s *Settings) saveCard(card settingsCard) echo.HandlerFunc {
	if card.custom != nil {
		return func(c echo.Context) error { return card.custom.save(s, c) }
	}
	return func(c echo.Context) error {
		form, err := c.FormParams()
		if err != nil {
			return err
		}
		snap := s.values(card)
		changes, inputs := settings.ReadForm(snap, card.paths, form)
		saved, err := s.apply(c, card, changes)
		if err == nil {
			return renderSaved(c, card.id, "", func() (templ.Component, error) {
				m := s.cardModel(card, saved, nil, nil)
				m.Meta.Saved = true
				return views.SettingsCard(m), nil
			})
		}
		placed, ok := placeErrors(ctx(c), err, card.paths)
		if !ok {
			return err
		}
		m := s.cardModel(card, snap, inputs, placed.fields)
		m.Meta.Failed, m.Meta.Errors = true, placed.card
		return s.renderCustom(c, http.StatusUnprocessableEntity, card.id, views.SettingsCard(m))
	}
}

// cardModel draws a plain card from the registry: each field shows inputs[path] (what a refused
// save held) or else its effective value, its source, and its error. Fields below a sub-section
// of the card's settings (connection_cooldown.oauth.*) form a group titled
// settings.group.<sub-section>.
func (s *Settings) cardModel(card settingsCard, snap settingValues, inputs map[string]settings.Input,
	fieldErrs map[string]string) views.SettingsCardModel {
	m := views.SettingsCardModel{Meta: views.CardMeta{ID: card.id}, Link: card.link}
	if card.id == "streams" && s.StreamEnds != nil {
		for _, n := range s.StreamEnds() {
			m.Counts = append(m.Counts, views.CardCount{Code: n.End, Before: n.BeforeClient, After: n.AfterFB})
		}
	}
	for _, p := range card.paths {
		st, ok := settings.Lookup(p)
		if !ok {
			continue // TestSettingsCardsUseTheRegistry keeps this from happening
		}
		in, typed := inputs[p]
		if !typed {
			in = st.Input(snap.Value(p))
		}
		addField(&m, groupKey(p), settingField(st, in, snap.Source(p), fieldErrs[p]))
	}
	return m
}

// groupKey is the title key of the group a setting is shown in: its sub-section below the
// card's section ("settings.group.oauth" for connection_cooldown.oauth.base_cooldown_ms), or ""
// for the card's own fields.
func groupKey(path string) string {
	parts := splitPath(path)
	if len(parts) < 3 {
		return ""
	}
	return "settings.group." + parts[len(parts)-2]
}

// addField appends a field to the card: to the last block when it belongs there, else in a
// new block (a run of own fields, or a run of groups side by side).
func addField(m *views.SettingsCardModel, group string, f views.SettingField) {
	var last *views.FieldBlock
	if n := len(m.Blocks); n > 0 {
		last = &m.Blocks[n-1]
	}
	switch {
	case group == "" && last != nil && len(last.Groups) == 0:
		last.Fields = append(last.Fields, f)
	case group == "":
		m.Blocks = append(m.Blocks, views.FieldBlock{Fields: []views.SettingField{f}})
	case last != nil && len(last.Groups) > 0 && last.Groups[len(last.Groups)-1].TitleKey == group:
		g := &last.Groups[len(last.Groups)-1]
		g.Fields = append(g.Fields, f)
	case last != nil && len(last.Groups) > 0:
		last.Groups = append(last.Groups, views.FieldGroup{TitleKey: group, Fields: []views.SettingField{f}})
	default:
		m.Blocks = append(m.Blocks, views.FieldBlock{Groups: []views.FieldGroup{{TitleKey: group, Fields: []views.SettingField{f}}}})
	}
}

// renderSaved answers a post that saved: a plain form is sent back to the page with the card
// marked as just saved (?saved=<id>, then query), htmx gets the card that draw draws from what
// was saved, marked saved by it.
func renderSaved(c echo.Context, id, query string, draw func() (templ.Component, error)) error {
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/settings?saved="+id+query+"#card-"+id)
	}
	card, err := draw()
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, card)
}

// renderCustom answers a post that saved nothing: the card alone for htmx, the whole page with
// the card as shown otherwise.
func (s *Settings) renderCustom(c echo.Context, status int, id string, card templ.Component) error {
	if isHTMX(c) {
		return Render(c, status, card)
	}
	return s.renderSettingsPage(c, status, id, card)
}
