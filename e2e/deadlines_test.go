package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// slowClients opens n connections, sends head on each and then one byte of filler every 100 ms
// on all of them until the test ends; it returns the connections. With distinct, connection i
// starts from its own loopback address (127.0.1.i+1), so each is a client of its own.
func slowClients(t *testing.T, addr string, n int, head string, distinct bool) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		var d net.Dialer
		if distinct {
			d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(i+1))}
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				for _, c := range conns {
					_, _ = c.Write([]byte("a")) // fails once the gateway hung up; that is the point
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// awaitHangUp reads each connection until the gateway closes it, at most until limit after
// start, and returns what it answered.
func awaitHangUp(t *testing.T, conns []net.Conn, start time.Time, least, limit time.Duration) []string {
	t.Helper()
	answers := make([]string, len(conns))
	for i, c := range conns {
		c.SetReadDeadline(start.Add(limit))
		b, err := io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection %d still held %v after it began", i, limit)
		}
		answers[i] = string(b) // EOF or a reset: the gateway hung up (a reset may cost the answer)
	}
	if took := time.Since(start); took < least {
		t.Fatalf("connections closed after %v, before the read timeout", took)
	}
	return answers
}

// Thirty unauthenticated clients that send a login body (or request headers) a byte at a time
// are cut off at the read timeout, however long they keep dribbling. (Each login comes from an
// address of its own and declares a body within the login form's 8 KiB: else the throttle or
// the size limit answers at once, before the body is read.)
func TestSlowClientsAreCutOffAtTheReadTimeout(t *testing.T) {
	e := testenv.New(t, "--read-timeout", "1s")
	addr := strings.TrimPrefix(e.Base, "http://")

	t.Run("slow login bodies", func(t *testing.T) {
		start := time.Now()
		conns := slowClients(t, addr, 30, "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
			"Content-Length: 8000\r\n\r\npassword=", true)
		answered := 0
		for i, a := range awaitHangUp(t, conns, start, time.Second, 6*time.Second) {
			if a != "" && !strings.HasPrefix(a, "HTTP/1.1 408 ") {
				t.Fatalf("connection %d answered %.40q, want 408", i, a)
			}
			if a != "" {
				answered++
			}
		}
		if answered == 0 {
			t.Fatal("no slow client got its 408")
		}
	})
	t.Run("slow headers", func(t *testing.T) {
		start := time.Now()
		conns := slowClients(t, addr, 30, "GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", false)
		awaitHangUp(t, conns, start, time.Second, 6*time.Second)
	})
	t.Run("slow admin API body", func(t *testing.T) {
		start := time.Now()
		conns := slowClients(t, addr, 1, "POST /api/providers HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+testenv.AdminToken+
			"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"name\":\"", false)
		a := awaitHangUp(t, conns, start, time.Second, 6*time.Second)[0]
		if !strings.HasPrefix(a, "HTTP/1.1 408 ") || !strings.Contains(a, `"code":"request_timeout"`) {
			t.Fatalf("answer %q, want 408 in the admin error shape", a)
		}
	})
	// A proxy call is spared the deadline only once its key is checked: without one, its body
	// may not hold the connection while net/http reads it away before the refusal.
	t.Run("slow proxy body without a key", func(t *testing.T) {
		start := time.Now()
		conns := slowClients(t, addr, 1, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"model\":\"", false)
		if a := awaitHangUp(t, conns, start, time.Second, 6*time.Second)[0]; a != "" && !strings.HasPrefix(a, "HTTP/1.1 401 ") {
			t.Fatalf("answer %.60q, want 401", a)
		}
	})
}

// An authenticated proxy call may send its body slowly: the body deadline is lifted for it.
func TestReadTimeoutSparesAuthenticatedProxyBodies(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON), "--read-timeout", "1s")

	// A proxy body that pauses longer than the read timeout half-way.
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", e.Base+"/v1/chat/completions", pr)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(testenv.ChatBody))
	half := len(testenv.ChatBody) / 2
	go func() {
		_, _ = io.WriteString(pw, testenv.ChatBody[:half])
		time.Sleep(1500 * time.Millisecond) // the client's own slowness, longer than the read timeout
		_, _ = io.WriteString(pw, testenv.ChatBody[half:])
		pw.Close()
	}()
	resp, err := testenv.ChatClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("slow proxy body: %d %s", resp.StatusCode, body)
	}

}
