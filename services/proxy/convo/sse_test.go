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

// TestParseEvent: the name and the data (several data lines joined by a newline, one space after
// the colon dropped, CR LF endings and comments passed over), and no allocation for an event of
// a known name with one data line.
func TestParseEvent(t *testing.T) {
	for _, c := range []struct{ ev, name, data string }{
		{"event: message_start\ndata: {\"a\":1}\n\n", "message_start", `{"a":1}`},
		{"data: a\r\ndata: b\r\n\r\n", "", "a\nb"},
		{"data:a\ndata:  b\ndata: c\n\n", "", "a\n b\nc"},
		{": keep-alive\nevent:my.own.event\n\n", "my.own.event", ""},
		{"data: [DONE]", "", "[DONE]"},
		{"id: 7\nevent: response.completed\nretry: 10\ndata: {}\n\n", "response.completed", "{}"},
	} {
		name, data := ParseEvent([]byte(c.ev))
		if name != c.name || string(data) != c.data {
			t.Errorf("ParseEvent(%q) = %q, %q; want %q, %q", c.ev, name, data, c.name, c.data)
		}
	}
	ev := []byte("event: response.output_text.delta\ndata: {\"delta\":\"hi\"}\n\n")
	if n := testing.AllocsPerRun(100, func() { ParseEvent(ev) }); n != 0 {
		t.Errorf("ParseEvent allocates %v times for a known event", n)
	}
	// The joined data is a copy: the event's bytes are left as they were.
	two := []byte("data: a\ndata: b\n\n")
	_, data := ParseEvent(two)
	data[0] = 'x'
	if string(two) != "data: a\ndata: b\n\n" {
		t.Errorf("ParseEvent wrote into the event: %q", two)
	}
}
