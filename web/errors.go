package web

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

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

// surfaceOf tells from the address (and, for the shared model list, the Anthropic version
// header) which format the caller speaks.
func surfaceOf(r *http.Request) surface {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1/messages"):
		return surfaceAnthropic
	case strings.HasPrefix(p, "/v1/models") && r.Header.Get("anthropic-version") != "":
		return surfaceAnthropic
	case p == "/v1" || strings.HasPrefix(p, "/v1/"):
		return surfaceOpenAI
	case p == "/api" || strings.HasPrefix(p, "/api/"), p == "/metrics":
		return surfaceAdmin
	}
	return surfaceDashboard
}

// errorHandler renders every error that reached the edge once, in its caller's format, and
// leaves it for the request log line (which logs it once, with the request id).
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		e := edgeError(err)
		setRequestError(c, e)
		if tr := proxy.TraceFrom(c.Request().Context()); tr != nil && tr.ErrorCode == "" {
			tr.ErrorCode = e.ReasonCode()
		}
		if c.Response().Committed || e.Code == errs.ClientClosed {
			return // the answer is under way (or nobody is left to read it)
		}
		if werr := writeError(c, e); werr != nil {
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

func writeError(c echo.Context, e *errs.Error) error {
	r := c.Request()
	if unreadBody(c) {
		// The rest of the body is not wanted: close rather than have net/http read it first.
		c.Response().Header().Set(echo.HeaderConnection, "close")
	}
	s := surfaceOf(r)
	switch s {
	case surfaceOpenAI:
		proxy.ErrorHeaders(c.Response().Header(), e)
		return c.Blob(proxyStatus(e), echo.MIMEApplicationJSON, proxy.OpenAIErrorBody(e))
	case surfaceAnthropic:
		proxy.ErrorHeaders(c.Response().Header(), e)
		return c.Blob(proxyStatus(e), echo.MIMEApplicationJSON, proxy.AnthropicErrorBody(e))
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
		msg = e.Msg.In(i18n.FromContext(r.Context()))
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return views.ErrorPage(views.ErrorModel{Status: status, Message: msg}).Render(r.Context(), c.Response())
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
		return adminErrorBody{Error: adminErrorDetail{Code: string(errs.Internal), Message: errs.M("err.internal").String()}}
	}
	d := adminErrorDetail{Code: e.ReasonCode(), Message: e.Msg.String()}
	if len(e.Fields) > 0 {
		d.Fields = make(map[string]string, len(e.Fields))
		for k, m := range e.Fields {
			d.Fields[k] = m.String()
		}
	}
	return adminErrorBody{Error: d}
}
