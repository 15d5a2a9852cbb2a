package handlers

import (
	"net/http"

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
func (a *API) ListProviders(c echo.Context) error {
	list, err := a.Catalog.ListProviders(ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, Items(list))
}

// GetProvider answers GET /api/providers/:id.
func (a *API) GetProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	p, err := a.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// CreateProvider answers POST /api/providers.
func (a *API) CreateProvider(c echo.Context) error {
	var in catalog.ProviderInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := a.Catalog.CreateProvider(ctx(c), in, a.ValidateProviderOverrides)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, p)
}

// UpdateProvider answers PATCH /api/providers/:id.
func (a *API) UpdateProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	var in catalog.ProviderInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := a.Catalog.UpdateProvider(ctx(c), id, in, a.ValidateProviderOverrides)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// DeleteProvider answers DELETE /api/providers/:id.
func (a *API) DeleteProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	if err := a.Catalog.DeleteProvider(ctx(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
