// Package usage reports spend and tokens over a time range, by client key, provider or model,
// from the quarter-hour usage buckets the request log writes behind (services/traffic). It is
// read by the Usage page and GET /api/usage; never on the request path.
package usage

import (
	"context"
	"sort"
	"strconv"
	"time"

	"switchyard/db"
)

// By is what a report groups by.
type By string

// The groupings.
const (
	ByKey      By = "key"
	ByProvider By = "provider"
	ByModel    By = "model"
)

// Groupings lists every grouping in display order.
var Groupings = []By{ByKey, ByProvider, ByModel}

// ParseBy reads a grouping's name; ok is false for anything else.
func ParseBy(s string) (By, bool) {
	for _, b := range Groupings {
		if string(b) == s {
			return b, true
		}
	}
	return "", false
}

// Step is the length of a bucket: a report's range starts and ends on one.
const Step = db.UsageBucketSeconds * time.Second

// MaxSpan is the longest range a report covers: the buckets are kept for 400 days.
const MaxSpan = 400 * 24 * time.Hour

// chunk is how much of the range is read at a time, so a long range never holds all its
// buckets in memory at once (a year of a busy gateway is a million of them).
const chunk = 31 * 24 * time.Hour

// Floor and Ceil round a time to the quarter hour at or before it, and at or after it.
func Floor(t time.Time) time.Time { return t.Truncate(Step) }

// Ceil is the quarter hour at or after t.
func Ceil(t time.Time) time.Time {
	f := Floor(t)
	if f.Equal(t) {
		return f
	}
	return f.Add(Step)
}

// Sums are the counts of a group (or of a step, or of everything). InputTokens is every prompt
// token, the cache reads and writes included; OutputTokens every answer token, reasoning
// included. CostUSD is the spend of the priced requests; UnpricedRequests counts the requests
// that used tokens of a model without a price (their cost is not in CostUSD).
type Sums struct {
	Requests         int64   `json:"requests"`
	Errors           int64   `json:"errors"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	ReasoningTokens  int64   `json:"reasoning_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	UnpricedRequests int64   `json:"unpriced_requests"`
}

// bucketSums is a bucket's counts.
func bucketSums(b *db.UsageBucket) Sums {
	return Sums{
		Requests: b.Requests, Errors: b.Errors,
		InputTokens: b.InputTokens, OutputTokens: b.OutputTokens,
		CacheReadTokens: b.CacheReadTokens, CacheWriteTokens: b.CacheWriteTokens,
		ReasoningTokens: b.ReasoningTokens, CostUSD: b.CostUSD, UnpricedRequests: b.Unpriced,
	}
}

// Add sums another group's counts into s.
func (s *Sums) Add(o Sums) {
	s.Requests += o.Requests
	s.Errors += o.Errors
	s.InputTokens += o.InputTokens
	s.OutputTokens += o.OutputTokens
	s.CacheReadTokens += o.CacheReadTokens
	s.CacheWriteTokens += o.CacheWriteTokens
	s.ReasoningTokens += o.ReasoningTokens
	s.CostUSD += o.CostUSD
	s.UnpricedRequests += o.UnpricedRequests
}

// Row is one group of a report: a client key (KeyID, its name), a provider, or a provider's
// model (Name is "provider/model").
type Row struct {
	Name     string
	KeyID    int64
	Provider string
	Model    string
	Sums
}

// Point is one step of a report's series.
type Point struct {
	Start time.Time
	Sums
}

// Source gives the buckets of a range (traffic.Service.UsageBuckets).
type Source interface {
	UsageBuckets(ctx context.Context, from, to time.Time) ([]db.UsageBucket, error)
}

// Query is the range a report covers and, when Points > 0, the series it draws: Points steps
// of Every each from From (Every a whole number of quarter hours).
type Query struct {
	From, To time.Time
	Every    time.Duration
	Points   int
}

// Report is the use of a range by client key, provider and model; the range is whole quarter
// hours (From rounded down, To up).
type Report struct {
	From, To time.Time
	// Total is the use of the whole range.
	Total Sums
	// Series is the use per step (empty unless the query asked for one).
	Series []Point
	combos map[combo]*Sums
}

// combo is the finest grouping a report keeps: client key, provider and model (the
// connection is summed away).
type combo struct {
	KeyID           int64
	Provider, Model string
}

// Build reads the range's buckets from src, a month at a time, and sums them. Buckets of
// client key 0 (none) are left out; there are none today, the check keeps it so.
func Build(ctx context.Context, src Source, q Query) (Report, error) {
	r := Report{From: Floor(q.From), To: Ceil(q.To), combos: map[combo]*Sums{}}
	if q.Points > 0 && q.Every > 0 {
		r.Series = make([]Point, q.Points)
		for i := range r.Series {
			r.Series[i].Start = r.From.Add(time.Duration(i) * q.Every)
		}
	}
	for at := r.From; at.Before(r.To); at = at.Add(chunk) {
		end := at.Add(chunk)
		if end.After(r.To) {
			end = r.To
		}
		rows, err := src.UsageBuckets(ctx, at, end)
		if err != nil {
			return Report{}, err
		}
		for i := range rows {
			b := &rows[i]
			start := time.Unix(b.Bucket*db.UsageBucketSeconds, 0)
			if b.KeyID == 0 || start.Before(at) || !start.Before(end) {
				continue
			}
			k := combo{b.KeyID, b.Provider, b.Model}
			s := r.combos[k]
			if s == nil {
				s = &Sums{}
				r.combos[k] = s
			}
			bs := bucketSums(b)
			s.Add(bs)
			r.Total.Add(bs)
			if len(r.Series) > 0 {
				if i := int(start.Sub(r.From) / q.Every); i >= 0 && i < len(r.Series) {
					r.Series[i].Add(bs)
				}
			}
		}
	}
	return r, nil
}

// Empty reports whether the range saw no request of any client key.
func (r Report) Empty() bool { return r.Total.Requests == 0 }

// Rows groups the report by a grouping, the costliest first, then the busiest, then by name.
// names are the client keys' names; a key not among them (deleted) is named "#id".
func (r Report) Rows(by By, names map[int64]string) []Row {
	groups := map[combo]*Row{}
	for k, s := range r.combos {
		g := k
		switch by {
		case ByKey:
			g = combo{KeyID: k.KeyID}
		case ByProvider:
			g = combo{Provider: k.Provider}
		default:
			g.KeyID = 0
		}
		row := groups[g]
		if row == nil {
			row = &Row{KeyID: g.KeyID, Provider: g.Provider, Model: g.Model}
			switch by {
			case ByKey:
				row.Name = names[g.KeyID]
				if row.Name == "" {
					row.Name = "#" + strconv.FormatInt(g.KeyID, 10)
				}
			case ByProvider:
				row.Name = g.Provider
			default:
				row.Name = ModelName(g.Provider, g.Model)
			}
			groups[g] = row
		}
		row.Add(*s)
	}
	out := make([]Row, 0, len(groups))
	for _, row := range groups {
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.CostUSD != b.CostUSD:
			return a.CostUSD > b.CostUSD
		case a.Requests != b.Requests:
			return a.Requests > b.Requests
		case a.Name != b.Name:
			return a.Name < b.Name
		case a.KeyID != b.KeyID:
			return a.KeyID < b.KeyID
		case a.Provider != b.Provider:
			return a.Provider < b.Provider
		}
		return a.Model < b.Model
	})
	return out
}

// ModelName is how a report names a provider's model: "provider/model"; a request that never
// reached a provider has only its model (or nothing).
func ModelName(provider, model string) string {
	if provider == "" {
		return model
	}
	return provider + "/" + model
}
