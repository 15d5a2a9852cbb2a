package proxy

import (
	"net/http"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// fail classifies a failed attempt, applies it to the connection's state and says whether the
// request may go on elsewhere or be retried.
func (e *Engine) fail(c *call, conn *catalog.ConnEntry, res attemptResult) failure {
	if res.noToken {
		return tokenFailure(res)
	}
	r := c.snap.Resilience()
	status := res.status
	if res.hidden {
		status = http.StatusOK // the classifier reads an error hidden in a 200 by its own code and type
	}
	in := resilience.Input{Status: status, Header: res.header, Body: string(res.errBody),
		Provider: c.t.provider.Name, AuthType: resilience.AuthType(conn.AuthType), Now: e.opt.Clock.Now(),
		Rules: toRules(r.ErrorRules), Restatements: toRestatements(r.StatusRestatements)}
	out := resilience.Classify(in)
	if res.transport {
		out.Message = res.err.Msg.String()
	}
	if out.Scope == resilience.ScopeConnection || out.Terminal != resilience.TerminalNone {
		e.opt.Observer.ConnectionFailure(c.t.provider.Name, string(out.Reason))
	}
	e.opt.Cooldowns.RecordFailure(conn.ID, out, cooldownPolicy(r.ConnectionCooldown, conn.AuthType))
	// A used-up usage window is the account's, not the model's; a stored response another
	// connection holds is the request's: neither locks the model.
	if out.Status > 0 && !out.UntilReset && out.Code != resilience.CodeStoredStateMissing {
		e.opt.Lockouts.RecordFailure(c.t.provider.Name, conn.ID, c.t.model, out.Status, string(out.Reason), out.Cooldown, out.FromUpstream)
	}
	f := failure{err: res.err, outcome: out, result: resilience.Result{Status: res.status, Transport: res.transport && !res.localTimeout,
		LocalTimeout: res.localTimeout, Duration: e.opt.Clock.Since(c.start), Detail: out.Message}}
	if out.Status > 0 {
		f.result.Status = out.Status
	}
	if out.UntilReset {
		// The account used up its own usage window: nothing about the provider, so neither its
		// breaker and health (no verdict) nor its cooldown gate hear of it.
		f.result = resilience.Result{}
	} else if out.Scope == resilience.ScopeConnection || out.Scope == resilience.ScopeProvider || res.transport {
		e.opt.Gate.RecordFailure(c.t.provider.Name, resilience.AuthType(conn.AuthType), r.ProviderCooldown)
	}
	switch {
	case res.localTimeout:
		f.retryable = false // our own timeout: never retried on the same target
	case res.transport:
		f.retryable = true
	default:
		f.retryable = c.retryOn.Match(out.Status)
	}
	answered := res.status
	if res.redirect {
		answered = http.StatusBadGateway // what Classify makes of a redirect
	}
	if out.Status != answered && out.Status > 0 { // restated: the client sees the restated answer
		f.err = &errs.Error{Code: errs.CodeForStatus(out.Status), Status: out.Status, Reason: "upstream_error", Msg: res.err.Msg,
			RetryAfter: out.RetryAfter}
	} else if out.RetryAfter > 0 && f.err.RetryAfter == 0 {
		f.err.RetryAfter = out.RetryAfter
	}
	// The client's code names what went wrong, as classified; a redirect keeps upstream_redirect
	// (its class, server_error, would hide it) unless a restatement made it another answer.
	if res.status > 0 && out.Reason != "" && (!res.redirect || f.err != res.err) {
		f.err.Reason = string(out.Reason)
	}
	attrs := []any{"provider", c.t.provider.Name, "connection_id", conn.ID, "status", res.status, "reason", out.Reason,
		"scope", out.Scope, "terminal", out.Terminal, "failover", out.Failover}
	if res.redirect {
		attrs = append(attrs, "location", res.location)
	}
	e.opt.Log.Info("upstream attempt failed", attrs...)
	return f
}

func cooldownPolicy(cc settings.ConnectionCooldown, authType string) resilience.CooldownPolicy {
	p := cc.APIKey
	if authType == catalog.AuthOAuth {
		p = cc.OAuth
	}
	return resilience.CooldownPolicy{Base: ms(p.BaseCooldownMS), MaxSteps: p.MaxBackoffSteps,
		Max: ms(cc.MaxCooldownMS), UseHints: p.UseUpstreamRetryHints}
}

func toRules(in []settings.ErrorRule) []resilience.Rule {
	if len(in) == 0 {
		return nil
	}
	out := make([]resilience.Rule, len(in))
	for i, r := range in {
		out[i] = resilience.Rule{Name: r.Name, Provider: r.Provider, Statuses: r.Statuses, HeaderMatches: r.HeaderMatches,
			BodyMarkers: r.BodyMarkers, ExcludeMarkers: r.ExcludeMarkers, Reason: resilience.Reason(r.Reason),
			Scope: resilience.Scope(r.Scope), Cooldown: ms(r.CooldownMS), Terminal: resilience.Terminal(r.Terminal)}
	}
	return out
}

func toRestatements(in []settings.StatusRestatement) []resilience.Restatement {
	if len(in) == 0 {
		return nil
	}
	out := make([]resilience.Restatement, len(in))
	for i, r := range in {
		out[i] = resilience.Restatement{Name: r.Name, Provider: r.Provider, FromStatus: r.FromStatus,
			HeaderMatches: r.HeaderMatches, BodyMarkers: r.BodyMarkers, ExcludeMarkers: r.ExcludeMarkers,
			ToStatus: r.ToStatus, RetryAfter: ms(r.RetryAfterMS)}
	}
	return out
}
