package proxy

import (
	"math/rand/v2"

	"switchyard/services/catalog"
	"switchyard/services/routing"
)

// connOrder is the order a call tries its provider's connections in: the provider's strategy
// (routing.Order over the connections, with their own numbers), or, for priority (the default),
// lower priority first and round robin among equals.
func (e *Engine) connOrder(c *call) []*catalog.ConnEntry {
	p := c.t.provider
	if p.Strategy == "" || p.Strategy == routing.Priority || len(p.Conns) <= 1 {
		return p.Candidates()
	}
	cands := make([]routing.Candidate, len(p.Conns))
	for i, conn := range p.Conns {
		inFlight, uses, errRate, ttft := e.stats.peek(connStatKey(conn.ID)).read()
		h, reset := e.headroom(conn)
		cands[i] = routing.Candidate{Weight: 1, InFlight: inFlight, Uses: uses, ErrorRate: errRate, TTFT: ttft,
			Headroom: h, ResetAt: reset, Saturated: e.atCap(c, conn) && e.waiting(conn.ID) > 0}
	}
	order := routing.Order(p.Strategy, cands, p.Turn(), rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	out := make([]*catalog.ConnEntry, len(order))
	for i, j := range order {
		out[i] = p.Conns[j]
	}
	return out
}
