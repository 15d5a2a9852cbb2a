package handlers

import (
	"context"

	"github.com/labstack/echo/v4"

	"switchyard/services/proxy"
)

// ConnectionTester makes a real upstream call with one connection.
type ConnectionTester interface {
	TestConnection(ctx context.Context, id int64) (proxy.TestResult, error)
}

// ListConnections answers GET /api/connections.
func (a *API) ListConnections(c echo.Context) error { return listJSON(c, a.Catalog.ListConnections) }

// GetConnection answers GET /api/connections/:id.
func (a *API) GetConnection(c echo.Context) error { return getJSON(c, a.Catalog.GetConnection) }

// CreateConnection answers POST /api/connections.
func (a *API) CreateConnection(c echo.Context) error {
	return createJSON(c, checkedBy(a.Catalog.CreateConnection, a.ValidateConnectionOverrides))
}

// UpdateConnection answers PATCH /api/connections/:id.
func (a *API) UpdateConnection(c echo.Context) error {
	return updateJSON(c, checkedByID(a.Catalog.UpdateConnection, a.ValidateConnectionOverrides))
}

// DeleteConnection answers DELETE /api/connections/:id.
func (a *API) DeleteConnection(c echo.Context) error {
	return deleteByID(c, a.Catalog.DeleteConnection)
}

// TestConnection answers POST /api/connections/:id/test with the result of a real upstream call.
func (a *API) TestConnection(c echo.Context) error { return getJSON(c, a.Tester.TestConnection) }
