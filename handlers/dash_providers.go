package handlers

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/ops"
	"switchyard/services/proxy"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/views"
)

// providerFields are the fields of the provider forms, for placing service errors.
var providerFields = []string{"name", "type", "base_url", "strategy", "upstream_format", "responses_models"}

// providerFormat reads the form's upstream format fields into in. They apply to the OpenAI
// types only (the page hides them for the others, but a browser without :has() still sends
// them): another type is sent chat, the only format it has, and keeps the list its type
// defaults to; codex is sent responses, the only one the Codex backend speaks (its form shows
// it fixed, whatever the hidden select says). The patterns field (one pattern per line) counts for type openai only; a form
// without the field (from before it) leaves the list as it is.
func providerFormat(c echo.Context, f *views.ProviderForm, in *catalog.ProviderInput) {
	f.UpstreamFormat, f.ResponsesModels = strings.TrimSpace(c.FormValue("upstream_format")), c.FormValue("responses_models")
	switch {
	case f.Type == catalog.TypeCodex:
		f.UpstreamFormat = catalog.UpstreamResponses
		in.UpstreamFormat = &f.UpstreamFormat
	case !catalog.SpeaksOpenAI(f.Type):
		chat := catalog.UpstreamChat
		in.UpstreamFormat = &chat
	case f.UpstreamFormat != "":
		in.UpstreamFormat = &f.UpstreamFormat
	}
	if form, _ := c.FormParams(); f.Type == catalog.TypeOpenAI && form.Has("responses_models") {
		patterns := splitLines(f.ResponsesModels)
		in.ResponsesModels = &patterns
	}
}

// splitLines is the patterns of a one-pattern-per-line field, blank lines left out.
func splitLines(text string) []string {
	out := []string{}
	for line := range strings.Lines(text) {
		if p := strings.TrimSpace(line); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// responsesModelsText is how the patterns field shows a provider's list: one per line; a
// provider of another type shows the default of type openai, which it takes when the type is
// changed to openai.
func responsesModelsText(p catalog.Provider) string {
	if p.Type != catalog.TypeOpenAI {
		return strings.Join(catalog.DefaultResponsesModels(catalog.TypeOpenAI), "\n")
	}
	return strings.Join(p.ResponsesModels, "\n")
}

// providerFormErrors places a refused provider's messages on the form: each pattern's message
// (responses_models[2]) under the patterns field, naming the pattern, in the patterns' order.
func providerFormErrors(cx context.Context, err error, patterns []string) (views.FieldErrors, string, bool) {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code == errs.Internal {
		return nil, "", false
	}
	rest := *e
	rest.Fields = map[string]errs.Msg{}
	byIndex := map[int]string{}
	for k, m := range e.Fields {
		index, ok := strings.CutPrefix(k, "responses_models[")
		i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
		if !ok || err != nil {
			rest.Fields[k] = m
			continue
		}
		msg := Text(cx, m)
		if i >= 0 && i < len(patterns) && !strings.Contains(msg, patterns[i]) {
			msg = "“" + patterns[i] + "”: " + msg
		}
		byIndex[i] = msg
	}
	fields, form := views.FieldErrors{}, ""
	if len(rest.Fields) > 0 || len(byIndex) == 0 {
		fields, form, _ = formErrors(cx, &rest, providerFields...)
	}
	if len(byIndex) > 0 {
		var msgs []string
		if prev := fields["responses_models"]; prev != "" {
			msgs = append(msgs, prev)
		}
		for _, i := range slices.Sorted(maps.Keys(byIndex)) {
			msgs = append(msgs, byIndex[i])
		}
		fields["responses_models"] = strings.Join(msgs, " ")
	}
	return fields, form, true
}

// providersModel lists every provider with its connections; the forms start empty.
func (d *Dashboard) providersModel(c echo.Context) (views.ProvidersModel, error) {
	provs, err := d.Catalog.ListProviders(ctx(c))
	if err != nil {
		return views.ProvidersModel{}, err
	}
	conns, err := d.Catalog.ListConnections(ctx(c))
	if err != nil {
		return views.ProvidersModel{}, err
	}
	live := d.liveState(c)
	types := map[int64]string{}
	for _, p := range provs {
		types[p.ID] = p.Type
	}
	byProvider := map[int64][]views.ConnectionRow{}
	for _, cn := range conns {
		st, ok := live.conns[cn.ID]
		if !ok { // not in the registry yet: nothing has happened to it
			st = views.ConnectionState{ID: cn.ID, Name: cn.Name, Enabled: cn.Enabled, Status: string(resilience.StatusActive)}
		}
		row := views.ConnectionRow{ID: cn.ID, Name: cn.Name, AuthType: cn.AuthType, Priority: cn.Priority,
			MaxConcurrent: cn.MaxConcurrent, State: st, Kind: types[cn.ProviderID]}
		if cn.Account != nil {
			row.Account, row.Plan, row.SetupToken = cn.Account.Email, cn.Account.Plan, cn.Account.SetupToken
		}
		byProvider[cn.ProviderID] = append(byProvider[cn.ProviderID], row)
	}
	// The patterns field starts with type openai's default: it shows when that type is chosen.
	addForm := views.ProviderForm{Type: catalog.TypeOpenAICompatible, UpstreamFormat: catalog.UpstreamChat,
		ResponsesModels: strings.Join(catalog.DefaultResponsesModels(catalog.TypeOpenAI), "\n")}
	m := views.ProvidersModel{
		Shell:           d.shell(c, "providers", i18n.T(ctx(c), "providers.title"), "/providers"),
		Types:           providerTypes(ctx(c)),
		ProviderForm:    addForm,
		ConnectionForm:  views.ConnectionForm{Enabled: true},
		Version:         live.version,
		ClaudeProviders: d.providersOfType(catalog.TypeAnthropic),
		Codex:           d.accountCard(c, catalog.TypeCodex),
		Copilot:         d.accountCard(c, catalog.TypeCopilot),
	}
	for _, p := range provs {
		st, ok := live.providers[p.Name]
		if !ok {
			st = views.ProviderState{ID: p.ID, Name: p.Name, Status: string(ops.StatusNotConfigured),
				Breaker: string(resilience.CircuitClosed)}
		}
		m.Providers = append(m.Providers, views.ProviderRow{ID: p.ID, Name: p.Name, Type: p.Type, TypeLabel: typeLabel(ctx(c), p.Type),
			Served: len(proxy.ServedSurfaces(p.Type)) > 0, BaseURL: p.BaseURL, ListedModelsOnly: p.ListedModelsOnly,
			UpstreamFormat: p.UpstreamFormat, AccountsOnly: catalog.AccountsOnly(p.Type), Discovery: d.discovery(c, p.Name), State: st, Connections: byProvider[p.ID]})
	}
	return m, nil
}

// live is every provider's and connection's live state, keyed by provider name and connection
// id, and the version of it a poll compares.
type live struct {
	providers map[string]views.ProviderState
	conns     map[int64]views.ConnectionState
	// ordered lists them in registry order, for the poll's answer.
	orderedProviders []views.ProviderState
	orderedConns     []views.ConnectionState
	version          string
}

// liveState gathers every provider's and connection's live state from memory (no database
// read, so the page can poll it).
func (d *Dashboard) liveState(c echo.Context) live {
	reg := d.Catalog.Registry()
	now := d.Ops.Now()
	l := live{providers: map[string]views.ProviderState{}, conns: map[int64]views.ConnectionState{}}
	for _, st := range d.Ops.ProviderStatuses() {
		if p, ok := reg.Provider(st.Provider); ok {
			v := providerState(ctx(c), reg, p, st, now)
			l.providers[st.Provider] = v
			l.orderedProviders = append(l.orderedProviders, v)
		}
	}
	lockouts := map[int64][]views.ConnLockout{}
	for _, lo := range d.Ops.ModelCooldowns() {
		if lo.RemainingMS > 0 {
			lockouts[lo.ConnectionID] = append(lockouts[lo.ConnectionID], views.ConnLockout{Model: lo.Model, Target: lo.Target,
				RemainingMS: lo.RemainingMS, ExpiresAt: lo.ExpiresAt, Anchor: views.LockoutAnchor(lo.Provider, lo.ConnectionID, lo.Target)})
		}
	}
	for _, v := range d.Ops.ConnectionStates() {
		st := connectionState(reg, v, now)
		st.Lockouts = lockouts[v.ID]
		l.conns[v.ID] = st
		l.orderedConns = append(l.orderedConns, st)
	}
	l.version = liveVersion(l.orderedProviders, l.orderedConns)
	return l
}

// liveVersion fingerprints the live state without the time left on its countdowns (which the
// browser ticks down itself): it changes when something happens, not every second.
func liveVersion(provs []views.ProviderState, conns []views.ConnectionState) string {
	type connShape struct {
		views.ConnectionState
		Lockouts []views.ConnLockout
	}
	ps := copyEach(provs, func(p *views.ProviderState) {
		p.ProbeInMS = min(p.ProbeInMS, 1) // only whether a probe is still ahead
		p.ModelBreakers = copyEach(p.ModelBreakers, func(b *views.ModelBreaker) { b.ProbeInMS = min(b.ProbeInMS, 1) })
	})
	cs := make([]connShape, len(conns))
	for i, c := range conns {
		c.RemainingMS = min(c.RemainingMS, 1)
		c.Account = countdownShape(c.Account) // only whether a countdown is still ahead
		ls := copyEach(c.Lockouts, func(l *views.ConnLockout) { l.RemainingMS = 0 })
		c.Lockouts = nil
		cs[i] = connShape{ConnectionState: c, Lockouts: ls}
	}
	return stateVersion(ps, cs)
}

// providerState turns a provider's status into its view.
func providerState(ctx context.Context, reg *catalog.Registry, p *catalog.ProviderEntry, st ops.ProviderStatus, now time.Time) views.ProviderState {
	v := views.ProviderState{ID: p.ID, Name: p.Name, Status: string(st.Status), Breaker: st.Breaker, Conns: connCounts(st.Connections)}
	if st.NextProbeAt != nil && st.Breaker != string(resilience.CircuitClosed) {
		v.ProbeAt = *st.NextProbeAt
		v.ProbeInMS = max(st.NextProbeAt.Sub(now).Milliseconds(), 0)
	}
	for _, b := range st.ModelBreakers {
		if b.State == resilience.CircuitOpen || b.State == resilience.CircuitHalfOpen {
			mb := views.ModelBreaker{Model: b.Model, State: string(b.State)}
			if !b.NextProbeAt.IsZero() {
				mb.ProbeInMS = max(b.NextProbeAt.Sub(now).Milliseconds(), 0)
			}
			v.ModelBreakers = append(v.ModelBreakers, mb)
		}
	}
	for _, c := range st.DegradedModels {
		v.Degraded = append(v.Degraded, views.DegradedModel{Model: c.Model, OK: c.OK, Fail: c.Fail})
	}
	for _, f := range st.LastFailures {
		v.Failures = append(v.Failures, views.Failure{At: f.At, Model: f.Model, Status: f.Status, Problem: msgProblem(ctx, reg, f.Msg)})
	}
	return v
}

// connCounts is how many of a provider's connections are in which state, for the views.
func connCounts(n ops.ConnSummary) views.ConnCounts {
	return views.ConnCounts{Total: n.Total, Usable: n.Usable, Cooling: n.Cooling, Terminal: n.Terminal, Disabled: n.Disabled}
}

// strategyOptions are the routing strategies for a select, each with its help text
// (<helpPrefix>.<strategy>.help).
func strategyOptions(cx context.Context, helpPrefix string) []views.StrategyOption {
	var opts []views.StrategyOption
	for _, s := range routing.Strategies {
		opts = append(opts, views.StrategyOption{Value: string(s),
			Label: i18n.T(cx, "strategy."+string(s)), Help: i18n.T(cx, helpPrefix+"."+string(s)+".help")})
	}
	return opts
}

// ProvidersState answers GET /providers/state, the providers page's poll: every provider's and
// connection's state as out-of-band fragments, or 204 when the state is still the version the
// page sent (?v=).
func (d *Dashboard) ProvidersState(c echo.Context) error {
	l := d.liveState(c)
	return renderPoll(c, l.version, views.LiveState(l.orderedProviders, l.orderedConns, l.version))
}

// ResetBreaker answers POST /providers/:id/reset-breaker: closes the provider's breaker and every
// model breaker of it. htmx gets the provider's breaker back (its state strip and status pill
// out of band); a plain form is redirected.
func (d *Dashboard) ResetBreaker(c echo.Context) error {
	p, _, ok, err := itemAt(c, d.Sessions, "/providers", d.Catalog.GetProvider)
	if !ok {
		return err
	}
	if err := d.Ops.ResetBreaker(ctx(c), p.Name, ""); err != nil {
		return err
	}
	if isHTMX(c) {
		if st, ok := d.liveState(c).providers[p.Name]; ok {
			return Render(c, http.StatusOK, views.ProviderStateFragment(st))
		}
	}
	d.flash(c, "success", i18n.T(ctx(c), "state.breaker_reset", p.Name))
	return seeOther(c, "/providers#provider-"+p.Name)
}

// ProvidersPage answers GET /providers; ?provider=<name> preselects the add-connection form.
func (d *Dashboard) ProvidersPage(c echo.Context) error {
	return d.renderProviders(c, http.StatusOK, func(m *views.ProvidersModel) {
		m.ConnectionForm.Provider = c.QueryParam("provider")
		m.Claude.Provider = c.QueryParam("provider")
	})
}

// renderProviders answers with the providers page; show puts onto it what this answer shows
// besides the lists (a form as it was posted, a card at its next step).
func (d *Dashboard) renderProviders(c echo.Context, status int, show func(m *views.ProvidersModel)) error {
	m, err := d.providersModel(c)
	if err != nil {
		return err
	}
	show(&m)
	return Render(c, status, views.ProvidersPage(m))
}

// CreateProvider answers POST /providers.
func (d *Dashboard) CreateProvider(c echo.Context) error {
	f := views.ProviderForm{Name: strings.TrimSpace(c.FormValue("name")), Type: c.FormValue("type"),
		BaseURL: strings.TrimSpace(c.FormValue("base_url")), ResponsesAPI: c.FormValue("responses_api") == "true",
		ListedModelsOnly: c.FormValue("listed_models_only") == "true"}
	in := catalog.ProviderInput{Name: &f.Name, Type: &f.Type, BaseURL: &f.BaseURL,
		ResponsesAPI: &f.ResponsesAPI, ListedModelsOnly: &f.ListedModelsOnly}
	providerFormat(c, &f, &in)
	p, err := d.Catalog.CreateProvider(ctx(c), in, nil)
	if err != nil {
		fields, form, ok := providerFormErrors(ctx(c), err, patternsOf(in))
		if !ok {
			return err
		}
		f.Errors, f.Error = fields, form
		return d.renderProviders(c, http.StatusUnprocessableEntity, func(m *views.ProvidersModel) { m.ProviderForm = f })
	}
	d.flash(c, "success", i18n.T(ctx(c), "providers.created", p.Name))
	return seeOther(c, "/providers#provider-"+p.Name)
}

// EditProviderPage answers GET /providers/:id/edit.
func (d *Dashboard) EditProviderPage(c echo.Context) error {
	p, _, ok, err := itemAt(c, d.Sessions, "/providers", d.Catalog.GetProvider)
	if !ok {
		return err
	}
	return Render(c, http.StatusOK, views.ProviderEditPage(d.providerEditModel(c, p,
		views.ProviderForm{Type: p.Type, BaseURL: p.BaseURL, ResponsesAPI: p.ResponsesAPI, ListedModelsOnly: p.ListedModelsOnly,
			Strategy: p.Strategy, UpstreamFormat: p.UpstreamFormat, ResponsesModels: responsesModelsText(p)})))
}

func (d *Dashboard) providerEditModel(c echo.Context, p catalog.Provider, f views.ProviderForm) views.ProviderEditModel {
	path := "/providers/" + c.Param("id") + "/edit"
	return views.ProviderEditModel{Shell: d.shell(c, "providers", i18n.T(ctx(c), "providers.edit_title", p.Name), path),
		ID: p.ID, Name: p.Name, Types: providerTypes(ctx(c)), Form: f, Strategies: strategyOptions(ctx(c), "provider_strategy")}
}

// UpdateProvider answers POST /providers/:id/edit: type, base URL, the two switches, the
// connection order and the upstream format.
func (d *Dashboard) UpdateProvider(c echo.Context) error {
	old, id, ok, err := itemAt(c, d.Sessions, "/providers", d.Catalog.GetProvider)
	if !ok {
		return err
	}
	f := views.ProviderForm{Type: c.FormValue("type"), BaseURL: strings.TrimSpace(c.FormValue("base_url")),
		ResponsesAPI: c.FormValue("responses_api") == "true", ListedModelsOnly: c.FormValue("listed_models_only") == "true",
		Strategy: c.FormValue("strategy")}
	in := catalog.ProviderInput{Type: &f.Type, BaseURL: &f.BaseURL, ResponsesAPI: &f.ResponsesAPI, ListedModelsOnly: &f.ListedModelsOnly}
	if f.Strategy != "" { // a form from before the field keeps the provider's strategy
		in.Strategy = &f.Strategy
	}
	providerFormat(c, &f, &in)
	p, err := d.Catalog.UpdateProvider(ctx(c), id, in, nil)
	if err != nil {
		fields, form, ok := providerFormErrors(ctx(c), err, patternsOf(in))
		if !ok {
			return err
		}
		f.Errors, f.Error = fields, form
		return Render(c, http.StatusUnprocessableEntity, views.ProviderEditPage(d.providerEditModel(c, old, f)))
	}
	d.flash(c, "success", i18n.T(ctx(c), "providers.updated", p.Name))
	return seeOther(c, "/providers#provider-"+p.Name)
}

// patternsOf is the patterns a form sent, for naming them in its errors.
func patternsOf(in catalog.ProviderInput) []string {
	if in.ResponsesModels == nil {
		return nil
	}
	return *in.ResponsesModels
}

// DeleteProvider answers POST /providers/:id/delete; its connections go with it.
func (d *Dashboard) DeleteProvider(c echo.Context) error {
	return deleteAt(c, d.Sessions, "/providers", d.Catalog.GetProvider, d.Catalog.DeleteProvider,
		func(p catalog.Provider) string { return i18n.T(ctx(c), "providers.deleted", p.Name) })
}

// missing answers err on the list at back (listMissing); any other error is returned.
func (d *Dashboard) missing(c echo.Context, err error, back string) error {
	return listMissing(c, d.Sessions, back, err)
}

// gone answers an action on something that no longer exists: back to the list with a message.
func (d *Dashboard) gone(c echo.Context, back string) error { return listGone(c, d.Sessions, back) }
