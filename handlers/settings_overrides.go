package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// noStatuses is what an override field holds for an empty status list ("retry on nothing");
// an empty field inherits.
const noStatuses = "none"

// providerOverridesCard edits one provider's overrides at a time (the registry's settings a
// provider may override: retry and circuit_breaker) and lists what every provider overrides. It
// saves through the catalog (the same validation as PATCH /api/providers/{id}), not the
// settings service.
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
	overridable := settings.ProviderOverridable()
	own := func(p catalog.Provider) map[string]string {
		o := settings.ParseProviderOverrides(p.Resilience)
		texts := map[string]string{}
		for _, st := range overridable {
			if v, ok := o.Value(st.Path()); ok {
				texts[st.Path()] = overrideText(st, v)
			}
		}
		return texts
	}
	sel := slices.IndexFunc(provs, func(p catalog.Provider) bool { return p.ID == id })
	if sel < 0 {
		sel = max(0, slices.IndexFunc(provs, func(p catalog.Provider) bool { return len(own(p)) > 0 }))
	}
	for _, p := range provs {
		texts := own(p)
		row := views.ProviderOverrideRow{ID: p.ID, Name: p.Name}
		for _, st := range overridable {
			if v, ok := texts[st.Path()]; ok {
				row.Overrides = append(row.Overrides, st.Path()+" = "+v)
			}
		}
		m.Providers = append(m.Providers, row)
	}
	m.Selected = provs[sel].ID
	values := own(provs[sel])
	if typed != nil && provs[sel].ID == id {
		values = typed
	}
	snap := s.Svc.Snapshot()
	for _, st := range overridable {
		path := st.Path()
		f := views.OverrideField{Name: path, Value: values[path], Global: overrideText(st, snap.Value(path)),
			GlobalSource: snap.Source(path), Options: overrideOptions(st), Unit: st.Unit(), Error: fieldErrs[path]}
		if strings.HasPrefix(path, "retry.") {
			m.Retry = append(m.Retry, f)
		} else {
			m.Breaker = append(m.Breaker, f)
		}
	}
	return m, nil
}

// overrideText writes a setting's value the way an override field takes it: a list as
// "429, 5xx" (or "none"), a switch as true or false.
func overrideText(st *settings.Setting, v any) string {
	in := st.Input(v)
	switch st.Kind() {
	case settings.KindStatuses, settings.KindCodes:
		if len(in.List) == 0 {
			return noStatuses
		}
		return strings.Join(in.List, ", ")
	}
	return in.Text
}

// overrideOptions are the choices of a select override ("" = inherit comes first on the card).
func overrideOptions(st *settings.Setting) []string {
	if st.Kind() == settings.KindToggle {
		return []string{"true", "false"}
	}
	return st.Options()
}

// readOverride reads one filled-in override field through the setting's registry entry.
func readOverride(st *settings.Setting, text string) (any, *errs.Msg) {
	in := settings.Input{Text: text}
	switch st.Kind() {
	case settings.KindStatuses, settings.KindCodes:
		if strings.EqualFold(text, noStatuses) {
			in = settings.Input{}
		} else {
			in = settings.Input{Adding: text}
		}
	}
	v, _, problem := st.Parse(in)
	return v, problem
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
	typed, problems := map[string]string{}, map[string]errs.Msg{}
	var o settings.ProviderOverrides
	for _, st := range settings.ProviderOverridable() {
		text := strings.TrimSpace(form.Get(st.Path()))
		if text == "" {
			continue
		}
		typed[st.Path()] = text
		v, problem := readOverride(st, text)
		if problem != nil {
			problems[st.Path()] = *problem
			continue
		}
		o.Set(st.Path(), v)
	}
	if len(problems) > 0 {
		// Check what could be read as well, so every error shows at once; nothing is saved.
		err = o.Validate()
		if err == nil {
			err = errs.Fields(problems)
		} else if e := errs.As(err); e.Code == errs.Invalid {
			for k, m := range problems {
				e.Fields[k] = m
			}
		}
	} else {
		raw, jerr := json.Marshal(o)
		if jerr != nil {
			return jerr
		}
		_, err = s.Providers.UpdateProvider(ctx(c), id, catalog.ProviderInput{Resilience: raw}, settings.CheckProviderOverrides)
		if err == nil {
			return renderSaved(c, overridesCardID, fmt.Sprintf("&provider=%d", id), func() (templ.Component, error) {
				m, err := s.overridesModel(ctx(c), id, nil, nil)
				if err != nil {
					return nil, err
				}
				m.Meta.Saved = true
				return views.ProviderOverridesCard(m), nil
			})
		}
	}
	placed, ok := placeOverrideErrors(ctx(c), err)
	if !ok {
		return err
	}
	m, err := s.overridesModel(ctx(c), id, typed, placed.fields)
	if err != nil {
		return err
	}
	m.Meta.Failed, m.Meta.Errors = true, placed.card
	return s.renderCustom(c, http.StatusUnprocessableEntity, overridesCardID, views.ProviderOverridesCard(m))
}

// placeOverrideErrors places the messages of a refused save on the overrides card; the catalog
// keys them below "resilience.".
func placeOverrideErrors(ctx context.Context, err error) (placedErrors, bool) {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code == errs.Internal {
		return placedErrors{}, false
	}
	if e.Code == errs.NotFound {
		return placedErrors{fields: map[string]string{}, card: []string{i18n.T(ctx, "err.not_found")}}, true
	}
	fields := make(map[string]errs.Msg, len(e.Fields))
	for k, m := range e.Fields {
		fields[strings.TrimPrefix(k, "resilience.")] = m
	}
	var paths []string
	for _, st := range settings.ProviderOverridable() {
		paths = append(paths, st.Path())
	}
	return placeErrors(ctx, &errs.Error{Code: e.Code, Msg: e.Msg, Fields: fields}, paths)
}
