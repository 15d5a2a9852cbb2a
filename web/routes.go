package web

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
)

// routes mounts every route of the gateway: probes, static files, the proxy surfaces, the admin
// API and the dashboard. This is the one place to look for what answers an address.
func routes(e *echo.Echo, d Deps, files *assets) []Route {
	var table []Route
	// A route's own middleware is put around its handler here, once: echo would apply it again
	// on every request (a closure per middleware and request).
	add := func(g interface {
		Add(string, string, echo.HandlerFunc, ...echo.MiddlewareFunc) *echo.Route
	}, prefix, access, method, path string, h echo.HandlerFunc, mw ...echo.MiddlewareFunc) {
		g.Add(method, path, chained(h, mw...))
		table = append(table, Route{Method: method, Path: prefix + path, Access: access})
	}

	// Probes, metrics and static files.
	add(e, "", "public", http.MethodGet, "/health", d.Health.Live, identifyAdmin(d.Auth, d.Sessions))
	add(e, "", "public", http.MethodGet, "/ready", d.Health.Ready, identifyAdmin(d.Auth, d.Sessions))
	add(e, "", "metrics", http.MethodGet, "/metrics", echo.WrapHandler(d.Metrics.Handler()), metricsAuth(d.Auth, d.Sessions))
	add(e, "", "public", http.MethodGet, "/static/*", files.serve)

	// The proxy surfaces, under /v1 and without it: clients append their paths to a base URL that
	// may or may not end in /v1 (the Anthropic SDKs append /v1/messages to http://host,
	// @ai-sdk/anthropic appends /messages to http://host/v1), so both habits reach the same
	// handlers through the same chain. Metrics and the request log name a surface by its /v1
	// route, whichever address was used. Only /v1 catches unknown addresses (its group's
	// middleware runs for them, so they need a key too); without /v1 only the surfaces answer.
	// The chain is put around each surface's handler once, not given to the /v1 group, whose
	// middleware echo would apply again on every request; the group's catch-all for unknown
	// addresses gets it the same way (as echo's Group.Use would register it).
	chain := []echo.MiddlewareFunc{trace(), recordRequest(d.Traffic, d.Metrics, d.Now), clientKey(d.Keys, d.Auth, d.ReadTimeout),
		noteIgnoredIdempotencyKey(d.Log)}
	v1 := e.Group("/v1")
	unknown := chained(echo.NotFoundHandler, chain...)
	v1.RouteNotFound("", unknown)
	v1.RouteNotFound("/*", unknown)
	surface := func(method, path string, h echo.HandlerFunc, route string) {
		full := append(slices.Clip(chain), observe(d.Metrics, route))
		add(v1, "/v1", "client", method, path, h, full...)
		add(e, "", "client", method, path, h, full...)
	}
	// The surfaces that generate count against the key's limits; listing models, counting
	// tokens and leases do not.
	limited := func(h echo.HandlerFunc) echo.HandlerFunc { return keyLimits(d.Limits)(h) }
	surface(http.MethodPost, "/chat/completions", limited(d.Proxy.Chat), "/v1/chat/completions")
	surface(http.MethodPost, "/messages", limited(d.Proxy.Messages), "/v1/messages")
	surface(http.MethodPost, "/responses", limited(d.Proxy.Responses), "/v1/responses")
	surface(http.MethodGet, "/responses", d.Proxy.ResponsesSocket, "/v1/responses")
	surface(http.MethodPost, "/messages/count_tokens", d.Proxy.CountTokens, "/v1/messages/count_tokens")
	surface(http.MethodGet, "/models", d.Proxy.Models, "/v1/models")
	surface(http.MethodGet, "/models/*", d.Proxy.Model, "/v1/models/{id}")
	surface(http.MethodPost, "/session-leases", d.Leases.SessionLeases, "/v1/session-leases")

	// The admin API.
	api := e.Group("/api", crossOrigin(), adminAPI(d.Auth, d.Sessions), markDegraded(d.Degraded))
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
	add(api, "/api", "admin", http.MethodGet, "/combos", d.CombosAPI.List)
	add(api, "/api", "admin", http.MethodPost, "/combos", d.CombosAPI.Create)
	add(api, "/api", "admin", http.MethodGet, "/combos/:id", d.CombosAPI.Get)
	add(api, "/api", "admin", http.MethodPatch, "/combos/:id", d.CombosAPI.Update)
	add(api, "/api", "admin", http.MethodDelete, "/combos/:id", d.CombosAPI.Delete)
	add(api, "/api", "admin", http.MethodGet, "/keys", d.KeysAPI.List)
	add(api, "/api", "admin", http.MethodPost, "/keys", d.KeysAPI.Create)
	add(api, "/api", "admin", http.MethodGet, "/keys/:id", d.KeysAPI.Get)
	add(api, "/api", "admin", http.MethodGet, "/keys/:id/usage", d.KeyUsage.Get)
	add(api, "/api", "admin", http.MethodPatch, "/keys/:id", d.KeysAPI.Update)
	add(api, "/api", "admin", http.MethodDelete, "/keys/:id", d.KeysAPI.Revoke)
	add(api, "/api", "admin", http.MethodGet, "/requests", d.Requests.List)
	add(api, "/api", "admin", http.MethodGet, "/requests/:id", d.Requests.Get)
	add(api, "/api", "admin", http.MethodGet, "/usage", d.Requests.Usage)
	add(api, "/api", "admin", http.MethodGet, "/usage.csv", d.Requests.UsageCSV)
	add(api, "/api", "admin", http.MethodGet, "/settings/resilience", d.Settings.Get)
	add(api, "/api", "admin", http.MethodPatch, "/settings/resilience", d.Settings.Patch)
	add(api, "/api", "admin", http.MethodGet, "/settings/oauth", d.Settings.GetOAuth)
	add(api, "/api", "admin", http.MethodPatch, "/settings/oauth", d.Settings.PatchOAuth)
	add(api, "/api", "admin", http.MethodPost, "/oauth/claude/start", d.Claude.Start)
	add(api, "/api", "admin", http.MethodPost, "/oauth/claude/complete", d.Claude.Complete)
	add(api, "/api", "admin", http.MethodPost, "/oauth/codex/start", d.SignIns.CodexStart)
	add(api, "/api", "admin", http.MethodPost, "/oauth/codex/complete", d.SignIns.CodexComplete)
	add(api, "/api", "admin", http.MethodPost, "/oauth/codex/device", d.SignIns.CodexDevice)
	add(api, "/api", "admin", http.MethodPost, "/oauth/codex/device/poll", d.SignIns.CodexDevicePoll)
	add(api, "/api", "admin", http.MethodPost, "/oauth/copilot/device", d.SignIns.CopilotDevice)
	add(api, "/api", "admin", http.MethodPost, "/oauth/copilot/device/poll", d.SignIns.CopilotDevicePoll)
	add(api, "/api", "admin", http.MethodPost, "/sessions/revoke-all", d.SessionsAPI.RevokeAll)
	add(api, "/api", "admin", http.MethodGet, "/settings/sessions", d.SessionsAPI.GetSettings)
	add(api, "/api", "admin", http.MethodPatch, "/settings/sessions", d.SessionsAPI.PatchSettings)
	add(api, "/api", "admin", http.MethodGet, "/settings/prices", d.Settings.GetPrices)
	add(api, "/api", "admin", http.MethodPatch, "/settings/prices", d.Settings.PatchPrices)
	add(api, "/api", "admin", http.MethodPost, "/settings/prices/webhook-secret", d.Settings.RotateWebhookSecret)

	// The dashboard: every action is a POST form that redirects (303) or re-renders its page with
	// errors (422); htmx only adds in-place updates on top.
	pub := e.Group("", crossOrigin(), locale())
	add(pub, "", "public", http.MethodGet, "/login", d.Dashboard.LoginPage)
	add(pub, "", "public", http.MethodPost, "/login", d.Dashboard.Login)
	add(pub, "", "public", http.MethodGet, "/lang/:code", d.Dashboard.SetLang)
	// Callers that are no browser (an SDK with a wrong base URL, curl) and have no session get
	// the JSON 404 of an unknown address instead of a redirect to a login page they cannot use;
	// this group also catches every address without a route.
	dash := e.Group("", crossOrigin(), locale(), pagesForBrowsers(d.Sessions), dashboardAuth(d.Sessions), parseForm(),
		markDegraded(d.Degraded))
	page := func(method, path string, h echo.HandlerFunc) { add(dash, "", "dashboard", method, path, h) }
	page(http.MethodPost, "/logout", d.Dashboard.Logout)
	page(http.MethodPost, "/logout-everywhere", d.Dashboard.LogoutEverywhere)
	page(http.MethodGet, "/", d.Dashboard.Home)
	page(http.MethodGet, "/overview/health", d.Dashboard.OverviewHealth)
	page(http.MethodGet, "/overview/traffic", d.Dashboard.OverviewTraffic)
	page(http.MethodGet, "/overview/replicas", d.Replicas.Panel)
	page(http.MethodGet, "/requests", d.Requests.RequestsPage)
	page(http.MethodGet, "/requests/:id", d.Requests.RequestDetailPage)
	page(http.MethodGet, "/usage", d.Dashboard.UsagePage)

	page(http.MethodGet, "/providers", d.Dashboard.ProvidersPage)
	page(http.MethodGet, "/providers/state", d.Dashboard.ProvidersState)
	page(http.MethodPost, "/providers", d.Dashboard.CreateProvider)
	page(http.MethodGet, "/providers/:id/edit", d.Dashboard.EditProviderPage)
	page(http.MethodPost, "/providers/:id/edit", d.Dashboard.UpdateProvider)
	page(http.MethodPost, "/providers/:id/delete", d.Dashboard.DeleteProvider)
	page(http.MethodPost, "/providers/:id/reset-breaker", d.Dashboard.ResetBreaker)

	page(http.MethodPost, "/connections", d.Dashboard.CreateConnection)
	page(http.MethodPost, "/oauth/claude/start", d.Dashboard.StartClaudeSignIn)
	page(http.MethodPost, "/oauth/claude/complete", d.Dashboard.CompleteClaudeSignIn)
	page(http.MethodPost, "/oauth/claude/setup-token", d.Dashboard.AddClaudeSetupToken)
	page(http.MethodPost, "/oauth/codex/start", d.Dashboard.StartCodexSignIn)
	page(http.MethodPost, "/oauth/codex/complete", d.Dashboard.CompleteCodexSignIn)
	page(http.MethodPost, "/oauth/codex/device", d.Dashboard.StartCodexDevice)
	page(http.MethodPost, "/oauth/codex/device/poll", d.Dashboard.PollCodexDevice)
	page(http.MethodPost, "/oauth/copilot/device", d.Dashboard.StartCopilotDevice)
	page(http.MethodPost, "/oauth/copilot/device/poll", d.Dashboard.PollCopilotDevice)
	page(http.MethodGet, "/connections/:id/edit", d.Dashboard.EditConnectionPage)
	page(http.MethodPost, "/connections/:id/edit", d.Dashboard.UpdateConnection)
	page(http.MethodPost, "/connections/:id/delete", d.Dashboard.DeleteConnection)
	page(http.MethodPost, "/connections/:id/test", d.Dashboard.TestConnection)
	page(http.MethodPost, "/connections/:id/clear", d.Dashboard.ClearCooldown)
	page(http.MethodPost, "/connections/:id/reset", d.Dashboard.ResetConnectionState)

	page(http.MethodGet, "/combos", d.CombosPage.Page)
	page(http.MethodGet, "/combos/state", d.CombosPage.State)
	page(http.MethodGet, "/combos/new", d.CombosPage.New)
	page(http.MethodPost, "/combos", d.CombosPage.Create)
	page(http.MethodGet, "/combos/:id/edit", d.CombosPage.Edit)
	page(http.MethodPost, "/combos/:id/edit", d.CombosPage.Update)
	page(http.MethodPost, "/combos/:id/delete", d.CombosPage.Delete)
	page(http.MethodPost, "/combos/:id/move", d.CombosPage.Move)

	page(http.MethodGet, "/model-cooldowns", d.Dashboard.ModelCooldownsPage)
	page(http.MethodGet, "/model-cooldowns/table", d.Dashboard.ModelCooldownsTable)
	page(http.MethodPost, "/model-cooldowns/reenable", d.Dashboard.ReenableModel)
	page(http.MethodPost, "/model-cooldowns/reenable-all", d.Dashboard.ReenableAllModels)

	page(http.MethodGet, "/keys", d.Dashboard.KeysPage)
	page(http.MethodPost, "/keys", d.Dashboard.CreateKey)
	page(http.MethodGet, "/keys/:id/edit", d.Dashboard.EditKeyPage)
	page(http.MethodPost, "/keys/:id/edit", d.Dashboard.UpdateKey)
	page(http.MethodPost, "/keys/:id/revoke", d.Dashboard.RevokeKey)

	page(http.MethodGet, "/settings", d.Settings.SettingsPage)
	page(http.MethodPost, "/settings/:card", d.Settings.SaveCard)
	return table
}

// chained puts middleware around h as echo does (the first outermost).
func chained(h echo.HandlerFunc, mw ...echo.MiddlewareFunc) echo.HandlerFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// markDegraded notes on every dashboard request what this replica runs without, for the page's
// banners (handlers.MarkDegraded).
func markDegraded(degraded func() []string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if degraded != nil {
				handlers.MarkDegraded(c, degraded())
			}
			return next(c)
		}
	}
}
