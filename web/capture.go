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
	in := &captureReader{ReadCloser: r.Body, window: window}
	out := &captureWriter{ResponseWriter: res.Writer, window: window}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = in
	}
	res.Writer = out
	return in, out
}

// captureReader is a request body that keeps the first window bytes read.
type captureReader struct {
	io.ReadCloser
	window int
	buf    []byte // nil until a byte was read
	n      int64
}

func (r *captureReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n += int64(n)
	if room := r.window - len(r.buf); room > 0 && n > 0 {
		r.buf = append(r.buf, p[:min(n, room)]...)
	}
	return n, err
}

// captureWriter is a response writer that keeps the first window bytes written. Flushes,
// deadlines and hijacks reach the writer underneath through Unwrap.
type captureWriter struct {
	http.ResponseWriter
	window int
	buf    []byte
	n      int64
}

func (w *captureWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	if room := w.window - len(w.buf); room > 0 && n > 0 {
		w.buf = append(w.buf, p[:min(n, room)]...)
	}
	return n, err
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
