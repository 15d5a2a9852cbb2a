package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
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

// settingsCard is one card of the settings page: its id (its URL /settings/<id> and element
// #card-<id>), the settings it edits as dotted paths, and its view. Whether a path is a number
// or a toggle follows from the setting's value; a path ending in _ms is shown in milliseconds.
type settingsCard struct {
	id    string
	paths []string
	view  func(st *cardState) templ.Component
}

// settingsCards are the cards of the settings page, in page order. A new card is a view model
// and templ component in views/settings.templ, catalog keys, and an entry here.
var settingsCards = []settingsCard{
	{
		id: "connection-cooldown",
		paths: []string{"connection_cooldown.max_cooldown_ms",
			"connection_cooldown.api_key.base_cooldown_ms", "connection_cooldown.api_key.max_backoff_steps",
			"connection_cooldown.api_key.use_upstream_retry_hints",
			"connection_cooldown.oauth.base_cooldown_ms", "connection_cooldown.oauth.max_backoff_steps",
			"connection_cooldown.oauth.use_upstream_retry_hints"},
		view: func(st *cardState) templ.Component {
			return views.ConnectionCooldownCard(views.ConnectionCooldownCardModel{
				Meta:        st.meta,
				MaxCooldown: st.number("connection_cooldown.max_cooldown_ms"),
				APIKeyBase:  st.number("connection_cooldown.api_key.base_cooldown_ms"),
				APIKeySteps: st.number("connection_cooldown.api_key.max_backoff_steps"),
				APIKeyHints: st.toggle("connection_cooldown.api_key.use_upstream_retry_hints"),
				OAuthBase:   st.number("connection_cooldown.oauth.base_cooldown_ms"),
				OAuthSteps:  st.number("connection_cooldown.oauth.max_backoff_steps"),
				OAuthHints:  st.toggle("connection_cooldown.oauth.use_upstream_retry_hints"),
			})
		},
	},
	{
		id:    "request-queue",
		paths: []string{"request_queue.max_wait_ms", "request_queue.execution_max_wait_ms", "request_queue.max_queue_depth"},
		view: func(st *cardState) templ.Component {
			return views.RequestQueueCard(views.RequestQueueCardModel{
				Meta:             st.meta,
				MaxWait:          st.number("request_queue.max_wait_ms"),
				ExecutionMaxWait: st.number("request_queue.execution_max_wait_ms"),
				MaxQueueDepth:    st.number("request_queue.max_queue_depth"),
			})
		},
	},
}

// cardState is what a card is drawn from: for each setting the text in its input (or whether
// its toggle is on), the layer its effective value comes from, and its error.
type cardState struct {
	meta    views.CardMeta
	text    map[string]string
	on      map[string]bool
	sources map[string]string
	errors  map[string]string
}

func (st *cardState) number(path string) views.NumberField {
	f := views.NumberField{Name: path, Value: st.text[path], Source: st.sources[path], Error: st.errors[path]}
	if strings.HasSuffix(path, "_ms") {
		f.Unit = "ms"
	}
	return f
}

func (st *cardState) toggle(path string) views.ToggleField {
	return views.ToggleField{Name: path, Checked: st.on[path], Source: st.sources[path], Error: st.errors[path]}
}

// leafValues flattens the effective settings into dotted path → value (json.Number, bool,
// string or []any).
func leafValues(snap *settings.Snapshot) map[string]any {
	raw, err := json.Marshal(snap.Resilience())
	if err != nil {
		return map[string]any{} // plain data; cannot fail
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	_ = dec.Decode(&doc)
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if child, ok := v.(map[string]any); ok {
				walk(prefix+k+".", child)
				continue
			}
			out[prefix+k] = v
		}
	}
	walk("", doc)
	return out
}

// stateFromSnapshot draws a card from the effective settings.
func stateFromSnapshot(card settingsCard, snap *settings.Snapshot) *cardState {
	vals := leafValues(snap)
	st := &cardState{meta: views.CardMeta{ID: card.id}, text: map[string]string{}, on: map[string]bool{},
		sources: map[string]string{}, errors: map[string]string{}}
	for _, p := range card.paths {
		st.sources[p] = snap.Source(p)
		switch v := vals[p].(type) {
		case bool:
			st.on[p] = v
		case json.Number:
			st.text[p] = v.String()
		}
	}
	return st
}

// numberRE accepts what a person types for a number: digits with an optional fraction after a
// point or a comma.
var numberRE = regexp.MustCompile(`^-?[0-9]+([.,][0-9]+)?$`)

// normalizeNumber turns typed text into a JSON number literal ("007" → "7", "0,5" → "0.5").
func normalizeNumber(text string) (string, bool) {
	if !numberRE.MatchString(text) {
		return "", false
	}
	text = strings.Replace(text, ",", ".", 1)
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return strconv.FormatInt(n, 10), true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", false
	}
	return strconv.FormatFloat(f, 'f', -1, 64), true
}

// readCard reads a card's form into a partial settings document and the card state showing
// what was typed. Only values that differ from the effective ones go into the patch, so a
// value left alone keeps its layer (default or env). An empty or malformed number is an error
// here; types, ranges and cross-field rules are the settings service's.
func readCard(c echo.Context, card settingsCard, snap *settings.Snapshot) (patch map[string]any, st *cardState) {
	st = stateFromSnapshot(card, snap)
	vals := leafValues(snap)
	patch = map[string]any{}
	for _, p := range card.paths {
		if cur, isBool := vals[p].(bool); isBool {
			on := c.FormValue(p) == "true"
			st.on[p] = on
			if on != cur {
				setPath(patch, p, on)
			}
			continue
		}
		text := strings.TrimSpace(c.FormValue(p))
		st.text[p] = text
		switch num, ok := normalizeNumber(text); {
		case text == "":
			st.errors[p] = i18n.T(ctx(c), "err.required")
		case !ok:
			st.errors[p] = i18n.T(ctx(c), "err.number")
		case num != fmt.Sprint(vals[p]):
			setPath(patch, p, json.Number(num))
		}
	}
	return patch, st
}

// setPath puts v at a dotted path of a nested document.
func setPath(doc map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, k := range parts[:len(parts)-1] {
		child, ok := doc[k].(map[string]any)
		if !ok {
			child = map[string]any{}
			doc[k] = child
		}
		doc = child
	}
	doc[parts[len(parts)-1]] = v
}

// settingLabel names a setting mentioned in a message of the setting at path: the sibling
// closest to path with that name, e.g. max_cooldown_ms next to connection_cooldown.oauth.x is
// connection_cooldown.max_cooldown_ms.
func settingLabel(ctx context.Context, path, name string) string {
	for prefix := path; ; {
		i := strings.LastIndexByte(prefix, '.')
		if i < 0 {
			break
		}
		prefix = prefix[:i]
		if key := "setting." + prefix + "." + name; i18n.Has(i18n.EN, key) {
			return i18n.T(ctx, key)
		}
	}
	if key := "setting." + name; i18n.Has(i18n.EN, key) {
		return i18n.T(ctx, key)
	}
	return ""
}

// SettingsPage answers GET /settings. ?saved=<card id> marks that card as just saved (the
// redirect after a save without JavaScript).
func (s *Settings) SettingsPage(c echo.Context) error {
	var override *cardState
	if saved := c.QueryParam("saved"); saved != "" {
		for _, card := range settingsCards {
			if card.id == saved {
				override = stateFromSnapshot(card, s.Svc.Snapshot())
				override.meta.Saved = true
			}
		}
	}
	return s.renderSettingsPage(c, http.StatusOK, override)
}

func (s *Settings) renderSettingsPage(c echo.Context, status int, override *cardState) error {
	snap := s.Svc.Snapshot()
	m := views.SettingsModel{Shell: pageShell(c, nil, "settings", i18n.T(ctx(c), "settings.title"), "/settings")}
	for _, card := range settingsCards {
		st := stateFromSnapshot(card, snap)
		if override != nil && override.meta.ID == card.id {
			st = override
		}
		m.Cards = append(m.Cards, card.view(st))
	}
	return Render(c, status, views.SettingsPage(m))
}

// saveCard answers POST /settings/<card id>: a partial patch of the card's settings through
// the settings service (the same strict validation as PATCH /api/settings/resilience). htmx
// gets the card back: 200 saved, or 422 with the field errors and nothing saved. A plain form
// is redirected back (303) or gets the whole page with the errors (422).
func (s *Settings) saveCard(card settingsCard) echo.HandlerFunc {
	return func(c echo.Context) error {
		patch, st := readCard(c, card, s.Svc.Snapshot())
		if len(st.errors) == 0 {
			raw, err := json.Marshal(patch)
			if err != nil {
				return err
			}
			snap, err := s.Svc.Patch(ctx(c), raw)
			var ve *settings.ValidationError
			switch {
			case err == nil:
				if !isHTMX(c) {
					return c.Redirect(http.StatusSeeOther, "/settings?saved="+card.id+"#card-"+card.id)
				}
				st = stateFromSnapshot(card, snap)
				st.meta.Saved = true
				return Render(c, http.StatusOK, card.view(st))
			case errors.As(err, &ve):
				for _, k := range sortedKeys(ve.Fields) {
					msg := translateMessage(ctx(c), ve.Fields[k], func(name string) string { return settingLabel(ctx(c), k, name) })
					if slices.Contains(card.paths, k) {
						st.errors[k] = msg
					} else {
						if k != "" {
							msg = k + ": " + msg
						}
						st.meta.Errors = append(st.meta.Errors, msg)
					}
				}
			default:
				return err
			}
		}
		st.meta.Failed = true
		if isHTMX(c) {
			return Render(c, http.StatusUnprocessableEntity, card.view(st))
		}
		return s.renderSettingsPage(c, http.StatusUnprocessableEntity, st)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
