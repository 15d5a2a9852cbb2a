package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/traffic"
	"switchyard/views"
)

// windows are the time filters of the Request log page.
var windows = map[string]time.Duration{"15m": 15 * time.Minute, "1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

// RequestsPage answers GET /requests: the logged requests, newest first, filtered by the query
// (status, provider, model, key, window; before for the next page).
func (r *Requests) RequestsPage(c echo.Context) error {
	q := c.QueryParams()
	m := views.RequestsModel{Shell: pageShell(c, r.Sessions, "requests", i18n.T(ctx(c), "requests.title")), Off: !r.Log.Keeping(),
		Filter: views.RequestFilter{Status: q.Get("status"), Provider: q.Get("provider"), Model: q.Get("model"), Key: q.Get("key"),
			Window: q.Get("window")}}
	for _, p := range r.Catalog.Registry().Providers() {
		m.Providers = append(m.Providers, p.Name)
	}
	names, err := keyNames(c, r.Keys)
	if err != nil {
		return err
	}
	keys, err := r.Keys.List(ctx(c))
	if err != nil {
		return err
	}
	for _, k := range keys {
		m.Keys = append(m.Keys, views.KeyOption{ID: strconv.FormatInt(k.ID, 10), Name: k.Name})
	}
	f, err := requestFilter(c)
	if err == nil {
		if d, ok := windows[m.Filter.Window]; ok {
			f.Since = r.now().Add(-d)
		}
		f.Limit = 100
		var list []traffic.Entry
		if list, err = r.Log.List(ctx(c), f); err == nil {
			for _, e := range list {
				m.Rows = append(m.Rows, requestRow(ctx(c), e, names))
			}
			if len(list) == f.Limit {
				next := url.Values{}
				for k, v := range q {
					next[k] = v
				}
				next.Set("before", strconv.FormatInt(list[len(list)-1].ID, 10))
				m.Older = "/requests?" + next.Encode()
			}
		}
	}
	status := http.StatusOK
	if err != nil {
		_, form, ok := formErrors(ctx(c), err, "")
		if !ok {
			return err
		}
		m.Error, status = form, http.StatusUnprocessableEntity
	}
	return Render(c, status, views.RequestsPage(m))
}

// RequestDetailPage answers GET /requests/:id: one request with its attempt chain, the
// connections it left out and the bodies the log kept (or one line saying it keeps none).
func (r *Requests) RequestDetailPage(c echo.Context) error {
	e, names, err := r.entry(c)
	if err != nil {
		return err
	}
	cx := ctx(c)
	m := views.RequestDetailModel{Shell: pageShell(c, r.Sessions, "requests", i18n.T(cx, "requests.detail_title", e.ID)),
		Row: requestRow(cx, e, names), RequestID: e.RequestID, Problem: msgProblem(cx, r.Catalog.Registry(), e.Error),
		Stream: e.Stream, Complete: e.Complete, Retries: e.Retries, Failovers: e.Failovers,
		BodiesOff: r.Log.BodyBytes() == 0 && !e.RequestBody.Stored && !e.ResponseBody.Stored,
		Request:   bodyView(e.RequestBody), Response: bodyView(e.ResponseBody)}
	for i, a := range e.Chain {
		row := views.AttemptRow{N: i + 1, Connection: a.Connection, Kind: i18n.T(cx, "requests.kind."+a.Kind), Status: a.Status,
			Duration: views.FormatElapsed(cx, a.Duration), Detail: a.Detail, Target: a.Target}
		if a.Reason != "" {
			row.Reason = reasonLabel(cx, a.Reason)
		}
		m.Attempts = append(m.Attempts, row)
	}
	for _, x := range e.Skipped {
		row := views.SkipRow{Connection: x.Connection, Target: x.Target}
		switch x.Reason {
		case "terminal":
			row.Why = i18n.T(cx, "requests.skip.terminal", i18n.T(cx, "state.conn."+x.Detail))
		case "model_lockout":
			row.Why = i18n.T(cx, "requests.skip.model_lockout", reasonLabel(cx, x.Detail))
		default:
			row.Why = i18n.T(cx, "requests.skip.connection_cooldown", reasonLabel(cx, x.Detail))
		}
		if x.SecondsLeft > 0 {
			row.Left = views.HumanMS(cx, x.SecondsLeft*1000)
		}
		m.Skipped = append(m.Skipped, row)
	}
	m.Combo = e.Combo
	for _, st := range e.Route {
		m.Route = append(m.Route, routeRow(cx, st))
	}
	return Render(c, http.StatusOK, views.RequestDetailPage(m))
}

// routeRow is one step of a combo's decision trace in the reader's words.
func routeRow(cx context.Context, st traffic.RouteStep) views.RouteRow {
	row := views.RouteRow{Round: st.Round, Target: st.Target, Via: strings.Join(st.Via, " → "), Source: st.Source,
		Attempts: st.Attempts, Outcome: i18n.T(cx, "requests.outcome."+st.Outcome), OutcomeClass: "skip"}
	switch st.Outcome {
	case "answered":
		row.OutcomeClass = "ok"
	case "failed", "stopped":
		row.OutcomeClass = "bad"
	}
	if st.Reason != "" {
		row.Why = errorCodeLabel(cx, st.Reason)
		if row.Why == st.Reason {
			row.Why = reasonLabel(cx, st.Reason)
		}
	}
	if st.Action != "" {
		why := row.Why
		if why == "" {
			why = "–"
		}
		row.Why = i18n.T(cx, "requests.route_action."+st.Action, why)
	}
	row.Until = st.Until
	return row
}

func bodyView(b traffic.Body) views.BodyView {
	return views.BodyView{Text: b.Text, Stored: b.Stored, Truncated: b.Truncated}
}

// requestRow is a logged request for the views.
func requestRow(ctx context.Context, e traffic.Entry, names map[int64]string) views.RequestRow {
	row := views.RequestRow{ID: e.ID, At: e.At, Key: names[e.ClientKeyID], Surface: e.Surface, Model: e.Model, Provider: e.Provider,
		Connection: e.Connection, Status: e.Status, Class: "ok", ErrorCode: e.ErrorCode, Attempts: e.Attempts,
		Latency: views.FormatElapsed(ctx, e.Latency), TTFT: views.FormatDuration(ctx, e.TTFT), InTokens: e.InputTokens,
		OutTokens: e.OutputTokens, CacheRead: e.CacheReadTokens, CacheWrite: e.CacheWriteTokens, Reasoning: e.ReasoningTokens,
		Dropped: e.Dropped, DroppedCount: traffic.DroppedCount(e.Dropped)}
	if e.Priced {
		row.Cost = views.FormatDecimal(ctx, e.CostUSD, 4) + " USD"
	}
	if e.ClientKeyID != 0 && row.Key == "" {
		row.Key = "#" + strconv.FormatInt(e.ClientKeyID, 10)
	}
	if cl, bad := traffic.ClassOf(e.Status, e.ErrorCode); bad {
		row.Class = traffic.ClassNames[cl]
	}
	if e.ErrorCode != "" {
		// An upstream's failure is logged by its classified reason (rate_limit, server_error),
		// which the reasons' catalog names.
		if row.ErrorLabel = errorCodeLabel(ctx, e.ErrorCode); row.ErrorLabel == e.ErrorCode {
			row.ErrorLabel = reasonLabel(ctx, e.ErrorCode)
		}
	}
	return row
}

// errorCodeLabel names an error code in the reader's language (the code itself when the
// catalog does not know it).
func errorCodeLabel(ctx context.Context, code string) string {
	if key := "requests.code." + code; i18n.Has(i18n.FromContext(ctx), key) {
		return i18n.T(ctx, key)
	}
	return code
}

// now is the gateway's clock (the fake one in tests) for the time filters.
func (r *Requests) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}
