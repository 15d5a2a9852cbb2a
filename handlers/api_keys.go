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

// Create answers POST /api/keys with the new key, shown this once.
func (k *Keys) Create(c echo.Context) error {
	var in struct {
		Name string `json:"name"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	created, err := k.Keys.Create(ctx(c), in.Name)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, created)
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
