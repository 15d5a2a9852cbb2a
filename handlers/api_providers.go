package handlers

import (
	"github.com/labstack/echo/v4"

	"switchyard/services/catalog"
	"switchyard/services/ops"
)

// API serves the admin JSON API. Its handlers return errors; the edge renders them.
type API struct {
	Catalog *catalog.Service
	Tester  ConnectionTester
	Ops     *ops.Service
	// ValidateProviderOverrides and ValidateConnectionOverrides check override documents.
	ValidateProviderOverrides   catalog.ProviderOverridesValidator
	ValidateConnectionOverrides catalog.ConnectionOverridesValidator
}

// ListProviders answers GET /api/providers.
func (a *API) ListProviders(c echo.Context) error { return listJSON(c, a.Catalog.ListProviders) }

// GetProvider answers GET /api/providers/:id.
func (a *API) GetProvider(c echo.Context) error { return getJSON(c, a.Catalog.GetProvider) }

// CreateProvider answers POST /api/providers.
func (a *API) CreateProvider(c echo.Context) error {
	return createJSON(c, checkedBy(a.Catalog.CreateProvider, a.ValidateProviderOverrides))
}

// UpdateProvider answers PATCH /api/providers/:id.
func (a *API) UpdateProvider(c echo.Context) error {
	return updateJSON(c, checkedByID(a.Catalog.UpdateProvider, a.ValidateProviderOverrides))
}

// DeleteProvider answers DELETE /api/providers/:id.
func (a *API) DeleteProvider(c echo.Context) error { return deleteByID(c, a.Catalog.DeleteProvider) }
