package web

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Every open connection holds a file descriptor, and the process has a limit of them. Idle
// keep-alive connections cost the client nothing, so without care a few thousand anonymous ones
// (one cheap request each, then silence) take every descriptor: new clients, the health probe
// and the operator all time out. The guard keeps them in check at the edge:
//
//   - a connection is anonymous until a request on it passes an admin session, the admin token
//     or a client key check (markAuthenticated); anonymous ones may stay idle only a few seconds;
//   - one client address (an IPv6 client's /64) may keep only so many anonymous connections
//     idle at once; past that, a connection is closed once it has answered its request instead
//     of waiting for the next (trusted proxies are exempt). Connections with a request under
//     way are never counted: a client that opens hundreds at once for parallel calls loses none;
//   - the process keeps a reserve of descriptors for the database, upstream calls and the
//     requests that matter: when a new connection would pass the budget, the anonymous
//     connection idle the longest (else the oldest one that has not sent a request yet) is
//     closed to make room, and when the budget is all authenticated or busy, the new one is;
//   - an accept that fails for want of descriptors closes anonymous connections, so the server's
//     accept loop (which retries) finds room again instead of stalling.
//
// The guard wraps the listener (outside MalformedRequestListener) and learns each connection's
// state from http.Server's ConnState hook; ConnContext hands the connection to the requests on
// it.

// ConnLimits are the guard's limits.
type ConnLimits struct {
	// PerClient is how many idle anonymous connections one client address may keep; 0 = no cap.
	PerClient int
	// Trusted are reverse proxies: exempt from PerClient (every client behind them shares their
	// address).
	Trusted []*net.IPNet
	// AnonymousIdle is how long an anonymous keep-alive connection may stay idle; 0 = the
	// server's idle timeout.
	AnonymousIdle time.Duration
	// MaxOpen is how many connections may be open at once: the file limit less a reserve
	// (ConnBudget); 0 = no bound.
	MaxOpen int
}

// ConnBudget splits the process's limit of open files into the connections the guard lets in
// and a reserve for everything else (the database, upstream calls, logs): a tenth of the limit,
// at least 64 and at most 1,024, never more than half. A limit of 0 (unknown) or too large to
// matter is no bound.
func ConnBudget(fileLimit uint64) (maxOpen, reserve int) {
	if fileLimit == 0 || fileLimit > 1<<24 {
		return 0, 0
	}
	limit := int(fileLimit)
	reserve = min(max(limit/10, 64), 1024, limit/2)
	return limit - reserve, reserve
}

// ConnGuard tracks the server's connections; see above.
type ConnGuard struct {
	limits  ConnLimits
	trusted []netip.Prefix
	log     *slog.Logger
	now     func() time.Time

	mu    sync.Mutex
	open  int                // connections accepted and not closed
	idleN map[netip.Addr]int // idle anonymous connections per client network
	idle  list.List          // anonymous idle connections, idle the longest first
	fresh list.List          // anonymous connections before their first request, oldest first
	// refusals counts refused connections by reason since the last log line about them.
	refusals map[string]int
	lastLog  map[string]time.Time
}

// NewConnGuard builds a guard; now is the clock of its log throttling.
func NewConnGuard(limits ConnLimits, log *slog.Logger, now func() time.Time) *ConnGuard {
	g := &ConnGuard{limits: limits, log: log, now: now, idleN: map[netip.Addr]int{},
		refusals: map[string]int{}, lastLog: map[string]time.Time{}}
	for _, n := range limits.Trusted {
		if a, ok := netip.AddrFromSlice(n.IP); ok {
			ones, _ := n.Mask.Size()
			if a.Is4In6() && ones >= 96 {
				a, ones = a.Unmap(), ones-96
			}
			g.trusted = append(g.trusted, netip.PrefixFrom(a.Unmap(), ones).Masked())
		}
	}
	return g
}

// Listener wraps ln so that every connection it accepts is guarded.
func (g *ConnGuard) Listener(ln net.Listener) net.Listener { return &guardListener{Listener: ln, g: g} }

// Open is the number of connections open now.
func (g *ConnGuard) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

type guardListener struct {
	net.Listener
	g *ConnGuard
}

func (l *guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				l.g.relieve()
			}
			return nil, err // http.Server retries temporary errors after a short pause
		}
		if gc := l.g.admit(c); gc != nil {
			return gc, nil
		}
	}
}

// relieveBatch is how many anonymous connections an accept that ran out of descriptors closes.
const relieveBatch = 16

// relieve closes the anonymous connections idle the longest after an accept failed for want of
// file descriptors.
func (g *ConnGuard) relieve() {
	g.mu.Lock()
	var victims []*guardedConn
	for len(victims) < relieveBatch {
		v := g.victimLocked()
		if v == nil {
			break
		}
		victims = append(victims, v)
	}
	g.mu.Unlock()
	for _, v := range victims {
		_ = v.Close()
	}
	g.note("out_of_files", "", "accept failed: out of file descriptors; closed idle anonymous connections", len(victims))
}

// admit registers an accepted connection, or closes it when the budget is full of connections
// that must stay.
func (g *ConnGuard) admit(c net.Conn) *guardedConn {
	peer := peerAddr(c.RemoteAddr())
	g.mu.Lock()
	var victim *guardedConn
	if g.limits.MaxOpen > 0 && g.open >= g.limits.MaxOpen {
		if victim = g.victimLocked(); victim == nil {
			g.mu.Unlock()
			_ = c.Close()
			g.note("full", peer.String(), "connection refused: every connection of the budget is authenticated or busy", 0)
			return nil
		}
	}
	gc := &guardedConn{Conn: c, g: g, client: clientNet(peer), exempt: g.isTrusted(peer)}
	g.open++
	gc.elem, gc.in = g.fresh.PushBack(gc), &g.fresh
	g.mu.Unlock()
	if victim != nil {
		_ = victim.Close()
	}
	return gc
}

// victimLocked takes the anonymous connection to close first off its list: the one idle the
// longest, else the oldest that has not sent a request yet; nil when there is none.
func (g *ConnGuard) victimLocked() *guardedConn {
	for _, l := range []*list.List{&g.idle, &g.fresh} {
		if f := l.Front(); f != nil {
			v := f.Value.(*guardedConn)
			g.unlistLocked(v)
			return v
		}
	}
	return nil
}

func (g *ConnGuard) unlistLocked(c *guardedConn) {
	if c.elem == nil {
		return
	}
	if c.in == &g.idle {
		if g.idleN[c.client] <= 1 {
			delete(g.idleN, c.client)
		} else {
			g.idleN[c.client]--
		}
	}
	c.in.Remove(c.elem)
	c.elem, c.in = nil, nil
}

func (g *ConnGuard) isTrusted(a netip.Addr) bool {
	for _, p := range g.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// noteEvery is how often each kind of refusal is logged at most; the line counts the others.
const noteEvery = 10 * time.Second

// note logs a refusal at warn, at most once per noteEvery per kind, with the number of refusals
// of that kind since the last line.
func (g *ConnGuard) note(kind, client, msg string, closed int) {
	now := g.now()
	g.mu.Lock()
	g.refusals[kind]++
	n := g.refusals[kind]
	if now.Sub(g.lastLog[kind]) < noteEvery {
		g.mu.Unlock()
		return
	}
	g.lastLog[kind], g.refusals[kind] = now, 0
	open := g.open
	g.mu.Unlock()
	attrs := []any{"count", n, "open_connections", open}
	if client != "" {
		attrs = append(attrs, "client", client)
	}
	if kind == "out_of_files" {
		attrs = append(attrs, "closed", closed)
	}
	g.log.Warn(msg, attrs...)
}

// ConnState is http.Server's ConnState hook: it files each connection by what it is doing. An
// anonymous connection that turns idle while its client keeps PerClient idle already is closed.
func (g *ConnGuard) ConnState(c net.Conn, state http.ConnState) {
	gc, ok := c.(*guardedConn)
	if !ok {
		return
	}
	g.mu.Lock()
	if gc.closed || state == http.StateNew { // a new one is on the fresh list already (admit)
		g.mu.Unlock()
		return
	}
	g.unlistLocked(gc)
	if state != http.StateIdle || gc.authed.Load() {
		g.mu.Unlock()
		return
	}
	if g.limits.PerClient > 0 && !gc.exempt && g.idleN[gc.client] >= g.limits.PerClient {
		g.mu.Unlock()
		_ = gc.Close() // its answer is out; it just does not wait for another request
		g.note("per_client", gc.client.String(), "connection closed after its answer: the client keeps too many unauthenticated connections idle", 0)
		return
	}
	gc.elem, gc.in = g.idle.PushBack(gc), &g.idle
	g.idleN[gc.client]++
	gc.clampNext.Store(true)
	g.mu.Unlock()
}

type guardedConnKey struct{}

// ConnContext is http.Server's ConnContext hook: requests find their connection in their context.
func (g *ConnGuard) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*guardedConn); ok {
		return context.WithValue(ctx, guardedConnKey{}, gc)
	}
	return ctx
}

// markAuthenticated notes that a request on r's connection passed an admin session, the admin
// token or a client key: the connection is no longer anonymous.
func markAuthenticated(r *http.Request) {
	if gc, ok := r.Context().Value(guardedConnKey{}).(*guardedConn); ok && !gc.authed.Load() {
		gc.authenticate()
	}
}

// guardedConn is a connection the guard tracks. Its list fields belong to the guard's lock.
type guardedConn struct {
	net.Conn
	g      *ConnGuard
	client netip.Addr // the client network (clientNet)
	exempt bool       // a trusted proxy: no PerClient cap

	elem   *list.Element
	in     *list.List
	closed bool
	// authed is set once a request on the connection authenticated.
	authed atomic.Bool
	// clampNext is set when the connection turned idle anonymous: net/http's next read deadline
	// on it is its idle timeout, which the anonymous one shortens.
	clampNext atomic.Bool
	closeOnce sync.Once
}

func (c *guardedConn) authenticate() {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if c.closed || c.authed.Load() {
		return
	}
	c.authed.Store(true)
	c.g.unlistLocked(c)
}

// SetReadDeadline shortens net/http's idle deadline of an anonymous connection to the
// anonymous idle timeout (net/http sets it right after the connection turned idle).
func (c *guardedConn) SetReadDeadline(t time.Time) error {
	if d := c.g.limits.AnonymousIdle; d > 0 && c.clampNext.Swap(false) && !c.authed.Load() {
		if limit := time.Now().Add(d); t.IsZero() || t.After(limit) {
			t = limit
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *guardedConn) Close() error {
	c.closeOnce.Do(func() {
		g := c.g
		g.mu.Lock()
		c.closed = true
		g.unlistLocked(c)
		g.open--
		g.mu.Unlock()
	})
	return c.Conn.Close()
}

// peerAddr is the IP address of a peer (IPv4-mapped addresses as IPv4).
func peerAddr(addr net.Addr) netip.Addr {
	var a netip.Addr
	switch v := addr.(type) {
	case *net.TCPAddr:
		a = v.AddrPort().Addr()
	default:
		if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
			a = ap.Addr()
		}
	}
	return a.Unmap().WithZone("")
}

// clientNet is the client network of a peer address: an IPv4 address, an IPv6 address's /64.
func clientNet(a netip.Addr) netip.Addr {
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}
