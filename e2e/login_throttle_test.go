package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"

	"switchyard/e2e/testenv"
)

// clientFrom is an HTTP client whose connections start from a given loopback address (all of
// 127.0.0.0/8 reaches the gateway on 127.0.0.1), so a test can be two different clients.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login posts the password with extra headers and returns the status (303 = logged in).
func login(t *testing.T, c *http.Client, base, password string, header map[string]string) int {
	t.Helper()
	st, _ := testenv.Fetch(t, c, "POST", base+"/login", url.Values{"password": {password}}, header)
	return st
}

// Without trusted proxies, forwarding headers are the client's own words: a guesser who sends a
// new X-Forwarded-For or X-Real-IP with every attempt is throttled on its real address all the
// same, and naming the admin's address locks out only the guesser.
func TestLoginThrottleIgnoresForwardingHeadersFromUntrustedPeers(t *testing.T) {
	e := testenv.New(t)
	attacker, admin := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.1")
	throttled := 0
	for i := range 30 {
		h := map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.113.%d", i+1), "X-Real-IP": fmt.Sprintf("198.51.100.%d", i+1)}
		if i%2 == 1 {
			h = map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1"} // the admin's own address
		}
		switch st := login(t, attacker, e.Base, "guess", h); st {
		case http.StatusTooManyRequests:
			throttled++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("attempt %d: status %d", i, st)
		}
	}
	if throttled != 25 {
		t.Fatalf("%d of 30 spoofed attempts throttled, want 25 (5 allowed, then every one)", throttled)
	}
	if st := login(t, admin, e.Base, testenv.Password, nil); st != http.StatusSeeOther {
		t.Fatalf("the admin, from another address, was refused: %d", st)
	}
}

// Behind a trusted proxy, the client is the nearest address in X-Forwarded-For that is not the
// proxy: a guesser cannot choose it by sending its own header through the proxy, and the real
// admin behind the same proxy stays able to log in. A peer that is not a trusted proxy is keyed
// on its own address whatever it sends.
func TestLoginThrottleKeysOnTheClientBehindATrustedProxy(t *testing.T) {
	e := testenv.New(t, "--trusted-proxies", "127.0.0.1/32")
	proxy, direct := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	const adminIP, guesserIP = "198.51.100.7", "203.0.113.66"
	count := func(c *http.Client, header func(i int) map[string]string) (throttled int) {
		for i := range 12 {
			switch st := login(t, c, e.Base, "guess", header(i)); st {
			case http.StatusTooManyRequests:
				throttled++
			case http.StatusUnauthorized:
			default:
				t.Fatalf("attempt %d: status %d", i, st)
			}
		}
		return throttled
	}
	// The guesser writes the admin's address first; the proxy appends the address it saw.
	if n := count(proxy, func(int) map[string]string {
		return map[string]string{"X-Forwarded-For": adminIP + ", " + guesserIP}
	}); n != 7 {
		t.Fatalf("guesser behind the proxy: %d of 12 throttled, want 7", n)
	}
	// A peer that is not the proxy is keyed on its own address, whatever it claims.
	if n := count(direct, func(i int) map[string]string {
		return map[string]string{"X-Forwarded-For": fmt.Sprintf("192.0.2.%d", i+1), "X-Real-IP": adminIP}
	}); n != 7 {
		t.Fatalf("untrusted peer: %d of 12 throttled, want 7", n)
	}
	if st := login(t, proxy, e.Base, testenv.Password, map[string]string{"X-Forwarded-For": adminIP}); st != http.StatusSeeOther {
		t.Fatalf("the admin behind the proxy was refused: %d", st)
	}
	// X-Real-IP from the trusted proxy names the client too.
	if st := login(t, proxy, e.Base, testenv.Password, map[string]string{"X-Real-IP": "192.0.2.200"}); st != http.StatusSeeOther {
		t.Fatalf("a client named by X-Real-IP was refused: %d", st)
	}
}
