package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/traffic"
	"switchyard/views"
)

// healthModel puts what needs attention into words, each with a link to its place.
func (d *Dashboard) healthModel(c echo.Context) views.HealthModel {
	reg := d.Catalog.Registry()
	var m views.HealthModel
	for _, t := range d.Ops.Troubles() {
		it := views.TroubleItem{Kind: t.Kind, Severity: "warn", Href: "/providers#provider-" + t.Provider, RemainingMS: t.RemainingMS}
		if t.Until != nil {
			it.Until = *t.Until
		}
		switch t.Kind {
		case "breaker_open", "breaker_half_open":
			it.Severity = "error"
			if t.Kind == "breaker_half_open" {
				it.Severity = "warn"
			}
			if t.Model == "" {
				it.Text = i18n.T(ctx(c), "health."+t.Kind, t.Provider)
			} else {
				it.Text = i18n.T(ctx(c), "health.model_"+t.Kind, t.Provider, t.Model)
			}
		case "provider_unavailable":
			it.Severity, it.Text = "error", i18n.T(ctx(c), "health.unavailable", t.Provider)
		case "connection_terminal":
			it.Severity, it.Href = "error", connAnchor(t.ConnectionID)
			it.Text = i18n.T(ctx(c), "health.terminal", t.Connection, t.Provider, i18n.T(ctx(c), "state.conn."+t.Status))
		case "connection_cooling":
			it.Href = connAnchor(t.ConnectionID)
			it.Text = i18n.T(ctx(c), "health.cooling", t.Connection, t.Provider, reasonLabel(ctx(c), t.Reason))
		case "model_lockout":
			it.Href = "/model-cooldowns#" + views.LockoutAnchor(t.Provider, t.ConnectionID, t.Target)
			it.Text = i18n.T(ctx(c), "health.lockout", t.Model, t.Provider, t.Connection)
		case "discovery_failed":
			it.Text, it.Problem = i18n.T(ctx(c), "health.discovery", t.Provider), fetchProblem(ctx(c), reg, t.Cause)
		case "type_unserved":
			it.Text = i18n.T(ctx(c), "health.unserved", t.Provider, typeLabel(ctx(c), t.Status))
		default:
			continue
		}
		m.Items = append(m.Items, it)
	}
	shape := make([]views.TroubleItem, len(m.Items))
	for i, it := range m.Items {
		it.RemainingMS = min(it.RemainingMS, 1)
		shape[i] = it
	}
	m.Version = stateVersion(shape)
	return m
}

// reasonLabel names a classified failure reason in the reader's language (the code itself when
// the catalog does not know it).
func reasonLabel(ctx context.Context, reason string) string {
	if reason == "" {
		return i18n.T(ctx, "state.reason.unknown")
	}
	for _, prefix := range []string{"state.reason.", "requests.reason."} {
		if i18n.Has(i18n.FromContext(ctx), prefix+reason) {
			return i18n.T(ctx, prefix+reason)
		}
	}
	return reason
}

// OverviewHealth answers GET /overview/health, the overview's poll: the health strip out of
// band, or 204 while it is still the version the page sent (?v=).
func (d *Dashboard) OverviewHealth(c echo.Context) error {
	m := d.healthModel(c)
	return renderPoll(c, m.Version, views.HealthStrip(m))
}

// OverviewTraffic answers GET /overview/traffic?range=hour|day: the traffic card alone.
func (d *Dashboard) OverviewTraffic(c echo.Context) error {
	m, err := d.trafficModel(c, c.QueryParam("range"))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, http.StatusOK, views.TrafficCard(m))
}

// trafficModel draws the traffic of the last hour ("hour", the default) or day ("day").
func (d *Dashboard) trafficModel(c echo.Context, rangeName string) (views.TrafficModel, error) {
	r, style := traffic.LastHour, "hm"
	if rangeName == "day" {
		r = traffic.LastDay
	} else {
		rangeName = "hour"
	}
	names, err := keyNames(c, d.Keys)
	if err != nil {
		return views.TrafficModel{}, err
	}
	cx := ctx(c)
	total := d.Traffic.Total(r)
	m := views.TrafficModel{Range: rangeName, Requests: total.Requests, ErrorRate: views.FormatPercent(cx, total.ErrorCount(), total.Requests),
		LatencyP50: views.FormatDuration(cx, total.LatencyP50), LatencyP95: views.FormatDuration(cx, total.LatencyP95),
		TTFTP50: views.FormatDuration(cx, total.TTFTP50), InTokens: total.In, OutTokens: total.Out}
	m.Charts = trafficCharts(cx, d.Traffic.Series(r, nil), style)
	provs, keys := d.Traffic.Breakdown(r)
	for _, g := range provs {
		row := breakdownRow(cx, g)
		row.Name = g.Provider
		if g.Provider == "" {
			row.Name, row.Muted = i18n.T(cx, "traffic.no_provider"), true
		}
		m.Providers = append(m.Providers, row)
	}
	for _, g := range keys {
		row := breakdownRow(cx, g)
		row.Name = names[g.KeyID]
		switch {
		case g.KeyID == 0:
			row.Name, row.Muted = i18n.T(cx, "traffic.no_key"), true
		case row.Name == "":
			row.Name = "#" + strconv.FormatInt(g.KeyID, 10)
		}
		m.Keys = append(m.Keys, row)
	}
	return m, nil
}

func breakdownRow(ctx context.Context, g traffic.Group) views.BreakdownRow {
	t := g.Total
	return views.BreakdownRow{Requests: t.Requests, ErrorRate: views.FormatPercent(ctx, t.ErrorCount(), t.Requests),
		LatencyP50: views.FormatDuration(ctx, t.LatencyP50), LatencyP95: views.FormatDuration(ctx, t.LatencyP95),
		InTokens: t.In, OutTokens: t.Out,
		Spark: views.Sparkline{Values: g.Requests, Label: i18n.T(ctx, "traffic.spark_label", views.FormatInt(ctx, t.Requests))}}
}

// trafficCharts draws the charts of a series: requests, error rate by class, latency and time
// to first token (p50 and p95), tokens in and out.
func trafficCharts(ctx context.Context, pts []traffic.Point, style string) []views.Chart {
	n := len(pts)
	starts := make([]time.Time, n)
	req := make([]float64, n)
	errShare := make([][]float64, traffic.NumClasses)
	for k := range errShare {
		errShare[k] = make([]float64, n)
	}
	lat50, lat95, ttft50, ttft95 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	in, out := make([]float64, n), make([]float64, n)
	tips := map[string][]string{}
	var sumReq, sumErr, sumIn, sumOut int64
	for i, p := range pts {
		starts[i] = p.Start
		at := p.Start.UTC().Format("15:04") + " UTC"
		req[i] = float64(p.Requests)
		sumReq += p.Requests
		sumErr += p.ErrorCount()
		sumIn += p.In
		sumOut += p.Out
		for k := range errShare {
			if p.Requests > 0 {
				errShare[k][i] = float64(p.Errors[k]) / float64(p.Requests) * 100
			}
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		lat50[i], lat95[i], ttft50[i], ttft95[i] = views.Missing, views.Missing, views.Missing, views.Missing
		if p.Requests > 0 {
			lat50[i], lat95[i] = ms(p.LatencyP50), ms(p.LatencyP95)
		}
		if p.Streams > 0 {
			ttft50[i], ttft95[i] = ms(p.TTFTP50), ms(p.TTFTP95)
		}
		in[i], out[i] = float64(p.In), float64(p.Out)
		tips["requests"] = append(tips["requests"], i18n.T(ctx, "traffic.tip.requests", at, views.FormatInt(ctx, p.Requests)))
		tips["errors"] = append(tips["errors"], i18n.T(ctx, "traffic.tip.errors", at, views.FormatPercent(ctx, p.ErrorCount(), p.Requests),
			views.FormatInt(ctx, p.Errors[traffic.ClassClient]), views.FormatInt(ctx, p.Errors[traffic.ClassRateLimited]),
			views.FormatInt(ctx, p.Errors[traffic.ClassServer]), views.FormatInt(ctx, p.Errors[traffic.ClassAborted])))
		tips["latency"] = append(tips["latency"], i18n.T(ctx, "traffic.tip.percentiles", at,
			views.FormatDuration(ctx, p.LatencyP50), views.FormatDuration(ctx, p.LatencyP95)))
		tips["ttft"] = append(tips["ttft"], i18n.T(ctx, "traffic.tip.percentiles", at,
			views.FormatDuration(ctx, p.TTFTP50), views.FormatDuration(ctx, p.TTFTP95)))
		tips["tokens"] = append(tips["tokens"], i18n.T(ctx, "traffic.tip.tokens", at, views.FormatInt(ctx, p.In), views.FormatInt(ctx, p.Out)))
	}
	count := func(v float64) string { return views.FormatInt(ctx, int64(v)) }
	msLabel := func(v float64) string { return views.FormatDuration(ctx, time.Duration(v*float64(time.Millisecond))) }
	pct := func(v float64) string { return views.FormatDecimal(ctx, v, 0) + " %" }
	errSeries := make([]views.ChartSeries, traffic.NumClasses)
	for k := range errSeries {
		errSeries[k] = views.ChartSeries{Name: i18n.T(ctx, "traffic.class."+traffic.ClassNames[k]), Class: "s-" + traffic.ClassNames[k],
			Values: errShare[k]}
	}
	base := func(id, key, kind string, series []views.ChartSeries, summary string) views.Chart {
		empty := i18n.T(ctx, "traffic.no_data")
		if id == "ttft" {
			empty = i18n.T(ctx, "traffic.no_streams")
		}
		return views.Chart{ID: "chart-" + id, Title: i18n.T(ctx, key), Kind: kind, Series: series, Starts: starts,
			Tips: tips[id], Summary: summary, TimeStyle: style, EmptyText: empty}
	}
	return []views.Chart{
		base("requests", "traffic.chart.requests", "bars",
			[]views.ChartSeries{{Name: i18n.T(ctx, "traffic.requests"), Class: "s-requests", Values: req}},
			i18n.T(ctx, "traffic.summary.requests", views.FormatInt(ctx, sumReq))).Scale(count),
		base("errors", "traffic.chart.errors", "stacked", errSeries,
			i18n.T(ctx, "traffic.summary.errors", views.FormatPercent(ctx, sumErr, sumReq))).Scale(pct),
		base("latency", "traffic.chart.latency", "lines", []views.ChartSeries{
			{Name: i18n.T(ctx, "traffic.p50"), Class: "s-p50", Values: lat50},
			{Name: i18n.T(ctx, "traffic.p95"), Class: "s-p95", Values: lat95}}, i18n.T(ctx, "traffic.chart.latency")).Scale(msLabel),
		base("ttft", "traffic.chart.ttft", "lines", []views.ChartSeries{
			{Name: i18n.T(ctx, "traffic.p50"), Class: "s-p50", Values: ttft50},
			{Name: i18n.T(ctx, "traffic.p95"), Class: "s-p95", Values: ttft95}}, i18n.T(ctx, "traffic.chart.ttft")).Scale(msLabel),
		base("tokens", "traffic.chart.tokens", "bars", []views.ChartSeries{
			{Name: i18n.T(ctx, "traffic.tokens_in"), Class: "s-in", Values: in},
			{Name: i18n.T(ctx, "traffic.tokens_out"), Class: "s-out", Values: out}},
			i18n.T(ctx, "traffic.summary.tokens", views.FormatInt(ctx, sumIn), views.FormatInt(ctx, sumOut))).Scale(count),
	}
}

// overviewCounts fills the inventory numbers and rows of the overview.
func (d *Dashboard) overviewCounts(c echo.Context, m *views.OverviewModel) error {
	provs, err := d.Catalog.ListProviders(ctx(c))
	if err != nil {
		return err
	}
	conns, err := d.Catalog.ListConnections(ctx(c))
	if err != nil {
		return err
	}
	keys, err := d.Keys.List(ctx(c))
	if err != nil {
		return err
	}
	m.Providers, m.Connections, m.Keys = len(provs), len(conns), len(keys)
	perProvider := map[int64]int{}
	for _, cn := range conns {
		perProvider[cn.ProviderID]++
		if cn.Enabled {
			m.EnabledConnections++
		}
	}
	for _, k := range keys {
		if k.RevokedAt == nil {
			m.ActiveKeys++
		}
	}
	models := map[string][]string{}
	for _, mo := range d.Inventory.List() {
		models[mo.Provider] = append(models[mo.Provider], mo.Name)
		m.Models++
	}
	for _, p := range provs {
		m.Rows = append(m.Rows, views.OverviewProvider{Name: p.Name, Type: typeLabel(ctx(c), p.Type), Connections: perProvider[p.ID],
			Discovery: d.discovery(c, p.Name), Models: models[p.Name]})
	}
	return nil
}
