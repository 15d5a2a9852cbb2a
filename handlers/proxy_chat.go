package handlers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/proxy"
	"switchyard/services/routing"
)

// DefaultMaxBodyBytes is the default limit of a client request body (32 MiB).
const DefaultMaxBodyBytes = 32 << 20

// Proxy serves the client-facing surfaces. Errors are returned and rendered by the edge in the
// surface's format.
type Proxy struct {
	Engine       *proxy.Engine
	Inventory    *proxy.Inventory
	MaxBodyBytes int64
	// Combos gives the current combos, listed as models (nil: none).
	Combos func() *routing.Registry
}

// readBody reads the client's request body up to the limit. It is never inlined into the
// handlers, whose frames stay on the stack of every open stream.
//
//go:noinline
func (p *Proxy) readBody(c echo.Context) ([]byte, error) {
	limit := p.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	r := c.Request()
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := readAll(http.MaxBytesReader(c.Response(), r.Body, limit), r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		e := errs.Wrap(err, errs.Invalid, "proxy.body_read_failed")
		e.Status, e.Reason = http.StatusBadRequest, "body_read_failed"
		return nil, e
	}
	return body, nil
}

// readAll reads r to its end. With the size declared (Content-Length, else -1) the body is
// read into one slice of that size, where io.ReadAll grows a slice through several and copies
// them at the end: a coding agent's request is often hundreds of kilobytes.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1) // one byte more, so the end is read without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) { // more than declared: grow as io.ReadAll would
			b = append(b, 0)[:len(b)]
		}
	}
}

func tooLarge(limit int64) *errs.Error {
	e := errs.New(errs.TooLarge, "proxy.request_too_large", limit>>20)
	e.Reason = "request_too_large"
	return e
}

// Chat answers POST /v1/chat/completions.
func (p *Proxy) Chat(c echo.Context) error { return p.serve(c, (*proxy.Engine).Chat) }

// Messages answers POST /v1/messages (Anthropic's surface).
func (p *Proxy) Messages(c echo.Context) error { return p.serve(c, (*proxy.Engine).Messages) }

// Responses answers POST /v1/responses (OpenAI's Responses API).
func (p *Proxy) Responses(c echo.Context) error { return p.serve(c, (*proxy.Engine).Responses) }

// serve hands the request's body to one of the engine's surfaces. The surface is a method
// expression, not a method value, so that a request allocates no closure for it.
func (p *Proxy) serve(c echo.Context, surface func(*proxy.Engine, context.Context, http.ResponseWriter, []byte,
	http.Header, *proxy.Trace) *errs.Error) error {
	body, err := p.readBody(c)
	if err != nil {
		return err
	}
	r := c.Request()
	if e := surface(p.Engine, r.Context(), c.Response(), body, r.Header, TraceOf(c)); e != nil {
		return e
	}
	return nil
}

// ResponsesSocket answers GET /v1/responses, the WebSocket transport some Responses clients try
// first. An upgrade is refused with 426 Upgrade Required, the one answer on which Codex falls back
// to HTTP POST at once (other failures cost it retries first); a plain GET is 405. Either way the
// client is pointed at POST, which is served.
func (p *Proxy) ResponsesSocket(c echo.Context) error {
	c.Response().Header().Set("Allow", http.MethodPost)
	e := errs.New(errs.Invalid, "proxy.websocket_unsupported")
	e.Status, e.Reason = http.StatusMethodNotAllowed, "websocket_unsupported"
	if strings.EqualFold(c.Request().Header.Get("Upgrade"), "websocket") {
		e.Status = http.StatusUpgradeRequired
		c.Response().Header().Set("Connection", "close")
	}
	return e
}

// CountTokens answers POST /v1/messages/count_tokens.
func (p *Proxy) CountTokens(c echo.Context) error {
	body, err := p.readBody(c)
	if err != nil {
		return err
	}
	r := c.Request()
	if e := p.Engine.CountTokens(r.Context(), c.Response(), body, r.Header, TraceOf(c)); e != nil {
		return e
	}
	return nil
}
