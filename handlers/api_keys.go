package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/clientkeys"
)

// Keys serves /api/keys.
type Keys struct {
	Keys *clientkeys.Service
}

// List answers GET /api/keys.
func (k *Keys) List(c echo.Context) error { return listJSON(c, k.Keys.List) }

// Get answers GET /api/keys/:id (never the key itself).
func (k *Keys) Get(c echo.Context) error { return getJSON(c, k.Keys.Get) }

// Create answers POST /api/keys with the new key, shown this once: {"name", "allowed_models"?,
// "scopes"?, "allowed_connections"?}.
func (k *Keys) Create(c echo.Context) error {
	var in clientkeys.Input
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	created, err := k.Keys.Create(ctx(c), in)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, created)
}

// Update answers PATCH /api/keys/:id: the fields given change (name, allowed_models, scopes,
// allowed_connections), the others stay; 422 names each field that fails.
func (k *Keys) Update(c echo.Context) error { return updateJSON(c, k.Keys.Update) }

// Revoke answers DELETE /api/keys/:id.
func (k *Keys) Revoke(c echo.Context) error { return deleteByID(c, k.Keys.Revoke) }
