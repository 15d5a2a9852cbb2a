package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// sseEvent is one event of a stream: its name and its data decoded.
type sseEvent struct {
	Name string
	Data any
}

// parseSSE reads a stream's events, failing on an event that is not named JSON.
func parseSSE(t *testing.T, doc []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, ev := range convotest.SplitEvents(doc) {
		name, data := convo.ParseEvent(ev)
		if name == "" {
			t.Fatalf("an Anthropic event without a name: %q", ev)
		}
		out = append(out, sseEvent{name, decode(t, data)})
	}
	return out
}

// accumulate reads a stream as the Anthropic SDK does, into the message it says, and returns it
// as JSON with the error event's data, if any. It fails on a stream the SDK refuses.
func accumulate(t *testing.T, doc []byte) (msg any, errData any) {
	t.Helper()
	m, errData := sdkAccumulate(t, doc)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, b), errData
}

// sdkAccumulate is the SDK's message of a stream.
func sdkAccumulate(t *testing.T, doc []byte) (m anthropic.Message, errData any) {
	t.Helper()
	for _, ev := range convotest.SplitEvents(doc) {
		name, data := convo.ParseEvent(ev)
		if name == "ping" {
			continue
		}
		if name == "error" {
			errData = decode(t, data)
			break
		}
		var e anthropic.MessageStreamEventUnion
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("the SDK cannot read %q: %v", ev, err)
		}
		if err := m.Accumulate(e); err != nil {
			t.Fatalf("the SDK refuses %q: %v", ev, err)
		}
	}
	return m, errData
}

// A message read into events and written back is the message it was.
func TestAnswerRoundTrip(t *testing.T) {
	for name, in := range files(t, "testdata/answer", ".json") {
		t.Run(name, func(t *testing.T) {
			evs, err := ReadAnswer(nil, in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := AppendAnswer(nil, nil, evs, 0)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, decode(t, in), decode(t, out))
		})
	}
}

// The events of a whole answer: blocks in order with Anthropic's indexes, tool arguments as the
// text of their JSON, usage in the model's terms (input counts the cached tokens), the stop.
func TestReadAnswerEvents(t *testing.T) {
	in := files(t, "testdata/answer", ".json")["text_tools_thinking"]
	evs, err := ReadAnswer([]convo.Event{{Kind: convo.EvEnd}}, in)
	if err != nil {
		t.Fatal(err)
	}
	sameKinds(t, evs[1:], convo.EvStart,
		convo.EvBlockStart, convo.EvDelta, convo.EvSignature, convo.EvBlockStop,
		convo.EvBlockStart, convo.EvDelta, convo.EvBlockStop,
		convo.EvBlockStart, convo.EvDelta, convo.EvBlockStop,
		convo.EvBlockStart, convo.EvDelta, convo.EvBlockStop,
		convo.EvUsage, convo.EvStop, convo.EvEnd)
	if s := evs[1]; s.ID != "msg_01ABC" || s.Model != "claude-sonnet-4-5" {
		t.Errorf("start %+v", s)
	}
	if s := evs[4]; s.Text != "EqQB" || s.Index != 0 {
		t.Errorf("signature %+v", s)
	}
	if c := evs[9]; c.Block != convo.BlockToolCall || c.ID != "toolu_1" || c.Name != "get_weather" || c.Index != 2 {
		t.Errorf("tool call %+v", c)
	}
	if d := evs[10]; d.Text != `{\"city\":\"Paris\"}` {
		t.Errorf("arguments %q", d.Text)
	}
	u := evs[15].Usage
	if u.Input != 150 || u.Output != 50 || u.CacheRead != 30 || u.CacheWrite != 20 ||
		u.Has != convo.HasInput|convo.HasOutput|convo.HasCacheRead|convo.HasCacheWrite {
		t.Errorf("usage %+v", u)
	}
	if s := evs[16]; s.Stop != convo.StopToolUse {
		t.Errorf("stop %+v", s)
	}
}

// An error object in a 200 answer is an Error event: its type in OpenAI's words, Anthropic's own
// kept as the code. What is not an object is no answer.
func TestReadAnswerError(t *testing.T) {
	evs, err := ReadAnswer(nil, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	if err != nil || len(evs) != 1 || evs[0].Kind != convo.EvError {
		t.Fatalf("%v %+v", err, evs)
	}
	if e := evs[0].Err; e.Type != "server_error" || e.Code != "overloaded_error" || e.Message != "Overloaded" {
		t.Errorf("error %+v", e)
	}
	out, _ := AppendAnswer(nil, nil, evs, 0)
	sameJSON(t, decode(t, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)), decode(t, out))
	for _, bad := range []string{`[]`, `{"id":`, ``, `{"content":[}`} {
		if _, err := ReadAnswer(nil, []byte(bad)); !errors.Is(err, errNotAnswer) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A stream read into events and written back says what it said: the same events in the same
// order (pings aside) with the same data, usage as the SDK accumulates it (message_delta repeats
// the input counts, as Anthropic's current API does), the error event as it was.
func TestStreamRoundTrip(t *testing.T) {
	for name, in := range files(t, "testdata/stream", ".sse") {
		t.Run(name, func(t *testing.T) {
			out := convotest.Relay(NewStreamReader(), NewStreamWriter(nil, 0), nil, in)
			wantMsg, wantErr := accumulate(t, in)
			gotMsg, gotErr := accumulate(t, out)
			sameJSON(t, wantMsg, gotMsg)
			sameJSON(t, wantErr, gotErr)
			var want []sseEvent
			for _, e := range parseSSE(t, in) {
				if e.Name != "ping" {
					want = append(want, e)
				}
			}
			got := parseSSE(t, out)
			if len(got) != len(want) {
				t.Fatalf("%d events, want %d\n%s", len(got), len(want), out)
			}
			for i := range want {
				if want[i].Name != got[i].Name {
					t.Fatalf("event %d is %s, want %s", i, got[i].Name, want[i].Name)
				}
				if want[i].Name != "message_delta" {
					sameJSON(t, want[i].Data, got[i].Data)
				}
			}
		})
	}
}

// The events a stream implies, collected by AppendAnswer, are the message the SDK accumulates
// from the stream: stream and whole answers agree.
func TestStreamEventsMakeTheAnswer(t *testing.T) {
	in := files(t, "testdata/stream", ".sse")["thinking_text_tools"]
	out, err := AppendAnswer(nil, nil, convotest.ReadStream(NewStreamReader(), in), 0)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := accumulate(t, in)
	sameJSON(t, want, sdkMessage(t, out))
}

// sdkMessage is an answer as the SDK reads it, as JSON.
func sdkMessage(t *testing.T, body []byte) any {
	t.Helper()
	var m anthropic.Message
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("the SDK cannot read %s: %v", body, err)
	}
	b, _ := json.Marshal(m)
	return decode(t, b)
}

// The stream reader's events for what Anthropic's fixtures do not show: a ping, comments, a
// server tool's blocks left out with their deltas, a tool's whole input at its start,
// redacted thinking, usage repeated in message_delta, a stop sequence, nothing after the end.
func TestStreamReaderEvents(t *testing.T) {
	doc := []byte(`: keep-alive

event: ping
data: {"type": "ping"}

event: message_start
data: {"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":90,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"go\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwK"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"now","input":{"tz":"UTC"}}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

data: not json

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":7}}

event: message_stop
data: {"type":"message_stop"}

event: message_stop
data: {"type":"message_stop"}
`)
	evs := convotest.ReadStream(NewStreamReader(), doc)
	sameKinds(t, evs, convo.EvStart, convo.EvUsage, convo.EvBlockStart, convo.EvSignature, convo.EvBlockStop,
		convo.EvBlockStart, convo.EvDelta, convo.EvBlockStop, convo.EvUsage, convo.EvStop, convo.EvEnd)
	if u := evs[1].Usage; u.Input != 100 || u.CacheRead != 90 || u.CacheWrite != 0 || u.Output != 1 ||
		u.Has != convo.HasInput|convo.HasOutput|convo.HasCacheRead|convo.HasCacheWrite {
		t.Errorf("start usage %+v", u)
	}
	if e := evs[2]; e.Index != 1 || e.Block != convo.BlockRedactedThinking || evs[3].Text != "EmwK" {
		t.Errorf("redacted %+v %+v", e, evs[3])
	}
	if e := evs[6]; e.Text != `{\"tz\":\"UTC\"}` || e.Index != 2 {
		t.Errorf("input at the start %+v", e)
	}
	if u := evs[8].Usage; u.Input != 100 || u.Output != 7 {
		t.Errorf("final usage %+v", u)
	}
	if s := evs[9]; s.Stop != convo.StopSequence || s.StopSequence != "END" {
		t.Errorf("stop %+v", s)
	}
}

// A stream's error event is an Error event, and nothing follows it.
func TestStreamReaderError(t *testing.T) {
	rd := NewStreamReader()
	evs := rd.Read(nil, []byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Slow down\"}}\n\n"))
	if len(evs) != 1 || evs[0].Kind != convo.EvError || evs[0].Err.Type != "rate_limit_error" || evs[0].Err.Code != "rate_limit_error" || evs[0].Err.Message != "Slow down" {
		t.Fatalf("%+v", evs)
	}
	if evs := rd.Read(nil, []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")); len(evs) != 0 {
		t.Fatalf("events after the error: %+v", evs)
	}
	// An event named only by its SSE name.
	evs = NewStreamReader().Read(nil, []byte("event: error\ndata: {\"error\":{\"type\":\"api_error\",\"message\":\"x\"}}\n\n"))
	if len(evs) != 1 || evs[0].Err.Type != "server_error" {
		t.Fatalf("%+v", evs)
	}
}

// Hand-built answers the way the readers of other formats give them, written as a stream and as
// a whole answer (goldens in testdata/writer). The SDK reads both, and they say the same.
var writerCases = []struct {
	name string
	evs  []convo.Event
}{
	{"text", []convo.Event{
		{Kind: convo.EvStart, ID: "chatcmpl-9x", Model: "gpt-x"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 0, Text: "Hel"},
		{Kind: convo.EvDelta, Index: 0, Text: `lo \"world\"\n`},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvUsage, Usage: convo.Usage{Input: 10, Output: 5, Has: convo.HasInput | convo.HasOutput}},
		{Kind: convo.EvStop, Stop: convo.StopEnd},
		{Kind: convo.EvEnd},
	}},
	{"thinking_signature", []convo.Event{
		{Kind: convo.EvStart, ID: "resp_abc", Model: "gpt-5-codex"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockThinking},
		{Kind: convo.EvDelta, Index: 0, Text: "Let me think."},
		{Kind: convo.EvSignature, Index: 0, Text: "EqQBCkYIBxgC"},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvBlockStart, Index: 1, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 1, Text: "Done."},
		{Kind: convo.EvBlockStop, Index: 1},
		{Kind: convo.EvStop, Stop: convo.StopEnd},
		{Kind: convo.EvEnd},
	}},
	{"two_tool_calls", []convo.Event{
		{Kind: convo.EvStart, ID: "chatcmpl-2", Model: "gpt-x"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 0, Text: "Checking."},
		{Kind: convo.EvBlockStart, Index: 1, Block: convo.BlockToolCall, ID: "call_1", Name: "get_weather"},
		{Kind: convo.EvDelta, Index: 1, Text: `{\"city\":`},
		{Kind: convo.EvDelta, Index: 1, Text: `\"Paris\"}`},
		{Kind: convo.EvBlockStart, Index: 2, Block: convo.BlockToolCall, ID: "call_2", Namespace: "multi_agent", Name: "spawn_agent"},
		{Kind: convo.EvDelta, Index: 2, Text: `{}`},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvBlockStop, Index: 1},
		{Kind: convo.EvBlockStop, Index: 2},
		{Kind: convo.EvUsage, Usage: convo.Usage{Input: 40, Output: 12, Has: convo.HasInput | convo.HasOutput}},
		{Kind: convo.EvStop, Stop: convo.StopToolUse},
		{Kind: convo.EvEnd},
	}},
	{"usage_cache_tokens", []convo.Event{
		{Kind: convo.EvStart, ID: "msg_7", Model: "claude-x"},
		{Kind: convo.EvUsage, Usage: convo.Usage{Input: 150, CacheRead: 30, CacheWrite: 20, Output: 1,
			Has: convo.HasInput | convo.HasOutput | convo.HasCacheRead | convo.HasCacheWrite}},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 0, Text: "Once upon a"},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvUsage, Usage: convo.Usage{Output: 50, Reasoning: 20, Has: convo.HasOutput | convo.HasReasoning}},
		{Kind: convo.EvStop, Stop: convo.StopMaxTokens},
		{Kind: convo.EvEnd},
	}},
	{"error_mid_stream", []convo.Event{
		{Kind: convo.EvStart, ID: "chatcmpl-3", Model: "gpt-x"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 0, Text: "Partial"},
		{Kind: convo.EvError, Err: &convo.Error{Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Slow down"}},
		{Kind: convo.EvDelta, Index: 0, Text: "ignored"},
		{Kind: convo.EvEnd},
	}},
	{"redacted_and_empty_blocks", []convo.Event{
		{Kind: convo.EvStart, ID: "msg_8", Model: "claude-x"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockRedactedThinking},
		{Kind: convo.EvSignature, Index: 0, Text: "EmwKAhgB"},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvBlockStart, Index: 1, Block: convo.BlockText},
		{Kind: convo.EvBlockStop, Index: 1},
		{Kind: convo.EvBlockStart, Index: 2, Block: convo.BlockThinking},
		{Kind: convo.EvDelta, Index: 2, Text: ""},
		{Kind: convo.EvBlockStop, Index: 2},
		{Kind: convo.EvBlockStart, Index: 3, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 3, Text: ""},
		{Kind: convo.EvDelta, Index: 3, Text: "x"},
		{Kind: convo.EvBlockStop, Index: 3},
		{Kind: convo.EvStop, Stop: convo.StopSequence, StopSequence: "END"},
		{Kind: convo.EvEnd},
	}},
	{"incomplete", []convo.Event{
		{Kind: convo.EvStart, ID: "resp_9", Model: "gpt-5-codex"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 0, Text: "Once upon"},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvUsage, Usage: convo.Usage{Input: 9, Output: 100, Has: convo.HasInput | convo.HasOutput}},
		{Kind: convo.EvError, Err: &convo.Error{Incomplete: true, Reason: "max_output_tokens"}},
	}},
	{"index_reused", []convo.Event{
		{Kind: convo.EvStart, ID: "chatcmpl-4", Model: "gpt-x"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 0, Text: "Before."},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvBlockStart, Index: 1, Block: convo.BlockToolCall, ID: "call_1", Name: "f"},
		{Kind: convo.EvDelta, Index: 1, Text: `{}`},
		{Kind: convo.EvBlockStop, Index: 1},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 0, Text: "After."},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvEnd},
	}},
	{"no_start", []convo.Event{
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 0, Text: "hi"},
		{Kind: convo.EvEnd},
	}},
}

func TestWriters(t *testing.T) {
	client := &convo.Request{Model: "client-model"}
	for _, c := range writerCases {
		t.Run(c.name, func(t *testing.T) {
			stream := convotest.Write(NewStreamWriter(client, 0), nil, c.evs)
			convotest.Golden(t, filepath.Join("testdata", "writer", c.name+".sse"), stream)
			answer, err := AppendAnswer(nil, client, c.evs, 0)
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, answer, "", "  "); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, answer)
			}
			convotest.Golden(t, filepath.Join("testdata", "writer", c.name+".json"), append(pretty.Bytes(), '\n'))
			msg, errData := accumulate(t, stream)
			if errData != nil {
				sameJSON(t, errData, decode(t, answer))
				return
			}
			sameJSON(t, msg, sdkMessage(t, answer))
		})
	}
}

// The gateway ends a stream with Anthropic's error event, its code beside the standard fields;
// nothing is written after the end.
func TestStreamWriterAbort(t *testing.T) {
	w := NewStreamWriter(nil, 0)
	out := w.Write(nil, &convo.Event{Kind: convo.EvStart, ID: "msg_1"})
	out = w.Write(out, &convo.Event{Kind: convo.EvBlockStart, Block: convo.BlockText})
	out = w.Write(out, &convo.Event{Kind: convo.EvDelta, Text: "x"})
	out = w.Abort(out, "stream_stalled", "the upstream sent nothing for 30 s")
	evs := parseSSE(t, out)
	last := evs[len(evs)-1]
	if last.Name != "error" {
		t.Fatalf("last event %s", last.Name)
	}
	sameJSON(t, decode(t, []byte(`{"type":"error","error":{"type":"api_error","message":"the upstream sent nothing for 30 s","code":"stream_stalled"}}`)), last.Data)
	if more := w.Abort(nil, "x", "y"); len(more) != 0 {
		t.Fatalf("a second abort wrote %s", more)
	}
	if more := w.Write(nil, &convo.Event{Kind: convo.EvEnd}); len(more) != 0 {
		t.Fatalf("an event after the abort wrote %s", more)
	}
	done := NewStreamWriter(nil, 0)
	done.Write(nil, &convo.Event{Kind: convo.EvEnd})
	if more := done.Abort(nil, "x", "y"); len(more) != 0 {
		t.Fatalf("an abort after the end wrote %s", more)
	}
}

func TestMain(m *testing.M) {
	_ = os.MkdirAll(filepath.Join("testdata", "writer"), 0o755)
	os.Exit(m.Run())
}
