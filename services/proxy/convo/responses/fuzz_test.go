package responses

import (
	"encoding/json"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// FuzzReadRequest: any body either is refused or reads into a request that every writer of
// this package writes as valid JSON (the upstream request, and an answer echoing it), and that
// reads back.
func FuzzReadRequest(f *testing.F) {
	convotest.FuzzRequests(f, ReadRequest, func(t *testing.T, body []byte, r *convo.Request) ([]byte, error) {
		answer, _ := AppendAnswer(nil, r, nil, 1)
		if !json.Valid(answer) {
			t.Fatalf("invalid answer for %q: %s", body, answer)
		}
		w := NewStreamWriter(r, 1)
		stream := w.Write(nil, &convo.Event{Kind: convo.EvStart})
		stream = w.Write(stream, &convo.Event{Kind: convo.EvEnd})
		convotest.NamedEvents(t, stream)
		return AppendRequest(nil, r, convo.Target{})
	},
		`{"input":[{"type":"function_call_output","output":[{"type":"input_text","text":"x"}]},{"role":"assistant","content":7}]}`,
		`{"input":[{"type":"reasoning","summary":[{"text":"\u2028"}],"encrypted_content":"gAAAA\"x"}],"tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f","parameters":{"a" : [1, 2]}}]}]}`,
		`{"metadata":{"a":"b"},"text":{"format":{"type":"json_schema","schema":{ "x" :1 }}},"tool_choice":{"type":"function","name":"x"}}`)
}

// FuzzReadAnswer: any body either is refused or reads into events that the writer turns into a
// valid answer.
func FuzzReadAnswer(f *testing.F) {
	convotest.Seed(f, "upstream", ".json")
	f.Add([]byte(`{"output":[{"type":"function_call","arguments":7},{"type":"reasoning","summary":[null,{"text":1}],"encrypted_content":"\"x"}],"usage":{"input_tokens":1e400},"status":"incomplete","incomplete_details":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := ReadAnswer(nil, body)
		if err != nil {
			return
		}
		r := &convo.Request{Include: []string{"reasoning.encrypted_content"}}
		out, err := AppendAnswer(nil, r, evs, 1)
		if err != nil || !json.Valid(out) {
			t.Fatalf("invalid answer for %q: %v %s", body, err, out)
		}
	})
}

// FuzzStreamReader: arbitrary events (split at blank lines) never make the reader panic, and the
// writer turns what it reads into well-formed events with JSON data, which read back.
func FuzzStreamReader(f *testing.F) {
	convotest.Seed(f, "upstream", ".sse")
	f.Add([]byte("event: response.output_text.delta\ndata: {\"output_index\":3,\"delta\":\"x\"}\n\n" +
		"data: {\"type\":\"response.output_item.done\",\"output_index\":3,\"item\":{\"type\":\"reasoning\",\"encrypted_content\":\"e\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":99999999,\"delta\":\"x\"}\n\n" +
		"data: {\"type\":\"error\",\"error\":{\"message\":\"m\"}}\n\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		reader := NewStreamReader()
		r := &convo.Request{Include: []string{"reasoning.encrypted_content"}}
		w := NewStreamWriter(r, 1)
		out := w.Abort(convotest.Relay(reader, w, nil, doc), "stream_incomplete", "cut")
		convotest.NamedEvents(t, out)
		back := NewStreamReader()
		for _, ev := range convotest.SplitEvents(out) {
			back.Read(nil, ev)
		}
		if !back.done {
			t.Fatalf("the written stream has no end: %s", out)
		}
	})
}
