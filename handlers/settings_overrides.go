package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/settings"
	"switchyard/views"
)

// ProviderCatalog is what the per-provider overrides card needs of the catalog.
type ProviderCatalog interface {
	ListProviders(ctx context.Context) ([]catalog.Provider, error)
	UpdateProvider(ctx context.Context, id int64, in catalog.ProviderInput, validate catalog.ProviderOverridesValidator) (catalog.Provider, error)
}

const overridesCardID = "provider-overrides"

// overridePaths are the settings a provider can override (settings.ProviderOverrides), in the
// card's order: retry first, then the circuit breaker.
var overridePaths = []string{
	"retry.max_retries", "retry.initial_backoff_ms", "retry.max_backoff_ms", "retry.backoff_factor", "retry.jitter",
	"retry.retry_on_statuses",
	"circuit_breaker.enabled", "circuit_breaker.scope", "circuit_breaker.failure_threshold", "circuit_breaker.success_threshold",
	"circuit_breaker.timeout_ms", "circuit_breaker.failure_on_statuses", "circuit_breaker.slow_call_threshold_ms",
}

// noStatuses is what an override field holds for an empty status list ("retry on nothing");
// an empty field inherits.
const noStatuses = "none"

// providerOverridesCard edits one provider's overrides of retry and circuit_breaker at a time
// and lists what every provider overrides. It saves through the catalog (the same validation as
// PATCH /api/providers/{id}), not the settings service.
type providerOverridesCard struct{}

func (providerOverridesCard) page(s *Settings, c echo.Context, saved bool) (templ.Component, error) {
	id, _ := strconv.ParseInt(c.QueryParam("provider"), 10, 64)
	m, err := s.overridesModel(ctx(c), id, nil, nil)
	m.Meta.Saved = saved
	return views.ProviderOverridesCard(m), err
}

// overridesModel draws the card editing provider id (or, if there is none such, the first
// provider with overrides, else the first). typed, when not nil, is what the form held (a save
// that failed) instead of the stored overrides; fieldErrs are the messages by setting path.
func (s *Settings) overridesModel(ctx context.Context, id int64, typed, fieldErrs map[string]string) (views.ProviderOverridesCardModel, error) {
	m := views.ProviderOverridesCardModel{Meta: views.CardMeta{ID: overridesCardID}}
	if s.Providers == nil {
		return m, nil
	}
	provs, err := s.Providers.ListProviders(ctx)
	if err != nil {
		return m, err
	}
	if len(provs) == 0 {
		return m, nil
	}
	sel := slices.IndexFunc(provs, func(p catalog.Provider) bool { return p.ID == id })
	if sel < 0 {
		sel = max(0, slices.IndexFunc(provs, func(p catalog.Provider) bool { return len(overrideTexts(p.Resilience)) > 0 }))
	}
	for _, p := range provs {
		own := overrideTexts(p.Resilience)
		row := views.ProviderOverrideRow{ID: p.ID, Name: p.Name}
		for _, path := range overridePaths {
			if v, ok := own[path]; ok {
				row.Overrides = append(row.Overrides, path+" = "+v)
			}
		}
		m.Providers = append(m.Providers, row)
	}
	m.Selected = provs[sel].ID
	own := overrideTexts(provs[sel].Resilience)
	if typed != nil && provs[sel].ID == id {
		own = typed
	}
	snap := s.Svc.Snapshot()
	global := leafValues(snap)
	for _, path := range overridePaths {
		f := views.OverrideField{Name: path, Value: own[path], Global: valueText(global[path]), GlobalSource: snap.Source(path),
			Options: overrideOptions(path), Error: fieldErrs[path]}
		if strings.HasSuffix(path, "_ms") {
			f.Unit = "ms"
		}
		if strings.HasPrefix(path, "retry.") {
			m.Retry = append(m.Retry, f)
		} else {
			m.Breaker = append(m.Breaker, f)
		}
	}
	return m, nil
}

// overrideTexts reads a provider's stored overrides into setting path → text.
func overrideTexts(raw json.RawMessage) map[string]string {
	out := map[string]string{}
	if len(raw) == 0 {
		return out
	}
	for path, v := range flattenJSON(raw) {
		out[path] = valueText(v)
	}
	return out
}

// valueText writes a setting value the way an override field takes it.
func valueText(v any) string {
	switch v := v.(type) {
	case []any:
		if len(v) == 0 {
			return noStatuses
		}
		return strings.Join(listText(v), ", ")
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// overrideOptions are the choices of a select override ("" = inherit comes first on the card).
func overrideOptions(path string) []string {
	if path == "circuit_breaker.enabled" {
		return []string{"true", "false"}
	}
	return selectOptions[path]
}

// readOverride turns one filled-in override field into its JSON value, or a message.
func readOverride(ctx context.Context, path, text string) (any, string) {
	switch {
	case path == "circuit_breaker.enabled":
		b, err := strconv.ParseBool(text)
		if err != nil {
			return nil, i18n.T(ctx, "err.bool")
		}
		return b, ""
	case selectOptions[path] != nil:
		return text, ""
	case chipLists[path].suggestions != nil:
		if strings.EqualFold(text, noStatuses) {
			return []string{}, ""
		}
		list, bad := chipLists[path].read(nil, text)
		if len(bad) > 0 {
			return nil, i18n.T(ctx, "chips.invalid_status", strings.Join(bad, ", "))
		}
		return list, ""
	}
	num, ok := normalizeNumber(text)
	if !ok {
		return nil, i18n.T(ctx, "err.number")
	}
	return json.Number(num), ""
}

func (providerOverridesCard) save(s *Settings, c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	if s.Providers == nil {
		return echo.ErrNotFound
	}
	// Choosing another provider saves nothing: it shows that provider's overrides.
	pick := form.Get("pick")
	if pick == "" && form.Get("action") == "load" {
		pick = form.Get("provider")
	}
	if pick != "" {
		id, _ := strconv.ParseInt(pick, 10, 64)
		if !isHTMX(c) {
			return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/settings?provider=%d#card-%s", id, overridesCardID))
		}
		m, err := s.overridesModel(ctx(c), id, nil, nil)
		if err != nil {
			return err
		}
		return Render(c, http.StatusOK, views.ProviderOverridesCard(m))
	}

	id, _ := strconv.ParseInt(form.Get("editing"), 10, 64)
	typed, fieldErrs, doc := map[string]string{}, map[string]string{}, map[string]any{}
	for _, p := range overridePaths {
		text := strings.TrimSpace(form.Get(p))
		if text == "" {
			continue
		}
		typed[p] = text
		v, msg := readOverride(ctx(c), p, text)
		if msg != "" {
			fieldErrs[p] = msg
			continue
		}
		setPath(doc, p, v)
	}
	var meta []string
	if len(fieldErrs) == 0 {
		raw, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		_, err = s.Providers.UpdateProvider(ctx(c), id, catalog.ProviderInput{Resilience: raw}, settings.CheckProviderOverrides)
		var e *errs.Error
		switch {
		case err == nil:
			if !isHTMX(c) {
				return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/settings?saved=%s&provider=%d#card-%s", overridesCardID, id, overridesCardID))
			}
			m, err := s.overridesModel(ctx(c), id, nil, nil)
			if err != nil {
				return err
			}
			m.Meta.Saved = true
			return Render(c, http.StatusOK, views.ProviderOverridesCard(m))
		case errors.As(err, &e) && e.Code != errs.Internal:
			for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
				p := strings.TrimPrefix(k, "resilience.")
				msg := settingsMessage(ctx(c), plainText(e.Fields[k]), func(name string) string { return settingLabel(ctx(c), p, name) })
				if slices.Contains(overridePaths, p) {
					fieldErrs[p] = msg
				} else {
					meta = append(meta, k+": "+msg)
				}
			}
			switch {
			case len(e.Fields) > 0:
			case e.Code == errs.NotFound:
				meta = append(meta, i18n.T(ctx(c), "err.not_found"))
			default:
				meta = append(meta, Text(ctx(c), e.Msg))
			}
		default:
			return err
		}
	}
	m, err := s.overridesModel(ctx(c), id, typed, fieldErrs)
	if err != nil {
		return err
	}
	m.Meta.Failed, m.Meta.Errors = true, meta
	return s.renderCustom(c, http.StatusUnprocessableEntity, overridesCardID, views.ProviderOverridesCard(m))
}
