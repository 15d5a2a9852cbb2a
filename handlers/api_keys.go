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
func (k *Keys) List(c echo.Context) error {
	list, err := k.Keys.List(ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, Items(list))
}

// Get answers GET /api/keys/:id (never the key itself).
func (k *Keys) Get(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	key, err := k.Keys.Get(ctx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, key)
}

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
func (k *Keys) Update(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	var in clientkeys.Input
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	key, err := k.Keys.Update(ctx(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, key)
}

// Revoke answers DELETE /api/keys/:id.
func (k *Keys) Revoke(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	if err := k.Keys.Revoke(ctx(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
