package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/proxy/convo"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/settings"
)

// call is one client request on its way through the engine.
type call struct {
	trace  *Trace
	start  time.Time
	t      target
	body   []byte
	header http.Header
	stream bool
	// reasoning: the client's request asks the model to think first (its readiness timeout is
	// the adaptive maximum).
	reasoning bool
	snap      *settings.Snapshot
	retry     settings.Retry
	retryOn   *settings.StatusMatcher
	probe     bool // a half-open breaker's probe: one attempt, no retries, no failover
	// lease is the caller's own exclusive lease when it sent one (the target is then narrowed to
	// the leased connection); connections leased to other owners are never used.
	lease *routing.Lease
	// src is the client's format, dst the upstream's; path is the upstream address below the
	// provider's base URL.
	src, dst Format
	path     string
	// asked is the model as the client named it: a provider's model, a bare model or a combo.
	// An Anthropic client's answers name it (answermodel.go).
	asked string
	// replayDropped: an upstream refused the reasoning the client sent back, and the body goes
	// without some or all of it since (replay.go).
	replayDropped replayDrop
	countTokens   bool
	// hideUsage: the gateway asked a chat upstream for the stream's usage the client did not
	// ask for; the chunk that carries it is not relayed.
	hideUsage bool
	// req is the client's request in the conversation model, when it is translated: the answer's
	// writer reads what it repeats of it (a Responses answer echoes its fields, a chat stream
	// sends its usage chunk when asked, namespaced tool calls are mapped back).
	req *convo.Request
	// out is what went to the client so far (shared by the calls of one combo request).
	out *clientOut
	// attemptBase is the request's attempt count when this call began: the call's own budget
	// (retry.max_attempts) counts from it, so one combo target cannot spend another's. maxTotal
	// caps the request's attempts across all its calls (0 = none: a plain request has one call).
	attemptBase, maxTotal int
	// only restricts the call to one connection (a combo target pinned to it); nil = any.
	only *catalog.ConnEntry
	// targetDeadline is when the call's target must have begun to answer (a combo's
	// target_timeout_ms): it bounds each attempt until its answer starts and the waits between
	// attempts, never an answer under way. Zero = none.
	targetDeadline time.Time
	// inCombo is set for the calls of a request that named a combo: the combo's target rests
	// apply to them, and their first attempt is a failover when an earlier target was tried.
	inCombo   bool
	firstKind string
	// limits are the running attempt's time limits (nil between attempts).
	limits *attemptLimits
	// answered is when the answer began to go to the client (zero: it never did).
	answered time.Time
	// last is the call's last failed attempt, classified; nil when none failed. timedOut is set
	// when an attempt ran past its execution or target deadline.
	last     *failure
	timedOut bool
	// claude is what calls on Claude subscription accounts need (oauth.go).
	claude claudeCall
	// session is the client session the call belongs to, for session affinity (affinity.go).
	session callSession
	// stored is what the call names and makes of state a Responses upstream stores (stored.go).
	stored storedCall
	// keepItem, when set, keeps an output item of the translated Responses answer (items.go).
	keepItem func(id string, item []byte)
}

// failure is a failed attempt, classified.
type failure struct {
	err       *errs.Error
	outcome   resilience.Outcome
	retryable bool
	result    resilience.Result // what the breaker is told if this stays the last word
}

// breakerConfig returns the provider's effective breaker config, compiled once per snapshot for
// providers without overrides.
func (e *Engine) breakerConfig(c *call) resilience.BreakerConfig {
	if c.t.provider.Resilience.CircuitBreaker != (settings.BreakerOverrides{}) {
		eff, _ := c.snap.CircuitBreakerFor(c.t.provider.Resilience)
		if cfg, err := resilience.NewBreakerConfig(eff); err == nil {
			return cfg
		}
	}
	if cached := e.breakerCfg.Load(); cached != nil && cached.snap == c.snap {
		return cached.cfg
	}
	cfg, err := resilience.NewBreakerConfig(c.snap.Resilience().CircuitBreaker)
	if err != nil {
		cfg = resilience.BreakerConfig{} // a validated snapshot cannot get here; fail open
	}
	e.breakerCfg.Store(&cachedBreakerConfig{snap: c.snap, cfg: cfg})
	return cfg
}

// run passes the provider-level gates (circuit breaker, provider cooldown window), then works
// through the connections, and reports the logical request's outcome once to the breaker, the
// gate and the health window.
func (e *Engine) run(ctx context.Context, w http.ResponseWriter, c *call) *errs.Error {
	p := c.t.provider
	if len(p.Conns) == 0 {
		return noConnection(p.Name) // before the breaker: nothing to try, nothing to count
	}
	tk, open := e.opt.Breakers.Allow(p.Name, c.t.model, e.breakerConfig(c))
	if open != nil {
		key := "proxy.circuit_open"
		if open.Saturated {
			key = "proxy.circuit_saturated"
		}
		return withRetry(fail(errs.Unavailable, "circuit_open", key, open.Provider), open.RetryAfter)
	}
	defer tk.Done(resilience.Result{}) // neutral when no verdict was given (e.g. nothing attempted)
	gateCfg := c.snap.Resilience().ProviderCooldown
	if ok, remaining := e.opt.Gate.Check(p.Name, gateCfg); !ok {
		return withRetry(fail(errs.Unavailable, "provider_cooldown", "proxy.provider_cooldown", p.Name, roundUp(remaining)), remaining)
	}
	c.probe = tk.Probe()
	perr, verdict := e.work(ctx, w, c)
	if verdict != nil {
		tk.Done(*verdict)
		ok := verdict.Status >= 200 && verdict.Status < 300
		if !verdict.ClientAbort {
			var msg errs.Msg
			if perr != nil {
				msg = perr.Msg
			}
			e.opt.Health.Record(p.Name, c.t.model, ok, verdict.Status, msg)
		}
		if ok {
			e.opt.Gate.RecordSuccess(p.Name)
		}
	}
	return perr
}

// work tries the connections; verdict is the outcome for the breaker (nil = no upstream was
// called, which says nothing about the provider).
func (e *Engine) work(ctx context.Context, w http.ResponseWriter, c *call) (*errs.Error, *resilience.Result) {
	conns := e.storedFirst(c, e.pinFirst(c, e.connOrder(c)))
	if c.only != nil {
		conns = pinnedTo(conns, c.only.ID)
	}
	if len(conns) == 0 {
		return noConnection(c.t.provider.Name), nil
	}
	var last *failure
	var queueErr *errs.Error // set when a connection's queue was full
	kind := c.firstKind      // what the next attempt is: first, retry or failover
	var marks [16]bool       // tried and busy of up to 8 connections without an allocation
	var tried, busy []bool
	if n := len(conns); n <= len(marks)/2 {
		tried, busy = marks[:n:n], marks[n:2*n:2*n]
	} else {
		tried, busy = make([]bool, n), make([]bool, n)
	}
	// busy: filled up between pick and admission; waited for only when all are
	verdict := func() *resilience.Result {
		if last == nil || last.result == (resilience.Result{}) {
			return nil // nothing the provider is to blame for (a watchdog's local decision)
		}
		return &last.result
	}
	for retries := 0; ; {
		if last != nil && (c.retry.MaxAttempts > 0 && c.trace.Attempts-c.attemptBase >= c.retry.MaxAttempts ||
			c.maxTotal > 0 && c.trace.Attempts >= c.maxTotal) {
			return e.exhausted(c, conns, last), verdict() // the call's (or the request's) attempt budget is spent
		}
		i, spill, excluded := e.pick(c, conns, tried, busy)
		if len(excluded) > 0 {
			c.trace.skip(diagnostics(excluded).Excluded)
			c.pinExcluded(excluded)
		}
		if i < 0 {
			if last == nil && queueErr != nil {
				return queueErr, nil
			}
			if last == nil || !last.retryable || retries >= c.retry.MaxRetries || c.probe {
				return e.exhausted(c, conns, last), verdict()
			}
			wait := resilience.Backoff(retries+1, ms(c.retry.InitialBackoffMS), ms(c.retry.MaxBackoffMS),
				c.retry.BackoffFactor, c.retry.Jitter, rand.Float64)
			if soonest, ok := earliest(excluded); ok && soonest > wait {
				if soonest > ms(c.retry.MaxBackoffMS) {
					return e.exhausted(c, conns, last), verdict()
				}
				wait = soonest
			}
			if dl, ok := ctx.Deadline(); ok && e.opt.Clock.Now().Add(wait).After(dl) {
				return e.exhausted(c, conns, last), verdict()
			}
			if !c.targetDeadline.IsZero() && e.opt.Clock.Now().Add(wait).After(c.targetDeadline) {
				return e.exhausted(c, conns, last), verdict() // the target's time is up: the combo moves on
			}
			if !e.sleep(ctx, wait) {
				return clientGone(), &resilience.Result{ClientAbort: true}
			}
			retries++
			clear(tried)
			clear(busy)
			kind = "retry"
			continue
		}
		tried[i] = true
		conn := conns[i]
		adm, qerr, full, isBusy := e.admit(ctx, w, c, conn, spill)
		if isBusy {
			tried[i], busy[i] = false, true
			continue
		}
		if qerr != nil {
			if full { // this connection's queue is full: another may have room
				queueErr = qerr
				continue
			}
			return qerr, verdict() // local queue errors are never the provider's fault
		}
		defer adm.done() // a no-op once the attempt gave its slots back; covers a panic on the way
		stepKind := kind
		if stepKind == "" {
			stepKind = "first"
		}
		began := e.opt.Clock.Now()
		deadline := adm.deadline
		if !c.targetDeadline.IsZero() {
			deadline = max(min(deadline, c.targetDeadline.Sub(began)), time.Millisecond)
		}
		e.pinAttempt(c, conn)
		c.trace.attempt(conn, stepKind, began)
		actx, cancel := context.WithCancel(ctx)
		limits := newAttemptLimits(e.opt.Clock, cancel, began, deadline)
		c.limits = limits
		stat := e.stats.get(connStatKey(conn.ID))
		stat.begin()
		res := e.attemptOn(actx, cancel, w, c, conn, began.Add(deadline))
		limits.stop()
		c.limits = nil
		if res.err == nil {
			stat.end(true, e.opt.Clock.Since(began))
		} else {
			stat.end(false, 0)
		}
		step := c.trace.step() // the last call (a Claude account may have made several)
		step.end(res.status, e.opt.Clock.Now())
		if res.err == nil && !limits.timedOut() {
			e.opt.Observer.Attempt(c.t.provider.Name, "ok", kind)
			e.opt.Cooldowns.RecordSuccess(conn.ID)
			e.opt.Lockouts.RecordSuccess(c.t.provider.Name, conn.ID, c.t.model)
			e.pinServed(c, conn)
			ok := resilience.Result{Status: res.status, Duration: e.opt.Clock.Since(c.start)}
			perr := e.deliver(actx, w, c, conn, res)
			cancel()
			adm.done()
			return perr, e.streamVerdict(c, &ok)
		}
		cancel()
		adm.done()
		res.discard()
		if res.aborted != "" && ctx.Err() == nil && !limits.timedOut() {
			e.opt.Observer.StreamEnd(c.t.provider.Name, res.aborted, true)
			if !c.snap.Resilience().Streams.WatchdogCoolsConnection {
				// A local decision: the connection is not cooled and the breaker is not told;
				// the request moves on to another connection or target.
				step.Reason = res.aborted
				e.opt.Observer.Attempt(c.t.provider.Name, res.aborted, kind)
				last = &failure{err: res.err, outcome: resilience.Outcome{Reason: resilience.Reason(res.aborted), Failover: true}}
				c.last = last
				if c.probe {
					return res.err, nil
				}
				kind = "failover"
				continue
			}
		}
		if ctx.Err() != nil {
			step.Reason = "client_closed"
			return clientGone(), &resilience.Result{ClientAbort: true} // never the upstream's fault
		}
		if limits.timedOut() {
			step.Reason = resilience.CodeExecutionTimeout
			c.timedOut = true
			return fail(errs.Timeout, resilience.CodeExecutionTimeout, "proxy.execution_timeout",
				conn.Label, c.t.provider.Name, deadline.String()), verdict()
		}
		f := e.fail(c, conn, res)
		e.pinFailed(c, conn, f)
		c.storedFailed(conn, &f)
		step.Reason = string(f.outcome.Reason)
		if f.outcome.Code != "" {
			step.Reason = f.outcome.Code
		}
		if res.transport || res.redirect {
			step.Reason = f.err.ReasonCode()
		}
		step.Detail = res.location
		e.opt.Observer.Attempt(c.t.provider.Name, string(f.outcome.Reason), kind)
		last = &f
		c.last = last
		if !f.outcome.Failover && !f.retryable || c.probe {
			return f.err, verdict()
		}
		kind = "failover"
	}
}

// streamVerdict is the breaker's and the provider health's word on a delivered answer: a success,
// unless a stream did not end well. A stream the upstream broke or ended with its own error is a
// failure; one a watchdog ended is neutral (a local decision) unless watchdog_cools_connection
// says it counts; one the client left is the upstream's success up to then.
func (e *Engine) streamVerdict(c *call, ok *resilience.Result) *resilience.Result {
	switch c.trace.StreamEnd {
	case "", endClientGone, endCut:
		return ok
	case endIncomplete, endUpstreamErr, endFailed:
		return &resilience.Result{Transport: true, Duration: ok.Duration, Detail: c.trace.StreamEnd}
	}
	if c.snap.Resilience().Streams.WatchdogCoolsConnection {
		return &resilience.Result{LocalTimeout: true, Duration: ok.Duration, Detail: c.trace.StreamEnd}
	}
	return nil
}

// pinnedTo keeps the connection with id out of conns (none when it is not among them: disabled
// or deleted since the combo was saved).
func pinnedTo(conns []*catalog.ConnEntry, id int64) []*catalog.ConnEntry {
	for _, c := range conns {
		if c.ID == id {
			return []*catalog.ConnEntry{c}
		}
	}
	return nil
}

// noConnection is the answer for a provider without an enabled connection: nothing can serve the
// request until an operator adds one, so it is a 404 no client retries (the OpenAI and Anthropic
// SDKs and Codex retry neither a 404 nor an answer with x-should-retry: false), naming the page
// where connections are added. Once it was a 503 with Retry-After: 30, which clients retried for
// minutes in silence.
func noConnection(provider string) *errs.Error {
	e := fail(errs.NotFound, "no_executable_targets", "proxy.no_connections", provider)
	e.Header = http.Header{"X-Should-Retry": {"false"}}
	return e
}

// pick returns the first untried connection that may take a request for the model now, or -1
// and why the others were excluded. A connection at its concurrency cap (or found busy by an
// earlier admission of this request) is passed over while a sibling has a free slot: requests
// queue only when every eligible connection is full, and then on the first of them. spill says
// the connection was picked for its free slot, which admission then takes without waiting.
func (e *Engine) pick(c *call, conns []*catalog.ConnEntry, tried, busy []bool) (i int, spill bool, excluded []exclusion) {
	var full, later []int
	for i, conn := range conns {
		if tried[i] {
			continue
		}
		if busy[i] || e.atCap(c, conn) {
			full = append(full, i)
			continue
		}
		ok, x := e.eligible(c, conn)
		if ok && e.deferred(c, conn) {
			later = append(later, i)
			continue
		}
		if ok {
			return i, len(conns) > 1, excluded
		}
		excluded = append(excluded, x)
	}
	full = append(full, later...) // accounts at their usage wall that may still serve, last
	for _, i := range full {
		ok, x := e.eligible(c, conns[i])
		if ok {
			return i, false, excluded
		}
		excluded = append(excluded, x)
	}
	return -1, false, excluded
}

// eligible reports whether a connection may take the call's model now (not leased to another
// owner, not locked out, not cooling, not terminal); else why not. A terminal connection due for
// a probe takes the probe.
func (e *Engine) eligible(c *call, conn *catalog.ConnEntry) (bool, exclusion) {
	if x, leased := e.leasedToOther(c, conn); leased {
		return false, x
	}
	if x, locked := e.lockedOut(c, conn); locked {
		return false, x
	}
	if x, rests := e.resting(c, conn); rests {
		return false, x
	}
	if ok, why := e.opt.Cooldowns.Check(conn.ID); !ok {
		return false, exclusion{conn: conn, why: why}
	}
	if x, held := e.quotaHeld(conn); held {
		return false, x
	}
	return true, exclusion{}
}

// atCap reports whether a connection has no free slot right now: its quota-share limit
// (max_concurrent) or its request queue's execution limit is reached.
func (e *Engine) atCap(c *call, conn *catalog.ConnEntry) bool {
	if conn.MaxConcurrent > 0 && c.snap.Resilience().QuotaShareConcurrency.Enabled &&
		e.opt.Semaphores.Stats(conn.ID).Holding >= conn.MaxConcurrent {
		return true
	}
	if n := conn.Settings.RequestQueue.MaxConcurrentExecutions; n != nil && *n > 0 &&
		e.opt.Queues.Stats(conn.ID).Executing >= *n {
		return true
	}
	return false
}

type exclusion struct {
	conn    *catalog.ConnEntry
	lockout *resilience.Lockout // set when the model is locked out on this connection
	quota   bool                // set when the account is at its usage wall (quota_window)
	// rest is set when a combo rested the target on this connection (combo_routing: cool).
	rest  *resilience.TargetCooldown
	lease bool // set when another owner leases the connection (why.Remaining: until it expires)
	why   resilience.Exclusion
}

func earliest(ex []exclusion) (time.Duration, bool) {
	var best time.Duration
	found := false
	for _, x := range ex {
		if x.why.Status == resilience.StatusCooling && (!found || x.why.Remaining < best) {
			best, found = x.why.Remaining, true
		}
	}
	return best, found
}

// exhausted builds the answer when no connection is left to try. If some connection could serve
// now, the last upstream failure is the answer. Otherwise every connection is excluded: each one
// leased to another owner (the rest terminal) → 429 lease_capacity; all of them terminal → 429
// insufficient_quota when some only ran out of credits, else 401 naming the states and saying to
// reconnect (terminal); the model locked out where the connections are not terminal → 429
// listing the locked targets; else 429 with the earliest recovery and the reasons.
// Retry-After is the earliest time anything recovers; the body's diagnostics name every
// exclusion. A last failure that is another connection's "not found" for stored state gives way
// to why the connection that holds it could not serve (storedHolderAnswer).
func (e *Engine) exhausted(c *call, conns []*catalog.ConnEntry, last *failure) *errs.Error {
	if held := e.storedHolderAnswer(c, conns, last); held != nil {
		return held
	}
	all := e.excludedNow(c, conns)
	if len(all) < len(conns) && last != nil {
		return last.err
	}
	soonest, timed := earliest(all)
	diag := diagnostics(all)
	leased := false
	for _, x := range all {
		leased = leased || x.lease
	}
	if leased && !timed && last == nil {
		return e.leaseCapacity(c, all, diag) // the rest, if any, is terminal
	}
	if !timed && !leased && len(all) == len(conns) {
		return e.terminal(c, all, diag)
	}
	if last != nil {
		if timed { // when the gateway can serve again, not the upstream's last hint
			last.err.RetryAfter = soonest
		}
		last.err.Diagnostics = diag
		return last.err
	}
	var locked []string
	reasons := map[string]bool{}
	for _, x := range all {
		if x.lockout != nil {
			locked = append(locked, fmt.Sprintf("%s/%s on %s", c.t.provider.Name, x.lockout.Target, x.conn.Label))
		} else if x.why.Status == resilience.StatusCooling && x.why.Reason != "" {
			reasons[string(x.why.Reason)] = true
		}
	}
	if len(locked) > 0 {
		lockedOut := withRetry(fail(errs.RateLimited, "model_locked_out", "proxy.model_locked_out",
			c.t.provider.Name, c.t.model, strings.Join(locked, ", "), roundUp(soonest)), soonest)
		lockedOut.Header, lockedOut.Diagnostics = http.Header{"X-Should-Retry": {"false"}}, diag
		return lockedOut
	}
	// Rate limits and quotas are the client's to wait out (429); server errors, timeouts and
	// overloads are the provider's outage (503).
	code := errs.RateLimited
	if outage(reasons) {
		code = errs.Unavailable
	}
	cooling := withRetry(fail(code, "all_connections_cooling", "proxy.all_cooling",
		c.t.provider.Name, joinKeys(reasons, "cooldown"), roundUp(soonest)), soonest)
	cooling.Diagnostics = diag
	return cooling
}

// terminal is the answer when every connection is in a terminal state. Out of credits is not bad
// credentials: a connection out of credits is re-probed (every 30 min), so while any is, a later
// request can succeed and the answer is 429 insufficient_quota with Retry-After at the earliest
// re-probe, also when the others are banned or expired; only when every connection needs new
// credentials (banned, expired) is it 401 connections_unusable, saying to reconnect. Neither is
// worth a client's retry now: x-should-retry: false.
func (e *Engine) terminal(c *call, all []exclusion, diag *Diagnostics) *errs.Error {
	states := map[string]bool{}
	now := e.opt.Clock.Now()
	var probe time.Duration // until the earliest re-probe of a connection out of credits; 0 = none is
	for _, x := range all {
		states[string(x.why.Status)] = true
		if x.why.Status != resilience.StatusCreditsExhausted {
			continue
		}
		d := resilience.CreditsProbeInterval
		if next := e.opt.Cooldowns.Get(x.conn.ID).NextProbe; !next.IsZero() {
			d = max(next.Sub(now), time.Second)
		}
		if probe == 0 || d < probe {
			probe = d
		}
	}
	var out *errs.Error
	if probe > 0 {
		out = withRetry(fail(errs.RateLimited, reasonInsufficientQuota, "proxy.insufficient_quota", c.t.provider.Name,
			joinKeys(states, "terminal"), roundUp(probe)), probe)
	} else {
		out = fail(errs.Unauthorized, "connections_unusable", "proxy.connections_unusable", c.t.provider.Name, joinKeys(states, "terminal"))
	}
	out.Header, out.Diagnostics = http.Header{"X-Should-Retry": {"false"}}, diag
	return out
}

// outage reports whether every connection cools for the provider's own trouble (server errors,
// overload), rather than for the account's limits (rate limits, quotas, usage windows).
func outage(reasons map[string]bool) bool {
	if len(reasons) == 0 {
		return false
	}
	for r := range reasons {
		if r != string(resilience.ReasonServerError) && r != string(resilience.ReasonModelCapacity) {
			return false
		}
	}
	return true
}

// excludedNow lists the connections that cannot take the request right now (without taking a
// probe slot, unlike pick).
func (e *Engine) excludedNow(c *call, conns []*catalog.ConnEntry) []exclusion {
	var out []exclusion
	for _, conn := range conns {
		if x, leased := e.leasedToOther(c, conn); leased {
			out = append(out, x)
		} else if x, locked := e.lockedOut(c, conn); locked {
			out = append(out, x)
		} else if x, rests := e.resting(c, conn); rests {
			out = append(out, x)
		} else if ok, why := e.opt.Cooldowns.Peek(conn.ID); !ok {
			out = append(out, exclusion{conn: conn, why: why})
		} else if x, held := e.quotaHeld(conn); held {
			out = append(out, x)
		}
	}
	return out
}

// lockedOut reports whether the call's model is locked out on the connection.
func (e *Engine) lockedOut(c *call, conn *catalog.ConnEntry) (exclusion, bool) {
	locked, until, l := e.opt.Lockouts.Check(c.t.provider.Name, conn.ID, c.t.model)
	if !locked {
		return exclusion{}, false
	}
	return exclusion{conn: conn, lockout: &l, why: resilience.Exclusion{Status: resilience.StatusCooling,
		Reason: resilience.Reason(l.Reason), Remaining: until.Sub(e.opt.Clock.Now())}}, true
}

// resting reports whether a combo rested the call's target on the connection. Rests apply to
// requests through combos only: a client that names provider/model itself is served as asked.
func (e *Engine) resting(c *call, conn *catalog.ConnEntry) (exclusion, bool) {
	if !c.inCombo || e.opt.TargetCooldowns == nil {
		return exclusion{}, false
	}
	rests, tc := e.opt.TargetCooldowns.Check(c.t.provider.Name, c.t.model, conn.ID)
	if !rests {
		return exclusion{}, false
	}
	return exclusion{conn: conn, rest: &tc, why: resilience.Exclusion{Status: resilience.StatusCooling,
		Reason: resilience.Reason(tc.Reason), Remaining: tc.Until.Sub(e.opt.Clock.Now())}}, true
}

// diagnostics turns exclusions into the body's diagnostics.excluded list.
func diagnostics(all []exclusion) *Diagnostics {
	out := make([]Excluded, 0, len(all))
	for _, x := range all {
		d := Excluded{Connection: x.conn.Label, Reason: "connection_cooldown", Detail: string(x.why.Reason),
			SecondsLeft: int64((x.why.Remaining + time.Second - 1) / time.Second)}
		switch {
		case x.lease:
			d.Reason, d.Detail = "lease", ""
		case x.lockout != nil:
			d.Reason, d.Target = "model_lockout", x.lockout.Target
		case x.rest != nil:
			d.Reason, d.Target = "target_cooldown", x.rest.Model
		case x.quota:
			d.Reason, d.Detail = quotaWindow, "usage_threshold"
		case x.why.Status != resilience.StatusCooling:
			d.Reason, d.Detail, d.SecondsLeft = "terminal", string(x.why.Status), 0
		}
		out = append(out, d)
	}
	return &Diagnostics{Excluded: out}
}

func joinKeys(m map[string]bool, fallback string) string {
	if len(m) == 0 {
		return fallback
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

func roundUp(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10) + " s"
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

func (e *Engine) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := e.opt.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}
