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
	// ValidateConnectionOverrides checks a connection's override document.
	ValidateConnectionOverrides catalog.ConnectionOverridesValidator
}

// Home answers GET /: counts, discovered models and a quick start.
func (d *Dashboard) Home(c echo.Context) error {
	provs, err := d.Catalog.ListProviders(ctx(c))
	if err != nil {
		return err
	}
	conns, err := d.Catalog.ListConnections(ctx(c))
	if err != nil {
		return err
	}
	keys, err := d.Keys.List(ctx(c))
	if err != nil {
		return err
	}
	m := views.OverviewModel{
		Shell:     d.shell(c, "overview", i18n.T(ctx(c), "overview.title")),
		Providers: len(provs), Connections: len(conns), Keys: len(keys),
		BaseURL: c.Scheme() + "://" + c.Request().Host + "/v1",
	}
	perProvider := map[int64]int{}
	for _, cn := range conns {
		perProvider[cn.ProviderID]++
		if cn.Enabled {
			m.EnabledConnections++
		}
	}
	for _, k := range keys {
		if k.RevokedAt == nil {
			m.ActiveKeys++
		}
	}
	models := map[string][]string{}
	for _, mo := range d.Inventory.List() {
		models[mo.Provider] = append(models[mo.Provider], mo.Name)
		m.Models++
	}
	for _, p := range provs {
		m.Rows = append(m.Rows, views.OverviewProvider{Name: p.Name, Type: p.Type, Connections: perProvider[p.ID],
			Discovery: d.discovery(p.Name), Models: models[p.Name]})
	}
	return Render(c, http.StatusOK, views.OverviewPage(m))
}
