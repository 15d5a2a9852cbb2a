package web

import (
	"github.com/labstack/echo/v4"
)

// contentSecurityPolicy lets dashboard pages load scripts, styles, images and fetches from this
// origin only: no inline script or style, no eval, no plugins, no <base> rewriting, forms post
// only here, and no other site may frame a page (clickjacking).
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders marks every answer but the proxy surfaces' (which browsers never render) with
// the CSP above, no framing (frame-ancestors and, for old browsers, X-Frame-Options), no MIME
// sniffing and no referrer to other sites.
func securityHeaders() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !isProxyPath(c.Request().URL.Path) {
				h := c.Response().Header()
				h.Set("Content-Security-Policy", contentSecurityPolicy)
				h.Set("X-Frame-Options", "DENY")
				h.Set("X-Content-Type-Options", "nosniff")
				h.Set("Referrer-Policy", "same-origin")
			}
			return next(c)
		}
	}
}
