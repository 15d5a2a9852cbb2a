package proxy

import (
	"net/http"
	"strconv"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/resilience"
	"switchyard/services/routing"
)

// KeyAccess is what the engine asks of the client key that made a request (clientkeys.Access,
// compiled when keys are loaded: no database read on the request path).
type KeyAccess interface {
	// AllowsModel reports whether the key may address a model: provider/model or a combo name.
	AllowsModel(model string) bool
}

// ModelAllowed reports whether a key may address a model as the client wrote it: the string
// itself (provider/model, a combo name, or a bare name its pattern names), or, for a bare name
// exactly one provider lists, the provider/model it resolves to. Only memory is read. A nil
// access allows everything.
func (e *Engine) ModelAllowed(a KeyAccess, model string) bool {
	if a == nil || a.AllowsModel(model) {
		return true
	}
	reg := e.opt.Catalog.Registry()
	if _, _, ok := SplitModel(model, func(n string) bool { _, ok := reg.Provider(n); return ok }); ok {
		return false // provider/model is its own resolved form
	}
	served := e.opt.Inventory.ServedBy(model)
	return len(served) == 1 && a.AllowsModel(served[0]+"/"+model)
}

// ListAllowed keeps the models of the inventory a key may address: by provider/model, or by the
// bare name when the key names that and the bare name resolves to this model.
func (e *Engine) ListAllowed(a KeyAccess, list []Model) []Model {
	if a == nil {
		return list
	}
	out := list[:0:0]
	for _, m := range list {
		if a.AllowsModel(m.ID) || a.AllowsModel(m.Name) && servedOnlyBy(e.opt.Inventory.ServedBy(m.Name), m.Provider) {
			out = append(out, m)
		}
	}
	return out
}

func servedOnlyBy(served []string, provider string) bool {
	return len(served) == 1 && served[0] == provider
}

// errModelNotAllowed is the answer to a model outside the key's allowed_models: 403 in the
// client's format, before any resolution that could tell whether the model exists, and before
// any upstream call.
func errModelNotAllowed(model string) *errs.Error {
	return fail(errs.Forbidden, "model_not_allowed", "proxy.model_not_allowed", model)
}

// CheckModel is ModelAllowed as an error, for the surfaces that name a model outside a request
// body (GET /v1/models/{id}).
func (e *Engine) CheckModel(a KeyAccess, model string) *errs.Error {
	if e.ModelAllowed(a, model) {
		return nil
	}
	return errModelNotAllowed(model)
}

// The headers a lease holder's inference requests carry. Neither reaches an upstream (the
// forwarded headers are a whitelist, and passthrough drops every X-Switchyard-* header) or a
// log.
const (
	LeaseOwnerHeader      = "X-Switchyard-Lease-Owner"
	LeaseGenerationHeader = "X-Switchyard-Lease-Generation"
)

// LeaseTable is the table of exclusive session leases the engine reads (routing.Leases): memory
// only, reloaded after every committed change.
type LeaseTable interface {
	// Held returns the lease on a connection, expired or not.
	Held(connID int64) (routing.Lease, bool)
	// ByOwner returns the lease of an owner token, expired or not.
	ByOwner(token string) (routing.Lease, bool)
}

// leaseTarget checks a lease holder's request before anything is dispatched and narrows the
// target to the leased connection: the request is served by it or not at all. Both headers come
// together; the token must be one of this key's leases (409 lease_not_found), the generation the
// lease's current one (409 lease_generation_stale: an older acquisition of the same owner), the
// lease unexpired (409 lease_expired), and the connection one of the provider the request
// addresses (409 lease_provider_mismatch) that can serve (409 lease_connection_unavailable).
// A request without the headers comes back unchanged.
func (e *Engine) leaseTarget(in http.Header, keyID int64, t target) (target, *routing.Lease, *errs.Error) {
	owner, gen := in.Get(LeaseOwnerHeader), in.Get(LeaseGenerationHeader)
	if owner == "" && gen == "" {
		return t, nil, nil
	}
	if owner == "" || gen == "" {
		return t, nil, errInvalid("lease_headers_incomplete", "proxy.lease_headers_incomplete", LeaseOwnerHeader, LeaseGenerationHeader)
	}
	n, err := strconv.ParseInt(gen, 10, 64)
	if err != nil || n <= 0 {
		return t, nil, errInvalid("invalid_request", "proxy.lease_generation_invalid", LeaseGenerationHeader)
	}
	var l routing.Lease
	ok := false
	if e.opt.Leases != nil {
		l, ok = e.opt.Leases.ByOwner(owner)
	}
	if !ok || l.ClientKeyID != keyID {
		return t, nil, fail(errs.Conflict, "lease_not_found", "proxy.lease_not_found")
	}
	if l.Generation != n {
		return t, nil, fail(errs.Conflict, "lease_generation_stale", "proxy.lease_generation_stale", n)
	}
	if !l.Active(e.opt.Clock.Now()) {
		return t, nil, fail(errs.Conflict, "lease_expired", "proxy.lease_expired")
	}
	conn, found := e.opt.Catalog.Registry().Connection(l.ConnectionID)
	if !found {
		return t, nil, fail(errs.Conflict, "lease_not_found", "proxy.lease_not_found")
	}
	if conn.Provider != t.provider.Name {
		return t, nil, fail(errs.Conflict, "lease_provider_mismatch", "proxy.lease_provider_mismatch",
			conn.Label, conn.Provider, t.provider.Name)
	}
	var usable bool
	for _, c := range t.provider.Conns {
		if c.ID == conn.ID {
			usable = true
			break
		}
	}
	if !usable {
		return t, nil, fail(errs.Conflict, "lease_connection_unavailable", "proxy.lease_connection_unavailable", conn.Label)
	}
	// The provider as this request sees it: its one leased connection. The copy shares the
	// provider's name, settings and round-robin cursor; only the connection list differs.
	only := *t.provider
	only.Conns = []*catalog.ConnEntry{conn}
	t.provider = &only
	return t, &l, nil
}

// leasedToOther reports whether a connection is held by an unexpired lease of another owner than
// the call's own; such a connection is never used for the call (diagnostics reason "lease", with
// the time until the lease expires).
func (e *Engine) leasedToOther(c *call, conn *catalog.ConnEntry) (exclusion, bool) {
	if e.opt.Leases == nil {
		return exclusion{}, false
	}
	l, held := e.opt.Leases.Held(conn.ID)
	if !held || (c.lease != nil && c.lease.Owner == l.Owner) {
		return exclusion{}, false
	}
	now := e.opt.Clock.Now()
	if !l.Active(now) {
		return exclusion{}, false
	}
	// Status stays empty: a lease is no cooldown, so the engine's retry waits never wait for one
	// (it may be renewed); only the answer's Retry-After looks at its expiry.
	return exclusion{conn: conn, lease: true, why: resilience.Exclusion{Remaining: l.ExpiresAt.Sub(now)}}, true
}

// leaseCapacity is the answer when every connection that could serve the call is leased by
// another owner (the others being in terminal states): 429 lease_capacity, Retry-After the
// earliest expiry clamped to 1 s–5 min.
func (e *Engine) leaseCapacity(c *call, all []exclusion, diag *Diagnostics) *errs.Error {
	var soonest time.Duration
	n := 0
	for _, x := range all {
		if x.lease {
			if n == 0 || x.why.Remaining < soonest {
				soonest = x.why.Remaining
			}
			n++
		}
	}
	wait := routing.LeaseRetryAfter(soonest)
	out := withRetry(fail(errs.RateLimited, "lease_capacity", "proxy.lease_capacity", c.t.provider.Name, n, roundUp(wait)), wait)
	out.Diagnostics = diag
	return out
}
