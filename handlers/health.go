package handlers

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/labstack/echo/v4"
)

// SchemaChecker reports the applied and wanted migration counts.
type SchemaChecker interface {
	SchemaVersion(ctx context.Context) (current, want int, err error)
}

// Health answers liveness and readiness probes.
type Health struct {
	DB       SchemaChecker
	Draining *atomic.Bool // set when shutdown has begun
	Version  string
}

// Live answers GET /health: the process is up.
func (h *Health) Live(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "version": h.Version})
}

// Ready answers GET /ready: the database is open and migrated and we are not shutting down.
func (h *Health) Ready(c echo.Context) error {
	if h.Draining.Load() {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "shutting_down"})
	}
	cur, want, err := h.DB.SchemaVersion(ctx(c))
	if err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "database_unavailable"})
	}
	if cur != want {
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "migrations_pending", "schema": cur, "want": want})
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "schema": cur})
}
