package handlers

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"

	"switchyard/services/proxy"
)

// DefaultMaxBodyBytes is the default limit of a client request body (32 MiB).
const DefaultMaxBodyBytes = 32 << 20

// Proxy serves the client-facing OpenAI-compatible surface.
type Proxy struct {
	Engine       *proxy.Engine
	Inventory    *proxy.Inventory
	MaxBodyBytes int64
}

// openAIError is the OpenAI error body, with our diagnostics beside the error when there are any.
type openAIError struct {
	Error       openAIErrorBody `json:"error"`
	Diagnostics *diagnostics    `json:"diagnostics,omitempty"`
}

type diagnostics struct {
	Excluded []proxy.Excluded `json:"excluded"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

// WriteOpenAIError renders an engine error in OpenAI format; upstream OpenAI-format bodies are
// relayed unchanged.
func WriteOpenAIError(c echo.Context, e *proxy.Error) error {
	h := c.Response().Header()
	for k, v := range e.Header {
		h[k] = v
	}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + 999_999_999) / 1_000_000_000)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	} else if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	if e.Status == 499 { // the client is gone; there is no one to answer
		return nil
	}
	if len(e.Raw) > 0 {
		return c.Blob(e.Status, echo.MIMEApplicationJSON, e.Raw)
	}
	body := openAIError{Error: openAIErrorBody{Message: e.Message, Type: e.Type, Code: e.Code}}
	if len(e.Excluded) > 0 {
		body.Diagnostics = &diagnostics{Excluded: e.Excluded}
	}
	return c.JSON(e.Status, body)
}

// TraceKey is the echo context key under which proxy handlers leave the request's *proxy.Trace
// for the request log and metrics.
const TraceKey = "trace"

// Chat answers POST /v1/chat/completions.
func (p *Proxy) Chat(c echo.Context) error {
	limit := p.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	r := c.Request()
	if r.ContentLength > limit {
		return WriteOpenAIError(c, tooLarge(limit))
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return WriteOpenAIError(c, tooLarge(limit))
		}
		return WriteOpenAIError(c, &proxy.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Code: "body_read_failed", Message: "the request body could not be read"})
	}
	// Admission before any parsing: a full queue turns the request away cheaply.
	if e := p.Engine.Admit(r.Context(), gjson.GetBytes(body, "model").String()); e != nil {
		c.Set("proxy_error", e.Code)
		return WriteOpenAIError(c, e)
	}
	req, err := proxy.DecodeChatRequest(body)
	if err != nil {
		return WriteOpenAIError(c, &proxy.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Code: "invalid_request", Message: err.Error()})
	}
	tr := &proxy.Trace{}
	c.Set(TraceKey, tr)
	if e := p.Engine.Chat(r.Context(), c.Response(), req, r.Header, tr); e != nil {
		c.Set("proxy_error", e.Code)
		return WriteOpenAIError(c, e)
	}
	return nil
}

func tooLarge(limit int64) *proxy.Error {
	return &proxy.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: "request body exceeds the limit of " + strconv.FormatInt(limit>>20, 10) + " MiB"}
}

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// Models answers GET /v1/models with the union of every provider's models as provider/model.
func (p *Proxy) Models(c echo.Context) error {
	list := p.Inventory.List()
	data := make([]openAIModel, len(list))
	for i, m := range list {
		data[i] = openAIModel{ID: m.ID, Object: "model", Created: m.Created, OwnedBy: m.Provider}
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
}
