package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/resilience"
)

// attemptResult is one upstream call: either a response ready to relay, or a failure.
type attemptResult struct {
	resp *http.Response
	br   *bufio.Reader // for streams: the body, with the held events already read
	// held is a stream's events read before any went to the client: up to the first content
	// event (and the recovery hold-back), in order. wd watches the rest of the stream.
	held   [][]byte
	done   bool // the held events end the stream
	wd     *watchdog
	body   []byte  // for buffered answers: the whole body
	pooled *[]byte // body's buffer: back to the pool once delivered (or discarded)
	status int
	header http.Header

	translated bool // body is already in the client's format
	// usage is what the upstream's usage objects said (the answer's, or the stream's so far).
	usage        usageSeen
	hidden       bool // the error came inside an HTTP 200
	err          *errs.Error
	errBody      []byte
	transport    bool // no (complete) answer
	localTimeout bool // our own timeout fired
	noToken      bool // no usable token for the account: nothing was sent
	// aborted names the stream watchdog that ended the attempt before anything reached the
	// client (stream_readiness_timeout, …); a local decision, not the upstream's failure.
	aborted string
	// redirect is set when the upstream answered a redirect (status is its 3xx), which is never
	// followed: a failure like a 502. location is its target, scrubbed for the log and the chain.
	redirect bool
	location string
	// stored, when set, reads what a Responses stream's answer stored (stored.go).
	stored *storedCall
}

// attempt makes one upstream call. cancel ends ctx; the first-byte timeout uses it when the
// upstream sends no response headers in time (a local timeout: never retried on the same target).
func (e *Engine) attempt(ctx context.Context, cancel context.CancelFunc, c *call, conn *catalog.ConnEntry) attemptResult {
	p := c.t.provider
	body, header, base, nores := e.outgoing(ctx, c, conn)
	if nores != nil {
		return *nores
	}
	if base == "" {
		base = p.BaseURL
	}
	dialCtx := withConnectTimeout(ctx, ms(c.snap.Resilience().Streams.ConnectTimeoutMS))
	req, err := e.newUpstreamRequest(dialCtx, base, c.path, body, header)
	if err != nil {
		return attemptResult{err: &errs.Error{Code: errs.Internal, Msg: errs.M("err.internal"), Err: err}}
	}
	limits := c.limits
	if limits == nil { // a call made outside work's loop (tests): the first-byte limit alone
		limits = newAttemptLimits(e.opt.Clock, cancel, time.Time{}, 0)
	}
	firstByte := ms(c.snap.Resilience().Streams.FirstByteTimeoutMS)
	limits.awaitHeaders(firstByte)
	resp, err := e.rt.RoundTrip(req)
	limits.gotHeaders()
	if err != nil {
		if limits.firstByteLate() {
			r := transportFailure(p.Name, context.DeadlineExceeded)
			r.err.Msg = errs.M("proxy.first_byte_timeout", p.Name, firstByte.String())
			return r
		}
		return transportFailure(p.Name, err)
	}
	if isRedirect(resp.StatusCode) {
		resp.Body.Close()
		return redirectFailure(p.Name, resp, e.scrubLocation(req, resp, c, conn))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		b = e.scrubBytes(b, c, conn)
		return attemptResult{status: resp.StatusCode, header: resp.Header, errBody: b,
			err: upstreamError(p.Name, resp.StatusCode, resp.Header, b)}
	}
	if c.stream && isEventStream(resp.Header) {
		return e.streamStart(c, conn, resp, cancel)
	}
	if !c.stream && e.codexAccount(conn) {
		return e.codexAnswer(c, conn, resp) // the Codex backend answers with a stream only
	}
	b, buf, failed, ok := e.readAnswer(p.Name, resp)
	if !ok {
		return failed
	}
	if !containsMark(b, errorKey) {
		// no error object possible: skip the parse
	} else if _, _, _, embedded, ok := resilience.ExtractError(b); ok {
		return hiddenError(p.Name, resp.Header, embedded, e.scrubBytes(b, c, conn))
	}
	if c.stream {
		// A stream was asked for and a plain answer came: the upstream broke the protocol.
		return protocolFailure(p.Name, resp.Header, e.scrubBytes(b, c, conn), "proxy.protocol_not_stream")
	}
	if !looksLikeJSON(b) {
		return protocolFailure(p.Name, resp.Header, e.scrubBytes(b, c, conn), "proxy.protocol_not_json")
	}
	if c.src != c.dst {
		tb, tbuf, seen, err := c.translateBody(b) // the usage is read in the upstream's format, with the rest
		if err != nil {
			return protocolFailure(p.Name, resp.Header, e.scrubBytes(b, c, conn), "proxy.protocol_not_json")
		}
		releaseAnswer(buf) // the translation is a copy: nothing refers to the upstream's answer
		return attemptResult{resp: resp, body: tb, pooled: tbuf, status: resp.StatusCode, header: resp.Header, translated: true, usage: seen}
	}
	var seen usageSeen
	seen.observe(b)
	return attemptResult{resp: resp, body: b, pooled: buf, status: resp.StatusCode, header: resp.Header, usage: seen}
}

// discard lets go of an answer that will not be delivered (its attempt ran out of time as it
// arrived): the body is closed and the stream's watchdog stopped. A failed attempt has neither.
func (r *attemptResult) discard() {
	r.wd.stop()
	if r.resp != nil && r.br != nil {
		r.resp.Body.Close()
	}
	releaseAnswer(r.pooled)
	r.pooled = nil
}

// redirectFailure is a redirect the upstream answered: not followed (the call would go, with its
// credential and body, wherever the upstream points), but failed like the 502 it amounts to, so
// it is retried, fails over and counts for the breaker as a server error does. The client is told
// where it pointed, without credentials.
func redirectFailure(provider string, resp *http.Response, location string) attemptResult {
	target := location
	if target == "" {
		target = "(no Location)"
	}
	e := &errs.Error{Code: errs.Upstream, Status: http.StatusBadGateway, Reason: "upstream_redirect",
		Msg: errs.M("proxy.upstream_redirect", provider, resp.StatusCode, target)}
	return attemptResult{status: resp.StatusCode, header: resp.Header, err: e, redirect: true, location: location}
}

// looksLikeJSON is the cheap check that a success body is a JSON document: its first byte. A
// web page or a proxy's plain-text notice labelled as JSON fails it.
func looksLikeJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// protocolFailure is a success status with an answer the client's request cannot have come
// from (no stream for a stream request, no JSON for a JSON request): the upstream's failure,
// classified as the 502 it amounts to.
func protocolFailure(provider string, h http.Header, body []byte, key string) attemptResult {
	e := fail(errs.Upstream, "upstream_protocol_error", key, provider, strings.TrimSpace(snippet(body)))
	return attemptResult{status: http.StatusBadGateway, header: h, errBody: body, err: e}
}

var errorKey = []byte(`"error"`)

// readAnswer reads a whole answer of at most MaxResponseBytes and closes its body; a read error or
// a larger answer is the failed attempt it returns with ok false. The answer is read into a
// buffer from the answer pool; buf is that buffer, for whoever writes the answer to give back
// (releaseAnswer) once nothing refers to b any more. A buffer not given back is left to the
// collector, so a failure that keeps b (its error body) simply does not give it back.
func (e *Engine) readAnswer(provider string, resp *http.Response) (b []byte, buf *[]byte, failed attemptResult, ok bool) {
	buf = answerBufs.Get().(*[]byte)
	b, err := readBody(resp.Body, resp.ContentLength, e.opt.MaxResponseBytes+1, (*buf)[:0])
	resp.Body.Close()
	*buf = b
	if err != nil {
		releaseAnswer(buf)
		return nil, nil, transportFailure(provider, err), false
	}
	if int64(len(b)) > e.opt.MaxResponseBytes {
		releaseAnswer(buf)
		return nil, nil, attemptResult{status: http.StatusBadGateway, err: fail(errs.Upstream, "upstream_response_too_large", "proxy.response_too_large")}, false
	}
	return b, buf, attemptResult{}, true
}

// minAnswerRead is the least room readBody gives a read of an answer of unknown length.
const minAnswerRead = 4 << 10

// readBody appends a whole upstream answer of at most limit bytes to dst, which is first given
// room for the Content-Length (size) when it is known and within the limit, plus one byte, so
// the read that meets the end needs no more room. (bytes.Buffer.ReadFrom and io.ReadAll make
// room for 512 bytes more before every read, which for an answer of known length means a second
// buffer of twice its size and a copy into it, on every call.)
func readBody(r io.Reader, size, limit int64, dst []byte) ([]byte, error) {
	if size >= 0 && size < limit && int64(cap(dst)) < size+1 {
		dst = make([]byte, 0, size+1)
	}
	for int64(len(dst)) < limit {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, max(len(dst), minAnswerRead)) // double, from 4 KiB
		}
		room := dst[len(dst):cap(dst)]
		if rest := limit - int64(len(dst)); int64(len(room)) > rest {
			room = room[:rest]
		}
		n, err := r.Read(room)
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// hiddenError is an error object inside an HTTP 200: treated as the error it is, with its
// embedded status, else 502.
func hiddenError(provider string, h http.Header, embedded int, body []byte) attemptResult {
	status := embedded
	if status < 400 || status > 599 {
		status = http.StatusBadGateway
	}
	e := upstreamError(provider, status, h, body)
	e.Reason = "upstream_error_in_200"
	return attemptResult{status: status, header: h, errBody: body, err: e, hidden: true}
}

func transportFailure(provider string, err error) attemptResult {
	r := attemptResult{transport: true, err: fail(errs.Upstream, "upstream_unreachable", "proxy.unreachable", provider, transportText(err))}
	if errors.Is(err, context.DeadlineExceeded) {
		r.localTimeout = true
		r.err.Code, r.err.Reason = errs.Timeout, "upstream_timeout"
	}
	return r
}
