package traffic

import (
	"sort"
	"time"
)

// Class is the kind of error a request ended with, for the error-rate charts.
type Class int

// The error classes; a request answered 2xx or 3xx has none.
const (
	ClassClient      Class = iota // 4xx other than 429: the request was refused
	ClassRateLimited              // 429: a limit of ours or of every upstream connection
	ClassServer                   // 5xx: an upstream failed, a breaker is open, nothing was left
	ClassAborted                  // the client went away before the answer
	NumClasses
)

// ClassNames name the classes in order (i18n keys and CSS classes use them).
var ClassNames = [NumClasses]string{"client_error", "rate_limited", "server_error", "aborted"}

// ClassOf is the error class of a finished request; ok is false when it succeeded.
func ClassOf(status int, errorCode string) (Class, bool) {
	switch {
	case errorCode == "client_closed":
		return ClassAborted, true
	case status < 400 && streamFailed[errorCode]:
		return ClassServer, true // a stream that began and did not end well: the upstream's failure
	case status == 429:
		return ClassRateLimited, true
	case status >= 500:
		return ClassServer, true
	case status >= 400:
		return ClassClient, true
	}
	return 0, false
}

// streamFailed are the ends of a stream that began (status 200) and failed: the upstream broke
// it, ended it with an error or failed it, or a watchdog ended it.
var streamFailed = map[string]bool{"stream_incomplete": true, "upstream_stream_error": true, "response_failed": true,
	"stream_readiness_timeout": true, "stream_idle_timeout": true, "stream_throughput_too_low": true, "stream_total_timeout": true}

// bounds are the upper bounds (ms) of the latency histogram buckets; one more bucket holds
// everything slower. Percentiles are read from it, so they are estimates within a bucket.
var bounds = [...]float64{1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000, 1500, 2000,
	3000, 5000, 7000, 10000, 15000, 20000, 30000, 60000, 120000, 300000, 600000}

// hist counts durations into the buckets of bounds.
type hist [len(bounds) + 1]int64

func (h *hist) add(d time.Duration) {
	ms := float64(d) / float64(time.Millisecond)
	i := sort.SearchFloat64s(bounds[:], ms)
	h[i]++
}

func (h *hist) merge(o *hist) {
	for i := range h {
		h[i] += o[i]
	}
}

func (h *hist) count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// quantile estimates the q-quantile (0 < q ≤ 1), interpolating inside the bucket it falls in;
// 0 when the histogram is empty.
func (h *hist) quantile(q float64) time.Duration {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var seen float64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo, hi := 0.0, 0.0
			if i > 0 {
				lo = bounds[i-1]
			}
			if i < len(bounds) {
				hi = bounds[i]
			} else {
				hi = lo * 2
			}
			ms := lo + (hi-lo)*(rank-seen)/float64(c)
			return time.Duration(ms * float64(time.Millisecond))
		}
		seen += float64(c)
	}
	return time.Duration(bounds[len(bounds)-1] * float64(time.Millisecond))
}

// cell is the traffic of one minute for one provider and client key.
type cell struct {
	Requests int64             `json:"n"`
	Errors   [NumClasses]int64 `json:"e"`
	Latency  hist              `json:"l"`
	TTFT     hist              `json:"t"`
	In       int64             `json:"i"`
	Out      int64             `json:"o"`
}

func (c *cell) add(e *Entry) {
	c.Requests++
	if cl, bad := ClassOf(e.Status, e.ErrorCode); bad {
		c.Errors[cl]++
	}
	c.Latency.add(e.Latency)
	if e.TTFT > 0 {
		c.TTFT.add(e.TTFT)
	}
	c.In += e.InputTokens
	c.Out += e.OutputTokens
}

func (c *cell) merge(o *cell) {
	c.Requests += o.Requests
	for i := range c.Errors {
		c.Errors[i] += o.Errors[i]
	}
	c.Latency.merge(&o.Latency)
	c.TTFT.merge(&o.TTFT)
	c.In += o.In
	c.Out += o.Out
}

// dim is what a cell is kept per: the provider ("" when none was resolved) and the client key
// (0 when none authenticated).
type dim struct {
	Provider string
	KeyID    int64
}

type cellKey struct {
	Minute int64
	dim
}

// keepMinutes is how much of the past the in-memory aggregates cover: a day and a bit, so
// "today" and the day chart are always complete.
const keepMinutes = 25 * 60

// Range is a chart's time axis: Buckets points of Step each, ending with the current one.
type Range struct {
	Buckets int
	Step    time.Duration
}

// The ranges the dashboard shows.
var (
	LastHour = Range{Buckets: 60, Step: time.Minute}
	LastDay  = Range{Buckets: 96, Step: 15 * time.Minute}
)

// Point is the traffic of one step of a range.
type Point struct {
	Start      time.Time
	Requests   int64
	Errors     [NumClasses]int64
	LatencyP50 time.Duration
	LatencyP95 time.Duration
	TTFTP50    time.Duration
	TTFTP95    time.Duration
	Streams    int64 // requests with a time to first token
	In, Out    int64
}

// ErrorCount is the number of failed requests of the point.
func (p Point) ErrorCount() int64 {
	var n int64
	for _, e := range p.Errors {
		n += e
	}
	return n
}

func pointOf(start time.Time, c *cell) Point {
	return Point{Start: start, Requests: c.Requests, Errors: c.Errors,
		LatencyP50: c.Latency.quantile(0.5), LatencyP95: c.Latency.quantile(0.95),
		TTFTP50: c.TTFT.quantile(0.5), TTFTP95: c.TTFT.quantile(0.95), Streams: c.TTFT.count(),
		In: c.In, Out: c.Out}
}

// Group is one provider's or one client key's traffic over a range: the total and the number
// of requests per step (for a sparkline).
type Group struct {
	Provider string
	KeyID    int64
	Total    Point
	Requests []int64
}

// window returns the minute where the range starts, the number of minutes per step and the
// start time of its first step. The last step holds the current minute.
func (r Range) window(now time.Time) (first int64, per int64, start time.Time) {
	per = int64(r.Step / time.Minute)
	cur := now.Unix() / 60
	last := cur - cur%per // the minute the current step starts
	first = last - int64(r.Buckets-1)*per
	return first, per, time.Unix(first*60, 0)
}

// eachCell calls f, under the lock, for every cell of the range as it ends now, with the step
// the cell falls in; it returns the start of the first step.
func (s *Service) eachCell(r Range, f func(step int64, d dim, c *cell)) (start time.Time) {
	s.catchUp()
	first, per, start := r.window(s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	for m, byDim := range s.minutes {
		i := (m - first) / per
		if m < first || i >= int64(r.Buckets) {
			continue
		}
		for d, c := range byDim {
			f(i, d, c)
		}
	}
	return start
}

// Series is the traffic of every step of a range for the cells match selects (nil: all).
func (s *Service) Series(r Range, match func(provider string, keyID int64) bool) []Point {
	cells := make([]cell, r.Buckets)
	start := s.eachCell(r, func(i int64, d dim, c *cell) {
		if match == nil || match(d.Provider, d.KeyID) {
			cells[i].merge(c)
		}
	})
	out := make([]Point, r.Buckets)
	for i := range cells {
		out[i] = pointOf(start.Add(time.Duration(i)*r.Step), &cells[i])
	}
	return out
}

// Breakdown is the traffic of a range per provider and per client key, the busiest first.
func (s *Service) Breakdown(r Range) (providers, keys []Group) {
	type acc struct {
		total cell
		steps []int64
	}
	byProvider, byKey := map[string]*acc{}, map[int64]*acc{}
	get := func(a *acc) *acc {
		if a == nil {
			a = &acc{steps: make([]int64, r.Buckets)}
		}
		return a
	}
	start := s.eachCell(r, func(i int64, d dim, c *cell) {
		p := get(byProvider[d.Provider])
		byProvider[d.Provider] = p
		p.total.merge(c)
		p.steps[i] += c.Requests
		k := get(byKey[d.KeyID])
		byKey[d.KeyID] = k
		k.total.merge(c)
		k.steps[i] += c.Requests
	})
	for name, a := range byProvider {
		providers = append(providers, Group{Provider: name, Total: pointOf(start, &a.total), Requests: a.steps})
	}
	for id, a := range byKey {
		keys = append(keys, Group{KeyID: id, Total: pointOf(start, &a.total), Requests: a.steps})
	}
	busiest := func(g []Group) func(i, j int) bool {
		return func(i, j int) bool {
			if g[i].Total.Requests != g[j].Total.Requests {
				return g[i].Total.Requests > g[j].Total.Requests
			}
			return g[i].Provider < g[j].Provider || g[i].Provider == g[j].Provider && g[i].KeyID < g[j].KeyID
		}
	}
	sort.Slice(providers, busiest(providers))
	sort.Slice(keys, busiest(keys))
	return providers, keys
}

// Usage is what one client key used.
type Usage struct {
	Requests int64
	In, Out  int64
}

// KeyUsage sums each client key's traffic from since on (at most a day back).
func (s *Service) KeyUsage(since time.Time) map[int64]Usage {
	s.catchUp()
	from := since.Unix() / 60
	out := map[int64]Usage{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for m, byDim := range s.minutes {
		if m < from {
			continue
		}
		for d, c := range byDim {
			u := out[d.KeyID]
			u.Requests += c.Requests
			u.In += c.In
			u.Out += c.Out
			out[d.KeyID] = u
		}
	}
	return out
}

// Total is the traffic of a whole range (Start is the range's start).
func (s *Service) Total(r Range) Point {
	var total cell
	start := s.eachCell(r, func(_ int64, _ dim, c *cell) { total.merge(c) })
	return pointOf(start, &total)
}
