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
// #card-<id>), the settings it edits as dotted paths, and its view. What kind of field a path
// gets follows from its value (number, toggle) or from the tables in settings_fields.go
// (chips, selects, text); a path ending in _ms is shown in milliseconds. A card that is more
// than a set of leaves (rule lists, per-provider overrides) brings its own page and save.
type settingsCard struct {
	id     string
	paths  []string
	view   func(st *cardState) templ.Component
	custom customCard
}

// customCard draws and saves a card that the generic leaf editor cannot.
type customCard interface {
	// page draws the card for GET /settings; saved marks the redirect after a plain-form save.
	page(s *Settings, c echo.Context, saved bool) (templ.Component, error)
	// save answers POST /settings/<id> like the generic cards: 200 or 422 with the card for
	// htmx, 303 or the page with 422 otherwise.
	save(s *Settings, c echo.Context) error
}

// settingsCards are the cards of the settings page, in page order: the reference's order for
// the cards it has (request queue, connection cooldown, circuit breaker, combo cooldown wait,
// quota-share, provider cooldown, model lockout), ours next to their closest kin. A new card
// is a view model and templ component in views/settings_*.templ, catalog keys, and an entry here.
var settingsCards = []settingsCard{
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
		id: "retry",
		paths: []string{"retry.max_retries", "retry.initial_backoff_ms", "retry.max_backoff_ms",
			"retry.backoff_factor", "retry.jitter", "retry.retry_on_statuses"},
		view: func(st *cardState) templ.Component {
			return views.RetryCard(views.RetryCardModel{
				Meta:           st.meta,
				MaxRetries:     st.number("retry.max_retries"),
				InitialBackoff: st.number("retry.initial_backoff_ms"),
				MaxBackoff:     st.number("retry.max_backoff_ms"),
				Factor:         st.number("retry.backoff_factor"),
				Jitter:         st.number("retry.jitter"),
				RetryOn:        st.chips("retry.retry_on_statuses"),
			})
		},
	},
	{
		id: "circuit-breaker",
		paths: []string{"circuit_breaker.enabled", "circuit_breaker.scope", "circuit_breaker.failure_threshold",
			"circuit_breaker.success_threshold", "circuit_breaker.timeout_ms", "circuit_breaker.failure_on_statuses",
			"circuit_breaker.slow_call_threshold_ms"},
		view: func(st *cardState) templ.Component {
			return views.CircuitBreakerCard(views.CircuitBreakerCardModel{
				Meta:             st.meta,
				Enabled:          st.toggle("circuit_breaker.enabled"),
				Scope:            st.choice("circuit_breaker.scope"),
				FailureThreshold: st.number("circuit_breaker.failure_threshold"),
				SuccessThreshold: st.number("circuit_breaker.success_threshold"),
				Timeout:          st.number("circuit_breaker.timeout_ms"),
				FailureOn:        st.chips("circuit_breaker.failure_on_statuses"),
				SlowCall:         st.number("circuit_breaker.slow_call_threshold_ms"),
			})
		},
	},
	{id: "provider-overrides", custom: providerOverridesCard{}},
	{
		id: "combo-cooldown-wait",
		paths: []string{"combo_cooldown_wait.enabled", "combo_cooldown_wait.max_wait_ms",
			"combo_cooldown_wait.max_attempts", "combo_cooldown_wait.budget_ms"},
		view: func(st *cardState) templ.Component {
			return views.ComboCooldownWaitCard(views.ComboCooldownWaitCardModel{
				Meta:        st.meta,
				Enabled:     st.toggle("combo_cooldown_wait.enabled"),
				MaxWait:     st.number("combo_cooldown_wait.max_wait_ms"),
				MaxAttempts: st.number("combo_cooldown_wait.max_attempts"),
				Budget:      st.number("combo_cooldown_wait.budget_ms"),
			})
		},
	},
	{
		id:    "quota-share",
		paths: []string{"quota_share_concurrency.enabled"},
		view: func(st *cardState) templ.Component {
			return views.QuotaShareCard(views.QuotaShareCardModel{
				Meta:    st.meta,
				Enabled: st.toggle("quota_share_concurrency.enabled"),
			})
		},
	},
	{
		id: "provider-cooldown",
		paths: []string{"provider_cooldown.enabled",
			"provider_cooldown.api_key.failure_threshold", "provider_cooldown.api_key.failure_window_ms", "provider_cooldown.api_key.cooldown_ms",
			"provider_cooldown.oauth.failure_threshold", "provider_cooldown.oauth.failure_window_ms", "provider_cooldown.oauth.cooldown_ms"},
		view: func(st *cardState) templ.Component {
			return views.ProviderCooldownCard(views.ProviderCooldownCardModel{
				Meta:            st.meta,
				Enabled:         st.toggle("provider_cooldown.enabled"),
				APIKeyThreshold: st.number("provider_cooldown.api_key.failure_threshold"),
				APIKeyWindow:    st.number("provider_cooldown.api_key.failure_window_ms"),
				APIKeyCooldown:  st.number("provider_cooldown.api_key.cooldown_ms"),
				OAuthThreshold:  st.number("provider_cooldown.oauth.failure_threshold"),
				OAuthWindow:     st.number("provider_cooldown.oauth.failure_window_ms"),
				OAuthCooldown:   st.number("provider_cooldown.oauth.cooldown_ms"),
			})
		},
	},
	{
		id: "model-lockout",
		paths: []string{"model_lockout.enabled", "model_lockout.error_codes", "model_lockout.base_cooldown_ms",
			"model_lockout.max_cooldown_ms", "model_lockout.use_exponential_backoff", "model_lockout.max_backoff_steps",
			"model_lockout.families"},
		view: func(st *cardState) templ.Component {
			return views.ModelLockoutCard(views.ModelLockoutCardModel{
				Meta:            st.meta,
				Enabled:         st.toggle("model_lockout.enabled"),
				ErrorCodes:      st.chips("model_lockout.error_codes"),
				BaseCooldown:    st.number("model_lockout.base_cooldown_ms"),
				MaxCooldown:     st.number("model_lockout.max_cooldown_ms"),
				Exponential:     st.toggle("model_lockout.use_exponential_backoff"),
				MaxBackoffSteps: st.number("model_lockout.max_backoff_steps"),
				Families:        st.textArea("model_lockout.families"),
			})
		},
	},
	{
		id: "claude-low-priority",
		paths: []string{"claude_low_priority.slow_retry_after_default_ms", "claude_low_priority.slow_max_wait_default_ms",
			"claude_low_priority.lane_cooloff_ms", "claude_low_priority.limit_reset_error_backoff_ms"},
		view: func(st *cardState) templ.Component {
			return views.ClaudeLowPriorityCard(views.ClaudeLowPriorityCardModel{
				Meta:              st.meta,
				SlowRetryAfter:    st.number("claude_low_priority.slow_retry_after_default_ms"),
				SlowMaxWait:       st.number("claude_low_priority.slow_max_wait_default_ms"),
				LaneCooloff:       st.number("claude_low_priority.lane_cooloff_ms"),
				LimitResetBackoff: st.number("claude_low_priority.limit_reset_error_backoff_ms"),
			})
		},
	},
	{
		id: "streams",
		paths: []string{"streams.connect_timeout_ms", "streams.first_byte_timeout_ms", "streams.readiness_timeout_ms",
			"streams.idle_timeout_ms", "streams.throughput_watchdog.enabled", "streams.throughput_watchdog.warmup_ms",
			"streams.throughput_watchdog.window_ms", "streams.throughput_watchdog.min_useful_bytes_per_second",
			"streams.throughput_watchdog.min_useful_bytes"},
		view: func(st *cardState) templ.Component {
			return views.StreamsCard(views.StreamsCardModel{
				Meta:            st.meta,
				ConnectTimeout:  st.number("streams.connect_timeout_ms"),
				FirstByte:       st.number("streams.first_byte_timeout_ms"),
				Readiness:       st.number("streams.readiness_timeout_ms"),
				Idle:            st.number("streams.idle_timeout_ms"),
				Watchdog:        st.toggle("streams.throughput_watchdog.enabled"),
				WatchdogWarmup:  st.number("streams.throughput_watchdog.warmup_ms"),
				WatchdogWindow:  st.number("streams.throughput_watchdog.window_ms"),
				WatchdogRate:    st.number("streams.throughput_watchdog.min_useful_bytes_per_second"),
				WatchdogMinimum: st.number("streams.throughput_watchdog.min_useful_bytes"),
			})
		},
	},
	{
		id:    "discovery",
		paths: []string{"discovery.model_refresh_interval_ms", "discovery.provider_recheck_interval_ms"},
		view: func(st *cardState) templ.Component {
			return views.DiscoveryCard(views.DiscoveryCardModel{
				Meta:           st.meta,
				RefreshEvery:   st.number("discovery.model_refresh_interval_ms"),
				RecheckFailing: st.number("discovery.provider_recheck_interval_ms"),
			})
		},
	},
	{id: "error-rules", paths: []string{"error_rules", "status_restatements"}, custom: errorRulesCard{}},
}

// cardState is what a card is drawn from: for each setting the text in its input (or whether
// its toggle is on, or its chips), the layer its effective value comes from, and its error.
type cardState struct {
	meta    views.CardMeta
	text    map[string]string
	on      map[string]bool
	lists   map[string][]string
	adding  map[string]string // text left in a chips field's add input
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

func (st *cardState) choice(path string) views.SelectField {
	return views.SelectField{Name: path, Value: st.text[path], Options: selectOptions[path],
		Source: st.sources[path], Error: st.errors[path]}
}

func (st *cardState) chips(path string) views.ChipsField {
	spec := chipLists[path]
	return views.ChipsField{Name: path, Values: st.lists[path], Adding: st.adding[path], Suggestions: spec.suggestions,
		Codes: spec.codes, Source: st.sources[path], Error: st.errors[path]}
}

func (st *cardState) textArea(path string) views.TextAreaField {
	spec := textLeaves[path]
	return views.TextAreaField{Name: path, Value: st.text[path], Placeholder: spec.placeholder, Rows: spec.rows,
		Source: st.sources[path], Error: st.errors[path]}
}

// leafValues flattens the effective settings into dotted path → value (json.Number, bool,
// string or []any). Map-valued leaves (model_lockout.families) are drawn by their textLeaves
// entry instead.
func leafValues(snap *settings.Snapshot) map[string]any {
	raw, err := json.Marshal(snap.Resilience())
	if err != nil {
		return map[string]any{} // plain data; cannot fail
	}
	return flattenJSON(raw)
}

// flattenJSON turns a JSON object into dotted path → value, with numbers kept as json.Number.
func flattenJSON(raw []byte) map[string]any {
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

// listText is a list value's elements as text.
func listText(v []any) []string {
	out := make([]string, 0, len(v))
	for _, e := range v {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// stateFromSnapshot draws a card from the effective settings.
func stateFromSnapshot(card settingsCard, snap *settings.Snapshot) *cardState {
	vals := leafValues(snap)
	st := &cardState{meta: views.CardMeta{ID: card.id}, text: map[string]string{}, on: map[string]bool{},
		lists: map[string][]string{}, adding: map[string]string{}, sources: map[string]string{}, errors: map[string]string{}}
	r := snap.Resilience()
	for _, p := range card.paths {
		st.sources[p] = snap.Source(p)
		if spec, ok := textLeaves[p]; ok {
			st.text[p] = spec.format(&r)
			continue
		}
		switch v := vals[p].(type) {
		case bool:
			st.on[p] = v
		case json.Number:
			st.text[p] = v.String()
		case string:
			st.text[p] = v
		case []any:
			st.lists[p] = listText(v)
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
// value left alone keeps its layer (default or env). An empty or malformed number, a chip that
// is no status and a line of text that cannot be read are errors here; types, ranges and
// cross-field rules are the settings service's.
func readCard(c echo.Context, card settingsCard, snap *settings.Snapshot) (patch map[string]any, st *cardState) {
	st = stateFromSnapshot(card, snap)
	vals := leafValues(snap)
	r := snap.Resilience()
	form, _ := c.FormParams()
	patch = map[string]any{}
	for _, p := range card.paths {
		if spec, ok := textLeaves[p]; ok {
			text := form.Get(p)
			st.text[p] = text
			v, msg := spec.parse(ctx(c), text)
			if msg != "" {
				st.errors[p] = msg
			} else if !sameJSON(v, spec.current(&r)) {
				setPath(patch, p, v)
			}
			continue
		}
		switch cur := vals[p].(type) {
		case bool:
			on := form.Get(p) == "true"
			st.on[p] = on
			if on != cur {
				setPath(patch, p, on)
			}
		case string:
			text := strings.TrimSpace(form.Get(p))
			st.text[p] = text
			if text != cur {
				setPath(patch, p, text)
			}
		case []any:
			spec := chipLists[p]
			list, bad := spec.read(form[p], form.Get(p+".add"))
			st.lists[p], st.adding[p] = list, strings.Join(bad, ", ")
			switch {
			case len(bad) > 0:
				st.errors[p] = i18n.T(ctx(c), spec.invalidKey(), st.adding[p])
			case !slices.Equal(list, listText(cur)):
				setPath(patch, p, spec.value(list))
			}
		default:
			text := strings.TrimSpace(form.Get(p))
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
	}
	return patch, st
}

// sameJSON reports whether two values encode to the same JSON.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
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
		st := stateFromSnapshot(card, s.Svc.Snapshot())
		st.meta.Saved = true
		return s.renderSettingsPage(c, http.StatusOK, card.id, card.view(st))
	}
	return s.renderSettingsPage(c, http.StatusOK, "", nil)
}

// renderSettingsPage draws the whole page; the card with id shown is drawn as given (a card
// just saved or refused), every other from the effective settings.
func (s *Settings) renderSettingsPage(c echo.Context, status int, shown string, comp templ.Component) error {
	snap := s.Svc.Snapshot()
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
			m.Cards = append(m.Cards, card.view(stateFromSnapshot(card, snap)))
		}
	}
	return Render(c, status, views.SettingsPage(m))
}

// saveCard answers POST /settings/<card id>: a partial patch of the card's settings through
// the settings service (the same strict validation as PATCH /api/settings/resilience). htmx
// gets the card back: 200 saved, or 422 with the field errors and nothing saved. A plain form
// is redirected back (303) or gets the whole page with the errors (422).
func (s *Settings) saveCard(card settingsCard) echo.HandlerFunc {
	if card.custom != nil {
		return func(c echo.Context) error { return card.custom.save(s, c) }
	}
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
				placeFieldErrors(ctx(c), ve.Fields, card.paths, st.errors, &st.meta)
			default:
				return err
			}
		}
		st.meta.Failed = true
		if isHTMX(c) {
			return Render(c, http.StatusUnprocessableEntity, card.view(st))
		}
		return s.renderSettingsPage(c, http.StatusUnprocessableEntity, card.id, card.view(st))
	}
}

// placeFieldErrors puts the service's messages next to the card's fields: a message keyed by
// one of paths, or by something inside it (model_lockout.families.anthropic.opus), goes to
// that field; anything else to the top of the card.
func placeFieldErrors(ctx context.Context, fields map[string]string, paths []string, dst map[string]string, meta *views.CardMeta) {
	for _, k := range sortedKeys(fields) {
		msg := settingsMessage(ctx, fields[k], func(name string) string { return settingLabel(ctx, k, name) })
		if p, inner, ok := fieldOf(k, paths); ok {
			if inner != "" {
				msg = inner + ": " + msg
			}
			if dst[p] == "" {
				dst[p] = msg
			}
			continue
		}
		if k != "" {
			msg = k + ": " + msg
		}
		meta.Errors = append(meta.Errors, msg)
	}
}

// fieldOf finds the path among paths that a message key belongs to, and what inside it the key
// names ("anthropic.opus" for model_lockout.families.anthropic.opus).
func fieldOf(key string, paths []string) (path, inner string, ok bool) {
	for _, p := range paths {
		switch {
		case key == p:
			return p, "", true
		case strings.HasPrefix(key, p+"."):
			return p, key[len(p)+1:], true
		case strings.HasPrefix(key, p+"["):
			return p, key[len(p):], true
		}
	}
	return "", "", false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
