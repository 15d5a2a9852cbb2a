package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/sessions"
	"switchyard/services/settings"
	"switchyard/views"
)

// sessionsCardID is the card of the dashboard sessions' lifetimes. They are a document of their
// own (services/sessions, PATCH /api/settings/sessions), so the card reads and saves through
// that service; its fields are drawn and read from their registry entries like every other.
const sessionsCardID = "dashboard-sessions"

// sessionsCard edits the session lifetimes.
type sessionsCard struct{}

func (sessionsCard) page(s *Settings, c echo.Context, saved bool) (templ.Component, error) {
	m := sessionsCardModel(s.Sessions.Document(), nil, nil)
	m.Meta.Saved = saved
	return views.SettingsCard(m), nil
}

func (sessionsCard) save(s *Settings, c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	var patch sessions.Patch
	targets := map[string]*sessions.Optional{"absolute_lifetime_ms": &patch.AbsoluteLifetimeMS, "idle_timeout_ms": &patch.IdleTimeoutMS}
	inputs, fieldErrs := map[string]settings.Input{}, map[string]string{}
	for _, st := range settings.SessionSettings() {
		v, shown, problem := st.Parse(st.FormInput(form))
		inputs[st.Path()] = shown
		if problem != nil {
			fieldErrs[st.Path()] = Text(ctx(c), *problem)
			continue
		}
		n := v.(int64)
		*targets[strings.TrimPrefix(st.Path(), "sessions.")] = sessions.Optional{Set: true, Value: &n}
	}
	if len(fieldErrs) == 0 {
		doc, err := s.Sessions.Save(ctx(c), patch)
		if err == nil {
			return renderSaved(c, sessionsCardID, "", func() (templ.Component, error) {
				m := sessionsCardModel(doc, nil, nil)
				m.Meta.Saved = true
				return views.SettingsCard(m), nil
			})
		}
		var e *errs.Error
		if !errors.As(err, &e) || len(e.Fields) == 0 {
			return err
		}
		for k, msg := range e.Fields {
			fieldErrs["sessions."+k] = Text(ctx(c), msg)
		}
	}
	m := sessionsCardModel(s.Sessions.Document(), inputs, fieldErrs)
	m.Meta.Failed = true
	return s.renderCustom(c, http.StatusUnprocessableEntity, sessionsCardID, views.SettingsCard(m))
}

// sessionsCardModel draws the card: each lifetime shows inputs[path] (what a refused save held)
// or else its effective value, its source and its error.
func sessionsCardModel(doc sessions.Document, inputs map[string]settings.Input, fieldErrs map[string]string) views.SettingsCardModel {
	m := views.SettingsCardModel{Meta: views.CardMeta{ID: sessionsCardID}}
	values := map[string]int64{"absolute_lifetime_ms": doc.Values.AbsoluteLifetimeMS, "idle_timeout_ms": doc.Values.IdleTimeoutMS}
	for _, st := range settings.SessionSettings() {
		name := strings.TrimPrefix(st.Path(), "sessions.")
		in, typed := inputs[st.Path()]
		if !typed {
			in = st.Input(values[name])
		}
		addField(&m, "", settingField(st, in, doc.Sources[name], fieldErrs[st.Path()]))
	}
	return m
}
