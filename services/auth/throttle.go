package auth

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// throttle budgets attempts per client address: burst at once, then one every interval. A client
// whose budget has refilled is the same as one never seen, so it is forgotten: the table holds
// only the clients of the last burst × interval, however many addresses an attacker cycles
// through. An IPv6 client is its /64 (a host usually owns a whole /64 and can pick any address
// in it); an IPv4 client its address.
type throttle struct {
	interval time.Duration
	burst    int

	mu        sync.RWMutex // the table; each entry's limiter has a lock of its own
	clients   map[string]*throttleEntry
	lastPrune time.Time
	// held is len(clients), kept under mu and read without it: wait, asked on every request,
	// takes no lock and reads no clock while no client has been refused lately.
	held atomic.Int64
}

type throttleEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

// pruneAbove is the table size from which refilled clients are swept out (at most once per
// refill period).
const pruneAbove = 1024

func newThrottle(burst int, interval time.Duration) *throttle {
	return &throttle{interval: interval, burst: burst, clients: map[string]*throttleEntry{}}
}

// refill is how long an idle client takes to get its whole budget back.
func (t *throttle) refill() time.Duration { return time.Duration(t.burst) * t.interval }

// entry is the client's budget, created full; the caller holds t.mu.
func (t *throttle) entry(client string, now time.Time) *throttleEntry {
	client = clientNetwork(client)
	if len(t.clients) > pruneAbove && now.Sub(t.lastPrune) >= t.refill() {
		for k, e := range t.clients {
			if now.Sub(e.seen) >= t.refill() {
				delete(t.clients, k)
			}
		}
		t.held.Store(int64(len(t.clients)))
		t.lastPrune = now
	}
	e, ok := t.clients[client]
	if !ok {
		e = &throttleEntry{lim: rate.NewLimiter(rate.Every(t.interval), t.burst)}
		t.clients[client] = e
		t.held.Store(int64(len(t.clients)))
	}
	e.seen = now
	return e
}

// take spends one attempt of the client's budget; false when none is left.
func (t *throttle) take(client string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entry(client, now).lim.AllowN(now, 1)
}

// wait is how long the client has to wait before its next attempt: 0 while its budget lasts.
// Asking spends nothing and remembers nothing (a client never refused has no entry).
func (t *throttle) wait(client string, now func() time.Time) time.Duration {
	if t.held.Load() == 0 {
		return 0 // none refused lately (the usual case)
	}
	t.mu.RLock()
	e := t.clients[clientNetwork(client)]
	t.mu.RUnlock()
	if e == nil {
		return 0
	}
	tokens := e.lim.TokensAt(now())
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(t.interval))
}

// clientNetwork is the key of a client address: an IPv6 address's /64, anything else as it is.
func clientNetwork(client string) string {
	a, err := netip.ParseAddr(client)
	if err != nil {
		return client
	}
	a = a.Unmap()
	if a.Is6() {
		if p, err := a.WithZone("").Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}
