package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/auth"
	"switchyard/services/catalog"
	"switchyard/services/clientkeys"
	"switchyard/services/proxy"
	"switchyard/views"
)

// Dashboard serves the server-rendered dashboard pages.
type Dashboard struct {
	Auth      *auth.Service
	Sessions  *Sessions
	Catalog   *catalog.Service
	Keys      *clientkeys.Service
	Tester    ConnectionTester
	Inventory *proxy.Inventory
	Settings  *Settings
}

// Routes lists the dashboard pages and actions (all behind the login).
func (d *Dashboard) Routes() []DashRoute {
	return []DashRoute{
		{http.MethodGet, "/", d.Home},
	}
}

// Home answers GET /.
func (d *Dashboard) Home(c echo.Context) error {
	return Render(c, http.StatusOK, views.HomePage())
}
