package handlers

import (
	"encoding/csv"
	"maps"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/usage"
)

func TestUsageQuery(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 7, 30, 0, time.UTC)
	end := time.Date(2026, 3, 10, 12, 15, 0, 0, time.UTC) // the end of the current quarter hour
	for _, tc := range []struct {
		name     string
		query    string
		by       usage.By
		from, to time.Time
		bad      []string // the fields refused
	}{
		{name: "defaults: the last 24 hours by key", query: "", by: usage.ByKey, from: end.Add(-24 * time.Hour), to: end},
		{name: "rfc 3339", query: "group_by=model&from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00%2B01:00", by: usage.ByModel,
			from: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), to: time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)},
		{name: "unix seconds", query: "group_by=provider&from=1772323200&to=1772409600", by: usage.ByProvider,
			from: time.Unix(1772323200, 0).UTC(), to: time.Unix(1772409600, 0).UTC()},
		{name: "only from: up to now", query: "from=1772323200", by: usage.ByKey, from: time.Unix(1772323200, 0).UTC(), to: end},
		{name: "only to: the day before", query: "to=1772409600", by: usage.ByKey, from: time.Unix(1772409600-86400, 0).UTC(),
			to: time.Unix(1772409600, 0).UTC()},
		{name: "400 days", query: "from=2025-01-01T00:00:00Z&to=2026-02-05T00:00:00Z", by: usage.ByKey,
			from: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), to: time.Date(2026, 2, 5, 0, 0, 0, 0, time.UTC)},
		{name: "unknown grouping", query: "group_by=connection", bad: []string{"group_by"}},
		{name: "not a time", query: "from=yesterday&to=2026-13-01T00:00:00Z", bad: []string{"from", "to"}},
		{name: "milliseconds are refused, not read as the year 57000", query: "from=1772323200000", bad: []string{"from"}},
		{name: "before 1970", query: "from=-5", bad: []string{"from"}},
		{name: "to before from", query: "from=1772409600&to=1772323200", bad: []string{"to"}},
		{name: "to equal to from", query: "from=1772409600&to=1772409600", bad: []string{"to"}},
		{name: "longer than 400 days", query: "from=2025-01-01T00:00:00Z&to=2026-02-05T00:00:01Z", bad: []string{"to"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := echo.New().NewContext(httptest.NewRequest("GET", "/api/usage?"+tc.query, nil), httptest.NewRecorder())
			by, from, to, err := usageQuery(c, now)
			if len(tc.bad) > 0 {
				e := errs.As(err)
				if e == nil || e.Code != errs.Invalid {
					t.Fatalf("err %v, want a 422 naming %v", err, tc.bad)
				}
				if got := slices.Sorted(maps.Keys(e.Fields)); !slices.Equal(got, tc.bad) {
					t.Fatalf("fields %v, want %v", e.Fields, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if by != tc.by || !from.Equal(tc.from) || !to.Equal(tc.to) {
				t.Fatalf("got %s %v – %v, want %s %v – %v", by, from, to, tc.by, tc.from, tc.to)
			}
		})
	}
}

func TestUsageCSV(t *testing.T) {
	id, prov, model, prov2 := int64(4), "openai", "=HYPERLINK(\"x\")", "local"
	sums := usage.Sums{Requests: 1200, Errors: 3, InputTokens: 1_000_000, OutputTokens: 25, CacheReadTokens: 7, CacheWriteTokens: 1,
		ReasoningTokens: 2, CostUSD: 0.00000045, UnpricedRequests: 1}
	for _, tc := range []struct {
		by   usage.By
		item usageItem
		want [][]string
	}{
		{usage.ByKey, usageItem{Name: "agent, \"bob\"", KeyID: &id, Sums: sums}, [][]string{
			{"key_id", "key_name", "requests", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
				"reasoning_tokens", "cost_usd", "unpriced_requests"},
			{"4", "agent, \"bob\"", "1200", "3", "1000000", "25", "7", "1", "2", "0.00000045", "1"}}},
		{usage.ByProvider, usageItem{Name: prov2, Provider: &prov2, Sums: usage.Sums{CostUSD: 12345.5}}, [][]string{
			{"provider", "requests", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
				"reasoning_tokens", "cost_usd", "unpriced_requests"},
			{"local", "0", "0", "0", "0", "0", "0", "0", "12345.5", "0"}}},
		{usage.ByModel, usageItem{Name: prov + "/" + model, Provider: &prov, Model: &model, Sums: sums}, [][]string{
			{"provider", "model", "requests", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
				"reasoning_tokens", "cost_usd", "unpriced_requests"},
			{"openai", "'=HYPERLINK(\"x\")", "1200", "3", "1000000", "25", "7", "1", "2", "0.00000045", "1"}}},
	} {
		t.Run(string(tc.by), func(t *testing.T) {
			b, err := usageCSV(usageAnswer{GroupBy: tc.by, Items: []usageItem{tc.item}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
			if err != nil {
				t.Fatalf("not CSV: %v\n%s", err, b)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCSVText(t *testing.T) {
	for in, want := range map[string]string{"laptop": "laptop", "=1+1": "'=1+1", "+1": "'+1", "-x": "'-x", "@SUM": "'@SUM",
		"\tx": "'\tx", "": "", "a=b": "a=b"} {
		if got := csvText(in); got != want {
			t.Errorf("csvText(%q) = %q, want %q", in, got, want)
		}
	}
}
