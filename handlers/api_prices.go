package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// GetPrices answers GET /api/settings/prices: the operator's prices, the time zone of budget
// days, the global budget webhook, whether its signing secret is set (never the secret), and
// what the built-in table holds.
func (s *Settings) GetPrices(c echo.Context) error {
	return c.JSON(http.StatusOK, s.Prices.View())
}

// PatchPrices answers PATCH /api/settings/prices: "models" are merged into the saved prices
// (null removes one), the other fields replace theirs. A malformed body → 400; any invalid or
// unknown field → 422 with per-field errors and nothing saved. Saved prices bill the next
// request.
func (s *Settings) PatchPrices(c echo.Context) error {
	raw, err := readStrictBody(c, false)
	if err != nil {
		return err
	}
	v, err := s.Prices.Patch(ctx(c), raw)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// RotateWebhookSecret answers POST /api/settings/prices/webhook-secret: a new signing secret
// for budget webhooks, returned this once ({"secret": "whsec_…"}); the old one signs nothing
// from now on.
func (s *Settings) RotateWebhookSecret(c echo.Context) error {
	secret, err := s.Prices.RotateWebhookSecret(ctx(c))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store") // the secret is shown once
	return c.JSON(http.StatusOK, map[string]string{"secret": secret})
}
