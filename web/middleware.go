package web

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/i18n"
	"switchyard/services/auth"
	"switchyard/services/clientkeys"
	"switchyard/services/metrics"
	"switchyard/services/proxy"
	"switchyard/services/secrets"
)

// requestID gives every request an id, echoed in X-Request-Id (a sane client-sent one is kept).
func requestID() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := c.Request().Header.Get(echo.HeaderXRequestID)
			if id == "" || len(id) > 64 || !proxy.ValidIdempotencyKey(id) {
				id = secrets.RandomToken(12)
			}
			c.Set("request_id", id)
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			return next(c)
		}
	}
}

// requestLog writes one structured line per request; never headers or bodies.
func requestLog(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			r := c.Request()
			if r.URL.Path == "/health" || strings.HasPrefix(r.URL.Path, "/static/") {
				return nil
			}
			attrs := []slog.Attr{
				slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", c.Response().Status),
				slog.Int64("bytes", c.Response().Size),
				slog.Duration("duration", time.Since(start)),
			}
			if v, ok := c.Get("proxy_error").(string); ok {
				attrs = append(attrs, slog.String("error_code", v))
			}
			if tr, ok := c.Get(handlers.TraceKey).(*proxy.Trace); ok && tr.Provider != "" {
				attrs = append(attrs, slog.String("provider", tr.Provider), slog.String("model", tr.Model),
					slog.Int64("connection_id", tr.ConnectionID), slog.Int("attempts", tr.Attempts),
					slog.Bool("stream", tr.Stream))
				if tr.Stream {
					attrs = append(attrs, slog.Bool("complete", tr.Complete), slog.Duration("ttft", tr.TTFT))
				}
				if tr.InputTokens+tr.OutputTokens > 0 {
					attrs = append(attrs, slog.Int64("input_tokens", tr.InputTokens), slog.Int64("output_tokens", tr.OutputTokens))
				}
			}
			if e, ok := c.Get("error").(error); ok {
				attrs = append(attrs, slog.String("error", e.Error()))
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
			return nil
		}
	}
}

// observe records every proxy request in the metrics, labelled by the route and the trace.
func observe(m *metrics.Metrics, route string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			provider, model := "", ""
			if tr, ok := c.Get(handlers.TraceKey).(*proxy.Trace); ok {
				provider, model = tr.Provider, tr.MetricModel
			}
			m.Request(route, c.Response().Status, provider, model, time.Since(start))
			return err
		}
	}
}

// metricsAuth protects /metrics with the admin token when one is set (or an admin session).
func metricsAuth(a *auth.Service, s *handlers.Sessions) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !a.TokenEnabled() {
				return next(c)
			}
			if tok, ok := bearer(c.Request()); ok && a.CheckToken(tok) || s.IsAdmin(c.Request()) {
				return next(c)
			}
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			return c.String(http.StatusUnauthorized, "unauthorized\n")
		}
	}
}

// locale puts the negotiated language into the request context.
func locale() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			var choice string
			if ck, err := c.Cookie(handlers.LangCookie); err == nil {
				choice = ck.Value
			}
			l := i18n.Negotiate(choice, c.Request().Header.Get("Accept-Language"))
			c.SetRequest(c.Request().WithContext(i18n.WithLang(c.Request().Context(), l)))
			return next(c)
		}
	}
}

// crossOrigin refuses state-changing browser requests that come from another origin, using the
// Fetch metadata and Origin headers (net/http's CrossOriginProtection); non-browser clients,
// which send neither, pass.
func crossOrigin() echo.MiddlewareFunc {
	cop := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := cop.Check(c.Request()); err != nil {
				return c.JSON(http.StatusForbidden, map[string]any{"error": map[string]string{
					"code": "forbidden", "message": "cross-origin request refused"}})
			}
			return next(c)
		}
	}
}

// adminAPI lets a request through with a logged-in session or the admin bearer token.
func adminAPI(a *auth.Service, s *handlers.Sessions) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if tok, ok := bearer(c.Request()); ok && a.CheckToken(tok) {
				return next(c)
			}
			if s.IsAdmin(c.Request()) {
				return next(c)
			}
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			return handlers.APIMessage(c, http.StatusUnauthorized, "unauthorized",
				"log in to the dashboard or send Authorization: Bearer <SWITCHYARD_ADMIN_TOKEN>")
		}
	}
}

// dashboardAuth sends visitors without a session to the login page.
func dashboardAuth(s *handlers.Sessions) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if s.IsAdmin(c.Request()) {
				return next(c)
			}
			if c.Request().Header.Get("HX-Request") == "true" {
				c.Response().Header().Set("HX-Redirect", "/login")
				return c.NoContent(http.StatusUnauthorized)
			}
			if c.Request().Method != http.MethodGet {
				return c.String(http.StatusUnauthorized, "login required")
			}
			return c.Redirect(http.StatusSeeOther, "/login?next="+c.Request().URL.RequestURI())
		}
	}
}

type clientKeyCtx struct{}

// clientKey authenticates proxy callers by Authorization: Bearer or x-api-key.
func clientKey(k *clientkeys.Service) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			key, ok := bearer(r)
			if !ok {
				key = r.Header.Get("x-api-key")
			}
			if key == "" {
				return handlers.WriteOpenAIError(c, &proxy.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error",
					Code: "missing_api_key", Message: "missing API key: send Authorization: Bearer <key> or x-api-key: <key>"})
			}
			id, ok := k.Authenticate(key)
			if !ok {
				return handlers.WriteOpenAIError(c, &proxy.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error",
					Code: "invalid_api_key", Message: "invalid API key"})
			}
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), clientKeyCtx{}, id)))
			return next(c)
		}
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
}
