package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/auth"
	"switchyard/services/catalog"
	"switchyard/services/clientkeys"
	"switchyard/services/ops"
	"switchyard/services/proxy"
	"switchyard/services/traffic"
	"switchyard/views"
)

// Sessions is the dashboard's login and one-time message store (web.Sessions).
type Sessions interface {
	IsAdmin(c echo.Context) bool
	Login(c echo.Context) error
	Logout(c echo.Context) error
	// LogoutEverywhere ends every session, the caller's too, and returns how many ended.
	LogoutEverywhere(c echo.Context) (int64, error)
	AddFlash(c echo.Context, kind, text string) error
	TakeFlashes(c echo.Context) []views.Flash
}

// Dashboard serves the server-rendered dashboard pages.
type Dashboard struct {
	Auth      *auth.Service
	Sessions  Sessions
	Catalog   *catalog.Service
	Keys      *clientkeys.Service
	Tester    ConnectionTester
	Inventory *proxy.Inventory
	Settings  *Settings
	// Ops is the live resilience state and the operator's actions on it, shared with the API.
	Ops *ops.Service
	// Traffic is the request log and the traffic aggregates behind the charts.
	Traffic *traffic.Service
	// ValidateConnectionOverrides checks a connection's override document.
	ValidateConnectionOverrides catalog.ConnectionOverridesValidator
	// Claude signs Claude subscription accounts in.
	Claude ClaudeSignIn
	// Accounts signs ChatGPT/Codex and GitHub Copilot accounts in.
	Accounts AccountSignInPages
	// Limits is each client key's use against its limits (spend.Limiter), for the keys page;
	// nil shows the budgets' spend from the usage buckets and the other limits without use.
	Limits KeyLimits
}

// Home answers GET /: what needs attention, then what traffic is doing (?range=hour|day), then
// the inventory and a quick start.
func (d *Dashboard) Home(c echo.Context) error {
	m := views.OverviewModel{
		Shell:   d.shell(c, "overview", i18n.T(ctx(c), "overview.title")),
		Health:  d.healthModel(c),
		BaseURL: c.Scheme() + "://" + c.Request().Host + "/v1",
	}
	var err error
	if m.Traffic, err = d.trafficModel(c, c.QueryParam("range")); err != nil {
		return err
	}
	if err := d.overviewCounts(c, &m); err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.OverviewPage(m))
}
