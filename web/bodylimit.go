package web

import (
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
)

// MaxEdgeBody bounds the body of every request but an authenticated proxy call: dashboard forms
// and the admin API's JSON (1 MiB). The login form has a smaller bound of its own.
const MaxEdgeBody = 1 << 20

// bodyKey keeps, on the echo context, the request's capped body (limitBody).
const bodyKey = "switchyard.body"

// limitBody caps what a request may send as its body at limit: reading past it fails with
// http.MaxBytesError (413 where the handler reports it), and a declared Content-Length above it
// fails the first read before anything is read. Nothing is read here: a request refused by its
// authentication check costs nothing, and an error answer to a request whose body was not read
// to its end closes the connection (unreadBody) instead of making net/http read the rest. A
// proxy call whose client key checked out lifts the cap (liftBodyLimit); its handler has its
// own, larger one (--max-body-mib).
func limitBody(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if !hasBody(r) {
				return next(c)
			}
			orig := r.Body
			// net/http's own reader, on net/http's own writer: past the limit it makes the server
			// close the connection after the answer, lingering so the client reads it.
			b := &cappedBody{Reader: http.MaxBytesReader(c.Response().Writer, orig, limit), orig: orig}
			if r.ContentLength > limit {
				b.err = &http.MaxBytesError{Limit: limit}
			}
			r.Body = b
			c.Set(bodyKey, b)
			defer func() { r.Body = orig }() // net/http looks at its own body after the handler
			return next(c)
		}
	}
}

// cappedBody is the capped body: it fails at once on a declared length past the limit and
// remembers whether it was read to its end. Lifted, it is the body as it came.
type cappedBody struct {
	io.Reader
	orig   io.ReadCloser
	err    error // the refusal of a declared length past the limit
	eof    bool
	lifted bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.lifted {
		return b.orig.Read(p)
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.orig.Close() }

// unreadBody reports whether the request has a capped body that was not read to its end.
func unreadBody(c echo.Context) bool {
	b, ok := c.Get(bodyKey).(*cappedBody)
	return ok && !b.eof
}

// liftBodyLimit uncaps the body of an authenticated proxy call (in place: wrappers put around it
// since, such as the request log's capture, stay).
func liftBodyLimit(c echo.Context) {
	if b, ok := c.Get(bodyKey).(*cappedBody); ok {
		b.lifted = true
		c.Set(bodyKey, nil)
	}
}

// parseForm reads a dashboard form's body once its sender is known to be the admin, so that a
// body too large (413), too slow (408) or broken (400) is answered as such: the handlers' form
// accessors would take it for an empty form.
func parseForm() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if hasBody(r) {
				var err error
				if strings.HasPrefix(r.Header.Get(echo.HeaderContentType), echo.MIMEMultipartForm) {
					err = r.ParseMultipartForm(MaxEdgeBody)
				} else {
					err = r.ParseForm()
				}
				if err != nil {
					return handlers.BodyError(err)
				}
			}
			return next(c)
		}
	}
}
