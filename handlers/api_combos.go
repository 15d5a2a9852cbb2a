package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/routing"
)

// CombosAPI serves /api/combos.
type CombosAPI struct {
	Combos *routing.Service
}

// List answers GET /api/combos.
func (a *CombosAPI) List(c echo.Context) error {
	list, err := a.Combos.List(ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, Items(list))
}

// Get answers GET /api/combos/:id.
func (a *CombosAPI) Get(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	combo, err := a.Combos.Get(ctx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, combo)
}

// Create answers POST /api/combos with the created combo (201).
func (a *CombosAPI) Create(c echo.Context) error {
	var in routing.Input
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	combo, err := a.Combos.Create(ctx(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, combo)
}

// Update answers PATCH /api/combos/:id; targets, when given, replace the list.
func (a *CombosAPI) Update(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	var in routing.Input
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	combo, err := a.Combos.Update(ctx(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, combo)
}

// Delete answers DELETE /api/combos/:id (204); a combo another combo names is refused (409).
func (a *CombosAPI) Delete(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	if err := a.Combos.Delete(ctx(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
