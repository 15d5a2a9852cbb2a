package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/catalog"
	"switchyard/services/proxy"
)

// ConnectionTester makes a real upstream call with one connection.
type ConnectionTester interface {
	TestConnection(ctx context.Context, id int64) (proxy.TestResult, error)
}

// ListConnections answers GET /api/connections.
func (a *API) ListConnections(c echo.Context) error {
	list, err := a.Catalog.ListConnections(ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, Items(list))
}

// GetConnection answers GET /api/connections/:id.
func (a *API) GetConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	conn, err := a.Catalog.GetConnection(ctx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, conn)
}

// CreateConnection answers POST /api/connections.
func (a *API) CreateConnection(c echo.Context) error {
	var in catalog.ConnectionInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conn, err := a.Catalog.CreateConnection(ctx(c), in, a.ValidateConnectionOverrides)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, conn)
}

// UpdateConnection answers PATCH /api/connections/:id.
func (a *API) UpdateConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	var in catalog.ConnectionInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conn, err := a.Catalog.UpdateConnection(ctx(c), id, in, a.ValidateConnectionOverrides)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, conn)
}

// DeleteConnection answers DELETE /api/connections/:id.
func (a *API) DeleteConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	if err := a.Catalog.DeleteConnection(ctx(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// TestConnection answers POST /api/connections/:id/test with the result of a real upstream call.
func (a *API) TestConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	res, err := a.Tester.TestConnection(ctx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}
