package globalcap

import (
	"context"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// renewLoop renews the held leases every Renew until Close.
func (l *Limiter) renewLoop() {
	defer l.wg.Done()
	t := l.opt.Clock.NewTicker(l.opt.Renew)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.Chan():
			l.renew()
		}
	}
}

// renewal is the renewal of one connection's leases.
type renewal struct {
	conn    int64
	cap     int
	members []string
	cmd     *redis.Cmd
}

// renew extends every held lease and removes the orphans in one pipelined round trip; with
// nothing to do it pings, so that Healthy turns true again once Redis is back.
func (l *Limiter) renew() {
	now := l.opt.Clock.Now()
	l.mu.Lock()
	batch := make([]renewal, 0, len(l.held))
	for id, cl := range l.held {
		r := renewal{conn: id, cap: cl.cap, members: make([]string, 0, len(cl.members))}
		for m := range cl.members {
			r.members = append(r.members, m)
		}
		batch = append(batch, r)
	}
	var orphans []orphan
	for _, o := range l.orphans {
		if now.Sub(o.at) < l.opt.LeaseTTL { // an older one has run out by itself
			orphans = append(orphans, o)
		}
	}
	l.orphans = nil
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(l.ctx, l.opt.CallTimeout)
	defer cancel()
	if len(batch) == 0 && len(orphans) == 0 {
		l.observe(l.ctx, l.client.Ping(ctx).Err())
		return
	}
	pipe := l.client.Pipeline()
	for i := range batch {
		r := &batch[i]
		args := make([]any, 0, 2+len(r.members))
		args = append(args, l.ttlMS, r.cap)
		for _, m := range r.members {
			args = append(args, m)
		}
		// Eval, not EvalSha: a pipeline cannot fall back after NOSCRIPT (Redis restarted).
		r.cmd = renewScript.Eval(ctx, pipe, l.keys(r.conn), args...)
	}
	for _, o := range orphans {
		releaseScript.Eval(ctx, pipe, l.keys(o.conn), o.member, l.channel, o.conn)
	}
	_, err := pipe.Exec(ctx)
	l.observe(l.ctx, err)
	if err != nil {
		l.mu.Lock()
		l.orphans = append(l.orphans, orphans...)
		l.mu.Unlock()
		return
	}
	for _, r := range batch {
		res, err := r.cmd.Int64Slice()
		if err != nil || len(res) != 2+len(r.members) {
			continue
		}
		l.settle(r, res[2:])
	}
}

// settle records what a renewal found: leases lost or taken again are logged once per change,
// and a lease taken again after its request released it (the release ran between the snapshot
// and the renewal) is removed at once.
func (l *Limiter) settle(r renewal, states []int64) {
	var stale []string
	l.mu.Lock()
	cl := l.held[r.conn]
	for i, m := range r.members {
		lost, held := false, false
		if cl != nil {
			lost, held = cl.members[m]
		}
		switch {
		case !held:
			if states[i] == 2 {
				stale = append(stale, m)
			}
		case states[i] == 0 && !lost:
			cl.members[m] = true
			l.opt.Log.Warn("connection slot lease lost: its request runs on without a slot", "connection_id", r.conn)
		case states[i] != 0 && lost:
			cl.members[m] = false
			l.opt.Log.Info("connection slot lease taken again", "connection_id", r.conn)
		}
	}
	l.mu.Unlock()
	for _, m := range stale {
		if _, err := l.runRelease(l.ctx, r.conn, m); err != nil {
			l.orphan(r.conn, m)
		}
	}
}

// listen wakes this replica's waiters when another replica releases a slot, until Close.
func (l *Limiter) listen() {
	defer l.wg.Done()
	for {
		msg, err := l.ps.ReceiveTimeout(l.ctx, l.opt.Poll)
		if l.ctx.Err() != nil {
			return
		}
		if err != nil {
			if isTimeout(err) {
				continue
			}
			// Redis is away: wait a little before the next receive dials again.
			t := l.opt.Clock.NewTimer(l.opt.Renew)
			select {
			case <-l.ctx.Done():
				t.Stop()
				return
			case <-t.Chan():
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			if id, err := strconv.ParseInt(m.Payload, 10, 64); err == nil {
				l.wake.wake(id)
			}
		case *redis.Subscription:
			// (Re)subscribed: releases may have gone by unheard while the subscription was down.
			l.wake.wakeAll()
		}
	}
}

// wakeHub wakes the waiters of a connection: each watches the connection's channel, which a
// wake closes and replaces.
type wakeHub struct {
	mu sync.Mutex
	m  map[int64]chan struct{}
}

// watch returns the channel the next wake of the connection closes.
func (h *wakeHub) watch(id int64) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[int64]chan struct{}{}
	}
	ch := h.m[id]
	if ch == nil {
		ch = make(chan struct{})
		h.m[id] = ch
	}
	return ch
}

// wake wakes every waiter of the connection.
func (h *wakeHub) wake(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := h.m[id]; ch != nil {
		close(ch)
		delete(h.m, id)
	}
}

// wakeAll wakes every waiter.
func (h *wakeHub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, ch := range h.m {
		close(ch)
		delete(h.m, id)
	}
}
