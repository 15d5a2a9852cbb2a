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
	out   *logOut
	json  bool
	level slog.Leveler
}

// NewLogHandler is slog's text handler (JSON when json is set) writing to w at level and above,
// every line at once.
func NewLogHandler(w io.Writer, json bool, level slog.Leveler) *LogHandler {
	return newLogHandler(&logOut{w: w}, json, level)
}

// NewBufferedLogHandler is NewLogHandler gathering lines for up to every before writing them
// together (at most LogBuffer bytes at a time): one write a request was a system call per
// request, as much CPU as a tenth of the gateway's own work on a small request. A line at warn
// or above is written at once, with the lines before it, so errors are seen when they happen.
// Flush writes what waits; Close also makes every later line go out at once.
func NewBufferedLogHandler(w io.Writer, json bool, level slog.Leveler, every time.Duration) *LogHandler {
	return newLogHandler(&logOut{w: w, every: every}, json, level)
}

func newLogHandler(out *logOut, json bool, level slog.Leveler) *LogHandler {
	opts := &slog.HandlerOptions{Level: level}
	h := &LogHandler{out: out, json: json, level: level}
	if json {
		h.Handler = slog.NewJSONHandler(out, opts)
	} else {
		h.Handler = slog.NewTextHandler(out, opts)
	}
	return h
}

// Handle writes the record through slog; one at warn or above goes out at once.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	return flushed(h.out, r.Level, h.Handler.Handle(ctx, r))
}

// WithAttrs and WithGroup keep the flush at warn and above. The handler they return is not a
// LogHandler: request lines through it go through slog, with its attributes.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return derived{h.Handler.WithAttrs(as), h.out}
}

func (h *LogHandler) WithGroup(name string) slog.Handler {
	return derived{h.Handler.WithGroup(name), h.out}
}

// Flush writes the lines that wait.
func (h *LogHandler) Flush() { h.out.flush() }

// Close writes the lines that wait and every later line at once.
func (h *LogHandler) Close() { h.out.close() }

// derived is a handler made from a LogHandler's with attributes or a group.
type derived struct {
	slog.Handler
	out *logOut
}

func (d derived) Handle(ctx context.Context, r slog.Record) error {
	return flushed(d.out, r.Level, d.Handler.Handle(ctx, r))
}

func (d derived) WithAttrs(as []slog.Attr) slog.Handler {
	return derived{d.Handler.WithAttrs(as), d.out}
}
func (d derived) WithGroup(name string) slog.Handler {
	return derived{d.Handler.WithGroup(name), d.out}
}

// flushed flushes out after a line at warn or above and returns err.
func flushed(out *logOut, level slog.Level, err error) error {
	if level >= slog.LevelWarn {
		out.flush()
	}
	return err
}

// LogBuffer is how many bytes of lines a buffered LogHandler gathers at most.
const LogBuffer = 32 << 10

// logOut serializes the slog handler's writes and the request lines', so no two lines
// interleave, and, when every is set, gathers them for one write every so often. bufio.Writer
// would gather them too, but writes only when full: here a timer also writes what waits, so a
// quiet gateway's lines are not held back.
type logOut struct {
	mu    sync.Mutex
	w     io.Writer
	every time.Duration // 0: each line is written at once
	buf   []byte
	timer *time.Timer // writes what waits every after the first line gathered; nil until then
	armed bool        // the timer is due
}

func (l *logOut) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.every <= 0 {
		return l.w.Write(p)
	}
	if len(l.buf)+len(p) > LogBuffer {
		l.writeLocked()
		if len(p) > LogBuffer {
			return l.w.Write(p)
		}
	}
	l.buf = append(l.buf, p...)
	if !l.armed {
		l.armed = true
		if l.timer == nil {
			l.timer = time.AfterFunc(l.every, l.due)
		} else {
			l.timer.Reset(l.every)
		}
	}
	return len(p), nil
}

// due is the timer's: it writes what waits.
func (l *logOut) due() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	l.writeLocked()
}

func (l *logOut) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writeLocked()
}

func (l *logOut) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.armed, l.every = false, 0
	l.writeLocked()
}

// writeLocked writes what waits; a write error loses those lines, as it would lose one line
// written at once (there is nowhere else to tell of it).
func (l *logOut) writeLocked() {
	if len(l.buf) == 0 {
		return
	}
	_, _ = l.w.Write(l.buf)
	if cap(l.buf) > 2*LogBuffer {
		l.buf = nil
		return
	}
	l.buf = l.buf[:0]
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
	if l.Level >= slog.LevelWarn {
		h.out.flush()
	}
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
