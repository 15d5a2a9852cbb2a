package chat

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// The stream fixtures: the events read, and the stream written from them for a client that
// asked for the usage chunk.
func TestStreamGolden(t *testing.T) {
	convotest.Goldens(t, "stream", ".sse", ".golden", func(t *testing.T, in []byte) []byte {
		evs := convotest.ReadStream(NewStreamReader(), in)
		out := writeStream(&convo.Request{IncludeUsage: true}, evs)
		return append(append(dump(evs), "---\n"...), out...)
	})
}

// A chat stream through the events and back gives a client what the original gave it: the
// role, the content and reasoning, each tool call with its id and name in its first fragment and
// its arguments, the finish reason, the usage, [DONE] — or the error that ended it.
func TestStreamRoundTrip(t *testing.T) {
	docs := map[string]string{
		"reasoning_text_tools": string(convotest.Read(t, "testdata/stream/reasoning_text_tools.sse")),
		"error":                string(convotest.Read(t, "testdata/stream/error.sse")),
		"escapes and length": `data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"\"q\" \u00e9\n\\"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}` + "\n\n" +
			`data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"completion_tokens_details":{"reasoning_tokens":2}}}` + "\n\n" +
			"data: [DONE]\n\n",
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			out := writeStream(&convo.Request{IncludeUsage: true}, convotest.ReadStream(NewStreamReader(), []byte(doc)))
			got, want := accumulate(t, out), accumulate(t, []byte(doc))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the stream\n got %s\nwant %s\n%s", mustJSON(got), mustJSON(want), out)
			}
		})
	}
}

// A thinking block, a text and two tool calls become the chunks an OpenAI-compatible server
// streams: the role in the first delta, reasoning_content and content deltas, each call
// announced with its index, id, type and name (arguments empty) and then its argument fragments
// under its index, the finish reason alone, the usage chunk (asked for) and [DONE].
func TestStreamWriterSequence(t *testing.T) {
	evs := []convo.Event{
		{Kind: convo.EvStart, ID: "msg_01", Model: "claude-x"},
		{Kind: convo.EvUsage, Usage: convo.Usage{Input: 25, CacheRead: 5, Has: convo.HasInput | convo.HasCacheRead}},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockThinking},
		{Kind: convo.EvDelta, Index: 0, Block: convo.BlockThinking, Text: "Two cities."},
		{Kind: convo.EvSignature, Index: 0, Text: "EqQB"},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvBlockStart, Index: 1, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 1, Block: convo.BlockText, Text: "Checking"},
		{Kind: convo.EvDelta, Index: 1, Block: convo.BlockText, Text: ` \"both\".`},
		{Kind: convo.EvBlockStop, Index: 1},
		{Kind: convo.EvBlockStart, Index: 2, Block: convo.BlockToolCall, ID: "toolu_1", Name: "get_weather"},
		{Kind: convo.EvDelta, Index: 2, Block: convo.BlockToolCall, Text: `{\"city\": `},
		{Kind: convo.EvDelta, Index: 2, Block: convo.BlockToolCall, Text: `\"Paris\"}`},
		{Kind: convo.EvBlockStop, Index: 2},
		{Kind: convo.EvBlockStart, Index: 3, Block: convo.BlockToolCall, ID: "toolu_2", Namespace: "agents", Name: "wait_agent"},
		{Kind: convo.EvDelta, Index: 3, Block: convo.BlockToolCall, Text: `{}`},
		{Kind: convo.EvBlockStop, Index: 3},
		{Kind: convo.EvUsage, Usage: convo.Usage{Output: 42, Has: convo.HasOutput}},
		{Kind: convo.EvStop, Stop: convo.StopToolUse},
		{Kind: convo.EvEnd},
	}
	head := `data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1700000000,"model":"claude-x","choices":[{"index":0,"delta":`
	tail := `,"finish_reason":null}]}` + "\n\n"
	want := head + `{"role":"assistant","content":""}` + tail +
		head + `{"reasoning_content":"Two cities."}` + tail +
		head + `{"content":"Checking"}` + tail +
		head + `{"content":" \"both\"."}` + tail +
		head + `{"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":""}}]}` + tail +
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}` + tail +
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}` + tail +
		head + `{"tool_calls":[{"index":1,"id":"toolu_2","type":"function","function":{"name":"agents__wait_agent","arguments":""}}]}` + tail +
		head + `{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}` + tail +
		head + `{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1700000000,"model":"claude-x","choices":[],` +
		`"usage":{"prompt_tokens":25,"completion_tokens":42,"total_tokens":67,"prompt_tokens_details":{"cached_tokens":5}}}` + "\n\n" +
		"data: [DONE]\n\n"
	if got := string(writeStream(&convo.Request{IncludeUsage: true}, evs)); got != want {
		t.Fatalf("wrote\n%s\nwant\n%s", got, want)
	}
	// Without stream_options.include_usage the client gets no usage chunk (the gateway asked
	// for it upstream for itself).
	noUsage := strings.Replace(want, `data: {"id":"chatcmpl-01","object":"chat.completion.chunk","created":1700000000,"model":"claude-x","choices":[],`+
		`"usage":{"prompt_tokens":25,"completion_tokens":42,"total_tokens":67,"prompt_tokens_details":{"cached_tokens":5}}}`+"\n\n", "", 1)
	if got := string(writeStream(&convo.Request{}, evs)); got != noUsage {
		t.Fatalf("without include_usage wrote\n%s", got)
	}
	// Every chunk written, one by one, is a whole SSE event.
	w := NewStreamWriter(&convo.Request{}, 1)
	for i := range evs {
		if out := w.Write(nil, &evs[i]); len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("event %d: %q", i, out)
		}
	}
}

// An error in the middle of a stream (OpenAI sends it as a chunk {"error":…} with status 200)
// ends the answer: the reader's last event is the Error, the writer's last chunk is OpenAI's
// error chunk, no [DONE] follows and nothing more is written, not even the gateway's own abort.
func TestStreamErrorMidStream(t *testing.T) {
	evs := convotest.ReadStream(NewStreamReader(), convotest.Read(t, "testdata/stream/error.sse"))
	last := evs[len(evs)-1]
	if last.Kind != convo.EvError || last.Err.Message != "upstream overloaded" || last.Err.Type != "server_error" || last.Err.Code != "overloaded" {
		t.Fatalf("last event %+v (%+v)", last, last.Err)
	}
	w := NewStreamWriter(&convo.Request{IncludeUsage: true}, 1)
	out := convotest.Write(w, nil, evs)
	wantEnd := `data: {"error":{"message":"upstream overloaded","type":"server_error","code":"overloaded","param":null}}` + "\n\n"
	if !strings.HasSuffix(string(out), wantEnd) || strings.Contains(string(out), "[DONE]") {
		t.Fatalf("wrote\n%s", out)
	}
	if more := w.Write(nil, &convo.Event{Kind: convo.EvEnd}); len(more) > 0 {
		t.Fatalf("wrote after the error: %s", more)
	}
	if more := w.Abort(nil, "stream_incomplete", "cut"); len(more) > 0 {
		t.Fatalf("aborted after the error: %s", more)
	}

	// An error from another format keeps its words mapped to OpenAI's.
	w = NewStreamWriter(&convo.Request{}, 1)
	got := string(w.Write(nil, &convo.Event{Kind: convo.EvError, Err: &convo.Error{Type: "overloaded_error", Message: "Overloaded"}}))
	if want := `data: {"error":{"message":"Overloaded","type":"server_error","code":"overloaded_error","param":null}}` + "\n\n"; got != want {
		t.Fatalf("wrote %s, want %s", got, want)
	}

	// The gateway cutting a stream short writes its own code and message, once.
	w = NewStreamWriter(&convo.Request{}, 1)
	out = w.Write(nil, &convo.Event{Kind: convo.EvStart, ID: "chatcmpl-1"})
	out = w.Abort(out[:0], "stream_stalled", `no event for 60 s`)
	if want := `data: {"error":{"message":"no event for 60 s","type":"upstream_error","code":"stream_stalled","param":null}}` + "\n\n"; string(out) != want {
		t.Fatalf("abort wrote %s", out)
	}
	if more := w.Abort(nil, "x", "y"); len(more) > 0 {
		t.Fatalf("aborted twice: %s", more)
	}
}

// What the reader makes of the streams OpenAI-compatible servers send.
func TestStreamReaderForms(t *testing.T) {
	chunk := func(delta string) string {
		return `data: {"id":"c","model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	for _, c := range []struct{ name, doc, want string }{
		{"parallel calls interleaved by index",
			chunk(`{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}`) +
				chunk(`{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{"}}]}`) +
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":":1}"}},{"index":1,"function":{"arguments":"}"}}]}`) +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
			"start id=\"c\" model=\"m\"\nblock_start 0 tool_call id=\"a\" name=\"f\"\ndelta 0 \"{\\\"x\\\"\"\n" +
				"block_start 1 tool_call id=\"b\" name=\"g\"\ndelta 1 \"{\"\ndelta 0 \":1}\"\ndelta 1 \"}\"\n" +
				"block_stop 0\nblock_stop 1\nstop tool_use\nend\n"},
		{"calls without an index, told apart by id",
			chunk(`{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}`) +
				chunk(`{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{"}}]}`) +
				chunk(`{"tool_calls":[{"function":{"arguments":"}"}}]}`) + "data: [DONE]\n\n",
			"start id=\"c\" model=\"m\"\nblock_start 0 tool_call id=\"a\" name=\"f\"\ndelta 0 \"{}\"\n" +
				"block_start 1 tool_call id=\"b\" name=\"g\"\ndelta 1 \"{\"\ndelta 1 \"}\"\nblock_stop 0\nblock_stop 1\nstop end\nend\n"},
		{"reasoning under either name, text after calls, refusal",
			chunk(`{"reasoning":"r1"}`) + chunk(`{"reasoning_content":"r2","reasoning":"ignored"}`) +
				chunk(`{"content":"t"}`) + chunk(`{"tool_calls":[{"index":0,"id":"a","function":{"name":"f"}}]}`) +
				chunk(`{"content":"after"}`) + chunk(`{"refusal":"no"}`) + "data: [DONE]\n\n",
			"start id=\"c\" model=\"m\"\nblock_start 0 thinking\ndelta 0 \"r1\"\ndelta 0 \"r2\"\nblock_stop 0\nblock_start 1 text\ndelta 1 \"t\"\nblock_stop 1\n" +
				"block_start 2 tool_call id=\"a\" name=\"f\"\nblock_stop 2\nblock_start 3 text\ndelta 3 \"after\"\ndelta 3 \"no\"\nblock_stop 3\nstop end\nend\n"},
		{"usage after the finish reason, stop held until [DONE]",
			chunk(`{"content":"x"}`) + `data: {"choices":[{"delta":{},"finish_reason":"length"}],"usage":null}` + "\n\n" +
				`data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":0}}}` + "\n\n" +
				"data: [DONE]\n\n",
			"start id=\"c\" model=\"m\"\nblock_start 0 text\ndelta 0 \"x\"\nblock_stop 0\n" +
				"usage input=7 output=1 cache_read=3 cache_write=0 reasoning=0 has=cache_read,input,output,reasoning\nstop max_tokens\nend\n"},
		{"other choices, keep-alives and junk ignored; nothing after [DONE]",
			": keep-alive\n\n" + `data: {"choices":[{"index":1,"delta":{"content":"other"}}]}` + "\n\ndata: {not json\n\nevent: x\n\n" +
				chunk(`{"content":"mine"}`) + "data: [DONE]\n\n" + chunk(`{"content":"late"}`),
			"start id=\"\" model=\"\"\nblock_start 0 text\ndelta 0 \"mine\"\nblock_stop 0\nstop end\nend\n"},
		{"an empty stream", "data: [DONE]\n\n", "start id=\"\" model=\"\"\nstop end\nend\n"},
		{"an error as a string, then nothing",
			chunk(`{"content":"a"}`) + `data: {"error":"boom"}` + "\n\n" + chunk(`{"content":"b"}`) + "data: [DONE]\n\n",
			"start id=\"c\" model=\"m\"\nblock_start 0 text\ndelta 0 \"a\"\nerror type=\"\" code=\"\" message=\"boom\" param=\"\"\n"},
		{"error null is no error; a stream cut before [DONE] has no end",
			`data: {"id":"c","error":null,"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}` + "\n\n",
			"start id=\"c\" model=\"\"\nblock_start 0 text\ndelta 0 \"a\"\nblock_stop 0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(dump(convotest.ReadStream(NewStreamReader(), []byte(c.doc)))); got != c.want {
				t.Fatalf("read\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// Texts are handed on as they stand in the chunk, escapes and all: nothing is unescaped and
// escaped again on the way.
func TestStreamTextsStayEscaped(t *testing.T) {
	in := `data: {"choices":[{"delta":{"content":"a\u00e9\"\\\n"}}]}` + "\n\n"
	evs := NewStreamReader().Read(nil, []byte(in))
	if len(evs) != 3 || evs[2].Text != `a\u00e9\"\\\n` {
		t.Fatalf("events %+v", evs)
	}
	out := string(writeStream(&convo.Request{}, evs))
	if !strings.Contains(out, `{"content":"a\u00e9\"\\\n"}`) {
		t.Fatalf("wrote %s", out)
	}
}

// An answer the upstream cut short (Responses' response.incomplete, read as an Error event that
// says so) ends a chat stream as chat says it: finish_reason length or content_filter, the usage
// chunk when asked for, [DONE]. Another incomplete reason is an error chunk.
func TestStreamCutShort(t *testing.T) {
	for reason, want := range map[string]string{
		"max_output_tokens": `{},"finish_reason":"length"}]}`,
		"content_filter":    `{},"finish_reason":"content_filter"}]}`,
	} {
		evs := []convo.Event{{Kind: convo.EvStart, ID: "resp_1", Model: "gpt-5-codex"},
			{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText}, {Kind: convo.EvDelta, Index: 0, Text: "Once"},
			{Kind: convo.EvUsage, Usage: convo.Usage{Input: 5, Output: 9, Has: convo.HasInput | convo.HasOutput}},
			{Kind: convo.EvError, Err: &convo.Error{Incomplete: true, Reason: reason}}}
		out := string(writeStream(&convo.Request{IncludeUsage: true}, evs))
		if !strings.Contains(out, want) || !strings.Contains(out, `"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}`) ||
			!strings.HasSuffix(out, "data: [DONE]\n\n") || strings.Contains(out, `"error"`) {
			t.Errorf("%s: wrote\n%s", reason, out)
		}
		a := accumulate(t, []byte(out))
		if a.Content != "Once" || a.ID != "chatcmpl-1" {
			t.Errorf("%s: %+v", reason, a)
		}
	}
	out := string(writeStream(&convo.Request{}, []convo.Event{{Kind: convo.EvStart},
		{Kind: convo.EvError, Err: &convo.Error{Incomplete: true, Reason: "something_new", Message: "cut"}}}))
	if !strings.HasSuffix(out, `data: {"error":{"message":"cut","type":"server_error","code":null,"param":null}}`+"\n\n") {
		t.Errorf("wrote\n%s", out)
	}
}
