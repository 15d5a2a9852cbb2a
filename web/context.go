package web

import (
	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
)

// The edge's own per-request values live on the echo context behind these typed accessors;
// those the handlers read too (a proxy request's trace and client key) have theirs in handlers.
const (
	requestIDKey = "switchyard.request_id"
	errorKey     = "switchyard.error"
)

func setRequestID(c echo.Context, id string) { c.Set(requestIDKey, id) }

// requestIDOf is the request's id, as echoed in X-Request-Id.
func requestIDOf(c echo.Context) string {
	id, _ := c.Get(requestIDKey).(string)
	return id
}

func setRequestError(c echo.Context, e *errs.Error) { c.Set(errorKey, e) }

// requestErrorOf is the error the request was answered with, nil when none.
func requestErrorOf(c echo.Context) *errs.Error {
	e, _ := c.Get(errorKey).(*errs.Error)
	return e
}
