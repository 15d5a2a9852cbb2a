package web

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestConnBudget(t *testing.T) {
	cases := []struct {
		limit            uint64
		maxOpen, reserve int
	}{
		{0, 0, 0},            // unknown: no bound
		{1 << 30, 0, 0},      // too large to matter
		{100, 50, 50},        // never more than half
		{256, 192, 64},       // at least 64
		{20000, 18976, 1024}, // at most 1,024
		{5000, 4500, 500},    // a tenth
	}
	for _, c := range cases {
		if m, r := ConnBudget(c.limit); m != c.maxOpen || r != c.reserve {
			t.Errorf("limit %d: %d connections, reserve %d; want %d, %d", c.limit, m, r, c.maxOpen, c.reserve)
		}
	}
}

// guardedServer serves on a guarded loopback listener: a request with X-Auth: yes authenticates
// its connection. accept, when set, replaces the listener's Accept (to make it fail).
func guardedServer(t *testing.T, limits ConnLimits, accept func(net.Listener) (net.Conn, error)) (*ConnGuard, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := NewConnGuard(limits, slog.New(slog.DiscardHandler), time.Now)
	srv := &http.Server{IdleTimeout: time.Minute, ConnState: g.ConnState, ConnContext: g.ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Auth") == "yes" {
				markAuthenticated(r)
			}
			io.WriteString(w, "ok")
		})}
	var inner net.Listener = ln
	if accept != nil {
		inner = &scriptedListener{Listener: ln, accept: accept}
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(g.Listener(inner)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return g, ln.Addr().String()
}

type scriptedListener struct {
	net.Listener
	accept func(net.Listener) (net.Conn, error)
}

func (l *scriptedListener) Accept() (net.Conn, error) { return l.accept(l.Listener) }

// client is one raw keep-alive connection to the test server.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, addr, from string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

// get makes one request on the connection; false when the server has closed it.
func (c *client) get(auth bool) bool {
	c.t.Helper()
	req := "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	if auth {
		req += "X-Auth: yes\r\n"
	}
	c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.c, req+"\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == 200
}

// closedWithin reports whether the server closes the connection within d.
func (c *client) closedWithin(d time.Duration) bool {
	c.c.SetReadDeadline(time.Now().Add(d))
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// waitOpen waits until the guard counts n open connections (accepting runs behind dialing).
func waitOpen(t *testing.T, g *ConnGuard, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for g.Open() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", g.Open(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitIdle waits until the guard counts n idle anonymous connections of a client.
func waitIdle(t *testing.T, g *ConnGuard, ip string, n int) {
	t.Helper()
	client := clientNet(netip.MustParseAddr(ip))
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		got := g.idleN[client]
		g.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d idle anonymous connections, want %d", ip, got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// At the budget, a new connection makes room by closing the anonymous connection idle the
// longest; authenticated connections are never closed for it, and when only they are left the
// new connection is refused.
func TestGuardClosesTheLongestIdleAnonymousConnectionFirst(t *testing.T) {
	g, addr := guardedServer(t, ConnLimits{MaxOpen: 4}, nil)
	auth := dialFrom(t, addr, "127.0.0.1")
	if !auth.get(true) {
		t.Fatal("authenticated request failed")
	}
	var anon []*client
	for i := range 3 {
		c := dialFrom(t, addr, "127.0.0.1")
		if !c.get(false) {
			t.Fatalf("anonymous request %d failed", i)
		}
		anon = append(anon, c)
		waitIdle(t, g, "127.0.0.1", i+1) // filed idle in this order
	}
	// The oldest anonymous one is used again: now the second is idle the longest.
	if !anon[0].get(false) {
		t.Fatal("request on the first anonymous connection failed")
	}
	waitIdle(t, g, "127.0.0.1", 3)
	fresh := dialFrom(t, addr, "127.0.0.1")
	if !anon[1].closedWithin(2 * time.Second) {
		t.Fatal("the connection idle the longest was not closed")
	}
	if !fresh.get(false) {
		t.Fatal("the new connection was not served")
	}
	for _, c := range []*client{anon[0], anon[2], auth} {
		if !c.get(false) {
			t.Fatal("a connection other than the longest idle was closed")
		}
	}
	// Authenticated connections only: the budget is theirs, a newcomer is turned away.
	for _, c := range []*client{anon[0], anon[2], fresh} {
		if !c.get(true) {
			t.Fatal("authenticating request failed")
		}
	}
	waitOpen(t, g, 4)
	late := dialFrom(t, addr, "127.0.0.1")
	if !late.closedWithin(2 * time.Second) {
		t.Fatal("a connection past a budget of authenticated connections was accepted")
	}
	for _, c := range []*client{anon[0], anon[2], fresh, auth} {
		if !c.get(false) {
			t.Fatal("an authenticated connection was closed")
		}
	}
}

// One client address keeps at most PerClient anonymous connections idle: another one is closed
// once it has answered. Connections with a request under way and authenticated ones do not
// count; other addresses and trusted proxies are not affected.
func TestGuardCapsIdleAnonymousConnectionsPerClient(t *testing.T) {
	g, addr := guardedServer(t, ConnLimits{PerClient: 2, Trusted: []*net.IPNet{{IP: net.IPv4(127, 0, 3, 9), Mask: net.CIDRMask(32, 32)}}}, nil)
	// Many connections at once, none idle yet: all are served.
	var burst []*client
	for range 6 {
		burst = append(burst, dialFrom(t, addr, "127.0.3.1"))
	}
	a1, a2 := burst[0], burst[1]
	if !a1.get(false) || !a2.get(false) {
		t.Fatal("requests on the first two failed")
	}
	waitIdle(t, g, "127.0.3.1", 2) // the server files a connection idle just after its answer
	third := burst[2]
	if !third.get(false) {
		t.Fatal("a third connection was not answered")
	}
	if !third.closedWithin(2 * time.Second) {
		t.Fatal("a third idle anonymous connection from one address was kept")
	}
	if a1.closedWithin(50*time.Millisecond) || a2.closedWithin(50*time.Millisecond) {
		t.Fatal("the first two idle connections were closed")
	}
	if other := dialFrom(t, addr, "127.0.3.2"); !other.get(false) || other.closedWithin(50*time.Millisecond) {
		t.Fatal("another address was held to the first one's cap")
	}
	// Once one of the two authenticates, another anonymous one may stay idle.
	if !a1.get(true) {
		t.Fatal("authenticating request failed")
	}
	waitIdle(t, g, "127.0.3.1", 1)
	if fourth := burst[3]; !fourth.get(false) || fourth.closedWithin(50*time.Millisecond) {
		t.Fatal("an idle connection was closed although one of the two authenticated")
	}
	if fifth := burst[4]; !fifth.get(true) || fifth.closedWithin(50*time.Millisecond) {
		t.Fatal("an authenticated connection was closed for the cap")
	}
	for i := range 6 {
		c := dialFrom(t, addr, "127.0.3.9")
		if !c.get(false) || c.closedWithin(10*time.Millisecond) {
			t.Fatalf("trusted proxy: connection %d closed", i)
		}
	}
}

// An anonymous connection is closed after the short anonymous idle timeout, an authenticated one
// keeps the server's idle timeout.
func TestGuardShortensTheIdleTimeoutOfAnonymousConnections(t *testing.T) {
	const anonIdle = 200 * time.Millisecond
	_, addr := guardedServer(t, ConnLimits{AnonymousIdle: anonIdle}, nil)
	anon, auth := dialFrom(t, addr, "127.0.0.1"), dialFrom(t, addr, "127.0.0.1")
	start := time.Now()
	if !anon.get(false) || !auth.get(true) {
		t.Fatal("requests failed")
	}
	if !anon.closedWithin(3 * time.Second) {
		t.Fatal("the anonymous connection outlived its idle timeout")
	}
	if took := time.Since(start); took < anonIdle {
		t.Fatalf("the anonymous connection was closed after %v, before its idle timeout", took)
	}
	if auth.closedWithin(4 * anonIdle) {
		t.Fatal("the authenticated connection was closed at the anonymous idle timeout")
	}
	if !auth.get(false) {
		t.Fatal("the authenticated connection no longer serves")
	}
}

// An accept that fails for want of file descriptors closes idle anonymous connections, and the
// server goes on accepting.
func TestGuardRelievesAnAcceptOutOfFiles(t *testing.T) {
	var fail atomic.Bool
	var waiting net.Conn // the connection that waits in the backlog while accepting fails
	g, addr := guardedServer(t, ConnLimits{}, func(ln net.Listener) (net.Conn, error) {
		if waiting != nil {
			c := waiting
			waiting = nil
			return c, nil
		}
		c, err := ln.Accept()
		if err == nil && fail.CompareAndSwap(true, false) {
			waiting = c
			return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
		}
		return c, err
	})
	idle, auth := dialFrom(t, addr, "127.0.0.1"), dialFrom(t, addr, "127.0.0.1")
	if !idle.get(false) || !auth.get(true) {
		t.Fatal("requests failed")
	}
	waitIdle(t, g, "127.0.0.1", 1)
	fail.Store(true)
	next := dialFrom(t, addr, "127.0.0.1")
	if !idle.closedWithin(3 * time.Second) {
		t.Fatal("the idle anonymous connection was not closed when accepting ran out of files")
	}
	if !next.get(false) || !auth.get(false) {
		t.Fatal("the server stopped serving after the failed accept")
	}
}

func TestClientNetIsTheIPv6Slash64(t *testing.T) {
	for _, c := range []struct {
		addr net.TCPAddr
		want string
	}{
		{net.TCPAddr{IP: net.ParseIP("192.0.2.1")}, "192.0.2.1"},
		{net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1")}, "192.0.2.1"},
		{net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6")}, "2001:db8:1:2::"},
		{net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::1")}, "2001:db8:1:2::"},
		{net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0"}, "fe80::"},
	} {
		if got := clientNet(peerAddr(&c.addr)); got.String() != c.want {
			t.Errorf("%s: %s, want %s", c.addr.String(), got, c.want)
		}
	}
}
