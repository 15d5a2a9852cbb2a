package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/routing"
)

// Leases serves POST /v1/session-leases: a client key with the scope lease:exclusive acquires,
// renews and releases exclusive leases on its allowed connections. Errors are in the client's
// format (OpenAI's, or Anthropic's with anthropic-version), like every proxy surface.
type Leases struct {
	Svc *routing.Leases
}

// leaseRequest is the body: {"action": "acquire"|"renew"|"release", "owner"?, "connection"?,
// "ttl_ms"?}.
type leaseRequest struct {
	Action     string `json:"action"`
	Owner      string `json:"owner"`
	Connection *int64 `json:"connection"`
	TTLMS      *int64 `json:"ttl_ms"`
}

// SessionLeases answers POST /v1/session-leases with the lease (200): acquire returns the owner
// token, once; renew and release need it.
func (l *Leases) SessionLeases(c echo.Context) error {
	var in leaseRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	id := clientKeyOf(c)
	h := routing.Holder{KeyID: id.KeyID, Exclusive: id.Access.MayLease(), Connections: id.Access.LeaseConnections()}
	var ttl time.Duration
	if in.TTLMS != nil {
		if *in.TTLMS < 0 {
			return leaseInvalid("lease.err.ttl_negative")
		}
		ttl = time.Duration(*in.TTLMS) * time.Millisecond
	}
	var g routing.Granted
	var err error
	switch in.Action {
	case "acquire":
		var conn int64
		if in.Connection != nil {
			if *in.Connection <= 0 {
				return leaseInvalid("lease.err.connection_id")
			}
			conn = *in.Connection
		}
		g, err = l.Svc.Acquire(ctx(c), h, routing.AcquireInput{Owner: in.Owner, Connection: conn, TTL: ttl})
	case "renew", "release":
		switch {
		case in.Owner == "":
			return leaseInvalid("lease.err.owner_required", in.Action)
		case in.Connection != nil:
			return leaseInvalid("lease.err.connection_acquire_only", in.Action)
		case in.Action == "release" && in.TTLMS != nil:
			return leaseInvalid("lease.err.ttl_release")
		case in.Action == "renew":
			g, err = l.Svc.Renew(ctx(c), h, in.Owner, ttl)
		default:
			g, err = l.Svc.Release(ctx(c), h, in.Owner)
		}
	default:
		return leaseInvalid("lease.err.action", in.Action)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, g)
}

// leaseInvalid is a malformed lease request: 400 invalid_request.
func leaseInvalid(key string, args ...any) *errs.Error {
	return &errs.Error{Code: errs.Invalid, Status: http.StatusBadRequest, Reason: "invalid_request", Msg: errs.M(key, args...)}
}
