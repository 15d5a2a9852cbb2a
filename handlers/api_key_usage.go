package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/clientkeys"
	"switchyard/services/spend"
)

// KeyUsageAPI serves GET /api/keys/:id/usage: a key's use against its limits now.
type KeyUsageAPI struct {
	Keys   *clientkeys.Service
	Limits interface {
		Use(id int64, lim spend.Limits) spend.KeyUse
	}
}

// Get answers GET /api/keys/:id/usage: the last minute's requests and tokens, the spend of the
// current day and month (in the configured time zone) and the requests running, beside the
// key's limits.
func (k *KeyUsageAPI) Get(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return err
	}
	key, err := k.Keys.Get(ctx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, k.Limits.Use(id, key.Limits))
}
