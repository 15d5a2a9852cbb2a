package web

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Only net/http's own refusal is rewritten: a handler's 400 that looks like it (plain text,
// Connection: close, the same words) goes out untouched.
func TestRefusalRewriteLeavesHandlerAnswersAlone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "400 Bad Request")
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(MalformedRequestListener(ln, slog.New(slog.DiscardHandler))) }()
	defer func() { srv.Close(); <-done }()
	for _, path := range []string{"/v1/chat/completions", "/api/providers"} {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || string(b) != "400 Bad Request" {
			t.Fatalf("%s: a handler's answer was rewritten: %d %q %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
}

func TestParseHead(t *testing.T) {
	cases := []struct {
		name, head, path, bad, anthropic string
		ok                               bool
	}{
		{"bad value", "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nIdempotency-Key: a\x01b\r\n\r\n{}", "/v1/chat/completions", "Idempotency-Key", "", true},
		{"first bad one named", "GET /api/x HTTP/1.1\r\nX-A: \x00\r\nX-B: \x01\r\n\r\n", "/api/x", "X-A", "", true},
		{"anthropic version", "GET /v1/models HTTP/1.1\r\nAnthropic-Version: 2023-06-01\r\nX: \x7f\r\n\r\n", "/v1/models", "X", "2023-06-01", true},
		{"bad name is not echoed", "GET /v1/models HTTP/1.1\r\nX<script>: \x01\r\n\r\n", "/v1/models", "", "", true},
		{"cut head", "GET /v1/models HTTP/1.1\r\nHost: a\r\nX-Long: abc", "/v1/models", "", "", true},
		{"no request line", "garbage", "", "", "", false},
		{"bad target", "GET :: HTTP/1.1\r\n\r\n", "", "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, bad, ok := parseHead([]byte(c.head))
			if ok != c.ok {
				t.Fatalf("ok %v", ok)
			}
			if !ok {
				return
			}
			if req.URL.Path != c.path || bad != c.bad || req.Header.Get("anthropic-version") != c.anthropic {
				t.Fatalf("path %q bad %q anthropic %q", req.URL.Path, bad, req.Header.Get("anthropic-version"))
			}
		})
	}
}

// A connection keeps the head of the request it is reading only until it answers: a stream may
// stay open for hours, and its connection should not hold the head (up to 4 KiB) meanwhile. The
// next request on the connection starts a head of its own.
func TestRefusalConnDropsTheHeadOnceItAnswers(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	c := &refusalConn{Conn: server, log: slog.New(slog.DiscardHandler)}
	defer c.Close()
	read := func(req string) {
		t.Helper()
		go func() { _, _ = io.WriteString(client, req) }()
		buf := make([]byte, 4096)
		if n, err := io.ReadAtLeast(c, buf, len(req)); err != nil || n != len(req) {
			t.Fatalf("read %d %v", n, err)
		}
	}
	write := func(answer string) {
		t.Helper()
		go func() { _, _ = io.Copy(io.Discard, io.LimitReader(client, int64(len(answer)))) }()
		if _, err := io.WriteString(c, answer); err != nil {
			t.Fatal(err)
		}
	}
	first := "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n\r\n"
	read(first)
	if string(c.head) != first {
		t.Fatalf("head %q", c.head)
	}
	write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
	if c.head != nil {
		t.Fatalf("the head is kept while the answer goes out: %q", c.head)
	}
	second := "GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n"
	read(second)
	if string(c.head) != second {
		t.Fatalf("the next request's head is %q", c.head)
	}
}
