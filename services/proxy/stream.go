package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
)

var (
	doneLine      = []byte("data: [DONE]")
	incompleteEvt = []byte(`data: {"error":{"message":"the upstream stream ended before it was complete","type":"upstream_error","code":"stream_incomplete"}}` + "\n\n")
)

// relayStream copies an upstream SSE body to the client event by event, flushing after each, and
// closes a stream that ends without its terminal event with an explicit stream_incomplete event.
// It reports whether the stream was complete.
func relayStream(ctx context.Context, w http.ResponseWriter, body io.Reader, log *slog.Logger) bool {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	br := bufio.NewReaderSize(body, 32<<10)
	var event []byte
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			event = append(event, line...)
			continue
		}
		if len(line) > 0 {
			event = append(event, line...)
			trimmed := bytes.TrimRight(line, "\r\n")
			if bytes.Equal(trimmed, doneLine) {
				done = true
			}
			if len(trimmed) == 0 { // blank line: the event is complete
				if _, werr := w.Write(event); werr != nil {
					return done
				}
				_ = rc.Flush()
				event = event[:0]
			}
		}
		if err != nil {
			if len(bytes.TrimSpace(event)) > 0 && done {
				// The upstream closed without the final blank line after [DONE].
				_, _ = w.Write(append(event, '\n'))
				_ = rc.Flush()
			}
			if ctx.Err() != nil {
				return done // the client left; nothing to tell it
			}
			if !done {
				if err != io.EOF {
					log.Warn("upstream stream broke", "error", err)
				}
				_, _ = w.Write(incompleteEvt)
				_ = rc.Flush()
			}
			return done
		}
	}
}
