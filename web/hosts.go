package web

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
)

// DNS rebinding: a web page on another site makes its own name resolve to the gateway's address
// (127.0.0.1, say), and the visitor's browser, believing it talks to that site, sends the
// gateway requests and hands the answers to the page. Such requests carry the attacker's name in
// Host, never one of the gateway's own, so they are refused with 421 Misdirected Request: the
// gateway answers only for loopback names and addresses, its listen address, and the public
// names it is configured with. Proxy calls with a valid client key pass whatever their Host (a
// rebinding page cannot know a client key, and some clients reach the gateway through names
// nobody configured).

// HostPolicy is which Host headers the gateway answers for.
type HostPolicy struct {
	// Public are the configured public names and addresses: lower case, without port (any port
	// is accepted).
	Public []string
	// Listen is the listen address (host:port as configured, or as listened on). An unspecified
	// host (0.0.0.0, ::, none) listens on every address of the machine, and which addresses reach
	// it (NAT, containers) cannot be known: then any IP address is accepted as Host (a rebinding
	// page's requests always name its own DNS name, never an address).
	Listen string
}

type hostPolicy struct {
	public      map[string]bool
	listenName  string
	listenIP    netip.Addr
	anyIPListen bool
}

func newHostPolicy(p HostPolicy) *hostPolicy {
	hp := &hostPolicy{public: map[string]bool{}}
	for _, h := range p.Public {
		h = normalHost(h)
		if a, err := netip.ParseAddr(h); err == nil {
			h = a.Unmap().String()
		}
		hp.public[h] = true
	}
	host, _, err := net.SplitHostPort(p.Listen)
	if err != nil {
		host = p.Listen
	}
	host = normalHost(host)
	if a, err := netip.ParseAddr(host); err == nil {
		hp.listenIP = a.Unmap()
		hp.anyIPListen = a.IsUnspecified()
	} else {
		hp.listenName = host
		hp.anyIPListen = host == ""
	}
	return hp
}

// normalHost is a host without port or brackets, in lower case, without a final dot.
func normalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// allows reports whether the gateway answers for a request's Host.
func (p *hostPolicy) allows(hostHeader string) bool {
	h := normalHost(hostHeader)
	if h == "" {
		return false
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") { // RFC 6761: always loopback
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		a = a.Unmap()
		return a.IsLoopback() || p.anyIPListen || a == p.listenIP || p.public[a.String()]
	}
	return h == p.listenName || p.public[h]
}

// foreignHostKey marks, on the echo context, a proxy call whose Host the gateway does not answer
// for: it may go on only with a valid client key (clientKey).
const foreignHostKey = "switchyard.foreign_host"

// hostGuard refuses requests for hosts the gateway does not answer for with 421, in the caller's
// format, before anything else reads them. Proxy routes (the route table's "client" routes,
// filled in once the table is built) go on to their client key check, which lets a valid key
// through and refuses everything else with 421.
func hostGuard(p *hostPolicy, clientRoutes map[string]bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if p.allows(r.Host) {
				return next(c)
			}
			if clientRoutes[r.Method+" "+c.Path()] {
				c.Set(foreignHostKey, true)
				return next(c)
			}
			return misdirected(r)
		}
	}
}

func isForeignHost(c echo.Context) bool {
	v, _ := c.Get(foreignHostKey).(bool)
	return v
}

// misdirected is the refusal of a request for a host the gateway does not answer for.
func misdirected(r *http.Request) *errs.Error {
	host := r.Host
	if len(host) > 100 {
		host = strings.ToValidUTF8(host[:100], "") + "…"
	}
	return &errs.Error{Code: errs.Forbidden, Status: http.StatusMisdirectedRequest, Reason: "misdirected_request",
		Msg: errs.M("err.misdirected_host", host)}
}
