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
// away, so a handler may work longer than timeout. The proxy routes (clientRoutes) are left to
// their key check, which sets the deadline only when it refuses (refusedBodyDeadline): an
// authenticated proxy call's body may be large and slow, and the check reads no body.
func readDeadline(timeout time.Duration, clientRoutes map[string]bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if r := c.Request(); timeout > 0 && hasBody(r) && !clientRoutes[r.Method+" "+c.Path()] {
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

// refusedBodyDeadline gives a proxy call whose key was refused the body deadline readDeadline
// spared it: net/http reads the unread body away before it sends the refusal, and a client
// without a key may not hold the connection while it dribbles.
func refusedBodyDeadline(c echo.Context, timeout time.Duration) {
	if timeout > 0 && hasBody(c.Request()) {
		_ = setReadDeadline(c.Response(), time.Now().Add(timeout))
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
