package handlers

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/ops"
	"switchyard/services/resilience"
	"switchyard/services/settings"
	"switchyard/views"
)

// connectionFields are the fields of the connection forms, for placing service errors.
var connectionFields = []string{"provider", "name", "api_key", "priority", "max_concurrent", "enabled", "setup_token",
	"low_priority_lane", "limit_reset"}

// connectionForm reads the connection form. The API key goes into in only, never into the
// form model, so it cannot be rendered back. On create, empty numbers mean the defaults; on
// edit, an empty priority is an error and an empty max_concurrent means unlimited.
func connectionForm(c echo.Context, create bool) (views.ConnectionForm, catalog.ConnectionInput) {
	f := views.ConnectionForm{
		Provider:      strings.TrimSpace(c.FormValue("provider")),
		Name:          strings.TrimSpace(c.FormValue("name")),
		Priority:      strings.TrimSpace(c.FormValue("priority")),
		MaxConcurrent: strings.TrimSpace(c.FormValue("max_concurrent")),
		Enabled:       create || c.FormValue("enabled") == "true",
		Errors:        views.FieldErrors{},
	}
	in := catalog.ConnectionInput{Name: &f.Name}
	if create {
		in.Provider = &f.Provider
	} else {
		in.Enabled = &f.Enabled
	}
	if key := c.FormValue("api_key"); create || key != "" {
		in.APIKey = &key
	}
	switch n, err := strconv.Atoi(f.Priority); {
	case f.Priority == "" && create:
	case f.Priority == "":
		f.Errors["priority"] = i18n.T(ctx(c), "err.required")
	case err != nil:
		f.Errors["priority"] = i18n.T(ctx(c), "err.whole_number")
	default:
		in.Priority = &n
	}
	switch n, err := strconv.Atoi(f.MaxConcurrent); {
	case f.MaxConcurrent == "":
		in.MaxConcurrent = catalog.OptionalInt{Set: !create}
	case err != nil:
		f.Errors["max_concurrent"] = i18n.T(ctx(c), "err.whole_number")
	default:
		in.MaxConcurrent = catalog.OptionalInt{Set: true, Value: &n}
	}
	return f, in
}

// CreateConnection answers POST /connections: a new API-key connection.
func (d *Dashboard) CreateConnection(c echo.Context) error {
	f, in := connectionForm(c, true)
	if len(f.Errors) == 0 {
		conn, err := d.Catalog.CreateConnection(ctx(c), in, nil)
		if err == nil {
			d.flash(c, "success", i18n.T(ctx(c), "connections.created", conn.Name, conn.Provider))
			return seeOther(c, connAnchor(conn.ID))
		}
		fields, form, ok := formErrors(ctx(c), err, connectionFields...)
		if !ok {
			return err
		}
		f.Errors, f.Error = fields, form
	}
	return d.renderProviders(c, http.StatusUnprocessableEntity, func(m *views.ProvidersModel) { m.ConnectionForm = f })
}

// EditConnectionPage answers GET /connections/:id/edit.
func (d *Dashboard) EditConnectionPage(c echo.Context) error {
	conn, _, ok, err := itemAt(c, d.Sessions, "/providers", d.Catalog.GetConnection)
	if !ok {
		return err
	}
	f := views.ConnectionForm{Provider: conn.Provider, Name: conn.Name, Priority: strconv.Itoa(conn.Priority), Enabled: conn.Enabled,
		LowPriorityLane: conn.LowPriorityLane, LimitReset: conn.LimitReset}
	if conn.MaxConcurrent != nil {
		f.MaxConcurrent = strconv.Itoa(*conn.MaxConcurrent)
	}
	stored := settings.ParseConnectionOverrides(conn.Overrides)
	typed := map[string]string{}
	for _, q := range queueOverrides {
		if v := q.get(&stored.RequestQueue); v != nil {
			typed[q.key] = strconv.FormatInt(*v, 10)
		}
	}
	return Render(c, http.StatusOK, views.ConnectionEditPage(d.connectionEditModel(c, conn, f, typed, nil)))
}

// connectionEditModel builds the edit page. typed holds the queue override inputs (what is
// stored, or what was typed), qerrs their errors; the effective values shown beside them are the
// stored ones merged over the global settings.
func (d *Dashboard) connectionEditModel(c echo.Context, conn catalog.Connection, f views.ConnectionForm,
	typed, qerrs map[string]string) views.ConnectionEditModel {
	path := "/connections/" + c.Param("id") + "/edit"
	var account, kind string
	if conn.Account != nil {
		account = conn.Account.Email
	}
	if p, ok := d.Catalog.Registry().Provider(conn.Provider); ok {
		kind = p.Type
	}
	return views.ConnectionEditModel{
		Shell: d.shell(c, "providers", i18n.T(ctx(c), "connections.edit_title", conn.Provider, conn.Name), path),
		ID:    conn.ID, Provider: conn.Provider, Kind: kind, Name: conn.Name, Account: account, Form: f, AuthType: conn.AuthType,
		// Only a Claude account is ever a pasted setup token; a GitHub token without a refresh
		// token is signed in again instead.
		SetupToken: conn.Account != nil && conn.Account.SetupToken && kind == catalog.TypeAnthropic,
		Queue:      d.queueFields(c, conn, typed, qerrs)}
}

// queueOverride is one per-connection request queue field of the edit form.
type queueOverride struct {
	key    string // under request_queue
	pacing bool   // a connection-only limit: empty means none rather than inherit
	get    func(q *settings.QueueOverrides) *int64
	set    func(q *settings.QueueOverrides, v *int64)
}

// queueOverrides are the edit form's request queue overrides, then its pacing limits.
var queueOverrides = []queueOverride{
	{key: "max_wait_ms",
		get: func(q *settings.QueueOverrides) *int64 { return q.MaxWaitMS },
		set: func(q *settings.QueueOverrides, v *int64) { q.MaxWaitMS = v }},
	{key: "execution_max_wait_ms",
		get: func(q *settings.QueueOverrides) *int64 { return q.ExecutionMaxWaitMS },
		set: func(q *settings.QueueOverrides, v *int64) { q.ExecutionMaxWaitMS = v }},
	{key: "max_queue_depth",
		get: func(q *settings.QueueOverrides) *int64 { return widen(q.MaxQueueDepth) },
		set: func(q *settings.QueueOverrides, v *int64) { q.MaxQueueDepth = narrow(v) }},
	{key: "requests_per_minute", pacing: true,
		get: func(q *settings.QueueOverrides) *int64 { return widen(q.RequestsPerMinute) },
		set: func(q *settings.QueueOverrides, v *int64) { q.RequestsPerMinute = narrow(v) }},
	{key: "min_gap_ms", pacing: true,
		get: func(q *settings.QueueOverrides) *int64 { return q.MinGapMS },
		set: func(q *settings.QueueOverrides, v *int64) { q.MinGapMS = v }},
	{key: "max_concurrent_executions", pacing: true,
		get: func(q *settings.QueueOverrides) *int64 { return widen(q.MaxConcurrentExecutions) },
		set: func(q *settings.QueueOverrides, v *int64) { q.MaxConcurrentExecutions = narrow(v) }},
}

// widen and narrow let the int overrides share the form code of the int64 ones.
func widen(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func narrow(v *int64) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

// queueFields shows each queue field with the value in force now and its layer: the global
// request_queue settings (default, env, persisted) or this connection's stored override.
func (d *Dashboard) queueFields(c echo.Context, conn catalog.Connection, typed, qerrs map[string]string) []views.QueueField {
	stored := settings.ParseConnectionOverrides(conn.Overrides)
	rq, sources := d.Settings.Svc.Snapshot().RequestQueueFor(stored)
	effective := map[string]int64{"max_wait_ms": rq.MaxWaitMS, "execution_max_wait_ms": rq.ExecutionMaxWaitMS,
		"max_queue_depth": int64(rq.MaxQueueDepth)}
	out := make([]views.QueueField, 0, len(queueOverrides))
	for _, q := range queueOverrides {
		f := views.QueueField{Key: q.key, Pacing: q.pacing, Value: typed[q.key], Error: qerrs[q.key]}
		var v int64
		if own := q.get(&stored.RequestQueue); !q.pacing {
			v, f.Source = effective[q.key], sources["request_queue."+q.key]
		} else if own != nil {
			v, f.Source = *own, settings.SourceConnection
		}
		f.Effective = effectiveText(c, q.key, v, f.Source != "")
		out = append(out, f)
	}
	return out
}

// effectiveText puts a queue value into words: "30,000 ms (30 s)", "0 (unbounded)", "no limit".
func effectiveText(c echo.Context, key string, v int64, set bool) string {
	switch {
	case !set:
		return i18n.T(ctx(c), "connedit.no_limit")
	case key == "max_queue_depth" && v == 0:
		return i18n.T(ctx(c), "connedit.unbounded")
	case strings.HasSuffix(key, "_ms"):
		text := views.FormatInt(ctx(c), v) + " ms"
		if v >= 1000 {
			text += " (" + views.HumanMS(ctx(c), v) + ")"
		}
		return text
	case key == "requests_per_minute":
		return i18n.T(ctx(c), "connedit.per_minute", views.FormatInt(ctx(c), v))
	}
	return views.FormatInt(ctx(c), v)
}

// readQueueOverrides reads the queue fields of the edit form into the stored overrides (other
// overrides are kept). typed is what was typed; bad holds fields that are not whole numbers.
func readQueueOverrides(c echo.Context, stored settings.ConnectionOverrides) (o settings.ConnectionOverrides, typed, bad map[string]string) {
	o, typed, bad = stored, map[string]string{}, map[string]string{}
	for _, q := range queueOverrides {
		text := strings.TrimSpace(c.FormValue(views.QueueFieldName(q.key)))
		typed[q.key] = text
		if text == "" {
			q.set(&o.RequestQueue, nil)
			continue
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			bad[q.key] = i18n.T(ctx(c), "err.whole_number")
			continue
		}
		q.set(&o.RequestQueue, &n)
	}
	return o, typed, bad
}

// UpdateConnection answers POST /connections/:id/edit; an empty API key keeps the stored one.
func (d *Dashboard) UpdateConnection(c echo.Context) error {
	old, id, ok, err := itemAt(c, d.Sessions, "/providers", d.Catalog.GetConnection)
	if !ok {
		return err
	}
	f, in := connectionForm(c, false)
	if old.AuthType == catalog.AuthOAuth {
		f.LowPriorityLane, f.LimitReset = c.FormValue("low_priority_lane") == "true", c.FormValue("limit_reset") == "true"
		in.LowPriorityLane, in.LimitReset = &f.LowPriorityLane, &f.LimitReset
		if token := c.FormValue("setup_token"); token != "" {
			in.SetupToken = &token
		}
	}
	overrides, typed, qerrs := readQueueOverrides(c, settings.ParseConnectionOverrides(old.Overrides))
	if len(f.Errors) == 0 && len(qerrs) == 0 {
		raw, err := json.Marshal(overrides)
		if err != nil {
			return err
		}
		in.Overrides = raw
		conn, err := d.Catalog.UpdateConnection(ctx(c), id, in, d.ValidateConnectionOverrides)
		if err == nil {
			d.flash(c, "success", i18n.T(ctx(c), "connections.updated", conn.Name))
			return seeOther(c, connAnchor(conn.ID))
		}
		shown := slices.Clone(connectionFields)
		for _, q := range queueOverrides {
			shown = append(shown, overridePrefix+q.key)
		}
		fields, form, ok := formErrors(ctx(c), err, shown...)
		if !ok {
			return err
		}
		for k, msg := range fields {
			if key, isQueue := strings.CutPrefix(k, overridePrefix); isQueue {
				qerrs[key] = msg
				delete(fields, k)
			}
		}
		f.Errors, f.Error = fields, form
	}
	return Render(c, http.StatusUnprocessableEntity, views.ConnectionEditPage(d.connectionEditModel(c, old, f, typed, qerrs)))
}

// overridePrefix is how the catalog names an error of a request queue override.
const overridePrefix = "overrides.request_queue."

// DeleteConnection answers POST /connections/:id/delete.
func (d *Dashboard) DeleteConnection(c echo.Context) error {
	return deleteAt(c, d.Sessions, "/providers", d.Catalog.GetConnection, d.Catalog.DeleteConnection,
		func(conn catalog.Connection) string { return i18n.T(ctx(c), "connections.deleted", conn.Name) })
}

// TestConnection answers POST /connections/:id/test: a real upstream call. htmx gets the
// result fragment (which offers "Reset state" when the test worked on a connection in a
// terminal state); a plain form gets it as a flash message on the page it came from.
func (d *Dashboard) TestConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	reg := d.Catalog.Registry()
	var m views.TestResultModel
	if conn, ok := reg.Connection(id); ok && conn.Broken != "" {
		m.Problem = views.Problem{Text: i18n.T(ctx(c), "connections.broken_hint")}
	} else {
		res, err := d.Tester.TestConnection(ctx(c), id)
		switch {
		case err == nil && res.OK:
			m = views.TestResultModel{OK: true, Problem: views.Problem{Text: i18n.T(ctx(c), "connections.test_ok", res.Models, res.LatencyMS)}}
			if st, err := d.Ops.ConnectionState(id); err == nil && isTerminal(st.Status) {
				m.ResetID, m.ResetName = id, st.Name
			}
		case err == nil:
			m.Problem = fetchProblem(ctx(c), reg, res.Cause)
		default:
			_, form, ok := formErrors(ctx(c), err)
			if !ok {
				return err
			}
			m.Problem = views.Problem{Text: form}
		}
	}
	if isHTMX(c) {
		return Render(c, http.StatusOK, views.TestResult(m))
	}
	kind, text := "error", m.Problem.Text
	if m.OK {
		kind = "success"
		if m.ResetID != 0 {
			text += " " + i18n.T(ctx(c), "connections.test_reset_offer")
		}
	}
	if m.Problem.Excerpt != "" {
		text += " «" + m.Problem.Excerpt + "»"
	}
	d.flash(c, kind, text)
	return c.Redirect(http.StatusSeeOther, connAnchor(id))
}

// isTerminal reports whether a connection status only an operator or new credentials end.
func isTerminal(status string) bool {
	return status == string(resilience.StatusBanned) || status == string(resilience.StatusExpired) ||
		status == string(resilience.StatusCreditsExhausted)
}

// connectionState turns a connection's state into its view.
func connectionState(reg *catalog.Registry, v ops.ConnectionState, now time.Time) views.ConnectionState {
	s := views.ConnectionState{ID: v.ID, Name: v.Name, Enabled: true, Status: v.Status, RemainingMS: v.RemainingMS,
		Reason: v.Reason, BackoffLevel: v.BackoffLevel, ErrorCode: v.ErrorCode, Pins: v.Pins,
		Queue: views.QueueNumbers{Executing: v.Queue.Executing, Waiting: v.Queue.Waiting, Rejected: v.Queue.Rejected,
			TimedOut: v.Queue.TimedOut, FailOpen: v.Queue.FailOpen}}
	if v.Until != nil {
		s.Until = *v.Until
	}
	if e, ok := reg.Connection(v.ID); ok {
		s.Enabled, s.Broken = e.Enabled, e.Broken != ""
	}
	s.Account = accountView(v, now)
	return s
}

// ClearCooldown answers POST /connections/:id/clear: ends a running cooldown and resets the
// backoff level (a terminal state stays). htmx gets the connection's state cell back.
func (d *Dashboard) ClearCooldown(c echo.Context) error {
	return d.clearConnection(c, false)
}

// ResetConnectionState answers POST /connections/:id/reset: like ClearCooldown, and also ends a
// terminal state (banned, expired, credits exhausted) and forgets the last error. It acts only
// with confirmed=true (sent by htmx after the browser asked); a plain form gets a confirmation
// page first.
func (d *Dashboard) ResetConnectionState(c echo.Context) error {
	return d.clearConnection(c, true)
}

func (d *Dashboard) clearConnection(c echo.Context, terminal bool) error {
	conn, id, ok, err := itemAt(c, d.Sessions, "/providers", d.Catalog.GetConnection)
	if !ok {
		return err
	}
	back := connAnchor(id)
	if terminal && c.FormValue("confirmed") != "true" {
		path := "/connections/" + strconv.FormatInt(id, 10) + "/reset"
		return Render(c, http.StatusOK, views.ConfirmPage(views.ConfirmModel{
			Shell:   d.shell(c, "providers", i18n.T(ctx(c), "state.reset_state"), "/providers"),
			Heading: i18n.T(ctx(c), "state.reset_title", conn.Provider, conn.Name),
			Text:    i18n.T(ctx(c), "state.reset_confirm", conn.Name),
			Action:  path,
			Confirm: i18n.T(ctx(c), "state.reset_state"),
			Back:    back,
		}))
	}
	if _, err := d.Ops.ResetConnection(ctx(c), id, terminal); err != nil {
		return err
	}
	if isHTMX(c) {
		if st, ok := d.liveState(c).conns[id]; ok {
			return Render(c, http.StatusOK, views.ConnectionStateFragment(st))
		}
	}
	key := "state.cooldown_cleared"
	if terminal {
		key = "state.state_reset"
	}
	d.flash(c, "success", i18n.T(ctx(c), key, conn.Name))
	return seeOther(c, back)
}
