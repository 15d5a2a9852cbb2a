// Package handlers adapts HTTP to the services: bind the request, call a service, render a view
// or JSON. No SQL and no policy lives here.
package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
)

// apiError is the admin API's error body: {"error": {"message", "code", "fields"}}.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string            `json:"message"`
	Code    string            `json:"code"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// StatusOf maps a service error code to an HTTP status.
func StatusOf(err error) int {
	switch errs.CodeOf(err) {
	case errs.Invalid:
		return http.StatusUnprocessableEntity
	case errs.NotFound:
		return http.StatusNotFound
	case errs.Conflict:
		return http.StatusConflict
	case errs.Unauthorized:
		return http.StatusUnauthorized
	case errs.Forbidden:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// APIError writes err as the admin API's JSON error; internal details stay in the log.
func APIError(c echo.Context, err error) error {
	var e *errs.Error
	status := StatusOf(err)
	body := apiErrorBody{Code: string(errs.CodeOf(err)), Message: "internal error"}
	if errors.As(err, &e) && status != http.StatusInternalServerError {
		body.Message = e.Msg.String()
		if len(e.Fields) > 0 {
			body.Fields = make(map[string]string, len(e.Fields))
			for k, m := range e.Fields {
				body.Fields[k] = m.String()
			}
		}
	} else {
		c.Logger().Error(err)
		c.Set("error", err)
	}
	return c.JSON(status, apiError{Error: body})
}

// APIMessage writes an admin API error with a status, code and message.
func APIMessage(c echo.Context, status int, code, msg string) error {
	return c.JSON(status, apiError{Error: apiErrorBody{Code: code, Message: msg}})
}

// Items wraps a list as {"items": [...]}, never null.
func Items[T any](list []T) map[string][]T {
	if list == nil {
		list = []T{}
	}
	return map[string][]T{"items": list}
}

// PathID parses the :id path parameter.
func PathID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, errs.New(errs.NotFound, "err.no_such_id", c.Param("id"))
	}
	return id, nil
}

// Render writes a templ component with a status.
func Render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

// ctx returns the request context.
func ctx(c echo.Context) context.Context { return c.Request().Context() }
