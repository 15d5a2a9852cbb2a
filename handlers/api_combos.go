package handlers

import (
	"github.com/labstack/echo/v4"

	"switchyard/services/routing"
)

// CombosAPI serves /api/combos.
type CombosAPI struct {
	Combos *routing.Service
}

// List answers GET /api/combos.
func (a *CombosAPI) List(c echo.Context) error { return listJSON(c, a.Combos.List) }

// Get answers GET /api/combos/:id.
func (a *CombosAPI) Get(c echo.Context) error { return getJSON(c, a.Combos.Get) }

// Create answers POST /api/combos with the created combo (201).
func (a *CombosAPI) Create(c echo.Context) error { return createJSON(c, a.Combos.Create) }

// Update answers PATCH /api/combos/:id; targets, when given, replace the list.
func (a *CombosAPI) Update(c echo.Context) error { return updateJSON(c, a.Combos.Update) }

// Delete answers DELETE /api/combos/:id (204); a combo another combo names is refused (409).
func (a *CombosAPI) Delete(c echo.Context) error { return deleteByID(c, a.Combos.Delete) }
