package handlers

import (
	"net/http"
	"switchyard/services/metrics"

	"github.com/labstack/echo/v4"

	"switchyard/services/sessions"
	"switchyard/services/settings"
	"switchyard/services/spend"
)

// Settings serves the resilience settings API and the settings cards.
type Settings struct {
	Svc *settings.Service
	// OAuth is the OAuth client settings document and its card.
	OAuth *settings.OAuthService
	// Providers backs the per-provider overrides card; nil leaves that card empty.
	Providers ProviderCatalog
	// Sessions keeps the dashboard sessions' lifetimes, edited on their card.
	Sessions *sessions.Service
	// StreamEnds counts the streams that did not end complete, by why, for the Streams card;
	// nil shows no counts.
	StreamEnds func() []metrics.StreamEndCount
	// Prices is the prices document (GET/PATCH /api/settings/prices) and its card.
	Prices *spend.PriceService
}

// Get answers GET /api/settings/resilience: every effective value and the layer it came from.
func (s *Settings) Get(c echo.Context) error {
	return c.JSON(http.StatusOK, s.Svc.Effective())
}

// Patch answers PATCH /api/settings/resilience: a strict partial update; any unknown key or
// invalid value → 422 with per-field errors (in English) and nothing saved.
func (s *Settings) Patch(c echo.Context) error {
	raw, err := readStrictBody(c, true)
	if err != nil {
		return err
	}
	if _, err := s.Svc.Patch(ctx(c), raw); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.Svc.Effective())
}

// GetOAuth answers GET /api/settings/oauth: every OAuth client setting and its layer.
func (s *Settings) GetOAuth(c echo.Context) error {
	return c.JSON(http.StatusOK, s.OAuth.Snapshot().Document())
}

// PatchOAuth answers PATCH /api/settings/oauth, as strict as PATCH /api/settings/resilience.
func (s *Settings) PatchOAuth(c echo.Context) error {
	raw, err := readStrictBody(c, true)
	if err != nil {
		return err
	}
	snap, err := s.OAuth.Patch(ctx(c), raw)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, snap.Document())
}
