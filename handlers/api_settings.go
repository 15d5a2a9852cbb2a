package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// Settings serves the resilience settings API and cards.
type Settings struct{}

// Get answers GET /api/settings/resilience.
func (s *Settings) Get(c echo.Context) error { return c.JSON(http.StatusOK, map[string]any{}) }

// Patch answers PATCH /api/settings/resilience.
func (s *Settings) Patch(c echo.Context) error { return c.JSON(http.StatusOK, map[string]any{}) }
