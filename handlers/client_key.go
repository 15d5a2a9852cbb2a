package handlers

import (
	"github.com/labstack/echo/v4"

	"switchyard/services/clientkeys"
)

// clientKeyKey holds, on the echo context, the client key the edge authenticated.
const clientKeyKey = "switchyard.client_key"

// SetClientKey notes the client key that authenticated a proxy request (the edge calls it).
func SetClientKey(c echo.Context, id clientkeys.Identity) { c.Set(clientKeyKey, id) }

// clientKeyOf is the client key of a proxy request; the zero Identity (no restrictions, no
// leases) when none was noted.
func clientKeyOf(c echo.Context) clientkeys.Identity {
	id, _ := c.Get(clientKeyKey).(clientkeys.Identity)
	return id
}

// ClientKeyOf is the client key of a proxy request (the zero Identity when none was noted).
func ClientKeyOf(c echo.Context) clientkeys.Identity { return clientKeyOf(c) }
