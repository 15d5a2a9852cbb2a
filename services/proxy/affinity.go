package proxy

import (
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"switchyard/services/catalog"
	"switchyard/services/resilience"
)

// Session affinity in the engine (the rules are resilience.Pins'). A request names its session
// in X-Switchyard-Session, else X-Session-Id, else by Claude Code's own session id; while
// session_affinity_ttl_ms is not 0, the connection its session is pinned to on the provider goes
// first in the provider's connection order (the rest keep theirs), and the outcome is told to
// the pin table:
//
//   - served by the pinned connection, or by another while the pinned one could not take the
//     request (excluded by pick: cooling, terminal, model locked out, or whatever else makes a
//     connection ineligible), or without a pin: the session is pinned to the connection that
//     served;
//   - served by another while the pinned one only had no free slot (pick spilled past it): the
//     pin stays where it is;
//   - a failure on the pinned connection counts toward clearing its pin, unless it is the
//     request's own fault (a failure that neither fails over nor retries, such as a plain 400);
//   - the request moving on to another connection after such a failure evicts the pin.
//
// The session headers are the gateway's own: upstreamHeader never passes them and
// passthroughHeader drops them (X-Switchyard-* and X-Session-Id). Claude Code's own header is
// Claude Code's: passed through to Claude accounts as today. The session is logged only as a
// short hash.

// The headers in which a client names its session.
const (
	SwitchyardSessionHeader = "X-Switchyard-Session"
	SessionIDHeader         = "X-Session-Id"
)

// sessionOf is the request's session key (resilience.SessionKey), "" when it names none:
// X-Switchyard-Session, then X-Session-Id, then Claude Code's session id (its header, else the
// session id inside metadata.user_id of a messages body).
func sessionOf(in http.Header, raw []byte, src Format) string {
	for _, h := range []string{SwitchyardSessionHeader, SessionIDHeader, sessionHeader} {
		if k := resilience.SessionKey(in.Get(h)); k != "" {
			return k
		}
	}
	if src != FormatMessages {
		return ""
	}
	if uid := gjson.GetBytes(raw, userIDPath); uid.Type == gjson.String {
		return resilience.SessionKey(sessionInUserID(uid.Str))
	}
	return ""
}

// callSession is a call's session: set when the request names one and affinity is on.
type callSession struct {
	ok bool
	id resilience.Session
	// pin is the session's pin on the provider being worked through (reset by pinFirst).
	pin providerPin
}

// providerPin is what a call knows of its session's pin on one provider.
type providerPin struct {
	conn   int64 // the connection pinned when the work began; 0 = none (or evicted since)
	out    bool  // the pinned connection could not take the request (excluded, or not a candidate)
	failed bool  // the pinned connection failed in this request
}

// sessionFor gives a call its session when affinity is on and the request names one. Sessions
// are namespaced by client key: two clients naming their sessions alike never share a pin.
func (e *Engine) sessionFor(in http.Header, raw []byte, src Format, clientKey int64) callSession {
	if e.opt.Pins == nil || e.opt.Pins.TTL() == 0 {
		return callSession{}
	}
	key := sessionOf(in, raw, src)
	if key == "" {
		return callSession{}
	}
	return callSession{ok: true, id: resilience.NewSession("key:"+strconv.FormatInt(clientKey, 10), key)}
}

// pinFirst returns the provider's connections with the one the call's session is pinned to
// first, the others in their order.
func (e *Engine) pinFirst(c *call, conns []*catalog.ConnEntry) []*catalog.ConnEntry {
	c.session.pin = providerPin{}
	if !c.session.ok {
		return conns
	}
	id, ok := e.opt.Pins.Connection(c.session.id, c.t.provider.Name)
	if !ok {
		return conns
	}
	c.session.pin.conn = id
	for i, conn := range conns {
		if conn.ID != id {
			continue
		}
		if i == 0 {
			return conns
		}
		out := make([]*catalog.ConnEntry, 0, len(conns))
		out = append(out, conn)
		out = append(out, conns[:i]...)
		return append(out, conns[i+1:]...)
	}
	c.session.pin.out = true // disabled or deleted since: whoever serves is pinned
	return conns
}

// pinExcluded notes when pick found the pinned connection unable to take the request.
func (c *call) pinExcluded(excluded []exclusion) {
	if c.session.pin.conn == 0 {
		return
	}
	for _, x := range excluded {
		if x.conn.ID == c.session.pin.conn {
			c.session.pin.out = true
		}
	}
}

// pinAttempt is told of each attempt: one on another connection after the pinned one failed is
// a failover away from it, which evicts the pin.
func (e *Engine) pinAttempt(c *call, conn *catalog.ConnEntry) {
	p := &c.session.pin
	if !c.session.ok || !p.failed || p.conn == 0 || conn.ID == p.conn {
		return
	}
	if e.opt.Pins.EvictConnection(c.session.id, c.t.provider.Name, p.conn) == resilience.PinCleared {
		e.logPin(c, "session pin evicted by a failover", p.conn)
	}
	p.conn = 0
}

// pinServed is told that conn served the call.
func (e *Engine) pinServed(c *call, conn *catalog.ConnEntry) {
	p := &c.session.pin
	if !c.session.ok || p.conn != 0 && p.conn != conn.ID && !p.out && !p.failed {
		return // spilled past a pinned connection that only had no free slot: the pin stays
	}
	switch e.opt.Pins.UseConnection(c.session.id, c.t.provider.Name, conn.ID) {
	case resilience.PinMade:
		e.logPin(c, "session pinned", conn.ID)
	case resilience.PinMoved:
		e.logPin(c, "session pin moved", conn.ID)
	}
}

// pinFailed is told that an attempt on conn failed.
func (e *Engine) pinFailed(c *call, conn *catalog.ConnEntry, f failure) {
	p := &c.session.pin
	if !c.session.ok || p.conn == 0 || conn.ID != p.conn || !f.outcome.Failover && !f.retryable {
		return
	}
	p.failed = true
	if e.opt.Pins.ConnectionFailed(c.session.id, c.t.provider.Name, conn.ID) == resilience.PinCleared {
		e.logPin(c, "session pin cleared after failures in a row", conn.ID)
		p.conn = 0
	}
}

func (e *Engine) logPin(c *call, msg string, connID int64) {
	e.opt.Log.Debug(msg, "session", c.session.id.Short(), "provider", c.t.provider.Name, "connection_id", connID)
}
