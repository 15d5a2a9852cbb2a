package web

import (
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

// captureBodies puts copying wrappers around a request's body and its response writer, each
// keeping the first window bytes that pass and counting the rest. Used only when the request
// log keeps bodies.
func captureBodies(c echo.Context, window int) (*captureReader, *captureWriter) {
	r, res := c.Request(), c.Response()
	in := &captureReader{ReadCloser: r.Body, captured: captured{window: window}}
	out := &captureWriter{ResponseWriter: res.Writer, captured: captured{window: window}}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = in
	}
	res.Writer = out
	return in, out
}

// captured keeps the first window bytes that pass and counts them all.
type captured struct {
	window int
	buf    []byte // nil until a byte passed
	n      int64
}

func (c *captured) keep(p []byte) {
	c.n += int64(len(p))
	if room := c.window - len(c.buf); room > 0 && len(p) > 0 {
		c.buf = append(c.buf, p[:min(len(p), room)]...)
	}
}

// captureReader is a request body that keeps the first window bytes read.
type captureReader struct {
	io.ReadCloser
	captured
}

func (r *captureReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.keep(p[:n])
	return n, err
}

// captureWriter is a response writer that keeps the first window bytes written. Flushes,
// deadlines and hijacks reach the writer underneath through Unwrap.
type captureWriter struct {
	http.ResponseWriter
	captured
}

func (w *captureWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.keep(p[:n])
	return n, err
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
