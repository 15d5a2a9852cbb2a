package handlers

import (
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/proxy"
)

// DefaultMaxBodyBytes is the default limit of a client request body (32 MiB).
const DefaultMaxBodyBytes = 32 << 20

// Proxy serves the client-facing surfaces. Errors are returned and rendered by the edge in the
// surface's format.
type Proxy struct {
	Engine       *proxy.Engine
	Inventory    *proxy.Inventory
	MaxBodyBytes int64
}

// readBody reads the client's request body up to the limit.
func (p *Proxy) readBody(c echo.Context) ([]byte, error) {
	limit := p.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	r := c.Request()
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, limit))
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

func tooLarge(limit int64) *errs.Error {
	e := errs.New(errs.TooLarge, "proxy.request_too_large", limit>>20)
	e.Reason = "request_too_large"
	return e
}

// Chat answers POST /v1/chat/completions.
func (p *Proxy) Chat(c echo.Context) error {
	body, err := p.readBody(c)
	if err != nil {
		return err
	}
	r := c.Request()
	if e := p.Engine.Chat(r.Context(), c.Response(), body, r.Header, proxy.TraceFrom(r.Context())); e != nil {
		return e
	}
	return nil
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
