package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/usage"
	"switchyard/views"
)

// UsagePage answers GET /usage?range=day|month: spend and tokens of the client keys over the
// last 24 hours (a point per hour, the default) or 30 days (a point per UTC day), charted and
// broken down by key, provider and model, each table downloadable as CSV.
func (d *Dashboard) UsagePage(c echo.Context) error {
	m, err := d.usageModel(c, c.QueryParam("range"))
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.UsagePage(m))
}

// usageModel reads the range's usage. Hours and days are UTC ones.
func (d *Dashboard) usageModel(c echo.Context, rangeName string) (views.UsageModel, error) {
	cx := ctx(c)
	now := d.Ops.Now().UTC()
	every, points, style := time.Hour, 24, "hm"
	from := now.Truncate(time.Hour).Add(-23 * time.Hour)
	if rangeName == "month" {
		every, points, style = 24*time.Hour, 30, "date"
		from = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -(points - 1))
	} else {
		rangeName = "day"
	}
	rep, err := usage.Build(cx, d.Traffic, usage.Query{From: from, To: from.Add(time.Duration(points) * every), Every: every, Points: points})
	if err != nil {
		return views.UsageModel{}, err
	}
	names, err := keyNames(c, d.Keys)
	if err != nil {
		return views.UsageModel{}, err
	}
	t := rep.Total
	m := views.UsageModel{Shell: d.shell(c, "usage", i18n.T(cx, "usage.title")), Range: rangeName, Empty: rep.Empty(),
		Totals: views.UsageTotals{Requests: t.Requests, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
			CacheReadTokens: t.CacheReadTokens, Cost: views.UsageCost{USD: t.CostUSD, Unpriced: t.UnpricedRequests}},
		Charts: usageCharts(cx, rep.Series, style)}
	span := "&from=" + strconv.FormatInt(rep.From.Unix(), 10) + "&to=" + strconv.FormatInt(rep.To.Unix(), 10)
	for _, by := range usage.Groupings {
		tab := views.UsageTable{By: string(by), CSV: "/api/usage.csv?group_by=" + string(by) + span}
		for _, r := range rep.Rows(by, names) {
			row := views.UsageRow{Name: r.Name, Requests: r.Requests, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
				CacheReadTokens: r.CacheReadTokens, Cost: views.UsageCost{USD: r.CostUSD, Unpriced: r.UnpricedRequests}}
			switch {
			case by == usage.ByKey && names[r.KeyID] != "":
				row.Href = "/keys#key-" + strconv.FormatInt(r.KeyID, 10)
			case by != usage.ByKey && r.Provider == "":
				// The request never reached a provider (an unknown model, a refused one).
				row.Muted = true
				if row.Name == "" {
					row.Name = i18n.T(cx, "traffic.no_provider")
				}
			}
			tab.Rows = append(tab.Rows, row)
		}
		m.Tables = append(m.Tables, tab)
	}
	return m, nil
}

// usageCharts draws the spend and the tokens of each step.
func usageCharts(ctx context.Context, pts []usage.Point, style string) []views.Chart {
	n := len(pts)
	starts := make([]time.Time, n)
	cost, in, out := make([]float64, n), make([]float64, n), make([]float64, n)
	var costTips, tokenTips []string
	var sumCost float64
	var sumIn, sumOut int64
	for i, p := range pts {
		starts[i] = p.Start
		at := p.Start.UTC().Format("15:04") + " UTC"
		if style == "date" {
			at = p.Start.UTC().Format("2006-01-02")
		}
		cost[i], in[i], out[i] = p.CostUSD, float64(p.InputTokens), float64(p.OutputTokens)
		sumCost += p.CostUSD
		sumIn += p.InputTokens
		sumOut += p.OutputTokens
		tip := i18n.T(ctx, "usage.tip.cost", at, views.FormatSpend(ctx, p.CostUSD), views.FormatInt(ctx, p.Requests))
		if p.UnpricedRequests > 0 {
			tip += " · " + i18n.T(ctx, "usage.plus_no_price_for", views.FormatInt(ctx, p.UnpricedRequests))
		}
		costTips = append(costTips, tip)
		tokenTips = append(tokenTips, i18n.T(ctx, "usage.tip.tokens", at, views.FormatInt(ctx, p.InputTokens),
			views.FormatInt(ctx, p.OutputTokens), views.FormatInt(ctx, p.CacheReadTokens)))
	}
	count := func(v float64) string { return views.FormatInt(ctx, int64(v)) }
	money := func(v float64) string { return views.FormatSpend(ctx, v) }
	empty := i18n.T(ctx, "traffic.no_data")
	return []views.Chart{
		views.Chart{ID: "chart-spend", Title: i18n.T(ctx, "usage.chart.spend"), Kind: "bars", Starts: starts, Tips: costTips,
			TimeStyle: style, EmptyText: i18n.T(ctx, "usage.chart.no_spend"),
			Series:  []views.ChartSeries{{Name: i18n.T(ctx, "usage.cost"), Class: "s-cost", Values: cost}},
			Summary: i18n.T(ctx, "usage.summary.spend", views.FormatSpend(ctx, sumCost))}.Scale(money),
		views.Chart{ID: "chart-tokens", Title: i18n.T(ctx, "usage.chart.tokens"), Kind: "bars", Starts: starts, Tips: tokenTips,
			TimeStyle: style, EmptyText: empty,
			Series: []views.ChartSeries{{Name: i18n.T(ctx, "usage.input"), Class: "s-in", Values: in},
				{Name: i18n.T(ctx, "usage.output"), Class: "s-out", Values: out}},
			Summary: i18n.T(ctx, "traffic.summary.tokens", views.FormatInt(ctx, sumIn), views.FormatInt(ctx, sumOut))}.Scale(count),
	}
}
