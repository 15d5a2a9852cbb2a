package web

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/services/errs"
	"switchyard/services/metrics"
	"switchyard/services/proxy"
	"switchyard/services/traffic"
)

// recordRequest hands every finished client request to the request log: who asked (the client
// key), which surface, what the engine did (provider, connection, attempt chain, skipped
// connections, tokens, time to first token) and how it ended. It runs inside trace() and outside
// the client key check; errors are rendered first, so the status is the one sent. A request
// refused before any client key authenticated (missing or invalid key) is anonymous: it is
// counted (switchyard_refused_requests_total by surface and reason, and the traffic charts) but
// never logged row by row, so nobody without a key can rotate the log. Never a header. Bodies
// only when the log keeps them: then the first bytes of the client's body and of what went to
// the client are copied as they pass (the runner truncates and redacts them off the request
// path); otherwise nothing is wrapped.
func recordRequest(rec RequestRecorder, m *metrics.Metrics, now func() time.Time) echo.MiddlewareFunc {
	window := 0
	if n := rec.BodyBytes(); n > 0 {
		window = n + traffic.CaptureMargin
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			at, start := now(), time.Now()
			var in *captureReader
			var out *captureWriter
			if window > 0 {
				in, out = captureBodies(c, window)
			}
			if err := next(c); err != nil {
				c.Error(err)
			}
			recordEntry(rec, m, c, at, start, in, out)
			return nil
		}
	}
}

// recordEntry builds the request's log entry and hands it over. Like logRequest it is never
// inlined: the entry is large, and the middleware's frame stays on the stack of every open
// stream.
//
//go:noinline
func recordEntry(rec RequestRecorder, m *metrics.Metrics, c echo.Context, at, start time.Time, in *captureReader, out *captureWriter) {
	e := traffic.Entry{RequestID: requestIDOf(c), At: at, Surface: surfaceRoute(c.Path()), Status: c.Response().Status,
		Latency: time.Since(start)}
	if in != nil {
		e.Capture = &traffic.Capture{Request: in.buf, RequestSize: in.n, Response: out.buf, ResponseSize: out.n}
	}
	if tr := handlers.TraceOf(c); tr != nil {
		fromTrace(&e, tr)
	}
	if re := requestErrorOf(c); re != nil {
		e.Error = re.Msg
		if e.ErrorCode == "" {
			e.ErrorCode = re.ReasonCode()
		}
		if re.Code == errs.ClientClosed {
			e.Status = errs.StatusOf(errs.ClientClosed) // nothing was sent
		}
	}
	if e.ClientKeyID != 0 && (e.InputTokens > 0 || e.OutputTokens > 0 || e.Priced) {
		model := e.Model
		if tr := handlers.TraceOf(c); tr != nil {
			model = tr.MetricModel // bounded: listed models, else "unlisted"
		}
		m.Spend(handlers.ClientKeyOf(c).Name, e.Provider, model, e.InputTokens, e.OutputTokens, e.CacheReadTokens,
			e.CacheWriteTokens, e.ReasoningTokens, e.CostUSD, e.Priced)
	}
	if e.ClientKeyID == 0 {
		reason := e.ErrorCode
		if reason == "" {
			reason = strconv.Itoa(e.Status)
		}
		m.Refused(e.Surface, reason)
		e.CountOnly, e.Capture = true, nil
	}
	rec.Record(e)
}

// fromTrace copies what the engine noted about a request into its log entry.
func fromTrace(e *traffic.Entry, tr *proxy.Trace) {
	e.ClientKeyID, e.ErrorCode, e.Provider, e.Model = tr.ClientKeyID, tr.ErrorCode, tr.Provider, tr.Model
	e.ConnectionID, e.Attempts, e.Retries, e.Failovers = tr.ConnectionID, tr.Attempts, tr.Retries, tr.Failovers
	e.Stream, e.Complete, e.TTFT = tr.Stream, tr.Complete, tr.TTFT
	e.InputTokens, e.OutputTokens = tr.InputTokens, tr.OutputTokens
	e.CacheReadTokens, e.CacheWriteTokens, e.ReasoningTokens = tr.Usage.CacheRead, tr.Usage.CacheWrite, tr.Usage.Reasoning
	e.CostUSD, e.Priced = tr.CostUSD, tr.Priced
	for _, a := range tr.Chain {
		e.Chain = append(e.Chain, traffic.Attempt{ConnectionID: a.ConnectionID, Connection: a.Connection, Kind: a.Kind,
			Status: a.Status, Reason: a.Reason, Duration: a.Duration, Detail: a.Detail, Target: a.Target})
		if a.ConnectionID == tr.ConnectionID {
			e.Connection = a.Connection
		}
	}
	for _, x := range tr.Skipped {
		e.Skipped = append(e.Skipped, traffic.Skip{Connection: x.Connection, Reason: x.Reason, Detail: x.Detail,
			Target: x.Target, SecondsLeft: x.SecondsLeft})
	}
	e.Combo, e.Dropped, e.Route = tr.Combo, tr.Dropped, tr.Route // the trace is the request's own and done with
}
