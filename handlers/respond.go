// Package handlers adapts HTTP to the services: bind the request, call a service, render a view
// or JSON. No SQL and no policy lives here. Handlers return errors; the edge (web) renders them
// in the caller's format and logs them once.
package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
)

// bindJSON decodes a JSON body strictly: exactly one value, no key twice, no unknown fields.
func bindJSON(c echo.Context, dst any) error {
	raw, err := readStrictBody(c, false)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return errs.Wrap(err, errs.Invalid, "err.bad_json", err.Error())
	}
	return nil
}

// readStrictBody reads an admin JSON body. A key given twice or a second document is refused, as
// it would be read as the last or not at all; so is a plain syntax error, unless syntaxLater
// leaves that to a service that names the field it happened in.
func readStrictBody(c echo.Context, syntaxLater bool) ([]byte, error) {
	raw, err := readAdminBody(c)
	if err != nil {
		return nil, err
	}
	if e := strictJSON(raw); e != nil && (!syntaxLater || e.Reason != "bad_json") {
		return nil, e
	}
	return raw, nil
}

// Items wraps a list as {"items": [...]}, never null.
func Items[T any](list []T) map[string][]T {
	if list == nil {
		list = []T{}
	}
	return map[string][]T{"items": list}
}

// copyEach is a copy of list, never nil, with change made to each element of the copy.
func copyEach[T any](list []T, change func(*T)) []T {
	out := make([]T, len(list))
	for i, v := range list {
		change(&v)
		out[i] = v
	}
	return out
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
