package proxy

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/settings"
)

// A combo is a named virtual model: its targets (a provider's model, or another combo) are tried
// in the order its strategy chooses, each with a budget of its own. The rules:
//
//   - a target is passed over before anything is sent when it cannot serve now: its breaker is
//     open, its provider cools down, or every connection it could use is cooling, in a terminal
//     state, has the model locked out, is rested by a combo, leased by someone else or at its
//     usage wall. The skip is noted with its reason and when it ends;
//   - a target whose connections are all at their concurrency cap with requests waiting is
//     passed over while a later target can start now (combo_routing.skip_saturated), and tried
//     (waiting in its line) only when none could;
//   - each target gets the provider's own retry budget (retries stay on the target); one failing
//     target can never spend the budget of the next. What a failure does then is operator data
//     (combo_routing.on_failure): move on, rest the target on that connection and move on, or
//     stop; a failure the classification lets fail over (a context overflow) always moves on;
//   - at most routing.MaxAttemptsCap upstream calls per client request (fewer when the combo
//     says so), however deeply combos nest;
//   - nothing is tried again once an answer began to go to the client;
//   - when every target is out for a short transient reason, the request waits for the first
//     to come back and is dispatched again (combo_cooldown_wait); when every target is out for
//     a quota window with a known reset, a combo with wait_until_reset holds the request until
//     that reset (up to its cap). Streaming clients get heartbeats meanwhile;
//   - when nothing can serve: 503 all_targets_cooling_down with Retry-After and every target's
//     reason in diagnostics.excluded (429 when they are all out of quota), or 404
//     no_executable_targets when no timer will change that.
//
// The request log keeps the whole decision (Trace.Route), an error answer carries it in
// diagnostics.route, and every response says in X-Switchyard-Route which target answered after
// how many calls.

// ComboSource gives the engine the current combos.
type ComboSource interface {
	Registry() *routing.Registry
}

// combo looks name up among the combos; nil when it names none.
func (e *Engine) combo(name string) *routing.Expansion {
	if e.opt.Combos == nil {
		return nil
	}
	reg := e.opt.Combos.Registry()
	if reg == nil {
		return nil
	}
	x, _ := reg.Expand(name)
	return x
}

// waitMargin is added to a cooldown wait so the target is usable when the request comes back.
const waitMargin = 50 * time.Millisecond

// serveCombo serves a request that named a combo.
func (e *Engine) serveCombo(ctx context.Context, w http.ResponseWriter, raw []byte, in http.Header, tr *Trace, src Format,
	countTokens bool, x *routing.Expansion) *errs.Error {
	req, derr := DecodeRequest(raw)
	if derr != nil {
		return derr
	}
	if countTokens {
		req.Stream = false
	}
	tr.Stream, tr.Combo = req.Stream, x.Combo.Name
	r := &comboRun{e: e, ctx: ctx, w: w, req: req, in: in, tr: tr, src: src, countTokens: countTokens, x: x,
		snap: e.opt.Settings.Snapshot(), out: &clientOut{}, limit: routing.MaxAttemptsCap,
		session: e.sessionFor(in, req.Raw, src, tr.ClientKeyID)}
	if m := x.Combo.MaxAttempts; m > 0 && m < r.limit {
		r.limit = m
	}
	perr := r.run()
	if perr == nil {
		return nil
	}
	tr.ErrorCode = perr.ReasonCode()
	finalError(perr, tr.Attempts)
	attachRoute(perr, tr.Route)
	if perr.Header == nil {
		perr.Header = http.Header{}
	}
	perr.Header.Set(RouteHeader, tr.route())
	if r.out.committed {
		if !isClientGone(perr) {
			writeStreamError(w, src, perr)
		}
		return nil
	}
	return perr
}

// comboRun is one client request on its way through a combo.
type comboRun struct {
	e           *Engine
	ctx         context.Context
	w           http.ResponseWriter
	req         Request
	in          http.Header
	tr          *Trace
	src         Format
	countTokens bool
	x           *routing.Expansion
	snap        *settings.Snapshot
	out         *clientOut
	// limit is the request's upstream attempt cap.
	limit int
	round int
	// session is the client's session, for the combo's target pin; pinned is the key of the
	// target it is pinned to ("" = none) and pinOut is set once that target could not serve.
	session callSession
	pinned  string
	pinOut  bool
	// leaseErr is why a target did not fit the lease the request holds (its provider is not the
	// leased connection's); answered when no target fits.
	leaseErr *errs.Error
}

// leafTarget is one provider target in the order of a round.
type leafTarget struct {
	routing.Target
	via []string // the nested combos it is reached through, outermost first
}

// label is how the route and the log name the target: provider/model, @connection when pinned.
func (t leafTarget) label() string { return t.Target.String() }

// pinKey names the target for the session's pin on the combo: its label, after the nested
// combos it is reached through.
func (t leafTarget) pinKey() string {
	if len(t.via) == 0 {
		return t.label()
	}
	return strings.Join(t.via, ">") + ">" + t.label()
}

// statKey keys the target's numbers (routeStats).
func (t leafTarget) statKey() string { return "t\x00" + t.label() }

// outcome of one round of dispatch.
type roundResult struct {
	done bool        // the request is answered (or the client left): err is the last word
	err  *errs.Error // done: nil when answered; else the last failure of the round, if any
	// called is set when an upstream call was made this round.
	called bool
}

// run dispatches rounds until a target answers, the combo stops, or no wait can help.
func (r *comboRun) run() *errs.Error {
	cw := r.snap.Resilience().ComboCooldownWait
	var waited time.Duration
	waits, resetWaited := 0, time.Duration(0)
	for {
		r.round++
		res := r.dispatch()
		if res.done {
			return res.err
		}
		view := r.survey()
		if wait, ok := r.cooldownWait(view, cw, waits, waited); ok {
			if !r.wait(wait) {
				return clientGone()
			}
			waits++
			waited += wait
			continue
		}
		if wait, ok := r.resetWait(view, resetWaited); ok {
			if !r.wait(wait) {
				return clientGone()
			}
			resetWaited += wait
			continue
		}
		return r.answer(res, view)
	}
}

// order lists the provider targets of x in the order its strategy (and each nested combo's
// own) chooses for this request.
func (r *comboRun) order(x *routing.Expansion, via []string, out []leafTarget) []leafTarget {
	cands := make([]routing.Candidate, len(x.Targets))
	for i, t := range x.Targets {
		if t.IsCombo() {
			cands[i] = routing.Candidate{Weight: t.Weight, Headroom: 1}
			continue
		}
		cands[i] = r.e.targetCandidate(r.snap, leafTarget{Target: t.Target})
	}
	turn := r.e.comboTurn(x.Combo.Name)
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for _, i := range routing.Order(x.Combo.Strategy, cands, turn, rnd) {
		t := x.Targets[i]
		switch {
		case !t.IsCombo():
			out = append(out, leafTarget{Target: t.Target, via: via})
		case t.Nested != nil:
			out = r.order(t.Nested, append(via[:len(via):len(via)], t.Combo), out)
		}
	}
	return out
}

// dispatch is one round: the targets in order, skipping those that cannot serve now, until one
// answers or the combo stops.
func (r *comboRun) dispatch() roundResult {
	var res roundResult
	var deferred []leafTarget
	skipSaturated := r.snap.Resilience().ComboRouting.SkipSaturated
	leaves := r.pinFirst(r.order(r.x, nil, nil))
	// step takes one target and reports whether the round is over; a saturated target is put
	// back for after the others (unless it is the last, or comes back from there).
	step := func(lf leafTarget, last, deferredPass bool) bool {
		if r.tr.Attempts >= r.limit {
			return true
		}
		st := r.peek(lf)
		if st.skip {
			r.note(lf, RouteStep{Outcome: "skipped", Reason: st.reason, Source: st.source, Until: st.until})
			if !deferredPass {
				r.pinLost(lf)
			}
			return false
		}
		if !deferredPass && skipSaturated && st.saturated && !last {
			deferred = append(deferred, lf)
			r.note(lf, RouteStep{Outcome: "deferred", Reason: "saturated", Source: st.source})
			return false
		}
		return r.try(lf, st, &res)
	}
	for i, lf := range leaves {
		if step(lf, i == len(leaves)-1, false) {
			return res
		}
	}
	for _, lf := range deferred {
		if step(lf, false, true) {
			return res
		}
	}
	return res
}

// try runs one target and reports whether the request is done (answered, stopped, or the
// client left); a failure that moves on is left in res.err.
func (r *comboRun) try(lf leafTarget, st targetState, res *roundResult) bool {
	t := target{provider: st.provider, model: lf.Model}
	if countsLocally(t, r.countTokens) { // the gateway counts itself toward providers without count_tokens
		r.tr.Provider, r.tr.Model, r.tr.MetricModel, r.tr.target = t.provider.Name, t.model, t.model, lf.label()
		res.done, res.err = true, r.e.countLocally(r.ctx, r.w, t, r.req, r.tr)
		if res.err == nil {
			r.note(lf, RouteStep{Outcome: "answered"})
		}
		return true
	}
	c, perr := r.e.prepare(t, r.req, r.in, r.tr, r.src, r.countTokens)
	if perr != nil {
		// The request cannot be put in this provider's format (a field it cannot carry): the
		// next target may speak the client's own. An earlier target's failure stays the answer:
		// it is why the request was not served (a previous_response_id its provider does not
		// hold), where this says only that this target was never a way.
		r.note(lf, RouteStep{Outcome: "failed", Reason: perr.ReasonCode(), Action: settings.ComboSkip})
		if res.err == nil {
			res.err = perr
		}
		return false
	}
	c.out, c.inCombo, c.only, c.lease = r.out, true, st.only, st.lease
	c.attemptBase, c.maxTotal = r.tr.Attempts, r.limit
	if r.tr.Attempts > 0 {
		c.firstKind = "failover"
	}
	if ms := r.x.Combo.TargetTimeoutMS; ms > 0 {
		c.targetDeadline = c.start.Add(time.Duration(ms) * time.Millisecond)
	}
	r.tr.Provider, r.tr.Model, r.tr.MetricModel, r.tr.target = t.provider.Name, t.model, t.model, lf.label()
	if found, _ := r.e.opt.Inventory.Lookup(t.provider.Name, t.model); !found {
		r.tr.MetricModel = UnlistedModel
	}
	stat := r.e.stats.get(lf.statKey())
	stat.begin()
	before := r.tr.Attempts
	perr = r.e.run(r.ctx, r.w, c)
	var ttft time.Duration
	if !c.answered.IsZero() {
		ttft = c.answered.Sub(c.start)
	}
	stat.end(perr == nil, ttft)
	step := RouteStep{Attempts: r.tr.Attempts - before}
	if r.tr.Attempts > before {
		res.called = true
	}
	switch {
	case perr == nil || r.out.delivered:
		step.Outcome = "answered"
		r.note(lf, step)
		if perr == nil && r.e.opt.TargetCooldowns != nil {
			r.e.opt.TargetCooldowns.Success(t.provider.Name, t.model, r.tr.ConnectionID)
		}
		r.pinServed(lf)
		res.done, res.err = true, perr
		return true
	case isClientGone(perr):
		step.Outcome, step.Reason = "failed", perr.ReasonCode()
		r.note(lf, step)
		res.done, res.err = true, perr
		return true
	}
	reason, action := r.action(c, perr)
	step.Outcome, step.Reason, step.Action = "failed", reason, action
	res.err = perr
	if c.last != nil && (c.last.outcome.Failover || c.last.retryable) {
		r.pinFailed(lf) // the request's own fault (a plain 400) says nothing of the target
	}
	switch action {
	case settings.ComboStop:
		step.Outcome = "stopped"
		r.note(lf, step)
		res.done = true
		return true
	case settings.ComboCool:
		if until, ok := r.cool(c, t); ok {
			step.Until = until
		}
	}
	r.note(lf, step)
	return false
}

// action is what the combo does after a target's call failed, and the failure's reason.
func (r *comboRun) action(c *call, perr *errs.Error) (reason, action string) {
	on := r.snap.Resilience().ComboRouting.OnFailure
	switch {
	case c.last != nil:
		reason = string(c.last.outcome.Reason)
		if c.last.result.Transport || c.last.result.LocalTimeout || reason == "" {
			reason = string(resilience.ReasonServerError)
		}
		if c.last.outcome.Failover && reason == string(resilience.ReasonRequestRejected) {
			return reason, settings.ComboSkip // a context overflow or a model without access: another model may do
		}
		return reason, on.For(reason)
	case c.timedOut:
		return perr.ReasonCode(), on.For(string(resilience.ReasonServerError))
	}
	// Nothing was called (every connection excluded meanwhile, a full queue, an open breaker):
	// not a failure of the request, so another target may serve it.
	return perr.ReasonCode(), settings.ComboSkip
}

// cool rests the target on the connection that failed last, for the failure's own cooldown
// (the upstream's reset hint, a quota window) or the model lockout's base doubling up to its
// max; it returns when the rest ends.
func (r *comboRun) cool(c *call, t target) (time.Time, bool) {
	if r.e.opt.TargetCooldowns == nil || c.last == nil || len(r.tr.Chain) == 0 {
		return time.Time{}, false
	}
	connID := r.tr.Chain[len(r.tr.Chain)-1].ConnectionID
	ml := r.snap.Resilience().ModelLockout
	tc := r.e.opt.TargetCooldowns.Cool(t.provider.Name, t.model, connID, string(c.last.outcome.Reason), c.last.outcome.Cooldown,
		ms(ml.BaseCooldownMS), ms(ml.MaxCooldownMS))
	return tc.Until, true
}

// peek is peekTarget for this request: a request that holds a lease sees each target's
// provider as its one leased connection, and a target on another provider as out.
func (r *comboRun) peek(lf leafTarget) targetState {
	return r.e.peekTarget(r.snap, lf, func(p *catalog.ProviderEntry) (*catalog.ProviderEntry, *routing.Lease, bool) {
		t, lease, lerr := r.e.leaseTarget(r.in, r.tr.ClientKeyID, target{provider: p, model: lf.Model})
		if lerr != nil {
			r.leaseErr = lerr
			return nil, nil, false
		}
		return t.provider, lease, true
	})
}

// pinFirst moves the target the session is pinned to on the combo to the front.
func (r *comboRun) pinFirst(leaves []leafTarget) []leafTarget {
	r.pinned, r.pinOut = "", false
	if !r.session.ok {
		return leaves
	}
	pin, ok := r.e.opt.Pins.Target(r.session.id, r.x.Combo.Name)
	if !ok {
		return leaves
	}
	keys := make([]string, len(leaves))
	for i, lf := range leaves {
		keys[i] = lf.pinKey()
	}
	i, found := pin.Find(keys)
	if !found {
		r.pinOut = true // the target is gone from the combo: whoever serves is pinned
		return leaves
	}
	r.pinned = keys[i]
	if i > 0 {
		lf := leaves[i]
		copy(leaves[1:i+1], leaves[:i])
		leaves[0] = lf
	}
	return leaves
}

// pinLost notes that the pinned target could not take the request.
func (r *comboRun) pinLost(lf leafTarget) {
	if r.pinned != "" && lf.pinKey() == r.pinned {
		r.pinOut = true
	}
}

// pinFailed is told that a target failed: on the pinned target it counts toward clearing the
// pin, and the request moving on evicts it.
func (r *comboRun) pinFailed(lf leafTarget) {
	if !r.session.ok || r.pinned == "" || lf.pinKey() != r.pinned {
		return
	}
	t := resilience.ComboTarget{Index: -1, Key: r.pinned}
	r.e.opt.Pins.TargetFailed(r.session.id, r.x.Combo.Name, t)
	r.e.opt.Pins.EvictTarget(r.session.id, r.x.Combo.Name, t)
	r.pinned, r.pinOut = "", true
}

// pinServed pins the session to the target that served it, unless the pinned target only was
// full (passed over as saturated): then the pin stays.
func (r *comboRun) pinServed(lf leafTarget) {
	if !r.session.ok || r.pinned != "" && r.pinned != lf.pinKey() && !r.pinOut {
		return
	}
	r.e.opt.Pins.UseTarget(r.session.id, r.x.Combo.Name, resilience.ComboTarget{Index: -1, Key: lf.pinKey()})
}

// note adds a step to the request's route.
func (r *comboRun) note(lf leafTarget, step RouteStep) {
	step.Target, step.Via, step.Round = lf.label(), lf.via, r.round
	r.tr.Route = append(r.tr.Route, step)
}

// targetView is a target as the end of a round finds it.
type targetView struct {
	lf leafTarget
	st targetState
}

// survey looks at every target again once a round found nothing to answer: which can serve now
// and when the others can.
func (r *comboRun) survey() []targetView {
	leaves := r.x.Leaves()
	out := make([]targetView, 0, len(leaves))
	seen := map[string]bool{}
	for _, l := range leaves {
		lf := leafTarget{Target: l.Target, via: l.Path[1:]}
		if seen[lf.label()] {
			continue
		}
		seen[lf.label()] = true
		out = append(out, targetView{lf: lf, st: r.peek(lf)})
	}
	return out
}

// soonest is the target that comes back first among those excluded by a timer, and whether
// every target is excluded (no target can serve now).
func soonest(view []targetView) (first *targetView, allOut bool) {
	allOut = true
	for i := range view {
		v := &view[i]
		if !v.st.skip {
			allOut = false
			continue
		}
		if !v.st.until.IsZero() && (first == nil || v.st.until.Before(first.st.until)) {
			first = v
		}
	}
	return first, allOut
}

// cooldownWait says how long to wait before dispatching again, when every target is out and
// the first to come back is out for a short transient reason (never for quota, credentials or
// a missing model), within combo_cooldown_wait's bounds and the request's deadline.
func (r *comboRun) cooldownWait(view []targetView, cw settings.ComboCooldownWait, waits int, waited time.Duration) (time.Duration, bool) {
	first, allOut := soonest(view)
	if !cw.Enabled || !allOut || first == nil || !first.st.transient || waits >= cw.MaxAttempts || r.tr.Attempts >= r.limit {
		return 0, false
	}
	d := first.st.until.Sub(r.e.opt.Clock.Now()) + waitMargin
	if d > ms(cw.MaxWaitMS) || waited+d > ms(cw.BudgetMS) || r.pastDeadline(d) {
		return 0, false
	}
	return max(d, waitMargin), true
}

// resetWait says how long a combo with wait_until_reset holds the request: when every target
// is out and the first to come back is out for a quota window with a known reset, until that
// reset, within the combo's cap (counted over the whole request) and the request's deadline.
func (r *comboRun) resetWait(view []targetView, waited time.Duration) (time.Duration, bool) {
	c := r.x.Combo
	first, allOut := soonest(view)
	if !c.WaitUntilReset || !allOut || first == nil || !first.st.quota || r.tr.Attempts >= r.limit {
		return 0, false
	}
	capMS := c.WaitUntilResetMaxMS
	if capMS <= 0 {
		capMS = routing.DefaultWaitMS
	}
	d := first.st.until.Sub(r.e.opt.Clock.Now()) + waitMargin
	if waited+d > ms(capMS) || r.pastDeadline(d) {
		return 0, false
	}
	return max(d, waitMargin), true
}

// pastDeadline reports whether waiting d would outlast the request's own deadline.
func (r *comboRun) pastDeadline(d time.Duration) bool {
	dl, ok := r.ctx.Deadline()
	return ok && r.e.opt.Clock.Now().Add(d).After(dl)
}

// wait waits d on the engine's clock, with heartbeats to a streaming client; false when the
// client left.
func (r *comboRun) wait(d time.Duration) bool {
	hb := r.e.beat(r.w, r.req.Stream, r.out, r.tr, ": waiting for a target\n\n")
	defer hb.stop()
	return r.e.sleep(r.ctx, d)
}

// answer is the client's answer when no target answered: the last failure when a target was
// called and failed; else all_targets_cooling_down (a timer will let a target serve again) or
// no_executable_targets (none will). Either way diagnostics.excluded names each target that is
// out and why.
func (r *comboRun) answer(res roundResult, view []targetView) *errs.Error {
	var excluded []Excluded
	for _, v := range view {
		if v.st.skip {
			excluded = append(excluded, v.st.excluded(v.lf, r.e.opt.Clock.Now()))
		}
	}
	first, allOut := soonest(view)
	if res.err == nil && first == nil && r.leaseErr != nil {
		return r.leaseErr // no target is on the leased connection's provider
	}
	if res.err != nil {
		if allOut && first != nil {
			res.err.RetryAfter = first.st.until.Sub(r.e.opt.Clock.Now())
		}
		attachExcluded(res.err, excluded)
		return res.err
	}
	name := r.x.Combo.Name
	if first == nil {
		e := fail(errs.NotFound, "no_executable_targets", "proxy.combo_no_targets", name, whyOut(view))
		e.Header = http.Header{"X-Should-Retry": {"false"}}
		attachExcluded(e, excluded)
		return e
	}
	left := first.st.until.Sub(r.e.opt.Clock.Now())
	code := errs.Unavailable
	if allQuota(view) {
		code = errs.RateLimited
	}
	e := withRetry(fail(code, "all_targets_cooling_down", "proxy.combo_all_cooling", name, whyOut(view), roundUp(left)), left)
	attachExcluded(e, excluded)
	return e
}

// allQuota reports whether every excluded target with a timer is out for a quota window.
func allQuota(view []targetView) bool {
	n := 0
	for _, v := range view {
		if v.st.skip && !v.st.until.IsZero() {
			if !v.st.quota {
				return false
			}
			n++
		}
	}
	return n > 0
}

// whyOut names the reasons the targets are out, for the message.
func whyOut(view []targetView) string {
	seen := map[string]bool{}
	var out []string
	for _, v := range view {
		if v.st.skip && !seen[v.st.reason] {
			seen[v.st.reason] = true
			out = append(out, v.st.reason)
		}
	}
	if len(out) == 0 {
		return "busy"
	}
	return strings.Join(out, ", ")
}

func attachExcluded(e *errs.Error, excluded []Excluded) {
	if len(excluded) == 0 {
		return
	}
	d, _ := e.Diagnostics.(*Diagnostics)
	if d == nil {
		d = &Diagnostics{}
		e.Diagnostics = d
	}
	d.Excluded = append(d.Excluded, excluded...)
}

// attachRoute puts the combo's route beside the error, so that a client refused with a 503 reads
// the same decision the request log keeps.
func attachRoute(e *errs.Error, route []RouteStep) {
	if len(route) == 0 {
		return
	}
	d, _ := e.Diagnostics.(*Diagnostics)
	if d == nil {
		d = &Diagnostics{}
		e.Diagnostics = d
	}
	d.Route = slices.Clone(route)
}

// targetState is what a combo knows of a target before it calls it.
type targetState struct {
	provider *catalog.ProviderEntry
	only     *catalog.ConnEntry // the connection the target is pinned to
	lease    *routing.Lease     // the request's own lease on the target's provider
	// skip: the target cannot serve now. reason says why (circuit_open, provider_cooldown,
	// connection_cooldown, model_lockout, target_cooldown, quota_window, terminal, lease,
	// no_connections, unknown_provider), detail the underlying reason, source what excluded
	// it, until when that ends (zero: no timer will).
	skip           bool
	reason, detail string
	source         string
	until          time.Time
	// transient: the exclusion that ends first is short and transient (a cooldown wait may
	// help); quota: it is a quota window with a known reset.
	transient, quota bool
	// saturated: every usable connection is at its cap with requests waiting.
	saturated bool
}

// excluded is the diagnostics entry of a skipped target.
func (st targetState) excluded(lf leafTarget, now time.Time) Excluded {
	x := Excluded{Target: lf.Provider + "/" + lf.Model, Reason: st.reason, Detail: st.detail}
	if st.only != nil {
		x.Connection = st.only.Label
	}
	if !st.until.IsZero() {
		x.SecondsLeft = int64((st.until.Sub(now) + time.Second - 1) / time.Second)
	}
	return x
}

// transientReasons are the reasons a combo waits for (combo_cooldown_wait).
func transientReason(r resilience.Reason) bool {
	switch r {
	case resilience.ReasonRateLimit, resilience.ReasonModelCapacity, resilience.ReasonServerError:
		return true
	}
	return false
}

// quotaReason reports whether r is a quota running out (a window that resets).
func quotaReason(r resilience.Reason) bool {
	return r == resilience.ReasonQuotaExhausted || r == quotaWindow
}

// peekTarget looks at a target without calling it and without taking anything (no probe slot,
// no queue place): whether it can serve now, and if not why and until when. narrow gives the
// provider as the request may use it (only its leased connection, for a request that holds a
// lease), or refuses the provider (the lease is on another).
func (e *Engine) peekTarget(snap *settings.Snapshot, lf leafTarget,
	narrow func(*catalog.ProviderEntry) (*catalog.ProviderEntry, *routing.Lease, bool)) targetState {
	var st targetState
	now := e.opt.Clock.Now()
	p, ok := e.opt.Catalog.Registry().Provider(lf.Provider)
	if !ok {
		st.skip, st.reason, st.source = true, "unknown_provider", "provider "+lf.Provider
		return st
	}
	if narrow != nil {
		if p, st.lease, ok = narrow(p); !ok {
			st.skip, st.reason, st.source = true, "lease", "provider "+lf.Provider
			return st
		}
	}
	st.provider = p
	c := &call{t: target{provider: p, model: lf.Model}, snap: snap, inCombo: true, lease: st.lease}
	if open, left := e.opt.Breakers.Peek(p.Name, lf.Model, e.breakerConfig(c)); open {
		st.skip, st.reason, st.source, st.until, st.transient = true, "circuit_open", "provider "+p.Name, now.Add(left), true
		return st
	}
	if ok, left := e.opt.Gate.Check(p.Name, snap.Resilience().ProviderCooldown); !ok {
		st.skip, st.reason, st.source, st.until, st.transient = true, "provider_cooldown", "provider "+p.Name, now.Add(left), true
		return st
	}
	conns := p.Conns
	if lf.Connection != "" {
		conns = nil
		for _, conn := range p.Conns {
			if conn.Name == lf.Connection {
				st.only, conns = conn, []*catalog.ConnEntry{conn}
				break
			}
		}
	}
	if len(conns) == 0 {
		st.skip, st.reason, st.source = true, "no_connections", "provider "+p.Name
		return st
	}
	ex := e.excludedNow(c, conns)
	if len(ex) < len(conns) {
		st.saturated = true
		for _, conn := range conns {
			if excludedConn(ex, conn) {
				continue
			}
			if !e.atCap(c, conn) || e.waiting(conn.ID) == 0 {
				st.saturated = false
				break
			}
		}
		if st.saturated {
			st.source = "provider " + p.Name
		}
		return st
	}
	st.skip = true
	var first *exclusion
	for i := range ex {
		x := &ex[i]
		if (x.why.Status == resilience.StatusCooling || x.lease) && (first == nil || x.why.Remaining < first.why.Remaining) {
			first = x
		}
	}
	if first == nil { // every connection is in a terminal state (or leased without a timer)
		st.reason, st.detail, st.source = "terminal", string(ex[0].why.Status), "connection "+ex[0].conn.Label
		return st
	}
	d := diagnostics([]exclusion{*first}).Excluded[0]
	st.reason, st.detail, st.source, st.until = d.Reason, d.Detail, "connection "+first.conn.Label, now.Add(first.why.Remaining)
	st.transient = transientReason(first.why.Reason) && !first.quota
	st.quota = first.quota || quotaReason(first.why.Reason)
	return st
}

func excludedConn(ex []exclusion, conn *catalog.ConnEntry) bool {
	for _, x := range ex {
		if x.conn == conn {
			return true
		}
	}
	return false
}

// targetCandidate is what the strategies read of a provider target.
func (e *Engine) targetCandidate(snap *settings.Snapshot, lf leafTarget) routing.Candidate {
	inFlight, uses, errRate, ttft := e.stats.peek(lf.statKey()).read()
	cand := routing.Candidate{Weight: lf.Weight, InFlight: inFlight, Uses: uses, ErrorRate: errRate, TTFT: ttft, Headroom: 1}
	p, ok := e.opt.Catalog.Registry().Provider(lf.Provider)
	if !ok {
		return cand
	}
	best := -1.0
	c := &call{t: target{provider: p, model: lf.Model}, snap: snap}
	saturated := true
	for _, conn := range p.Conns {
		if lf.Connection != "" && conn.Name != lf.Connection {
			continue
		}
		h, reset := e.headroom(conn)
		if h > best || h == best && !reset.IsZero() && (cand.ResetAt.IsZero() || reset.Before(cand.ResetAt)) {
			best, cand.ResetAt = h, reset
		}
		if !e.atCap(c, conn) || e.waiting(conn.ID) == 0 {
			saturated = false
		}
	}
	if best >= 0 {
		cand.Headroom = best
	}
	cand.Saturated = saturated && best >= 0
	return cand
}

// headroom is the share of quota a connection has left in its tightest usage window that has
// not reset yet (1 for API keys and accounts whose usage is unknown), and when that window
// resets.
func (e *Engine) headroom(conn *catalog.ConnEntry) (float64, time.Time) {
	if e.opt.Usage == nil {
		return 1, time.Time{}
	}
	u, ok := e.opt.Usage.Get(conn.ID)
	if !ok {
		return 1, time.Time{}
	}
	now := e.opt.Clock.Now()
	h, reset := 1.0, time.Time{}
	for _, w := range []*resilience.UsageWindow{u.FiveHour, u.SevenDay} {
		if w == nil || !w.ResetsAt.After(now) {
			continue
		}
		if left := 1 - w.Utilization/100; left < h {
			h = max(left, 0)
		}
		if reset.IsZero() || w.ResetsAt.Before(reset) {
			reset = w.ResetsAt
		}
	}
	return h, reset
}

// comboTurns counts the requests of each combo, for round-robin.
type comboTurns struct{ m sync.Map } // name → *atomic.Uint64

// comboTurn returns the combo's request number and counts one more.
func (e *Engine) comboTurn(name string) uint64 {
	v, ok := e.turns.m.Load(name)
	if !ok {
		v, _ = e.turns.m.LoadOrStore(name, new(atomic.Uint64))
	}
	return v.(*atomic.Uint64).Add(1) - 1
}

// TargetVerdict is what a combo would do with a provider target now: pass it over (Reason why,
// Until when that ends; zero = no timer will) or try it, and whether it is saturated.
type TargetVerdict struct {
	Skip      bool
	Reason    string
	Until     time.Time
	Saturated bool
}

// TargetVerdict looks at a combo target as the engine would before calling it; nothing is
// taken, so the dashboard may ask as often as it polls.
func (e *Engine) TargetVerdict(provider, model, connection string) TargetVerdict {
	st := e.peekTarget(e.opt.Settings.Snapshot(), leafTarget{Target: routing.Target{Provider: provider, Model: model,
		Connection: connection}}, nil)
	return TargetVerdict{Skip: st.skip, Reason: st.reason, Until: st.until, Saturated: st.saturated}
}
