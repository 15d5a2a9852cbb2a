package handlers

import (
	"context"

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
	return getJSON(c, func(cx context.Context, id int64) (spend.KeyUse, error) {
		key, err := k.Keys.Get(cx, id)
		if err != nil {
			return spend.KeyUse{}, err
		}
		return k.Limits.Use(id, key.Limits), nil
	})
}
