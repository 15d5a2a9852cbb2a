package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// streamUpstream is a chat upstream that counts the connections it accepts. A stream's events
// end with [DONE]; the body's end (its last chunk) follows only when the test opens the
// stream's gate, or when the gateway lets go of the stream.
type streamUpstream struct {
	*httptest.Server
	conns atomic.Int64
	gates chan chan struct{} // one a stream, sent once its [DONE] is out
}

func newStreamUpstream(t *testing.T) *streamUpstream {
	u := &streamUpstream{gates: make(chan chan struct{}, 16)}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") {
			testenv.JSONAnswer(`{"object":"list","data":[{"id":"gpt-test","object":"model"}]}`)(w, r)
			return
		}
		testenv.SSEAnswer(testenv.SSEChunks, -1)(w, r)
		gate := make(chan struct{})
		u.gates <- gate
		select {
		case <-gate:
		case <-r.Context().Done():
		}
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// A stream relayed to its terminal event leaves its upstream connection open for the next
// request: the gateway reads the body's end (the chunked body's last chunk, after [DONE])
// instead of closing it early, which would make every stream dial (and on TLS, handshake)
// anew. An upstream that keeps the stream open after its terminal event does not hold the
// client's answer: the gateway waits for its end only briefly.
func TestStreamsKeepTheirUpstreamConnection(t *testing.T) {
	up := newStreamUpstream(t)
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-up-REUSE-0001", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	terminal := map[string]string{"chat": "data: [DONE]", "messages": "event: message_stop", "responses": "event: response.completed"}

	// stream reads an answer up to its terminal event, then lets the upstream end the stream
	// (open) or not, and reads the answer to its end.
	stream := func(t *testing.T, s surfaceCall, open bool) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		body := strings.Replace(s.body("up/gpt-test"), `{"model"`, `{"stream":true,"model"`, 1)
		r := e.Post(ctx, s.path, key, body, map[string]string{"anthropic-version": "2023-06-01"})
		defer r.Body.Close()
		if r.StatusCode != 200 || !strings.Contains(r.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: status %d: %s", s.name, r.StatusCode, testenv.ReadAll(t, r))
		}
		var got strings.Builder
		buf := make([]byte, 4096)
		for !strings.Contains(got.String(), terminal[s.name]) {
			n, err := r.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil && !strings.Contains(got.String(), terminal[s.name]) {
				t.Fatalf("%s: %v before the terminal event: %s", s.name, err, got.String())
			}
		}
		gate := <-up.gates
		if open {
			close(gate)
		}
		rest, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatalf("%s: %v after the terminal event", s.name, err)
		}
		got.Write(rest)
		if !strings.Contains(got.String(), `"lo"`) {
			t.Fatalf("%s: not the whole stream: %s", s.name, got.String())
		}
		return got.String()
	}

	// One stream opens the connection the others reuse.
	stream(t, surfaces[0], true)
	before := up.conns.Load()
	for i := 0; i < 3; i++ {
		for _, s := range surfaces {
			stream(t, s, true)
		}
	}
	if n := up.conns.Load() - before; n != 0 {
		t.Fatalf("%d streams opened %d new upstream connections, want none", 3*len(surfaces), n)
	}

	// The upstream holds each stream open after [DONE]: the answers end all the same.
	for _, s := range surfaces {
		start := time.Now()
		stream(t, s, false)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: the answer took %v: the gateway waited for a held upstream stream", s.name, d)
		}
	}
}
