package web

import (
	"net"
	"net/http"

	"github.com/labstack/echo/v4"
)

// clientIP is how the edge tells a client's address (c.RealIP, which login throttling keys on).
// Without trusted proxies it is the direct peer, whatever the headers say. With them, the
// forwarding headers count only when the peer is one of those proxies: X-Forwarded-For is read
// from the right and yields the nearest address that is not a trusted proxy (so a client cannot
// pick its address by sending its own header through the proxy), else X-Real-IP. Loopback,
// link-local and private networks are not trusted implicitly (echo trusts them by default).
func clientIP(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := trustOnly(trusted)
	xff, realIP := echo.ExtractIPFromXFFHeader(opts...), echo.ExtractIPFromRealIPHeader(opts...)
	return func(r *http.Request) string {
		if len(r.Header[echo.HeaderXForwardedFor]) > 0 {
			return xff(r)
		}
		return realIP(r)
	}
}

// clientScheme is how the edge tells whether a client reached it over TLS (c.Scheme, which sets
// the session and language cookies' Secure flag and the base URL the overview shows). A TLS
// connection counts; X-Forwarded-Proto (and echo's other scheme headers) only when the direct
// peer is one of the trusted proxies, so a client cannot claim a TLS it does not have. Without
// trusted proxies only the connection counts (echo would otherwise believe any loopback or
// private peer).
func clientScheme(trusted []*net.IPNet) echo.SchemeExtractor {
	if len(trusted) == 0 {
		return echo.ExtractSchemeDirect()
	}
	return echo.ExtractSchemeFromHeaders(trustOnly(trusted)...)
}

// trustOnly are echo's trust options for exactly the trusted proxies.
func trustOnly(trusted []*net.IPNet) []echo.TrustOption {
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return opts
}
