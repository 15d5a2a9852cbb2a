package web

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"switchyard/services/jsonstr"
)

// LogHandler is the process's log handler: slog's text or JSON handler, and beside it the one
// line per request (logRequest) written by hand. That line is the only one every request
// writes; through slog it cost an attribute slice, a record, a caller lookup and the handler's
// generic formatting each time. Here its fields are appended to a pooled buffer, byte for byte
// what the slog handler writes for the same attributes (logline_test.go proves it for awkward
// values), and written in one Write, as slog writes its lines. Every other line goes through
// slog unchanged.
type LogHandler struct {
	slog.Handler
	out   *lockedWriter
	json  bool
	level slog.Leveler
}

// NewLogHandler is slog's text handler (JSON when json is set) writing to w at level and above.
func NewLogHandler(w io.Writer, json bool, level slog.Leveler) *LogHandler {
	out := &lockedWriter{w: w}
	opts := &slog.HandlerOptions{Level: level}
	h := &LogHandler{out: out, json: json, level: level}
	if json {
		h.Handler = slog.NewJSONHandler(out, opts)
	} else {
		h.Handler = slog.NewTextHandler(out, opts)
	}
	return h
}

// lockedWriter serializes the slog handler's writes and the request lines', so no two lines
// ever interleave, whatever the writer underneath.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// requestLine is what logRequest writes about a finished request. The fields past Duration are
// written only when set, as the flags say.
type requestLine struct {
	Level     slog.Level
	RequestID string
	Method    string
	Path      string
	Status    int
	Bytes     int64
	Duration  time.Duration
	ErrorCode string // written when not ""
	// Upstream: a provider served (or was tried for) the request.
	Upstream     bool
	Provider     string
	Model        string
	ConnectionID int64
	Attempts     int
	Stream       bool
	Complete     bool          // streams only
	TTFT         time.Duration // streams only
	Tokens       bool          // input and output tokens are written (upstream requests only)
	InputTokens  int64
	OutputTokens int64
	HasError     bool
	Error        string
}

// attrs are the line's attributes as slog takes them: the reference the hand-written formats
// match, and what a logger with another handler is given.
func (l *requestLine) attrs() []slog.Attr {
	attrs := []slog.Attr{
		slog.String("request_id", l.RequestID),
		slog.String("method", l.Method),
		slog.String("path", l.Path),
		slog.Int("status", l.Status),
		slog.Int64("bytes", l.Bytes),
		slog.Duration("duration", l.Duration),
	}
	if l.ErrorCode != "" {
		attrs = append(attrs, slog.String("error_code", l.ErrorCode))
	}
	if l.Upstream {
		attrs = append(attrs, slog.String("provider", l.Provider), slog.String("model", l.Model),
			slog.Int64("connection_id", l.ConnectionID), slog.Int("attempts", l.Attempts),
			slog.Bool("stream", l.Stream))
		if l.Stream {
			attrs = append(attrs, slog.Bool("complete", l.Complete), slog.Duration("ttft", l.TTFT))
		}
		if l.Tokens {
			attrs = append(attrs, slog.Int64("input_tokens", l.InputTokens), slog.Int64("output_tokens", l.OutputTokens))
		}
	}
	if l.HasError {
		attrs = append(attrs, slog.String("error", l.Error))
	}
	return attrs
}

// logLine writes the request line through log: by hand when log's handler is a LogHandler,
// else through slog. now is the line's time.
func logLine(log *slog.Logger, ctx context.Context, l *requestLine, now time.Time) {
	if h, ok := log.Handler().(*LogHandler); ok {
		h.writeRequest(l, now)
		return
	}
	log.LogAttrs(ctx, l.Level, "request", l.attrs()...)
}

// lineBufs are the buffers request lines are formatted in.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeRequest writes the request line as the slog handler would, if its level is enabled.
func (h *LogHandler) writeRequest(l *requestLine, now time.Time) {
	if l.Level < h.level.Level() {
		return
	}
	bp := lineBufs.Get().(*[]byte)
	var b []byte
	if h.json {
		b = l.appendJSON((*bp)[:0], now)
	} else {
		b = l.appendText((*bp)[:0], now)
	}
	_, _ = h.out.Write(b)
	if cap(b) <= 16<<10 { // a huge error text does not stay pooled
		*bp = b
		lineBufs.Put(bp)
	}
}

// appendText appends the line as slog.TextHandler writes it, newline included.
func (l *requestLine) appendText(b []byte, now time.Time) []byte {
	b = append(b, "time="...)
	b = appendRFC3339Millis(b, now.Round(0))
	b = append(b, " level="...)
	b = append(b, l.Level.String()...)
	b = append(b, " msg=request request_id="...)
	b = appendTextString(b, l.RequestID)
	b = append(b, " method="...)
	b = appendTextString(b, l.Method)
	b = append(b, " path="...)
	b = appendTextString(b, l.Path)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = append(b, " bytes="...)
	b = strconv.AppendInt(b, l.Bytes, 10)
	b = append(b, " duration="...)
	b = append(b, l.Duration.String()...)
	if l.ErrorCode != "" {
		b = append(b, " error_code="...)
		b = appendTextString(b, l.ErrorCode)
	}
	if l.Upstream {
		b = append(b, " provider="...)
		b = appendTextString(b, l.Provider)
		b = append(b, " model="...)
		b = appendTextString(b, l.Model)
		b = append(b, " connection_id="...)
		b = strconv.AppendInt(b, l.ConnectionID, 10)
		b = append(b, " attempts="...)
		b = strconv.AppendInt(b, int64(l.Attempts), 10)
		b = append(b, " stream="...)
		b = strconv.AppendBool(b, l.Stream)
		if l.Stream {
			b = append(b, " complete="...)
			b = strconv.AppendBool(b, l.Complete)
			b = append(b, " ttft="...)
			b = append(b, l.TTFT.String()...)
		}
		if l.Tokens {
			b = append(b, " input_tokens="...)
			b = strconv.AppendInt(b, l.InputTokens, 10)
			b = append(b, " output_tokens="...)
			b = strconv.AppendInt(b, l.OutputTokens, 10)
		}
	}
	if l.HasError {
		b = append(b, " error="...)
		b = appendTextString(b, l.Error)
	}
	return append(b, '\n')
}

// appendJSON appends the line as slog.JSONHandler writes it, newline included.
func (l *requestLine) appendJSON(b []byte, now time.Time) []byte {
	b = append(b, `{"time":"`...)
	b = now.Round(0).AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":`...)
	b = appendJSONString(b, l.Level.String())
	b = append(b, `,"msg":"request","request_id":`...)
	b = appendJSONString(b, l.RequestID)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, l.Method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, l.Path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, l.Bytes, 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, int64(l.Duration), 10)
	if l.ErrorCode != "" {
		b = append(b, `,"error_code":`...)
		b = appendJSONString(b, l.ErrorCode)
	}
	if l.Upstream {
		b = append(b, `,"provider":`...)
		b = appendJSONString(b, l.Provider)
		b = append(b, `,"model":`...)
		b = appendJSONString(b, l.Model)
		b = append(b, `,"connection_id":`...)
		b = strconv.AppendInt(b, l.ConnectionID, 10)
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(l.Attempts), 10)
		b = append(b, `,"stream":`...)
		b = strconv.AppendBool(b, l.Stream)
		if l.Stream {
			b = append(b, `,"complete":`...)
			b = strconv.AppendBool(b, l.Complete)
			b = append(b, `,"ttft":`...)
			b = strconv.AppendInt(b, int64(l.TTFT), 10)
		}
		if l.Tokens {
			b = append(b, `,"input_tokens":`...)
			b = strconv.AppendInt(b, l.InputTokens, 10)
			b = append(b, `,"output_tokens":`...)
			b = strconv.AppendInt(b, l.OutputTokens, 10)
		}
	}
	if l.HasError {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, l.Error)
	}
	return append(b, "}\n"...)
}

// appendRFC3339Millis is slog's time format: RFC 3339 truncated to milliseconds, always three
// digits after the point (log/slog's function of the same name).
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...) // drop the 4th digit
}

// appendTextString appends a value as slog's text handler does: as it is, or quoted when it is
// empty or has spaces, '=', quotes, control or unprintable characters or invalid UTF-8.
func appendTextString(b []byte, s string) []byte {
	if textNeedsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// textNeedsQuoting is log/slog's needsQuoting.
func textNeedsQuoting(s string) bool {
	if len(s) == 0 {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c != '\\' && (c == ' ' || c == '=' || !jsonSafe(c)) {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// jsonSafe reports whether an ASCII byte stands in a JSON string as it is: all but the control
// characters, the double quote and the backslash (log/slog's safeSet).
func jsonSafe(c byte) bool { return c >= ' ' && c != '"' && c != '\\' }

// appendJSONString appends s quoted and escaped as slog's JSON handler does.
func appendJSONString(b []byte, s string) []byte { return jsonstr.Append(b, s) }
