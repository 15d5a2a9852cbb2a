package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// flushRecorder is a client connection seen through its flushes: each flush sends what was
// written since the last one.
type flushRecorder struct {
	header  http.Header
	buf     bytes.Buffer
	flushed chan string
}

func newFlushRecorder() *flushRecorder {
	return &flushRecorder{header: http.Header{}, flushed: make(chan string, 64)}
}

func (f *flushRecorder) Header() http.Header         { return f.header }
func (f *flushRecorder) WriteHeader(int)             {}
func (f *flushRecorder) Write(p []byte) (int, error) { return f.buf.Write(p) }
func (f *flushRecorder) Flush() {
	f.flushed <- f.buf.String()
	f.buf.Reset()
}

// next is the next flush; the test fails when none comes within a few seconds.
func (f *flushRecorder) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case s := <-f.flushed:
		return s
	case <-time.After(5 * time.Second):
		t.Fatalf("no flush: %s", what)
		return ""
	}
}

func chatEvent(text string) string {
	return `data: {"choices":[{"index":0,"delta":{"content":"` + text + `"}}]}` + "\n\n"
}

// Events that arrive together leave together, in one write to the client; an event is never
// held back while the relay waits for the upstream's next.
func TestRelayFlushesBeforeItWaits(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	role := []byte(`data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\n\n")
	first := []byte(chatEvent("a"))
	w := newFlushRecorder()
	res := &attemptResult{held: [][]byte{role, first}, br: bufio.NewReaderSize(pr, streamReadBuffer),
		wd: startWatchdog(clockwork.NewFakeClock(), FormatChat, watchConfig{readiness: time.Minute, idle: time.Minute}, func() {})}
	ended := make(chan string, 1)
	go func() {
		ended <- relayStream(context.Background(), w, func() {}, res, slog.New(slog.DiscardHandler),
			&passthrough{format: FormatChat}, FormatChat, func(ev []byte) []byte { return ev }, func() {})
	}()

	if got, want := w.next(t, "the held events"), string(role)+string(first); got != want {
		t.Fatalf("first flush %q, want the held events in one: %q", got, want)
	}
	// Two events in one read of the upstream: one flush.
	if _, err := pw.Write([]byte(chatEvent("b") + chatEvent("c"))); err != nil {
		t.Fatal(err)
	}
	if got, want := w.next(t, "two events read at once"), chatEvent("b")+chatEvent("c"); got != want {
		t.Fatalf("flush %q, want %q", got, want)
	}
	// One event and the start of the next: the whole one goes out while the rest is awaited.
	if _, err := pw.Write([]byte(chatEvent("d") + `data: {"choices":[{"index":0,"delta":`)); err != nil {
		t.Fatal(err)
	}
	if got := w.next(t, "a whole event while the next is partial"); got != chatEvent("d") {
		t.Fatalf("flush %q, want %q", got, chatEvent("d"))
	}
	if _, err := pw.Write([]byte(`{"content":"e"}}]}` + "\n\n")); err != nil {
		t.Fatal(err)
	}
	if got := w.next(t, "the rest of an event"); got != chatEvent("e") {
		t.Fatalf("flush %q, want %q", got, chatEvent("e"))
	}
	if _, err := pw.Write([]byte("data: [DONE]\n\n")); err != nil {
		t.Fatal(err)
	}
	if got := w.next(t, "the terminal event"); got != "data: [DONE]\n\n" {
		t.Fatalf("flush %q, want the terminal event", got)
	}
	select {
	case end := <-ended:
		if end != "" {
			t.Fatalf("the relay ended with %q, want complete", end)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the relay did not end at the terminal event")
	}
}

func TestEventBuffered(t *testing.T) {
	for in, want := range map[string]bool{
		"":                             false,
		"data: a\n":                    false,
		"data: a\n\n":                  true,
		"data: a\r\n\r\n":              true,
		"event: x\ndata: a\n\ndata:":   true,
		"\n\n\ndata: a\n":              false, // stray blank lines, then a partial event
		"\n\r\n \n\n":                  false, // blank and white space only: no event
		"\n\ndata: a\n\n":              true,
		"data: a\ndata: b":             false,
		strings.Repeat("x", 40) + "\n": false,
	} {
		br := bufio.NewReaderSize(strings.NewReader(in), 64)
		if in != "" {
			if _, err := br.Peek(len(in)); err != nil {
				t.Fatal(err)
			}
		}
		if got := eventBuffered(br); got != want {
			t.Errorf("eventBuffered(%q) = %v, want %v", in, got, want)
		}
	}
}

// A Responses stream passed through: its terminal and error events are told by their names (or
// their data's type), not by words in a text; the last sequence number is kept for an error
// event the gateway adds.
func TestResponsesPassthroughEvents(t *testing.T) {
	ev := func(name, data string) []byte {
		if name == "" {
			return []byte("data: " + data + "\n\n")
		}
		return []byte("event: " + name + "\ndata: " + data + "\n\n")
	}
	delta := ev("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":4,"delta":"response.failed response.incomplete error"}`)
	for _, c := range []struct {
		name                  string
		events                [][]byte
		done, failed, cut, er bool
		seq                   int64
	}{
		{"text only", [][]byte{delta}, false, false, false, false, 5},
		{"completed", [][]byte{delta, ev("response.completed", `{"type":"response.completed","sequence_number":5,"response":{"output":[{"text":"response.failed"}]}}`)}, true, false, false, false, 6},
		{"failed", [][]byte{ev("response.failed", `{"type":"response.failed","sequence_number":2}`)}, true, true, false, false, 3},
		{"incomplete, unnamed", [][]byte{delta, ev("", `{"type":"response.incomplete","sequence_number":9}`)}, true, false, true, false, 10},
		{"error, unnamed", [][]byte{delta, ev("", `{"type":"error","code":"server_error","sequence_number":5}`)}, false, false, false, true, 6},
	} {
		p := &passthrough{format: FormatResponses, sequenced: true}
		var out []byte
		for _, e := range c.events {
			l := lookEvent(FormatResponses, e)
			out = p.Event(out, e, l)
		}
		if string(out) != string(bytes.Join(c.events, nil)) {
			t.Errorf("%s: relayed %q, want the events as they came", c.name, out)
		}
		if p.Done() != c.done || p.Failed() != c.failed || p.Cut() != c.cut || p.Errored() != c.er || p.seq != c.seq {
			t.Errorf("%s: done %v failed %v cut %v errored %v seq %d; want %v %v %v %v %d", c.name,
				p.Done(), p.Failed(), p.Cut(), p.Errored(), p.seq, c.done, c.failed, c.cut, c.er, c.seq)
		}
	}
}
