package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
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
	// API provides the live resilience state (connection states, provider statuses, model
	// lockouts) and the operator's actions on it, shared with the admin API.
	API *API
}

// Routes lists the dashboard pages and actions (all behind the login). Every action is a
// POST form that redirects (303) or re-renders its page with errors (422); htmx only adds
// in-place updates on top.
func (d *Dashboard) Routes() []DashRoute {
	routes := []DashRoute{
		{http.MethodGet, "/", d.Home},

		{http.MethodGet, "/providers", d.ProvidersPage},
		{http.MethodGet, "/providers/state", d.ProvidersState},
		{http.MethodPost, "/providers", d.CreateProvider},
		{http.MethodGet, "/providers/:id/edit", d.EditProviderPage},
		{http.MethodPost, "/providers/:id/edit", d.UpdateProvider},
		{http.MethodPost, "/providers/:id/delete", d.DeleteProvider},
		{http.MethodPost, "/providers/:id/reset-breaker", d.ResetBreaker},

		{http.MethodPost, "/connections", d.CreateConnection},
		{http.MethodGet, "/connections/:id/edit", d.EditConnectionPage},
		{http.MethodPost, "/connections/:id/edit", d.UpdateConnection},
		{http.MethodPost, "/connections/:id/delete", d.DeleteConnection},
		{http.MethodPost, "/connections/:id/test", d.TestConnection},
		{http.MethodPost, "/connections/:id/clear", d.ClearCooldown},
		{http.MethodPost, "/connections/:id/reset", d.ResetConnectionState},

		{http.MethodGet, "/model-cooldowns", d.ModelCooldownsPage},
		{http.MethodGet, "/model-cooldowns/table", d.ModelCooldownsTable},
		{http.MethodPost, "/model-cooldowns/reenable", d.ReenableModel},
		{http.MethodPost, "/model-cooldowns/reenable-all", d.ReenableAllModels},

		{http.MethodGet, "/keys", d.KeysPage},
		{http.MethodPost, "/keys", d.CreateKey},
		{http.MethodPost, "/keys/:id/revoke", d.RevokeKey},

		{http.MethodGet, "/settings", d.Settings.SettingsPage},
	}
	for _, card := range settingsCards {
		routes = append(routes, DashRoute{http.MethodPost, views.CardAction(card.id), d.Settings.saveCard(card)})
	}
	return routes
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
