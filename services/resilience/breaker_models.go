package resilience

import "time"

// Model breakers live in a map plus an intrusive list ordered by last use (head = most recent),
// so idle expiry and least-recently-used eviction start at the tail. A breaker that is open,
// half-open or has a request in flight is protected: it is never expired or evicted, because
// that would let traffic through to a failing model or lose a verdict.

// addModel creates the breaker of a model seen for the first time. It first drops idle closed
// breakers; when the provider still holds MaxModelBreakers it evicts the least recently used
// unprotected one, and when every slot is protected it refuses with a saturated OpenError.
func (g *breakerGroup) addModel(model string, now time.Time) (*breaker, *OpenError) {
	g.sweep(now)
	if len(g.models) >= MaxModelBreakers && !g.evict(true) {
		return nil, &OpenError{Provider: g.name, Model: model, RetryAfter: g.soonestProbe(now), Saturated: true}
	}
	b := &breaker{model: model, state: CircuitClosed}
	g.models[model] = b
	g.touch(b, now)
	g.m.onTransition(g.name, model, CircuitNone, CircuitClosed)
	return b, nil
}

func (b *breaker) protected() bool { return b.state != CircuitClosed || b.inflight > 0 }

// sweep drops model breakers unused for ModelBreakerIdleTTL unless protected.
func (g *breakerGroup) sweep(now time.Time) {
	for b := g.tail; b != nil; {
		if now.Sub(b.lastUsed) < ModelBreakerIdleTTL {
			return // the rest were used more recently
		}
		prev := b.prev
		if !b.protected() {
			g.drop(b)
		}
		b = prev
	}
}

// evict drops the least recently used unprotected model breaker; false when there is none.
// Without persist its row is left alone: only this replica's memory made room.
func (g *breakerGroup) evict(persist bool) bool {
	for b := g.tail; b != nil; b = b.prev {
		if !b.protected() {
			g.discard(b, persist)
			return true
		}
	}
	return false
}

// soonestProbe is the RetryAfter of a saturated refusal: the time until the first open
// breaker may probe (and so may close and become evictable), at least probeBusyRetry.
func (g *breakerGroup) soonestProbe(now time.Time) time.Duration {
	d := time.Duration(0)
	for b := g.head; b != nil; b = b.next {
		if b.state == CircuitOpen {
			if left := b.nextProbe.Sub(now); d == 0 || left < d {
				d = left
			}
		}
	}
	return max(d, probeBusyRetry)
}

// touch marks b as used now and moves it to the head of the list (linking it if needed).
func (g *breakerGroup) touch(b *breaker, now time.Time) {
	b.lastUsed = now
	if g.head == b {
		return
	}
	if b.listed {
		g.unlink(b)
	}
	b.prev, b.next, b.listed = nil, g.head, true
	if g.head != nil {
		g.head.prev = b
	}
	g.head = b
	if g.tail == nil {
		g.tail = b
	}
}

func (g *breakerGroup) unlink(b *breaker) {
	if !b.listed {
		return
	}
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		g.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		g.tail = b.prev
	}
	b.prev, b.next, b.listed = nil, nil, false
}
