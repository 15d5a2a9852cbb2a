package handlers

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/proxy"
	"switchyard/services/resilience"
)

// API serves the admin JSON API.
type API struct {
	Catalog    *catalog.Service
	Tester     ConnectionTester
	Cooldowns  *resilience.Cooldowns
	Lockouts   *resilience.Lockouts
	Breakers   *resilience.Breakers
	Queues     *resilience.Queues
	Semaphores *resilience.Semaphores
	Statuses   func() []proxy.ProviderStatus
	// ValidateProviderOverrides and ValidateConnectionOverrides check override documents.
	ValidateProviderOverrides   catalog.ProviderOverridesValidator
	ValidateConnectionOverrides catalog.ConnectionOverridesValidator
}

// bindJSON decodes a JSON body strictly (unknown fields are errors).
func bindJSON(c echo.Context, dst any) error {
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return errs.Wrap(err, errs.Invalid, "err.bad_json", err.Error())
	}
	return nil
}

// ListProviders answers GET /api/providers.
func (a *API) ListProviders(c echo.Context) error {
	list, err := a.Catalog.ListProviders(ctx(c))
	if err != nil {
		return APIError(c, err)
	}
	return c.JSON(http.StatusOK, Items(list))
}

// GetProvider answers GET /api/providers/:id.
func (a *API) GetProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return APIError(c, err)
	}
	p, err := a.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return APIError(c, err)
	}
	return c.JSON(http.StatusOK, p)
}

// CreateProvider answers POST /api/providers.
func (a *API) CreateProvider(c echo.Context) error {
	var in catalog.ProviderInput
	if err := bindJSON(c, &in); err != nil {
		return APIError(c, err)
	}
	p, err := a.Catalog.CreateProvider(ctx(c), in, a.ValidateProviderOverrides)
	if err != nil {
		return APIError(c, err)
	}
	return c.JSON(http.StatusCreated, p)
}

// UpdateProvider answers PATCH /api/providers/:id.
func (a *API) UpdateProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return APIError(c, err)
	}
	var in catalog.ProviderInput
	if err := bindJSON(c, &in); err != nil {
		return APIError(c, err)
	}
	p, err := a.Catalog.UpdateProvider(ctx(c), id, in, a.ValidateProviderOverrides)
	if err != nil {
		return APIError(c, err)
	}
	return c.JSON(http.StatusOK, p)
}

// DeleteProvider answers DELETE /api/providers/:id.
func (a *API) DeleteProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return APIError(c, err)
	}
	if err := a.Catalog.DeleteProvider(ctx(c), id); err != nil {
		return APIError(c, err)
	}
	return c.NoContent(http.StatusNoContent)
}
