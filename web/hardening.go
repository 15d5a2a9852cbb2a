package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// readDeadline gives a request timeout to send its body, counted from when routing begins
// (http.Server's ReadHeaderTimeout covers the headers before that). A client that dribbles its
// body then gets an error instead of holding the connection. Once the body is read to its end,
// net/http clears the deadline itself before it watches the connection for the client going
// away, so a handler may work longer than timeout. Authenticated proxy calls lift it at once
// (liftReadDeadline): their bodies may be large and slow.
func readDeadline(timeout time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if r := c.Request(); timeout > 0 && hasBody(r) {
				_ = setReadDeadline(c.Response(), time.Now().Add(timeout))
			}
			return next(c)
		}
	}
}

// hasBody reports whether the request has a body to read. Without one net/http is already
// watching the connection for the client going away, and a deadline would cut that watch and
// cancel a slow handler's context instead.
func hasBody(r *http.Request) bool { return r.Body != nil && r.Body != http.NoBody }

// liftReadDeadline ends the body deadline of a request that proved to be an authenticated proxy
// call.
func liftReadDeadline() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if hasBody(c.Request()) {
				_ = setReadDeadline(c.Response(), time.Time{})
			}
			return next(c)
		}
	}
}

// setReadDeadline is http.ResponseController's SetReadDeadline without the controller, which
// is allocated on every call: the writers are unwrapped down to net/http's, which sets it.
func setReadDeadline(w http.ResponseWriter, t time.Time) error {
	for {
		switch u := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return u.SetReadDeadline(t)
		case interface{ Unwrap() http.ResponseWriter }:
			w = u.Unwrap()
		default:
			return http.ErrNotSupported
		}
	}
}
