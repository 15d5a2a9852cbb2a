package chat

import (
	"bytes"
	"encoding/json"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// FuzzReadRequest: any body a client sends is refused or read; what is read is written as a
// valid JSON request that the reader takes again. Nothing panics.
func FuzzReadRequest(f *testing.F) {
	convotest.FuzzRequests(f, ReadRequest, func(_ *testing.T, body []byte, r *convo.Request) ([]byte, error) {
		return AppendRequest(nil, r, convo.Target{MaxCompletionTokens: len(body)%2 == 0})
	},
		`{"messages":[{"role":"tool","content":[{"type":"text"}]},{"role":"assistant","tool_calls":[{"function":{"arguments":"[1"}}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:a;base64,\u0000\""}},{"type":"file","file":{"file_data":"data:x/y;base64,\\"}}]}],"stop":["\u2028"]}`,
		`{"model":"\ud800","tools":[{"function":{"name":"a\"b","parameters":[1]}}],"tool_choice":{"function":{"name":"a\"b"}},"response_format":{"type":"json_schema","json_schema":{"name":"\n","schema":5}}}`)
}

// FuzzReadAnswer: any upstream answer is refused or read into events that keep the model's order;
// the answer written from them is valid JSON the reader takes again.
func FuzzReadAnswer(f *testing.F) {
	convotest.Seed(f, "answer", ".json")
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":{"a":[1,{}]}}},null]}}],"usage":{"prompt_tokens":1e400}}`))
	f.Add([]byte(`{"error":{"message":"x","code":[1]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := ReadAnswer(nil, body)
		if err != nil {
			return
		}
		checkGrammar(t, evs)
		out, err := AppendAnswer(nil, &convo.Request{}, evs, 1)
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid answer for %q:\n%s", body, out)
		}
		if _, err := ReadAnswer(nil, out); err != nil {
			t.Fatalf("the written answer is refused: %v\n%s", err, out)
		}
	})
}

// FuzzStreamReader feeds arbitrary events (split at blank lines) to the reader: it never panics,
// its events keep the model's order, and the writer makes well-formed SSE of them: every event
// ends with its blank line and carries JSON data (or [DONE]).
func FuzzStreamReader(f *testing.F) {
	convotest.Seed(f, "stream", ".sse")
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"x\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":-1,\"delta\":{\"tool_calls\":[{\"index\":99999999999999999999,\"id\":\"\\\"\"}]},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		r := NewStreamReader()
		w := NewStreamWriter(&convo.Request{IncludeUsage: len(doc)%2 == 0}, 1)
		var all []convo.Event
		for _, ev := range convotest.SplitEvents(doc) {
			evs := r.Read(nil, ev)
			all = append(all, evs...)
			for i := range evs {
				checkSSE(t, w.Write(nil, &evs[i]))
			}
		}
		checkGrammar(t, all)
		checkSSE(t, w.Abort(nil, "stream_incomplete", "the upstream stream ended before it was complete"))
	})
}

// checkSSE fails when out is not whole SSE events with JSON data (or [DONE]).
func checkSSE(t *testing.T, out []byte) {
	t.Helper()
	if len(out) == 0 {
		return
	}
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end an event: %q", out)
	}
	for _, ev := range bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
		_, data := convo.ParseEvent(ev)
		if !bytes.Equal(data, []byte("[DONE]")) && !json.Valid(data) {
			t.Fatalf("event data is not JSON: %q", ev)
		}
	}
}

// checkGrammar fails when events break the model's order: Start first (unless an Error comes
// first), a block started once before its deltas and stopped once, blocks other than tool calls
// not overlapping, Stop before End, nothing after End or Error.
func checkGrammar(t *testing.T, evs []convo.Event) {
	t.Helper()
	open := map[int]convo.BlockKind{}
	seen := map[int]bool{}
	started, stopped := false, false
	for i, e := range evs {
		fail := func(why string) { t.Helper(); t.Fatalf("event %d (%d): %s\n%s", i, e.Kind, why, dump(evs)) }
		if i > 0 && (evs[i-1].Kind == convo.EvEnd || evs[i-1].Kind == convo.EvError) {
			fail("an event after the end")
		}
		if !started && e.Kind != convo.EvStart && e.Kind != convo.EvError {
			fail("no start first")
		}
		switch e.Kind {
		case convo.EvStart:
			if started {
				fail("two starts")
			}
			started = true
		case convo.EvBlockStart:
			if seen[e.Index] {
				fail("a block started twice")
			}
			for _, k := range open {
				if k != convo.BlockToolCall || e.Block != convo.BlockToolCall {
					fail("blocks overlap")
				}
			}
			seen[e.Index], open[e.Index] = true, e.Block
		case convo.EvDelta, convo.EvSignature:
			if _, ok := open[e.Index]; !ok {
				fail("a delta outside its block")
			}
		case convo.EvBlockStop:
			if _, ok := open[e.Index]; !ok {
				fail("a block stopped that is not open")
			}
			delete(open, e.Index)
		case convo.EvStop:
			stopped = true
		case convo.EvEnd:
			if !stopped || len(open) > 0 {
				fail("an end without a stop, or with blocks open")
			}
		}
	}
}
