package proxy

import "testing"

func TestAppendNamingModel(t *testing.T) {
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"content\":[]}}\n\n"
	cases := []struct{ name, ev, model, want string }{
		{"renamed", start, "anthropic/claude-x",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"anthropic/claude-x\",\"content\":[]}}\n\n"},
		{"quoted as JSON", start, `we"ird\name`,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"we\\\"ird\\\\name\",\"content\":[]}}\n\n"},
		{"the same name", start, "claude-x", start},
		{"no model", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n", "a/b",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n"},
		{"not a string", "event: message_start\ndata: {\"message\":{\"model\":null}}\n\n", "a/b",
			"event: message_start\ndata: {\"message\":{\"model\":null}}\n\n"},
		// Several data lines are joined apart from the event: it goes as it came.
		{"data on two lines", "event: message_start\ndata: {\"message\":\ndata: {\"model\":\"x\"}}\n\n", "a/b",
			"event: message_start\ndata: {\"message\":\ndata: {\"model\":\"x\"}}\n\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := []byte(c.ev)
			l := lookMessages(ev)
			if !l.start {
				t.Fatal("message_start not seen")
			}
			p := &passthrough{format: FormatMessages, model: c.model}
			if got := string(p.Event([]byte("kept|"), ev, l)); got != "kept|"+c.want {
				t.Fatalf("got  %q\nwant %q", got, "kept|"+c.want)
			}
			if string(ev) != c.ev {
				t.Fatal("the upstream's event was changed")
			}
		})
	}
	// Other events pass as they are, model or not.
	delta := []byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"model\":\"claude-x\"}\n\n")
	p := &passthrough{format: FormatMessages, model: "a/b"}
	if got := string(p.Event(nil, delta, lookMessages(delta))); got != string(delta) {
		t.Fatalf("message_delta changed: %q", got)
	}
}

func TestNamingModelWholeAnswer(t *testing.T) {
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"model"}]}`
	body := []byte(answer)
	out, pooled := namingModel(body, nil, "anthropic/claude-x")
	if want := `{"id":"msg_1","type":"message","role":"assistant","model":"anthropic/claude-x","content":[{"type":"text","text":"model"}]}`; string(out) != want || pooled == nil {
		t.Fatalf("got %s (pooled %v)", out, pooled != nil)
	}
	if string(body) != answer {
		t.Fatal("the upstream's answer was changed in place")
	}
	releaseAnswer(pooled)
	// Already named so, or naming nothing: the answer as it came, in its own buffer.
	for _, b := range []string{answer, `{"type":"message","content":[]}`, `{"model":7}`} {
		if out, pooled := namingModel([]byte(b), nil, "claude-x"); string(out) != b || pooled != nil {
			t.Fatalf("%s became %s", b, out)
		}
	}
}
