package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"switchyard/services/proxy/convo"

	"switchyard/services/resilience"
)

var doneLine = []byte("data: [DONE]")

// readEvent reads one SSE event (up to and including its blank line). At the end of the body it
// returns what was read with the read error.
func readEvent(br *bufio.Reader) ([]byte, error) { return readEventInto(br, nil) }

// eventBuffered reports whether br holds a whole event already, one readEventInto returns
// without reading from the upstream: a line with more than white space, then a blank line.
func eventBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	content := false
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		line := b[:i]
		b = b[i+1:]
		switch {
		case len(bytes.TrimRight(line, "\r")) == 0:
			if content {
				return true
			}
		case len(bytes.TrimSpace(line)) > 0:
			content = true
		}
	}
}

// readEventInto is readEvent appending to buf[:0], so a relay can reuse one buffer.
func readEventInto(br *bufio.Reader, buf []byte) ([]byte, error) {
	ev := buf[:0]
	for {
		line, err := br.ReadSlice('\n')
		ev = append(ev, line...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return ev, err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			if len(bytes.TrimSpace(ev)) == 0 { // stray blank lines between events
				ev = ev[:0]
				continue
			}
			return ev, nil
		}
	}
}

// streamError reports whether an SSE event carries an error object in its data.
func streamError(ev []byte) (data string, embeddedStatus int, ok bool) {
	for _, line := range bytes.Split(ev, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		d, found := bytes.CutPrefix(line, []byte("data:"))
		if !found {
			continue
		}
		d = bytes.TrimSpace(d)
		if _, _, _, st, isErr := resilience.ExtractError(d); isErr {
			return string(d), st, true
		}
	}
	return "", 0, false
}

// hasDone reports whether ev has a line that is exactly the [DONE] data line (a trailing \r
// allowed).
func hasDone(ev []byte) bool {
	for from := 0; ; {
		i := bytes.Index(ev[from:], doneLine)
		if i < 0 {
			return false
		}
		i += from
		from = i + 1
		atLineStart := i == 0 || ev[i-1] == '\n'
		tail := bytes.TrimLeft(ev[i+len(doneLine):], "\r")
		if atLineStart && (len(tail) == 0 || tail[0] == '\n') {
			return true
		}
	}
}

// Stream ends, as the request log names them: "" for a stream that reached its terminal event,
// else why it did not (the abort kinds of watchdog.go are ends too).
const (
	endIncomplete  = "stream_incomplete"     // the upstream's stream broke before its end
	endUpstreamErr = "upstream_stream_error" // the upstream ended it with its own error event
	endFailed      = "response_failed"       // a Responses stream that ended in response.failed
	endCut         = "response_incomplete"   // … in response.incomplete (an answer cut short)
	endClientGone  = "client_closed"         // the client went away
)

// relayStream writes the held events and then the rest of the upstream SSE body to the client,
// event by event through the relay (as they came, or translated), flushing after each, while the
// watchdog watches the upstream's events. A stream that ends without its terminal event is
// closed with an explicit error event in the client's format — stream_incomplete, or the code of
// the watchdog that ended it — unless the upstream's own error event already told the client
// why. It returns how the stream ended ("" = complete).
//
// clean scrubs an event that carries an error (an upstream may echo the credential in an error
// event at any point of a stream); each event is looked at once (lookEvent), for the watchdog,
// the scrub, the usage and the relay.
//
// written runs after the first bytes reached the client (time to first token).
func relayStream(ctx context.Context, w http.ResponseWriter, commit func(), res *attemptResult, log *slog.Logger,
	r streamRelay, src Format, clean func([]byte) []byte, written func()) string {
	defer res.wd.stop()
	// A translating relay reads the usage with everything else of each event; only a stream
	// passed through has it sniffed here.
	ur, readsUsage := r.(interface{ Usage() convo.Usage })
	if readsUsage {
		defer func() { res.usage.take(ur.Usage()) }()
	}
	commit()
	rc := http.NewResponseController(w)
	// Events are flushed to the client before the relay could wait for the upstream: events
	// that arrived together leave together, in one write, as a proxy that copies what each read
	// brings would send them; none waits behind a read.
	pending := false // written to w, not yet flushed
	flush := func() {
		if pending {
			pending = false
			_ = rc.Flush()
			written()
		}
	}
	defer flush()
	var out []byte // one buffer for the client's bytes of every event
	send := func(ev []byte, l *eventLook) bool {
		if l.scrub {
			ev = clean(ev)
		}
		if !readsUsage && l.usage {
			res.usage.observe(ev)
		}
		if res.stored != nil && l.terminal && !l.failed {
			res.stored.observeEvent(l.data)
		}
		out = r.Event(out[:0], ev, *l)
		if len(out) == 0 {
			return true
		}
		if _, err := w.Write(out); err != nil {
			return false
		}
		pending = true
		return true
	}
	dst := res.wd.format
	for i, ev := range res.held {
		res.held[i] = nil // relayed: the event's memory may go
		// The watchdog saw the event when it was held; the relay looks at it now.
		l := lookEvent(dst, ev)
		if !send(ev, &l) {
			return endClientGone
		}
	}
	if r.Done() || res.done {
		return relayEnd(r)
	}
	var buf []byte // one buffer for every upstream event: each is relayed before the next is read
	for {
		if !eventBuffered(res.br) {
			flush()
		}
		ev, err := readEventInto(res.br, buf)
		buf = ev
		// An event cut by the end of the body is relayed only when it is whole anyway (a last
		// event without its blank line); a partial one would corrupt the client's parse.
		if len(bytes.TrimSpace(ev)) > 0 && (err == nil || wholeEvent(ev)) {
			l := lookEvent(dst, ev)
			res.wd.observe(l.kind, l.useful)
			if !send(ev, &l) {
				return endClientGone
			}
		}
		if r.Done() {
			return relayEnd(r)
		}
		if err != nil {
			kind := res.wd.stop()
			if kind == "" && ctx.Err() != nil {
				return endClientGone // the client left; nothing to tell it
			}
			if er, ok := r.(interface{ Errored() bool }); ok && er.Errored() && kind == "" {
				return endUpstreamErr // the client has the upstream's own error event: nothing to add
			}
			end, msg := endIncomplete, incompleteText
			if kind != "" {
				end, msg = kind, res.wd.text(kind)
				log.Warn("stream watchdog ended the stream", "kind", kind)
			} else if err != io.EOF {
				log.Warn("upstream stream broke", "error", err)
			}
			if ab, ok := r.(interface {
				Abort(dst []byte, code, msg string) []byte
			}); ok {
				_, _ = w.Write(ab.Abort(nil, end, msg))
			} else {
				_, _ = w.Write(abortEvent(src, end, msg))
			}
			pending = true // the deferred flush sends it
			return end
		}
	}
}

// relayEnd is how a stream that reached its terminal event ended: complete, or the upstream's
// error, failed or cut short as the client's format says it.
func relayEnd(r streamRelay) string {
	if f, ok := r.(interface{ Failed() bool }); ok && f.Failed() {
		return endFailed
	}
	if c, ok := r.(interface{ Cut() bool }); ok && c.Cut() {
		return endCut
	}
	if er, ok := r.(interface{ Errored() bool }); ok && er.Errored() {
		return endUpstreamErr
	}
	return ""
}

const incompleteText = "the upstream stream ended before it was complete"

// abortEvent is the error event that ends a client's stream of format src (chat completions or
// messages; a Responses relay writes its own, in sequence), with code and message.
func abortEvent(src Format, code, msg string) []byte {
	c, _ := json.Marshal(code)
	m, _ := json.Marshal(msg)
	if src == FormatMessages {
		// Anthropic's error event; code is ours, beside the standard fields.
		return []byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":" + string(m) +
			",\"code\":" + string(c) + "}}\n\n")
	}
	return []byte("data: {\"error\":{\"message\":" + string(m) + ",\"type\":\"upstream_error\",\"code\":" + string(c) +
		",\"param\":null}}\n\n")
}

// wholeEvent reports whether an event read up to the end of the body is complete: its data is
// [DONE] or a whole JSON document.
func wholeEvent(ev []byte) bool {
	_, data := convo.ParseEvent(ev)
	data = bytes.TrimSpace(data)
	return bytes.HasPrefix(data, []byte("[DONE]")) || (len(data) > 0 && json.Valid(data))
}

// terminate makes sure an event ends with its blank line.
func terminate(ev []byte) []byte {
	switch {
	case bytes.HasSuffix(ev, []byte("\n\n")), bytes.HasSuffix(ev, []byte("\r\n\r\n")):
		return ev
	case bytes.HasSuffix(ev, []byte("\n")):
		return append(ev, '\n')
	}
	return append(ev, '\n', '\n')
}
