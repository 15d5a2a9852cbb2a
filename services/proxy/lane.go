package proxy

import (
	"context"
	"net/http"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// quotaWindow is the diagnostics reason of an account skipped at its usage wall.
const quotaWindow = "quota_window"

// attemptOn is one attempt on a connection as the work loop sees it. For a Claude subscription
// account it can be several upstream calls on that same account: once more with a refreshed
// token after a 401, and, at the usage wall (429 with anthropic-ratelimit-unified-status:
// rejected), the limit reset and the low-priority lane with its waits for a slot (resilience
// lane.go decides). The answers it intercepts never reach failure classification, so the wall
// never cools the connection while the lane serves it. deadline is when the attempt's own
// execution deadline fires; the lane's waits end 5 s before it. On any connection, a call the
// upstream refused for the reasoning the client sent back is made again with less of it
// (replay.go).
func (e *Engine) attemptOn(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, c *call, conn *catalog.ConnEntry,
	deadline time.Time) attemptResult {
	e.dropUnreadable(c, conn)
	res := e.attemptVia(ctx, cancel, w, c, conn, deadline)
	for e.retryWithoutReplay(c, conn, res) { // at most twice: earlier turns', then all
		res = e.attemptVia(ctx, cancel, w, c, conn, deadline)
	}
	return res
}

// attemptVia is one attempt on conn, made as its kind of connection makes them.
func (e *Engine) attemptVia(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, c *call, conn *catalog.ConnEntry,
	deadline time.Time) attemptResult {
	switch {
	case !e.subscription(conn):
		return e.attempt(ctx, cancel, c, conn)
	case conn.ProviderType == catalog.TypeCodex:
		return e.attemptCodex(ctx, cancel, c, conn)
	case conn.ProviderType == catalog.TypeCopilot:
		return e.attemptCopilot(ctx, cancel, c, conn)
	}
	return e.attemptAccount(ctx, cancel, w, c, conn, deadline)
}

// attemptAccount is attemptOn's loop for a Claude subscription account. It is a function of its
// own so that its large frame is not on the stack of every other attempt: the deepest point of
// a request (the upstream call) sets how large its goroutine's stack grows, and stays so for as
// long as the stream is open.
func (e *Engine) attemptAccount(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, c *call, conn *catalog.ConnEntry,
	deadline time.Time) attemptResult {
	var waited time.Duration
	refreshed, resetTried, calls := false, false, 0
	for {
		c.claude.slow = e.opt.Lanes != nil && e.opt.Lanes.Active(conn.ID)
		if calls++; calls > 1 {
			c.trace.attempt(conn, "retry", e.opt.Clock.Now())
		}
		res := e.attempt(ctx, cancel, c, conn)
		if res.noToken || res.redirect || res.aborted != "" || res.resp == nil && res.status == 0 {
			return res
		}
		sig := resilience.ParseUnified(res.header)
		if e.opt.Usage != nil {
			e.opt.Usage.Observe(conn.ID, sig)
		}
		if res.status == http.StatusTooManyRequests {
			e.opt.Accounts.PollSoon(conn.ID)
		}
		if res.status == http.StatusUnauthorized && !refreshed {
			refreshed = true
			if _, err := e.opt.Accounts.TokenRejected(ctx, conn, c.claude.token); err == nil {
				e.opt.Log.Info("upstream refused the access token; trying once more with a refreshed one",
					"provider", c.t.provider.Name, "connection_id", conn.ID)
				e.endStep(c, res, "token_rejected")
				continue
			}
			return res
		}
		if e.opt.Lanes == nil {
			return res
		}
		cfg := laneConfig(c.snap)
		in := resilience.LaneInput{Status: res.status, Signal: sig, SentSlow: c.claude.slow, Lane: conn.LowPriorityLane,
			LimitReset: conn.LimitReset, Waited: waited, Deadline: e.remaining(ctx, deadline), ResetTried: resetTried}
		d := e.opt.Lanes.Decide(conn.ID, in, cfg)
		if d.Action == resilience.LaneTryReset {
			resetTried, in.ResetTried = true, true
			out := e.opt.Accounts.LimitReset(ctx, conn)
			e.opt.Log.Info("limit reset", "provider", c.t.provider.Name, "connection_id", conn.ID, "result", out.Result)
			d = e.opt.Lanes.AfterReset(conn.ID, in, out, cfg)
		}
		if d.Why != "" {
			e.opt.Log.Info("claude lane", "provider", c.t.provider.Name, "connection_id", conn.ID, "step", d.Why,
				"status", res.status, "slow_status", sig.SlowStatus)
		}
		switch d.Action {
		case resilience.LaneRetry:
			e.endStep(c, res, laneReason(d.Why))
			continue
		case resilience.LaneWait:
			e.endStep(c, res, laneReason(d.Why))
			if !e.laneWait(ctx, w, c, conn, d.Wait) {
				return attemptResult{transport: true, err: clientGone()}
			}
			waited += d.Wait
			continue
		}
		return res
	}
}

// endStep notes the answer of a call the account's loop takes on (it sends the request again),
// with why, in the attempt chain.
func (e *Engine) endStep(c *call, res attemptResult, why string) {
	step := c.trace.step()
	step.end(res.status, e.opt.Clock.Now())
	step.Reason = why
}

// laneReason is the attempt chain's reason for a call the usage wall's state machine took on:
// limit_reset after a claimed reset, else lane_<step> (lane_accepted, lane_joined,
// lane_slot_busy).
func laneReason(why string) string {
	if why == "reset" {
		return "limit_reset"
	}
	return "lane_" + why
}

// remaining is the time left before the earlier of the attempt's execution deadline and the
// request's own; 0 when neither is set.
func (e *Engine) remaining(ctx context.Context, deadline time.Time) time.Duration {
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
		deadline = dl
	}
	if deadline.IsZero() {
		return 0
	}
	return max(deadline.Sub(e.opt.Clock.Now()), time.Nanosecond)
}

// laneWait waits for a lane slot; a streaming client gets heartbeats meanwhile. It reports false
// when the client left.
func (e *Engine) laneWait(ctx context.Context, w http.ResponseWriter, c *call, conn *catalog.ConnEntry, d time.Duration) bool {
	done := e.opt.Lanes.Wait(conn.ID, e.opt.Clock.Now().Add(d))
	defer done()
	hb := e.heartbeats(c, w)
	defer hb.stop()
	return e.sleep(ctx, d)
}

func laneConfig(snap *settings.Snapshot) resilience.LaneConfig {
	l := snap.Resilience().ClaudeLowPriority
	return resilience.LaneConfig{SlowRetryAfterDefault: ms(l.SlowRetryAfterDefaultMS), SlowMaxWaitDefault: ms(l.SlowMaxWaitDefaultMS),
		CoolOff: ms(l.LaneCooloffMS), LimitResetErrorBackoff: ms(l.LimitResetErrorBackoffMS)}
}

// atWall reports whether a Claude or ChatGPT account has used the configured share of its 5-hour
// or weekly window, until when, and whether it may still serve there (a Claude account's lane or
// limit reset).
func (e *Engine) atWall(conn *catalog.ConnEntry) (at bool, until time.Time, canServe bool) {
	if e.opt.Usage != nil && e.subscription(conn) && conn.ProviderType == catalog.TypeCodex {
		at, until = e.opt.Usage.AtWall(conn.ID, e.opt.OAuthSettings.Snapshot().Codex().UsageThreshold)
		return at, until, false
	}
	if !e.claudeAccount(conn) || e.opt.Usage == nil {
		return false, time.Time{}, false
	}
	at, until = e.opt.Usage.AtWall(conn.ID, e.opt.OAuthSettings.Snapshot().Claude().UsageThreshold)
	if !at {
		return false, time.Time{}, false
	}
	return true, until, e.opt.Lanes != nil && e.opt.Lanes.CanTakeWall(conn.ID, conn.LowPriorityLane, conn.LimitReset)
}

// quotaHeld reports whether an account at its usage wall is left out until the window resets
// (reason quota_window): it is, unless its lane or a limit reset can still serve it.
func (e *Engine) quotaHeld(conn *catalog.ConnEntry) (exclusion, bool) {
	at, until, canServe := e.atWall(conn)
	if !at || canServe {
		return exclusion{}, false
	}
	return exclusion{conn: conn, quota: true, why: resilience.Exclusion{Status: resilience.StatusCooling,
		Reason: quotaWindow, Remaining: until.Sub(e.opt.Clock.Now())}}, true
}

// deferred reports whether an account at its usage wall that can still serve (slowly, in its
// lane) should be tried only after the accounts with room: traffic moves to fresher accounts.
func (e *Engine) deferred(_ *call, conn *catalog.ConnEntry) bool {
	at, _, canServe := e.atWall(conn)
	return at && canServe
}
