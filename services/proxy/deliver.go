package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/redact"
)

// deliver writes a successful attempt to the client.
func (e *Engine) deliver(ctx context.Context, w http.ResponseWriter, c *call, conn *catalog.ConnEntry, res attemptResult) *errs.Error {
	c.out.delivered, c.answered = true, e.opt.Clock.Now()
	e.storedServed(c, conn)
	h := w.Header()
	h.Set("X-Switchyard-Provider", c.t.provider.Name)
	h.Set(RouteHeader, c.trace.route())
	c.trace.Status = res.status
	if res.body != nil {
		if ct := res.resp.Header.Get("Content-Type"); ct != "" && !res.translated {
			h.Set("Content-Type", ct)
		} else {
			h.Set("Content-Type", "application/json")
		}
		if c.src == FormatMessages && !res.translated && c.asked != "" {
			res.body, res.pooled = namingModel(res.body, res.pooled, c.asked)
		}
		h.Set("Content-Length", strconv.Itoa(len(res.body)))
		setDate(h)
		w.WriteHeader(res.status)
		if c.stored.record {
			c.stored.observeAnswer(res.body)
		}
		_, _ = w.Write(res.body)
		// Send it all now: the request log and metrics run after the handler returns and must
		// not delay the answer.
		_ = http.NewResponseController(w).Flush()
		releaseAnswer(res.pooled) // written: nothing refers to it any more
		e.account(c, conn, &res.usage)
		return nil
	}
	defer res.resp.Body.Close()
	r := c.relay()
	if c.stored.record {
		res.stored = &c.stored
	} else if b, ok := r.(*bridge); ok && c.keepItem != nil {
		b.keep = c.keepItem
	}
	var secrets []string // looked up at the first error event, if one comes
	clean := func(ev []byte) []byte {
		if secrets == nil {
			secrets = e.secrets(c, conn)
		}
		return redact.Bytes(ev, secrets...)
	}
	end := relayStream(ctx, w, func() { c.out.commitStream(w, c.trace) }, &res, e.opt.Log, r, c.src, clean, func() {
		if c.trace.TTFT == 0 {
			c.trace.TTFT = e.opt.Clock.Since(c.start)
			e.opt.Observer.FirstToken(c.t.provider.Name, c.trace.TTFT)
		}
	})
	if r.Done() || res.done {
		finishStream(res.br, res.wd.abort)
	}
	c.trace.Complete, c.trace.StreamEnd = end == "", end
	if end != "" {
		c.trace.ErrorCode = end
		e.opt.Observer.StreamEnd(c.t.provider.Name, end, false)
	}
	e.account(c, conn, &res.usage)
	return nil
}

// Bounds on reading what follows a stream's terminal event (see finishStream).
const (
	streamTailWait  = 250 * time.Millisecond
	streamTailBytes = 64 << 10
)

// finishStream reads an upstream stream whose terminal event was relayed to its end, so its
// connection goes back to the pool: a body closed before its end (the chunked body's last
// chunk, which follows the terminal event) closes the connection, and the next request dials
// anew, on TLS with a handshake. The client already has the whole stream; an upstream that
// sends more or holds the stream open after its terminal event is waited for no longer than
// streamTailWait (real time: a bound on a socket read, not a policy of the gateway's clock)
// and streamTailBytes, then abort ends the attempt's context and the connection with it.
func finishStream(br *bufio.Reader, abort func()) {
	if br == nil {
		return
	}
	t := time.AfterFunc(streamTailWait, abort)
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, br, streamTailBytes)
}

// account notes what the delivered answer used and cost: its usage as the upstream reported
// it, priced by the upstream's model id. A subscription account's requests cost 0 (their
// tokens still count); a model without a price is left unpriced, never 0.
func (e *Engine) account(c *call, conn *catalog.ConnEntry, seen *usageSeen) {
	u := seen.usage()
	t := c.trace
	t.Usage, t.InputTokens, t.OutputTokens = u, u.Input, u.Output
	switch {
	case conn != nil && conn.AuthType == catalog.AuthOAuth:
		t.CostUSD, t.Priced = 0, true
	case e.opt.Price != nil:
		if p, ok := e.opt.Price(c.t.provider.Name, c.t.provider.Type, c.t.model); ok {
			t.CostUSD, t.Priced = p.Cost(u), true
		}
	}
	e.opt.Observer.Tokens(c.t.provider.Name, t.MetricModel, u.Input, u.Output)
}
