package handlers

import (
	"bytes"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/usage"
)

// usageItem is one group of GET /api/usage: a client key (key_id), a provider, or a provider's
// model; the fields that do not fit the grouping are left out.
type usageItem struct {
	Name     string  `json:"name"`
	KeyID    *int64  `json:"key_id,omitempty"`
	Provider *string `json:"provider,omitempty"`
	Model    *string `json:"model,omitempty"`
	usage.Sums
}

// usageAnswer is GET /api/usage's answer.
type usageAnswer struct {
	From    time.Time   `json:"from"`
	To      time.Time   `json:"to"`
	GroupBy usage.By    `json:"group_by"`
	Items   []usageItem `json:"items"`
	Total   usage.Sums  `json:"total"`
}

// usageWindow is how long the usage API and CSV look back when the query names no from.
const usageWindow = 24 * time.Hour

// usageQuery reads group_by (key, provider or model; key when absent), from and to (RFC 3339
// or unix seconds). Without to the range ends with the current quarter hour; without from it
// is the 24 hours before to. to must be after from, at most 400 days.
func usageQuery(c echo.Context, now time.Time) (usage.By, time.Time, time.Time, error) {
	q := c.QueryParams()
	fields := map[string]errs.Msg{}
	by := usage.ByKey
	if v := strings.TrimSpace(q.Get("group_by")); v != "" {
		var ok bool
		if by, ok = usage.ParseBy(v); !ok {
			fields["group_by"] = errs.M("err.one_of", "key, provider, model")
		}
	}
	at := func(name string) (time.Time, bool) {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339, v)
		if sec, perr := strconv.ParseInt(v, 10, 64); perr == nil {
			t, err = time.Unix(sec, 0), nil
		}
		// JSON and RFC 3339 end at year 9999; a time in milliseconds lands far beyond it.
		if err != nil || t.Before(time.Unix(0, 0)) || t.Year() > 9999 {
			fields[name] = errs.M("usage.err.time")
			return time.Time{}, false
		}
		return t, true
	}
	from, hasFrom := at("from")
	to, hasTo := at("to")
	if !hasTo {
		to = usage.Floor(now).Add(usage.Step)
	}
	if !hasFrom {
		from = to.Add(-usageWindow)
	}
	if len(fields) == 0 {
		switch {
		case !to.After(from):
			fields["to"] = errs.M("usage.err.order")
		case to.Sub(from) > usage.MaxSpan:
			fields["to"] = errs.M("usage.err.span", int(usage.MaxSpan/(24*time.Hour)))
		}
	}
	if len(fields) > 0 {
		return "", time.Time{}, time.Time{}, errs.Fields(fields)
	}
	return by, from.UTC(), to.UTC(), nil
}

// usageItems reads the query and builds the answer of the usage API and CSV.
func (r *Requests) usageItems(c echo.Context) (usageAnswer, error) {
	by, from, to, err := usageQuery(c, r.now())
	if err != nil {
		return usageAnswer{}, err
	}
	rep, err := usage.Build(ctx(c), r.Log, usage.Query{From: from, To: to})
	if err != nil {
		return usageAnswer{}, err
	}
	names, err := keyNames(c, r.Keys)
	if err != nil {
		return usageAnswer{}, err
	}
	out := usageAnswer{From: rep.From.UTC(), To: rep.To.UTC(), GroupBy: by, Items: []usageItem{}, Total: rep.Total}
	for _, row := range rep.Rows(by, names) {
		it := usageItem{Name: row.Name, Sums: row.Sums}
		switch by {
		case usage.ByKey:
			it.KeyID = &row.KeyID
		case usage.ByProvider:
			it.Provider = &row.Provider
		default:
			it.Provider, it.Model = &row.Provider, &row.Model
		}
		out.Items = append(out.Items, it)
	}
	return out, nil
}

// Usage answers GET /api/usage?group_by=key|provider|model&from=&to=: spend and tokens per
// group over the range (whole quarter hours: from rounded down, to up), the costliest first.
func (r *Requests) Usage(c echo.Context) error {
	out, err := r.usageItems(c)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

// UsageCSV answers GET /api/usage.csv with the same query: one row per group under a header
// row, numbers as plain decimals, as a download.
func (r *Requests) UsageCSV(c echo.Context) error {
	out, err := r.usageItems(c)
	if err != nil {
		return err
	}
	b, err := usageCSV(out)
	if err != nil {
		return err
	}
	name := "switchyard-usage-" + string(out.GroupBy) + "-" + out.From.Format("20060102T1504Z") + "-" + out.To.Format("20060102T1504Z") + ".csv"
	c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "text/csv; charset=utf-8", b)
}

// usageCSV writes the items: the grouping's columns (key_id and key_name, provider, or
// provider and model), then the sums.
func usageCSV(out usageAnswer) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	head := map[usage.By][]string{usage.ByKey: {"key_id", "key_name"}, usage.ByProvider: {"provider"}, usage.ByModel: {"provider", "model"}}[out.GroupBy]
	_ = w.Write(append(head, "requests", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
		"reasoning_tokens", "cost_usd", "unpriced_requests"))
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, it := range out.Items {
		var rec []string
		switch out.GroupBy {
		case usage.ByKey:
			rec = []string{n(*it.KeyID), csvText(it.Name)}
		case usage.ByProvider:
			rec = []string{csvText(*it.Provider)}
		default:
			rec = []string{csvText(*it.Provider), csvText(*it.Model)}
		}
		s := it.Sums
		_ = w.Write(append(rec, n(s.Requests), n(s.Errors), n(s.InputTokens), n(s.OutputTokens), n(s.CacheReadTokens),
			n(s.CacheWriteTokens), n(s.ReasoningTokens), strconv.FormatFloat(s.CostUSD, 'f', -1, 64), n(s.UnpricedRequests)))
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// csvText keeps a text cell from being read as a formula by a spreadsheet: a cell starting with
// =, +, -, @, a tab or a carriage return gets a leading apostrophe (model names come from
// clients).
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
