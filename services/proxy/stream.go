package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"

	"switchyard/services/proxy/translate"
	"switchyard/services/resilience"
)

var (
	doneLine      = []byte("data: [DONE]")
	incompleteEvt = []byte(`data: {"error":{"message":"the upstream stream ended before it was complete","type":"upstream_error","code":"stream_incomplete","param":null}}` + "\n\n")
	// incompleteMessagesEvt is Anthropic's error event; code is ours, beside the standard fields.
	incompleteMessagesEvt = []byte("event: error\ndata: " +
		`{"type":"error","error":{"type":"api_error","message":"the upstream stream ended before it was complete","code":"stream_incomplete"}}` + "\n\n")
)

// readEvent reads one SSE event (up to and including its blank line). At the end of the body it
// returns what was read with the read error.
func readEvent(br *bufio.Reader) ([]byte, error) { return readEventInto(br, nil) }

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

// relayStream writes the first event and then the rest of the upstream SSE body to the client,
// event by event through the relay (as they came, or translated), flushing after each. A stream
// that ends without its terminal event is closed with an explicit stream_incomplete error event in
// the client's format, unless the upstream's own error event already told the client why. It
// reports whether the stream was complete.
//
// clean scrubs an event that carries an error (an upstream may echo the credential in an error
// event at any point of a stream); other events pass the cheap errorEvent check only.
//
// written runs after the first bytes reached the client (time to first token).
func relayStream(ctx context.Context, w http.ResponseWriter, commit func(), first []byte, br *bufio.Reader, log *slog.Logger,
	r streamRelay, src Format, clean func([]byte) []byte, written func()) bool {
	commit()
	rc := http.NewResponseController(w)
	var out []byte // one buffer for the client's bytes of every event
	send := func(ev []byte) bool {
		if errorEvent(ev) {
			ev = clean(ev)
		}
		out = r.Event(out[:0], ev)
		if len(out) == 0 {
			return true
		}
		if _, err := w.Write(out); err != nil {
			return false
		}
		_ = rc.Flush()
		written()
		return true
	}
	if !send(first) || r.Done() {
		return r.Done()
	}
	var buf []byte // one buffer for every upstream event: each is relayed before the next is read
	for {
		ev, err := readEventInto(br, buf)
		buf = ev
		// An event cut by the end of the body is relayed only when it is whole anyway (a last
		// event without its blank line); a partial one would corrupt the client's parse.
		if len(bytes.TrimSpace(ev)) > 0 && (err == nil || wholeEvent(ev)) {
			if !send(ev) {
				return r.Done()
			}
		}
		if r.Done() {
			return true
		}
		if err != nil {
			if ctx.Err() != nil {
				return false // the client left; nothing to tell it
			}
			if err != io.EOF {
				log.Warn("upstream stream broke", "error", err)
			}
			if er, ok := r.(interface{ Errored() bool }); ok && er.Errored() {
				return false // the client has the upstream's own error event: nothing to add
			}
			if ic, ok := r.(interface{ Incomplete([]byte) []byte }); ok {
				_, _ = w.Write(ic.Incomplete(nil))
			} else {
				_, _ = w.Write(incompleteEvent(src))
			}
			_ = rc.Flush()
			return false
		}
	}
}

// wholeEvent reports whether an event read up to the end of the body is complete: its data is
// [DONE] or a whole JSON document.
func wholeEvent(ev []byte) bool {
	_, data := translate.ParseEvent(ev)
	data = bytes.TrimSpace(data)
	return bytes.HasPrefix(data, []byte("[DONE]")) || (len(data) > 0 && json.Valid(data))
}

// incompleteEvent is the error event that closes a stream the upstream left unfinished.
func incompleteEvent(src Format) []byte {
	if src == FormatMessages {
		return incompleteMessagesEvt
	}
	return incompleteEvt
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
