package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/sessions"
)

// SessionsAPI serves the dashboard session actions and settings of the admin API.
type SessionsAPI struct {
	Svc *sessions.Service
}

// RevokeAll answers POST /api/sessions/revoke-all: ends every dashboard session at once.
func (a *SessionsAPI) RevokeAll(c echo.Context) error {
	n, err := a.Svc.EndAll(ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]int64{"revoked": n})
}

// GetSettings answers GET /api/settings/sessions: the session lifetimes and where each comes from.
func (a *SessionsAPI) GetSettings(c echo.Context) error {
	return c.JSON(http.StatusOK, a.Svc.Document())
}

// PatchSettings answers PATCH /api/settings/sessions: a strict partial update (null restores a
// default); an unknown key or an out-of-range value → 422 and nothing saved.
func (a *SessionsAPI) PatchSettings(c echo.Context) error {
	return bodyJSON(c, http.StatusOK, a.Svc.Save)
}
