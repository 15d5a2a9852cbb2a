package proxy

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/proxy/convo"
)

// maxHeldBeforeContent bounds what a stream may send before its first content event (metadata,
// pings) that is held back: beyond it the stream goes to the client as it is.
const maxHeldBeforeContent = 256 << 10

// streamStart reads a stream's beginning before anything goes to the client: the events up to the
// first content event, and with the recovery hold-back on, the first hold_ms / hold_bytes after
// it. Until then a failure (an error event, a break, a watchdog) is an attempt that failed: it is
// retried or fails over, and the client sees nothing of it. The watchdog started here watches the
// rest of the stream; cancel ends the attempt's context when one fires.
func (e *Engine) streamStart(c *call, conn *catalog.ConnEntry, resp *http.Response, cancel context.CancelFunc) attemptResult {
	p := c.t.provider
	st := c.snap.Resilience().Streams
	wd := startWatchdog(e.opt.Clock, c.dst, c.watchConfig(), cancel)
	fail := func(r attemptResult) attemptResult {
		resp.Body.Close()
		if kind := wd.stop(); kind != "" {
			return abortedAttempt(p.Name, kind, resp.Header)
		}
		return r
	}
	br := bufio.NewReaderSize(resp.Body, streamReadBuffer)
	res := attemptResult{resp: resp, br: br, status: resp.StatusCode, header: resp.Header, wd: wd}
	held, holdUntil := 0, time.Time{}
	for {
		ev, rerr := readEvent(br)
		whole := len(bytes.TrimSpace(ev)) > 0 && (rerr == nil || wholeEvent(ev))
		if whole {
			if containsMark(ev, errorWord) {
				if msg, embedded, ok := streamError(ev); ok {
					return fail(hiddenError(p.Name, resp.Header, embedded, []byte(e.scrub(msg, c, conn))))
				}
			}
			l := lookEvent(c.dst, ev)
			wd.observe(l.kind, l.useful)
			res.held = append(res.held, ev)
			held += len(ev)
			if l.terminal {
				res.done = true
				return res
			}
			if l.kind != evMeta && holdUntil.IsZero() {
				if !st.Recovery.Enabled || st.Recovery.HoldMS == 0 || st.Recovery.HoldBytes == 0 {
					return res
				}
				holdUntil = e.opt.Clock.Now().Add(ms(st.Recovery.HoldMS))
			}
		}
		if rerr != nil {
			// Nothing reached the client: a break now is a failed attempt, which another
			// connection or target may serve.
			return fail(transportFailure(p.Name, rerr))
		}
		switch {
		case !holdUntil.IsZero() && (held >= int(st.Recovery.HoldBytes) || !e.opt.Clock.Now().Before(holdUntil)):
			return res
		case holdUntil.IsZero() && held > maxHeldBeforeContent:
			return res
		}
	}
}

var errorWord = []byte("error")

// watchConfig is the stream timeouts of the call, from its settings snapshot.
func (c *call) watchConfig() watchConfig {
	st := c.snap.Resilience().Streams
	reasoning := c.reasoning || reasoningModel(c.t.model)
	return watchConfig{readiness: readinessFor(st, len(c.body), reasoning), idle: ms(st.IdleTimeoutMS),
		total: ms(st.TotalTimeoutMS), tp: st.ThroughputWatchdog}
}

// reasoningField tells from one top-level field of a request whether it asks the model to think
// first: Anthropic's thinking (not disabled), OpenAI's reasoning_effort or Responses' reasoning
// object (an effort above minimal). DecodeRequest calls it on its one walk over the fields, so no
// search of the whole body runs per stream (tens of microseconds on an agent's request), and a
// mark quoted in a message or a tool's schema does not count.
func reasoningField(k, v string) bool {
	switch k {
	case "thinking":
		return convo.Kind(v) == '{' && gjson.Get(v, "type").String() != "disabled"
	case "reasoning_effort":
		return convo.Kind(v) == '"' && effortAsks(v)
	case "reasoning":
		return convo.Kind(v) == '{' && effortAsks(gjson.Get(v, "effort").Raw)
	}
	return false
}

// effortAsks: an effort (a JSON value) other than none or minimal asks for reasoning; a reasoning
// object without one (or with null) asks for the model's default.
func effortAsks(v string) bool {
	switch convo.Str(v) {
	case "none", "minimal":
		return false
	}
	return true
}

// reasoningModel reports whether a model thinks before it answers even when the request does not
// ask it to (OpenAI's o-series and GPT-5 reason by default, and a chat stream shows nothing of
// it): its readiness timeout is the adaptive maximum.
func reasoningModel(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "codex"} {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return strings.Contains(m, "reason") || strings.Contains(m, "thinking") || strings.Contains(m, "-r1")
}

// abortedAttempt is an attempt a stream watchdog ended before anything reached the client: a
// gateway timeout (504) of the gateway's own making, which moves on to another connection or
// target.
func abortedAttempt(provider, kind string, h http.Header) attemptResult {
	e := fail(errs.Timeout, kind, "proxy."+kind, provider)
	return attemptResult{status: http.StatusGatewayTimeout, header: h, err: e, aborted: kind, localTimeout: true}
}
