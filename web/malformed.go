package web

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/proxy"
)

// net/http refuses some requests while it reads their head, before any handler runs: a header
// value with control characters (a NUL or ESC in Idempotency-Key), a malformed header line, a
// head too large. It writes the refusal straight to the connection as plain text, in one Write,
// and closes it; there is no hook for it. So the gateway wraps the connections it accepts: each
// remembers the start of the request head it is reading, and when net/http's plain-text refusal
// comes through Write, it is replaced by the same status in the caller's format (OpenAI,
// Anthropic or admin JSON), naming the offending header. The bytes read are never changed, so
// how a request is framed stays net/http's decision alone. Dashboard addresses keep the plain
// text: a browser cannot send such a request.

// headKeep is how much of a request head a connection remembers: the request line and the
// headers before the offending one, in all but contrived requests.
const headKeep = 4096

// refusalHeaders is what net/http writes after the status line of a refusal, and never in a
// handler's answer (whose header names are sorted, Connection before Content-Type, and which
// carries a Date).
var refusalHeaders = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

// MalformedRequestListener wraps the server's listener so that requests net/http refuses before
// routing are answered in the caller's format.
func MalformedRequestListener(ln net.Listener, log *slog.Logger) net.Listener {
	return &refusalListener{Listener: ln, log: log}
}

type refusalListener struct {
	net.Listener
	log *slog.Logger
}

func (l *refusalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &refusalConn{Conn: c, log: l.log}, nil
}

type refusalConn struct {
	net.Conn
	log *slog.Logger

	mu   sync.Mutex
	head []byte  // the first bytes read since the last answer: the current request's head (nil after an answer)
	buf  *[]byte // the pool's holder of head's array, handed back with it
}

// heads keeps the head buffers of connections between their requests: once an answer is being
// written the head is of no use, and a connection keeps none while its answer (a stream, for
// hours maybe) goes out or while it idles.
var heads sync.Pool // of *[]byte

func (c *refusalConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.head == nil {
			if b, ok := heads.Get().(*[]byte); ok {
				c.buf, c.head = b, (*b)[:0]
			}
		}
		if room := headKeep - len(c.head); room > 0 {
			c.head = append(c.head, p[:min(n, room)]...)
		}
		c.mu.Unlock()
	}
	return n, err
}

// dropHead hands the head buffer back once the connection answers; the next read starts a new
// head.
func (c *refusalConn) dropHead() {
	c.mu.Lock()
	if c.head != nil {
		b := c.buf
		if b == nil {
			b = new([]byte)
		}
		*b = c.head[:0]
		c.head, c.buf = nil, nil
		heads.Put(b)
	}
	c.mu.Unlock()
}

func (c *refusalConn) Write(p []byte) (int, error) {
	if status, ok := refusalStatus(p); ok {
		c.mu.Lock()
		head := bytes.Clone(c.head)
		c.mu.Unlock()
		if answer := c.answer(status, head); answer != nil {
			if _, err := c.Conn.Write(answer); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	c.dropHead()
	return c.Conn.Write(p)
}

// refusalStatus recognises net/http's plain-text refusal of a request head and returns its
// status.
func refusalStatus(p []byte) (int, bool) {
	line, rest, ok := bytes.Cut(p, []byte("\r\n"))
	if !ok || !bytes.HasPrefix(line, []byte("HTTP/1.1 4")) || len(line) < 12 ||
		!bytes.HasPrefix(append([]byte("\r\n"), rest...), refusalHeaders) {
		return 0, false
	}
	status, err := strconv.Atoi(string(line[9:12]))
	return status, err == nil
}

// answer renders a refusal in the format of the request the head belongs to; nil keeps
// net/http's own text (dashboard addresses, or a head too broken to tell).
func (c *refusalConn) answer(status int, head []byte) []byte {
	req, header, ok := parseHead(head)
	if !ok {
		return nil
	}
	s := surfaceOf(req)
	if s == surfaceDashboard {
		return nil
	}
	e := &errs.Error{Code: errs.CodeForStatus(status), Status: status, Reason: "bad_request", Msg: errs.M("err.bad_request_head")}
	if header != "" {
		e.Reason, e.Msg = "invalid_header", errs.M("err.bad_header", header)
	}
	h := http.Header{}
	var body []byte
	switch s {
	case surfaceOpenAI:
		proxy.ErrorHeaders(h, e)
		body = proxy.OpenAIErrorBody(e)
	case surfaceAnthropic:
		proxy.ErrorHeaders(h, e)
		body = proxy.AnthropicErrorBody(e)
	default:
		body = adminErrorJSON(e)
	}
	id := newRequestID()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Connection", "close")
	h.Set("X-Request-Id", id)
	c.log.Debug("malformed request refused before routing", "request_id", id, "method", req.Method, "path", req.URL.Path,
		"status", status, "header", header)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// parseHead reads the request line and the headers of a (possibly cut) request head: the
// request as far as routing needs it (method, path, anthropic-version) and the name of the
// first header whose name or value net/http refuses ("" when none is in view).
func parseHead(head []byte) (*http.Request, string, bool) {
	lines := strings.Split(string(head), "\n")
	method, target, ok := strings.Cut(strings.TrimSuffix(lines[0], "\r"), " ")
	if !ok {
		return nil, "", false
	}
	target, _, _ = strings.Cut(target, " ")
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, "", false
	}
	req := &http.Request{Method: method, URL: u, Header: http.Header{}}
	bad := ""
	for _, l := range lines[1:] {
		l = strings.TrimSuffix(l, "\r")
		if l == "" {
			break
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		if strings.EqualFold(name, "anthropic-version") {
			req.Header.Set("anthropic-version", strings.TrimSpace(value))
		}
		if bad == "" && !validHeaderValue(value) && validToken(name) {
			bad = name
		}
	}
	return req, bad, true
}

// validHeaderValue is net/http's rule: no control characters but horizontal tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validToken reports whether s is a header name as RFC 9110 spells it, safe to name back.
func validToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// noteIgnoredIdempotencyKey logs, at debug, an Idempotency-Key the engine will not forward (not
// 1–255 visible ASCII characters; net/http already refused those with control characters). The
// request goes on without it; the key itself is not logged.
func noteIgnoredIdempotencyKey(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if _, sent := c.Request().Header["Idempotency-Key"]; sent {
				noteIdempotencyKey(log, c)
			}
			return next(c)
		}
	}
}

// noteIdempotencyKey is noteIgnoredIdempotencyKey's check and log line, never inlined: the
// middleware's frame stays on the stack of every open stream.
//
//go:noinline
func noteIdempotencyKey(log *slog.Logger, c echo.Context) {
	if k := c.Request().Header.Get("Idempotency-Key"); !proxy.ValidIdempotencyKey(k) {
		log.Debug("idempotency key ignored: not 1 to 255 visible ASCII characters", "request_id", requestIDOf(c),
			"length", len(k))
	}
}
