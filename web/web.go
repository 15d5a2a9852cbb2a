// Package web is the HTTP edge: the echo instance, the one route table, middleware and the
// central error handler.
package web

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/services/auth"
	"switchyard/services/clientkeys"
	"switchyard/services/metrics"
)

// Deps is everything the routes need; main builds it.
type Deps struct {
	Log      *slog.Logger
	Auth     *auth.Service
	Keys     *clientkeys.Service
	Sessions *handlers.Sessions
	Static   fs.FS
	Metrics  *metrics.Metrics

	Health    *handlers.Health
	API       *handlers.API
	KeysAPI   *handlers.Keys
	Settings  *handlers.Settings
	Proxy     *handlers.Proxy
	Dashboard *handlers.Dashboard
}

// Route is one entry of the route table, kept so tests can walk every route.
type Route struct {
	Method string
	Path   string
	// Access says who may call it: "public", "client" (client key), "admin" (session or token),
	// "dashboard" (session), "metrics" (admin token when one is set).
	Access string
}

// New builds the echo instance with every route.
func New(d Deps) (*echo.Echo, []Route) {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(discard{})
	e.HTTPErrorHandler = errorHandler(d.Log)
	e.Use(recoverer(d.Log), requestID(), requestLog(d.Log))

	var table []Route
	add := func(g interface {
		Add(string, string, echo.HandlerFunc, ...echo.MiddlewareFunc) *echo.Route
	}, prefix, access, method, path string, h echo.HandlerFunc, mw ...echo.MiddlewareFunc) {
		g.Add(method, path, h, mw...)
		table = append(table, Route{Method: method, Path: prefix + path, Access: access})
	}

	// Probes and static files.
	add(e, "", "public", http.MethodGet, "/health", d.Health.Live)
	add(e, "", "public", http.MethodGet, "/ready", d.Health.Ready)
	e.StaticFS("/static", d.Static)

	// The proxy surface.
	v1 := e.Group("/v1", clientKey(d.Keys))
	add(v1, "/v1", "client", http.MethodPost, "/chat/completions", d.Proxy.Chat, observe(d.Metrics, "/v1/chat/completions"))
	add(v1, "/v1", "client", http.MethodGet, "/models", d.Proxy.Models, observe(d.Metrics, "/v1/models"))
	mh := echo.WrapHandler(d.Metrics.Handler())
	add(e, "", "metrics", http.MethodGet, "/metrics", mh, metricsAuth(d.Auth, d.Sessions))

	// The admin API.
	api := e.Group("/api", crossOrigin(), adminAPI(d.Auth, d.Sessions))
	add(api, "/api", "admin", http.MethodGet, "/providers", d.API.ListProviders)
	add(api, "/api", "admin", http.MethodPost, "/providers", d.API.CreateProvider)
	add(api, "/api", "admin", http.MethodGet, "/providers/:id", d.API.GetProvider)
	add(api, "/api", "admin", http.MethodPatch, "/providers/:id", d.API.UpdateProvider)
	add(api, "/api", "admin", http.MethodDelete, "/providers/:id", d.API.DeleteProvider)
	add(api, "/api", "admin", http.MethodGet, "/connections", d.API.ListConnections)
	add(api, "/api", "admin", http.MethodPost, "/connections", d.API.CreateConnection)
	add(api, "/api", "admin", http.MethodGet, "/connections/:id", d.API.GetConnection)
	add(api, "/api", "admin", http.MethodPatch, "/connections/:id", d.API.UpdateConnection)
	add(api, "/api", "admin", http.MethodDelete, "/connections/:id", d.API.DeleteConnection)
	add(api, "/api", "admin", http.MethodPost, "/connections/:id/test", d.API.TestConnection)
	add(api, "/api", "admin", http.MethodPost, "/connections/:id/reset", d.API.ResetConnection)
	add(api, "/api", "admin", http.MethodGet, "/resilience/state", d.API.ResilienceState)
	add(api, "/api", "admin", http.MethodGet, "/resilience/model-cooldowns", d.API.ListModelCooldowns)
	add(api, "/api", "admin", http.MethodDelete, "/resilience/model-cooldowns", d.API.DeleteModelCooldowns)
	add(api, "/api", "admin", http.MethodPost, "/resilience/breakers/reset", d.API.ResetBreaker)
	add(api, "/api", "admin", http.MethodPost, "/resilience/reset", d.API.ResetAll)
	add(api, "/api", "admin", http.MethodGet, "/keys", d.KeysAPI.List)
	add(api, "/api", "admin", http.MethodPost, "/keys", d.KeysAPI.Create)
	add(api, "/api", "admin", http.MethodDelete, "/keys/:id", d.KeysAPI.Revoke)
	add(api, "/api", "admin", http.MethodGet, "/settings/resilience", d.Settings.Get)
	add(api, "/api", "admin", http.MethodPatch, "/settings/resilience", d.Settings.Patch)

	// The dashboard.
	pub := e.Group("", crossOrigin(), locale())
	add(pub, "", "public", http.MethodGet, "/login", d.Dashboard.LoginPage)
	add(pub, "", "public", http.MethodPost, "/login", d.Dashboard.Login)
	add(pub, "", "public", http.MethodGet, "/lang/:code", d.Dashboard.SetLang)
	dash := e.Group("", crossOrigin(), locale(), dashboardAuth(d.Sessions))
	add(dash, "", "dashboard", http.MethodPost, "/logout", d.Dashboard.Logout)
	for _, r := range d.Dashboard.Routes() {
		add(dash, "", "dashboard", r.Method, r.Path, r.Handler)
	}
	return e, table
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// recoverer turns a panic into a 500 in the right format and a log line; the process goes on.
// http.ErrAbortHandler is re-raised: it is how a handler aborts a response on purpose.
func recoverer(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler {
						panic(p)
					}
					log.Error("panic in handler", "path", c.Request().URL.Path, "panic", fmt.Sprint(p))
					err = echo.NewHTTPError(http.StatusInternalServerError, "internal error")
				}
			}()
			return next(c)
		}
	}
}

// errorHandler renders errors that reached echo: OpenAI format under /v1, JSON under /api,
// plain text elsewhere.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		status, msg := http.StatusInternalServerError, "internal error"
		var he *echo.HTTPError
		if errors.As(err, &he) {
			status = he.Code
			if s, ok := he.Message.(string); ok {
				msg = s
			} else {
				msg = http.StatusText(status)
			}
		} else {
			log.Error("unhandled error", "path", c.Request().URL.Path, "error", err)
		}
		path := c.Request().URL.Path
		switch {
		case len(path) >= 3 && path[:3] == "/v1":
			_ = c.JSON(status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error",
				"code": codeFor(status), "param": nil}})
		case len(path) >= 4 && path[:4] == "/api":
			_ = handlers.APIMessage(c, status, codeFor(status), msg)
		default:
			_ = c.String(status, msg)
		}
	}
}

func codeFor(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusInternalServerError:
		return "internal"
	}
	return "error"
}
