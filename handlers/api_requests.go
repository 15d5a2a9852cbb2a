package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services/catalog"
	"switchyard/services/clientkeys"
	"switchyard/services/errs"
	"switchyard/services/traffic"
)

// Requests serves the request log: GET /api/requests (and /{id}) for scripts, and the Request
// log pages of the dashboard.
type Requests struct {
	Log     *traffic.Service
	Keys    *clientkeys.Service
	Catalog *catalog.Service
	// Sessions is the dashboard's session store (page shell and flash messages).
	Sessions Sessions
	// Clock is the gateway's clock, for the time filters; nil = the real one.
	Clock func() time.Time
}

// requestFilter reads the request log filters from the query: status (error, 2xx, 3xx, 4xx,
// 5xx or one status), provider, model, surface, key (a client key id), since and until (RFC
// 3339 or unix milliseconds), before (an id: the next page) and limit (1–500).
func requestFilter(c echo.Context) (traffic.Filter, error) {
	q := c.QueryParams()
	f := traffic.Filter{Status: strings.TrimSpace(q.Get("status")), Provider: strings.TrimSpace(q.Get("provider")),
		Model: strings.TrimSpace(q.Get("model")), Surface: strings.TrimSpace(q.Get("surface"))}
	fields := map[string]errs.Msg{}
	num := func(name string, min, max int64) int64 {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min || n > max {
			fields[name] = errs.M("err.between", strconv.FormatInt(min, 10), strconv.FormatInt(max, 10))
		}
		return n
	}
	f.KeyID = num("key", 1, 1<<62)
	f.Before = num("before", 1, 1<<62)
	f.Limit = int(num("limit", 1, 500))
	at := func(name string) time.Time {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return time.Time{}
		}
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			return time.UnixMilli(ms)
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			fields[name] = errs.M("err.time")
		}
		return t
	}
	f.Since, f.Until = at("since"), at("until")
	if f.Status != "" && !validStatusFilter(f.Status) {
		fields["status"] = errs.M("err.one_of", "error, 2xx, 3xx, 4xx, 5xx, 100–599")
	}
	if len(fields) > 0 {
		return f, errs.Fields(fields)
	}
	return f, nil
}

func validStatusFilter(s string) bool {
	for _, v := range traffic.StatusFilters {
		if s == v {
			return true
		}
	}
	n, err := strconv.Atoi(s)
	return err == nil && n >= 100 && n <= 599
}

// keyNames maps client key ids to their names.
func keyNames(c echo.Context, keys *clientkeys.Service) (map[int64]string, error) {
	list, err := keys.List(ctx(c))
	if err != nil {
		return nil, err
	}
	out := make(map[int64]string, len(list))
	for _, k := range list {
		out[k.ID] = k.Name
	}
	return out, nil
}

// entry is the logged request the path's :id names, with the names of the client keys.
func (r *Requests) entry(c echo.Context) (traffic.Entry, map[int64]string, error) {
	id, err := PathID(c)
	if err != nil {
		return traffic.Entry{}, nil, err
	}
	e, err := r.Log.Get(ctx(c), id)
	if err != nil {
		return traffic.Entry{}, nil, err
	}
	names, err := keyNames(c, r.Keys)
	return e, names, err
}

// requestItem is a logged request in the admin API.
type requestItem struct {
	ID           int64     `json:"id"`
	RequestID    string    `json:"request_id"`
	Time         time.Time `json:"time"`
	ClientKeyID  int64     `json:"client_key_id"`
	ClientKey    string    `json:"client_key"`
	Surface      string    `json:"surface"`
	Model        string    `json:"model"`
	Provider     string    `json:"provider"`
	ConnectionID int64     `json:"connection_id"`
	Connection   string    `json:"connection"`
	Status       int       `json:"status"`
	ErrorCode    string    `json:"error_code"`
	Error        string    `json:"error,omitempty"`
	AttemptCount int       `json:"attempt_count"`
	Retries      int       `json:"retries"`
	Failovers    int       `json:"failovers"`
	LatencyMS    int64     `json:"latency_ms"`
	TTFTMS       int64     `json:"ttft_ms"`
	Stream       bool      `json:"stream"`
	Complete     bool      `json:"complete"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	// CacheReadTokens and CacheWriteTokens are parts of InputTokens, ReasoningTokens of
	// OutputTokens; CostUSD is null when the model had no price.
	CacheReadTokens  int64    `json:"cache_read_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	ReasoningTokens  int64    `json:"reasoning_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
	// Combo is the combo the client named ("" for none).
	Combo string `json:"combo,omitempty"`
	// Dropped names the request's fields and tools the upstream's format could not carry
	// (translated requests only); [] when nothing was dropped.
	Dropped []string `json:"dropped"`
}

// requestDetail is one logged request with its attempt chain, the connections it left out and,
// when the log keeps them, its bodies (truncated and redacted; absent when not kept).
type requestDetail struct {
	requestItem
	Attempts []attemptItem `json:"attempts"`
	Skipped  []skipItem    `json:"skipped"`
	// Route is a combo's decision trace: every target considered and what became of it.
	Route         []traffic.RouteStep `json:"route,omitempty"`
	RequestBody   *string             `json:"request_body,omitempty"`
	ResponseBody  *string             `json:"response_body,omitempty"`
	BodyTruncated bool                `json:"body_truncated"`
}

type attemptItem struct {
	Connection   string `json:"connection"`
	ConnectionID int64  `json:"connection_id"`
	Kind         string `json:"kind"`
	Status       int    `json:"status"`
	Reason       string `json:"reason"`
	Detail       string `json:"detail,omitempty"`
	Target       string `json:"target,omitempty"`
	DurationMS   int64  `json:"duration_ms"`
}

type skipItem struct {
	Connection  string `json:"connection"`
	Reason      string `json:"reason"`
	Detail      string `json:"detail,omitempty"`
	Target      string `json:"target,omitempty"`
	SecondsLeft int64  `json:"seconds_left"`
}

func toRequestItem(e traffic.Entry, names map[int64]string) requestItem {
	it := requestItem{ID: e.ID, RequestID: e.RequestID, Time: e.At.UTC(), ClientKeyID: e.ClientKeyID, ClientKey: names[e.ClientKeyID],
		Surface: e.Surface, Model: e.Model, Provider: e.Provider, ConnectionID: e.ConnectionID, Connection: e.Connection,
		Status: e.Status, ErrorCode: e.ErrorCode, AttemptCount: e.Attempts, Retries: e.Retries, Failovers: e.Failovers,
		LatencyMS: e.Latency.Milliseconds(), TTFTMS: e.TTFT.Milliseconds(), Stream: e.Stream, Complete: e.Complete,
		InputTokens: e.InputTokens, OutputTokens: e.OutputTokens, CacheReadTokens: e.CacheReadTokens,
		CacheWriteTokens: e.CacheWriteTokens, ReasoningTokens: e.ReasoningTokens, Combo: e.Combo, Dropped: e.Dropped}
	if it.Dropped == nil {
		it.Dropped = []string{}
	}
	if e.Priced {
		cost := e.CostUSD
		it.CostUSD = &cost
	}
	if e.Error.Key != "" {
		it.Error = English(e.Error)
	}
	return it
}

// List answers GET /api/requests: the logged requests the query's filters select, newest first.
func (r *Requests) List(c echo.Context) error {
	f, err := requestFilter(c)
	if err != nil {
		return err
	}
	list, err := r.Log.List(ctx(c), f)
	if err != nil {
		return err
	}
	names, err := keyNames(c, r.Keys)
	if err != nil {
		return err
	}
	out := make([]requestItem, len(list))
	for i, e := range list {
		out[i] = toRequestItem(e, names)
	}
	return c.JSON(http.StatusOK, Items(out))
}

// storedText is a kept body's text, nil when the log kept none.
func storedText(b traffic.Body) *string {
	if !b.Stored {
		return nil
	}
	return &b.Text
}

// Get answers GET /api/requests/:id with the attempt chain and the bodies kept.
func (r *Requests) Get(c echo.Context) error {
	e, names, err := r.entry(c)
	if err != nil {
		return err
	}
	d := requestDetail{requestItem: toRequestItem(e, names), Attempts: []attemptItem{}, Skipped: []skipItem{},
		RequestBody: storedText(e.RequestBody), ResponseBody: storedText(e.ResponseBody),
		BodyTruncated: e.RequestBody.Truncated || e.ResponseBody.Truncated, Route: e.Route}
	for _, a := range e.Chain {
		d.Attempts = append(d.Attempts, attemptItem{Connection: a.Connection, ConnectionID: a.ConnectionID, Kind: a.Kind,
			Status: a.Status, Reason: a.Reason, Detail: a.Detail, Target: a.Target, DurationMS: a.Duration.Milliseconds()})
	}
	for _, x := range e.Skipped {
		d.Skipped = append(d.Skipped, skipItem{Connection: x.Connection, Reason: x.Reason, Detail: x.Detail, Target: x.Target,
			SecondsLeft: x.SecondsLeft})
	}
	return c.JSON(http.StatusOK, d)
}
