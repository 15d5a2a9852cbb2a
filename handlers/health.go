package handlers

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/labstack/echo/v4"
)

// SchemaChecker reports the applied and wanted migration counts.
type SchemaChecker interface {
	SchemaVersion(ctx context.Context) (current, want int, err error)
}

// Health answers liveness and readiness probes. Anonymous callers learn only the status; the
// version and the schema are for the admin (token or session), as they tell an attacker which
// weaknesses to try.
type Health struct {
	DB       SchemaChecker
	Draining *atomic.Bool // set when shutdown has begun
	Version  string
	// Shared is set when the store is shared by replicas (PostgreSQL): losing it degrades a
	// replica, which serves on from memory, instead of making it unready.
	Shared bool
	// Degraded names what the replica runs without now ("store", "redis"); nil: nothing.
	Degraded func() []string
}

// adminCallerKey marks, on the echo context, a request the edge found to come from the admin.
const adminCallerKey = "switchyard.admin_caller"

// MarkAdminCaller notes that the request carries the admin token or an admin session.
func MarkAdminCaller(c echo.Context) { c.Set(adminCallerKey, true) }

func isAdminCaller(c echo.Context) bool {
	v, _ := c.Get(adminCallerKey).(bool)
	return v
}

// Live answers GET /health: the process is up.
func (h *Health) Live(c echo.Context) error {
	if !isAdminCaller(c) {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	}
	out := map[string]any{"status": "ok", "version": h.Version}
	if cur, _, err := h.DB.SchemaVersion(ctx(c)); err == nil {
		out["schema"] = cur
	}
	return c.JSON(http.StatusOK, out)
}

// Ready answers GET /ready: the database is open and migrated and we are not shutting down.
func (h *Health) Ready(c echo.Context) error {
	if h.Draining.Load() {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "shutting_down"})
	}
	cur, want, err := h.DB.SchemaVersion(ctx(c))
	var degraded []string
	if h.Degraded != nil {
		degraded = h.Degraded()
	}
	if err != nil && !h.Shared {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "database_unavailable"})
	}
	if err != nil || len(degraded) > 0 {
		// The store was reached at start (the replica migrated it) and the request path reads
		// memory: a replica without its store or Redis still serves, and says so.
		if err != nil && !slices.Contains(degraded, "store") {
			degraded = append(degraded, "store")
		}
		return c.JSON(http.StatusOK, map[string]any{"status": "degraded", "degraded": degraded})
	}
	admin := isAdminCaller(c)
	if cur != want {
		if !admin {
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "migrations_pending"})
		}
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "migrations_pending", "schema": cur, "want": want})
	}
	if !admin {
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "schema": cur})
}
