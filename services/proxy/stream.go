package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"

	"switchyard/services/resilience"
)

var (
	doneLine      = []byte("data: [DONE]")
	incompleteEvt = []byte(`data: {"error":{"message":"the upstream stream ended before it was complete","type":"upstream_error","code":"stream_incomplete"}}` + "\n\n")
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

func hasDone(ev []byte) bool {
	for rest := ev; ; {
		i := bytes.Index(rest, doneLine)
		if i < 0 {
			return false
		}
		end := rest[i+len(doneLine):]
		atLineStart := i == 0 || rest[i-1] == '\n'
		tail := bytes.TrimLeft(end, "\r")
		atLineEnd := len(tail) == 0 || tail[0] == '\n'
		if atLineStart && atLineEnd {
			return true
		}
		rest = end
	}
}

// relayStream writes the first event and then copies the rest of the upstream SSE body to the
// client event by event, flushing after each. A stream that ends without its terminal event is
// closed with an explicit stream_incomplete event. It reports whether the stream was complete.
//
// onEvent sees every relayed event after it was written (for time to first token and usage).
func relayStream(ctx context.Context, w http.ResponseWriter, commit func(), first []byte, br *bufio.Reader, log *slog.Logger,
	onEvent func(ev []byte)) bool {
	commit()
	rc := http.NewResponseController(w)
	done := hasDone(first)
	if _, err := w.Write(terminate(first)); err != nil {
		return done
	}
	_ = rc.Flush()
	onEvent(first)
	if done {
		return true
	}
	var buf []byte // one buffer for every event: each is written before the next is read
	for {
		ev, err := readEventInto(br, buf)
		buf = ev
		if len(bytes.TrimSpace(ev)) > 0 && (err == nil || hasDone(ev)) {
			done = done || hasDone(ev)
			if _, werr := w.Write(terminate(ev)); werr != nil {
				return done
			}
			_ = rc.Flush()
			onEvent(ev)
		}
		if done {
			return true
		}
		if err != nil {
			if ctx.Err() != nil {
				return false // the client left; nothing to tell it
			}
			if err != io.EOF {
				log.Warn("upstream stream broke", "error", err)
			}
			_, _ = w.Write(incompleteEvt)
			_ = rc.Flush()
			return false
		}
	}
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
