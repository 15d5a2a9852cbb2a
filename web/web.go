// Package web is the HTTP edge: the echo instance, the one route table (routes.go), middleware,
// sessions and the central error handler that renders every error in its caller's format.
package web

import (
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/services/auth"
	"switchyard/services/clientkeys"
	"switchyard/services/metrics"
	"switchyard/services/traffic"
)

// Deps is everything the routes need; the app builds it.
type Deps struct {
	Log      *slog.Logger
	Auth     *auth.Service
	Keys     *clientkeys.Service
	Sessions *Sessions
	Static   fs.FS
	Metrics  *metrics.Metrics
	// TrustedProxies are the reverse proxies whose forwarding headers name the client.
	TrustedProxies []*net.IPNet
	// ReadTimeout bounds how long a request may take to send its body, except authenticated
	// proxy calls (0 = no bound).
	ReadTimeout time.Duration
	// Hosts are the Host headers the gateway answers for (DNS rebinding).
	Hosts HostPolicy
	// Traffic receives every finished client request (the request log and the charts).
	Traffic RequestRecorder
	// Now is the gateway's clock, for the request log's timestamps.
	Now func() time.Time
	// Limits keeps client keys within their limits (nil: no limits are enforced).
	Limits KeyLimiter

	Health    *handlers.Health
	API       *handlers.API
	KeysAPI   *handlers.Keys
	KeyUsage  *handlers.KeyUsageAPI
	Settings  *handlers.Settings
	Proxy     *handlers.Proxy
	Dashboard *handlers.Dashboard
	CombosAPI *handlers.CombosAPI
	// CombosPage serves the dashboard's Combos pages.
	CombosPage *handlers.CombosPage
	// Leases serves /v1/session-leases.
	Leases *handlers.Leases

	// SessionsAPI ends dashboard sessions and edits their lifetimes.
	SessionsAPI *handlers.SessionsAPI
	Requests    *handlers.Requests
	// Claude signs Claude subscription accounts in.
	Claude *handlers.ClaudeAccounts
	// SignIns are the ChatGPT/Codex and Copilot sign-ins of the admin API.
	SignIns *handlers.AccountSignIns
	// Replicas serves the overview's Replicas panel; nil keeps the panel hidden.
	Replicas *handlers.Replicas
	// Degraded names what this replica runs without now ("store", "redis"), for the dashboard's
	// banners; nil: never degraded.
	Degraded func() []string
}

// RequestRecorder takes a finished client request (services/traffic); it must never block.
type RequestRecorder interface {
	Record(traffic.Entry)
	// BodyBytes is how much of each body the log keeps; 0 = none, and nothing is captured.
	BodyBytes() int
}

// Route is one entry of the route table, kept so tests can walk every route.
type Route struct {
	Method string
	Path   string
	// Access says who may call it: "public", "client" (client key), "admin" (session or token),
	// "dashboard" (session), "metrics" (admin token when one is set, else loopback clients; or a
	// session).
	Access string
}

// New builds the echo instance with every route.
func New(d Deps) (*echo.Echo, []Route, error) {
	files, err := newAssets(d.Static)
	if err != nil {
		return nil, nil, fmt.Errorf("static files: %w", err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(discard{}) // echo's own logger is unused: the request log and the error handler log
	e.HTTPErrorHandler = errorHandler(d.Log)
	e.IPExtractor = clientIP(d.TrustedProxies)
	e.SchemeExtractor = clientScheme(d.TrustedProxies)
	clientRoutes := map[string]bool{} // method + path of every proxy route, filled below
	// The edge's middleware runs for every request, routed or not. It is chained once, around
	// the handler the router found for the request (c.Handler(), which is what echo passes to
	// middleware given to Use): echo would chain such middleware anew on every request, a
	// closure per middleware and request.
	edge := chained(func(c echo.Context) error { return c.Handler()(c) },
		recoverer(d.Log), requestID(), requestLog(d.Log), securityHeaders(), readDeadline(d.ReadTimeout, clientRoutes), limitBody(MaxEdgeBody),
		hostGuard(newHostPolicy(d.Hosts), clientRoutes), compress(), withAssets(files))
	e.Use(func(echo.HandlerFunc) echo.HandlerFunc { return edge })
	table := routes(e, d, files)
	for _, r := range table {
		if r.Access == "client" {
			clientRoutes[r.Method+" "+r.Path] = true
		}
	}
	return e, table, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
