package handlers

import (
	"github.com/labstack/echo/v4"

	"switchyard/services/clientkeys"
	"switchyard/services/proxy"
)

// traceKey holds, on the echo context, a proxy request's trace: the edge creates it, the engine
// fills it in, the request log and the metrics read it. On the echo context, not the request's
// context: that would cost a copy of the request and a context value on every call.
const traceKey = "switchyard.trace"

// SetTrace gives a proxy request its trace (the edge calls it).
func SetTrace(c echo.Context, tr *proxy.Trace) { c.Set(traceKey, tr) }

// TraceOf is a proxy request's trace, nil when it has none.
func TraceOf(c echo.Context) *proxy.Trace {
	tr, _ := c.Get(traceKey).(*proxy.Trace)
	return tr
}

// clientKeyKey holds, on the echo context, the client key the edge authenticated.
const clientKeyKey = "switchyard.client_key"

// SetClientKey notes the client key that authenticated a proxy request (the edge calls it).
func SetClientKey(c echo.Context, id *clientkeys.Identity) { c.Set(clientKeyKey, id) }

// clientKeyOf is the client key of a proxy request; the zero Identity (no restrictions, no
// leases) when none was noted.
func clientKeyOf(c echo.Context) clientkeys.Identity {
	if id, _ := c.Get(clientKeyKey).(*clientkeys.Identity); id != nil {
		return *id
	}
	return clientkeys.Identity{}
}

// ClientKeyOf is the client key of a proxy request (the zero Identity when none was noted).
func ClientKeyOf(c echo.Context) clientkeys.Identity { return clientKeyOf(c) }

// operatorKey holds, on the echo context, who the admin caller is: "token" for the admin bearer
// token, or "session:" and the session's id hash.
const operatorKey = "switchyard.operator"

// SetOperator notes who an admin request's caller is (the admin middleware calls it).
func SetOperator(c echo.Context, who string) { c.Set(operatorKey, who) }

// operatorOf is who an admin request's caller is ("" when not noted): sign-in flows are bound
// to it, so one operator's flow id means nothing to another.
func operatorOf(c echo.Context) string {
	who, _ := c.Get(operatorKey).(string)
	return who
}
