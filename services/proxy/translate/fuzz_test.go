package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// seedDir adds every file of a testdata directory to the fuzz corpus.
func seedDir(f *testing.F, dir, ext string) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err == nil {
			f.Add(b)
		}
	}
}

// FuzzChatToMessages: any JSON a client sends either fails to decode or becomes a valid JSON
// request; the translator never panics.
func FuzzChatToMessages(f *testing.F) {
	seedDir(f, "chat_request", ".json")
	f.Add([]byte(`{"messages":[{"role":"tool","content":[{"type":"text"}]},{"role":"assistant","tool_calls":[{"function":{"arguments":"[1"}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ChatToMessages(body, Target{})
		if err == nil && !json.Valid(r.Body) {
			t.Fatalf("invalid output for %q: %s", body, r.Body)
		}
	})
}

// FuzzMessagesToChat: the same for Anthropic requests.
func FuzzMessagesToChat(f *testing.F) {
	seedDir(f, "messages_request", ".json")
	f.Add([]byte(`{"system":[{"type":"image"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":{"x":1}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := MessagesToChat(body, Target{MaxCompletionTokens: len(body)%2 == 0})
		if err == nil && !json.Valid(r.Body) {
			t.Fatalf("invalid output for %q: %s", body, r.Body)
		}
	})
}

// FuzzResponses: buffered answers translate to valid JSON or an error.
func FuzzResponses(f *testing.F) {
	seedDir(f, "messages_response", ".json")
	seedDir(f, "chat_response", ".json")
	f.Fuzz(func(t *testing.T, body []byte) {
		if out, err := MessagesResponseToChat(body, 1); err == nil && !json.Valid(out) {
			t.Fatalf("messages→chat: invalid output %s", out)
		}
		if out, err := ChatResponseToMessages(body); err == nil && !json.Valid(out) {
			t.Fatalf("chat→messages: invalid output %s", out)
		}
	})
}

// checkEvents parses translator output: every event ends with its blank line and carries a
// data line that is valid JSON (or [DONE]).
func checkEvents(t *testing.T, out []byte, named bool) {
	t.Helper()
	if len(out) == 0 {
		return
	}
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end an event: %q", out)
	}
	for _, ev := range bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
		name, data := ParseEvent(ev)
		if named && name == "" {
			t.Fatalf("an Anthropic event without a name: %q", ev)
		}
		if !bytes.Equal(data, []byte("[DONE]")) && !json.Valid(data) {
			t.Fatalf("event data is not JSON: %q", ev)
		}
	}
}

// FuzzStreams feeds arbitrary events (split at blank lines) to both stream translators: they
// never panic, and what they write is well-formed SSE with JSON data.
func FuzzStreams(f *testing.F) {
	seedDir(f, "messages_stream", ".sse")
	seedDir(f, "chat_stream", ".sse")
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"input_json_delta\"}}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"x\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		m := &MessagesToChatStream{IncludeUsage: true}
		c := NewChatToMessagesStream()
		for _, ev := range splitEvents(doc) {
			checkEvents(t, m.Event(nil, ev), false)
			checkEvents(t, c.Event(nil, ev), true)
		}
	})
}

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

// FuzzResponses: the Responses translators never panic; what they write is valid JSON or
// well-formed events.
func FuzzResponsesTranslation(f *testing.F) {
	seedDir(f, "responses_request", ".json")
	seedDir(f, "responses_stream", ".sse")
	f.Add([]byte(`{"input":[{"type":"function_call_output","output":[{"type":"input_text","text":"x"}]},{"role":"assistant","content":7}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if r, err := ResponsesToChat(doc, Target{}); err == nil && !json.Valid(r.Body) {
			t.Fatalf("invalid request %s", r.Body)
		}
		if out, err := ChatResponseToResponses(doc, EchoOf(doc)); err == nil && !json.Valid(out) {
			t.Fatalf("invalid answer %s", out)
		}
		s := &ChatToResponsesStream{Echo: EchoOf(nil)}
		var out []byte
		for _, ev := range splitEvents(doc) {
			out = s.Event(out, ev)
		}
		checkEvents(t, s.Abort(out, "stream_incomplete", "the upstream stream ended before it was complete"), true)
	})
}
