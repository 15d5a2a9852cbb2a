package web

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/i18n"
	"switchyard/services/errs"
	"switchyard/services/proxy"
	"switchyard/views"
)

// surface is the format a caller expects its errors in.
type surface int

const (
	surfaceDashboard surface = iota // an HTML page
	surfaceAdmin                    // the admin API's JSON: {"error": {"message", "code", "fields"}}
	surfaceOpenAI                   // {"error": {"message", "type", "code", "param"}}
	surfaceAnthropic                // {"type": "error", "error": {"type", "message"}}
)

// surfaceOf tells from the address which format the caller speaks. The proxy surfaces answer
// in theirs, with or without /v1: Anthropic's for messages, OpenAI's for chat completions and
// Responses; the shared model list, the session leases and any other address under /v1 in
// Anthropic's when the request carries anthropic-version, else OpenAI's. The admin API and /metrics answer in the
// admin JSON, everything else as a dashboard page.
func surfaceOf(r *http.Request) surface {
	p := r.URL.Path
	rest, v1 := splitV1(p)
	switch {
	case under(rest, "/messages"):
		return surfaceAnthropic
	case under(rest, "/chat/completions"), under(rest, "/responses"):
		return surfaceOpenAI
	case v1, under(rest, "/models"), under(rest, "/session-leases"):
		return clientSurface(r)
	case under(p, "/api"), p == "/metrics":
		return surfaceAdmin
	}
	return surfaceDashboard
}

// clientSurface is the format of an API client the address does not name: Anthropic's when it
// sends anthropic-version (every Anthropic SDK does), else OpenAI's.
func clientSurface(r *http.Request) surface {
	if r.Header.Get("anthropic-version") != "" {
		return surfaceAnthropic
	}
	return surfaceOpenAI
}

// splitV1 strips /v1 from an address; v1 reports whether it was there.
func splitV1(p string) (rest string, v1 bool) {
	if rest, ok := strings.CutPrefix(p, "/v1"); ok && (rest == "" || rest[0] == '/') {
		return rest, true
	}
	return p, false
}

// under reports whether an address is base or below it.
func under(p, base string) bool { return p == base || strings.HasPrefix(p, base+"/") }

// isProxyPath reports whether an address belongs to the proxy surfaces: anything under /v1, and
// the surfaces' own addresses without it.
func isProxyPath(p string) bool {
	rest, v1 := splitV1(p)
	return v1 || under(rest, "/messages") || under(rest, "/chat/completions") || under(rest, "/responses") ||
		under(rest, "/models") || under(rest, "/session-leases")
}

// surfaceRoute names a proxy route by its /v1 address, whichever address the client used, so
// the request log and the metrics see one surface.
func surfaceRoute(route string) string {
	if _, v1 := splitV1(route); v1 {
		return route
	}
	return "/v1" + route
}

// fromBrowser tells a person's browser from an API client: htmx requests, and requests that
// accept HTML and carry no API key header, are a browser's; SDKs, agents and curl send a key
// (Authorization: Bearer or x-api-key) or accept no HTML.
func fromBrowser(r *http.Request) bool {
	if r.Header.Get("HX-Request") == "true" {
		return true
	}
	if _, ok := bearer(r); ok || r.Header.Get("x-api-key") != "" {
		return false
	}
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "text/html") {
			return true
		}
	}
	return false
}

// pagesForBrowsers answers a caller of a dashboard address (or of an address without a route)
// that is no browser and has no session with the 404 of an unknown address, in its own JSON
// format, rather than a redirect to a login page it cannot use: an SDK whose base URL is wrong
// learns so. Browsers go on to dashboardAuth, which sends them to the login.
func pagesForBrowsers(s *Sessions) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !fromBrowser(c.Request()) && !s.IsAdmin(c) {
				return echo.ErrNotFound
			}
			return next(c)
		}
	}
}

// answerSurface is the format an error is answered in: the address's, except that an address
// without a route answers a caller that is no browser in its client's JSON format, never with an
// HTML page.
func answerSurface(r *http.Request, e *errs.Error) surface {
	s := surfaceOf(r)
	if s == surfaceDashboard && routeNotFound(e) && !fromBrowser(r) {
		return clientSurface(r)
	}
	return s
}

// routeNotFound reports whether the error is echo's: no route answers the address.
func routeNotFound(e *errs.Error) bool {
	return e.Code == errs.NotFound && e.Msg.Key == "err.route_not_found"
}

// unknownAddress is the 404 an API client gets for an address without a route: it names the
// method and the address (cut to 200 bytes), so a wrong base URL shows at once.
func unknownAddress(r *http.Request, cause error) *errs.Error {
	p := r.URL.Path
	if len(p) > 200 {
		p = strings.ToValidUTF8(p[:200], "") + "…"
	}
	return &errs.Error{Code: errs.NotFound, Msg: errs.M("err.unknown_address", r.Method, p), Err: cause}
}

// errorHandler renders every error that reached the edge once, in its caller's format, and
// leaves it for the request log line (which logs it once, with the request id).
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		e := edgeError(err)
		s := answerSurface(c.Request(), e)
		if routeNotFound(e) && (s == surfaceOpenAI || s == surfaceAnthropic) {
			e = unknownAddress(c.Request(), err)
		}
		setRequestError(c, e)
		if tr := handlers.TraceOf(c); tr != nil && tr.ErrorCode == "" {
			tr.ErrorCode = e.ReasonCode()
		}
		if c.Response().Committed || e.Code == errs.ClientClosed {
			return // the answer is under way (or nobody is left to read it)
		}
		if werr := writeError(c, e, s); werr != nil {
			log.Debug("write error answer", "request_id", requestIDOf(c), "error", werr)
		}
	}
}

// edgeError turns anything a handler returned into an *errs.Error: echo's own errors (no
// route, wrong method) by their status; unknown errors are internal.
func edgeError(err error) *errs.Error {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return &errs.Error{Code: errs.NotFound, Msg: errs.M("err.route_not_found"), Err: err}
		case http.StatusMethodNotAllowed:
			return &errs.Error{Code: errs.Invalid, Status: he.Code, Reason: "method_not_allowed", Msg: errs.M("err.method_not_allowed"), Err: err}
		}
		return &errs.Error{Code: errs.CodeForStatus(he.Code), Status: he.Code, Msg: errs.M("err.http_status", he.Code), Err: err}
	}
	return errs.As(err)
}

func writeError(c echo.Context, e *errs.Error, s surface) error {
	r := c.Request()
	if unreadBody(c) {
		// The rest of the body is not wanted: close rather than have net/http read it first.
		c.Response().Header().Set(echo.HeaderConnection, "close")
	}
	switch s {
	case surfaceOpenAI:
		proxy.ErrorHeaders(c.Response().Header(), e)
		return c.Blob(proxyStatus(e), echo.MIMEApplicationJSON, proxy.OpenAIErrorBody(e))
	case surfaceAnthropic:
		proxy.ErrorHeaders(c.Response().Header(), e)
		return c.Blob(proxyStatus(e), echo.MIMEApplicationJSON, proxy.AnthropicErrorBody(e))
	}
	if e.Code == errs.Internal && slices.Contains(handlers.DegradedOf(c), "store") {
		// What failed needed the shared store, which this replica has lost: say so (and that
		// nothing was saved) instead of an internal error the operator cannot act on.
		e = errs.New(errs.Unavailable, "degraded.unavailable")
		e.RetryAfter = 5 * time.Second
	}
	if e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	if s == surfaceAdmin {
		return c.JSON(e.HTTPStatus(), adminError(e))
	}
	status := e.HTTPStatus()
	msg := i18n.T(r.Context(), "err.internal")
	if e.Code != errs.Internal {
		msg = handlers.In(i18n.FromContext(r.Context()), e.Msg)
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return views.ErrorPage(views.ErrorModel{Status: status, Message: msg, Degraded: handlers.DegradedOf(c)}).Render(r.Context(), c.Response())
}

// proxyStatus is the status on the proxy surfaces, where a bad request is 400 (422 is the admin
// API's validation status).
func proxyStatus(e *errs.Error) int {
	if e.Status == 0 && e.Code == errs.Invalid {
		return http.StatusBadRequest
	}
	return e.HTTPStatus()
}

type adminErrorBody struct {
	Error adminErrorDetail `json:"error"`
}

type adminErrorDetail struct {
	Message string            `json:"message"`
	Code    string            `json:"code"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// adminErrorJSON is adminError encoded.
func adminErrorJSON(e *errs.Error) []byte {
	b, _ := json.Marshal(adminError(e))
	return b
}

// adminError is the admin API's error body, in English; an internal error says only that.
func adminError(e *errs.Error) adminErrorBody {
	if e.Code == errs.Internal {
		return adminErrorBody{Error: adminErrorDetail{Code: string(errs.Internal), Message: handlers.English(errs.M("err.internal"))}}
	}
	d := adminErrorDetail{Code: e.ReasonCode(), Message: handlers.English(e.Msg)}
	if len(e.Fields) > 0 {
		d.Fields = make(map[string]string, len(e.Fields))
		for k, m := range e.Fields {
			d.Fields[k] = handlers.English(m)
		}
	}
	return adminErrorBody{Error: d}
}
