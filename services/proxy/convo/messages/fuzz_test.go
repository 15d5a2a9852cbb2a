package messages

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"switchyard/services/proxy/convo"
)

// seedDir adds every file of a testdata directory to the fuzz corpus.
func seedDir(f *testing.F, dir, ext string) {
	names, _ := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	for _, name := range names {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
}

// checkSSE fails unless out is whole named events whose data is JSON.
func checkSSE(t *testing.T, out []byte) {
	t.Helper()
	if len(out) == 0 {
		return
	}
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end an event: %q", out)
	}
	for _, ev := range bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
		name, data := convo.ParseEvent(ev)
		if name == "" || !json.Valid(data) {
			t.Fatalf("not a named event with JSON data: %q", ev)
		}
	}
}

// FuzzReadRequest: any body is refused or read; what is read is written as valid JSON, which
// reads again. Nothing panics. The Claude Code seeds are 17 KB: each new input the engine finds
// is minimized for up to a minute by default, so run it with -fuzzminimizetime 3s.
func FuzzReadRequest(f *testing.F) {
	seedDir(f, "request", ".json")
	f.Add([]byte(`{"system":[{"type":"image"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":{"x":1}}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"system","content":[{"type":"text","text":"\u2028\"x"}]},{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":""}]}]}],"thinking":{"type":"enabled"}}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":[{"type":"tool_use","input":[1]},{"type":"redacted_thinking","data":"x"}]}],"output_format":{"type":"json_schema","schema":{}},"tools":[{"type":"bash_20250124"},null]}`))
	f.Add([]byte(`{"temperature":1e999,"top_p":-1e400,"thinking":{"type":"enabled","budget_tokens":99999999999999999999}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ReadRequest(body)
		if err != nil {
			return
		}
		out, err := AppendRequest(nil, r, convo.Target{DefaultMaxTokens: len(body) % 3})
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output for %q: %s", body, out)
		}
		if _, err := ReadRequest(out); err != nil {
			t.Fatalf("the output does not read again: %v\n%s", err, out)
		}
	})
}

// FuzzReadAnswer: any body is refused or read; its events make a valid answer and a stream of
// named JSON events.
func FuzzReadAnswer(f *testing.F) {
	seedDir(f, "answer", ".json")
	f.Add([]byte(`{"type":"error","error":{"type":5}}`))
	f.Add([]byte(`{"content":[{"type":"tool_use","input":"x"},{"type":"redacted_thinking"},{"type":"thinking","signature":7}],"usage":{"input_tokens":1e3},"stop_reason":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := ReadAnswer(nil, body)
		if err != nil {
			return
		}
		out, err := AppendAnswer(nil, nil, evs, 0)
		if err != nil || !json.Valid(out) {
			t.Fatalf("invalid answer for %q: %v %s", body, err, out)
		}
		w := NewStreamWriter(nil, 0)
		checkSSE(t, writeEvents(w, evs))
		checkSSE(t, w.Abort(nil, "c", "m"))
	})
}

// FuzzStreamReader feeds arbitrary events (split at blank lines) to the reader and its events to
// the writer: nothing panics, and what is written is named events with JSON data.
func FuzzStreamReader(f *testing.F) {
	seedDir(f, "stream", ".sse")
	seedDir(f, "writer", ".sse")
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"input_json_delta\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_start\",\"index\":-1,\"content_block\":{\"type\":\"tool_use\",\"input\":{\"a\":1}}}\n\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":-5}}\n\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		rd := NewStreamReader()
		w := NewStreamWriter(&convo.Request{Model: "m"}, 0)
		var evs []convo.Event
		var out []byte
		for _, ev := range splitEvents(doc) {
			evs = rd.Read(evs[:0], ev)
			for i := range evs {
				out = w.Write(out, &evs[i])
			}
		}
		checkSSE(t, w.Abort(out, "stream_incomplete", "the upstream stream ended before it was complete"))
	})
}
