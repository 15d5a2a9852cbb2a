package chat

import (
	"encoding/json"
	"reflect"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// The answer fixtures: the events read, and the answer written from them.
func TestAnswerGolden(t *testing.T) {
	convotest.Goldens(t, "answer", ".json", ".golden", func(t *testing.T, in []byte) []byte {
		evs, err := ReadAnswer(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := AppendAnswer(nil, &convo.Request{}, evs, 1700000000)
		if err != nil {
			t.Fatal(err)
		}
		return append(append(dump(evs), "---\n"...), convotest.Indent(t, out)...)
	})
}

// A chat completion through the events and back is the completion it was: id, model, content,
// reasoning, tool calls with their arguments as they came (invalid ones too), finish reason,
// usage with cached and reasoning tokens.
func TestAnswerRoundTrip(t *testing.T) {
	for _, in := range []string{
		string(convotest.Read(t, "testdata/answer/length.json")),
		string(convotest.Read(t, "testdata/answer/text_tools_reasoning.json")),
		`{"id":"chatcmpl-3","object":"chat.completion","created":5,"model":"o3","choices":[{"index":0,"message":{"role":"assistant","content":"A \"quoted\" \u00e9 line\n"},"finish_reason":"content_filter"}],` +
			`"usage":{"prompt_tokens":10,"completion_tokens":200,"total_tokens":210,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":150}}}`,
		`{"id":"chatcmpl-4","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],` +
			`"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	} {
		evs, err := ReadAnswer(nil, []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		var created struct{ Created int64 }
		_ = json.Unmarshal([]byte(in), &created)
		out, err := AppendAnswer(nil, &convo.Request{}, evs, created.Created)
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip changed the answer\n got %s\nwant %s", mustJSON(got), mustJSON(want))
		}
	}
}

// What the reader takes from the forms OpenAI-compatible servers write: reasoning under either
// name (reasoning_content wins), a refusal as the text when there is no content, DeepSeek's
// cache hits, the first choice only, a missing finish reason as the end of the turn, arguments
// given as an object.
func TestReadAnswerForms(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"id":"a","model":"m","choices":[{"message":{"reasoning":"r","reasoning_content":null,"content":null,"refusal":"I can't."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"prompt_cache_hit_tokens":4}}`,
			"start id=\"a\" model=\"m\"\nblock_start 0 thinking\ndelta 0 \"r\"\nblock_stop 0\nblock_start 1 text\ndelta 1 \"I can't.\"\nblock_stop 1\n" +
				"usage input=9 output=1 cache_read=4 cache_write=0 reasoning=0 has=cache_read,input,output\nstop end\nend\n"},
		{`{"choices":[{"index":0,"message":{"reasoning":"no","reasoning_content":"yes","content":"x"}},{"index":1,"message":{"content":"other"}}]}`,
			"start id=\"\" model=\"\"\nblock_start 0 thinking\ndelta 0 \"yes\"\nblock_stop 0\nblock_start 1 text\ndelta 1 \"x\"\nblock_stop 1\nstop end\nend\n"},
		{`{"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":{"a":"b"}}},{"function":{"name":"g"}},7]},"finish_reason":"function_call"}]}`,
			"start id=\"\" model=\"\"\nblock_start 0 tool_call id=\"c1\" name=\"f\"\ndelta 0 \"{\\\"a\\\":\\\"b\\\"}\"\nblock_stop 0\n" +
				"block_start 1 tool_call id=\"\" name=\"g\"\nblock_stop 1\nstop tool_use\nend\n"},
		{`{"choices":[]}`, "start id=\"\" model=\"\"\nstop end\nend\n"},
		{`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota","param":null}}`,
			"error type=\"insufficient_quota\" code=\"insufficient_quota\" message=\"quota\" param=\"\"\n"},
		{`{"error":"plain","choices":null}`, "error type=\"\" code=\"\" message=\"plain\" param=\"\"\n"},
		{`{"error":{"message":"m","code":429,"param":"messages"}}`, "error type=\"\" code=\"429\" message=\"m\" param=\"messages\"\n"},
	} {
		evs, err := ReadAnswer(nil, []byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := string(dump(evs)); got != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"choices":[}`, `"x"`} {
		if _, err := ReadAnswer(nil, []byte(bad)); err == nil {
			t.Errorf("%q read as an answer", bad)
		}
	}
}

// Events from another format's answer are written as a chat completion: texts joined, thinking
// as reasoning_content, calls under flat names with ids (one made up when the upstream gave none)
// and their arguments ({} for none), the stop reason in OpenAI's words, usage with the cached and
// reasoning tokens named. An error is OpenAI's error object, an Anthropic type mapped.
func TestAppendAnswerFromEvents(t *testing.T) {
	evs := []convo.Event{
		{Kind: convo.EvStart, ID: "msg_01", Model: "claude-x"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockThinking},
		{Kind: convo.EvDelta, Index: 0, Block: convo.BlockThinking, Text: "Think"},
		{Kind: convo.EvDelta, Index: 0, Block: convo.BlockThinking, Text: "ing."},
		{Kind: convo.EvSignature, Index: 0, Text: "sig"},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvBlockStart, Index: 1, Block: convo.BlockRedactedThinking},
		{Kind: convo.EvSignature, Index: 1, Text: "enc"},
		{Kind: convo.EvBlockStop, Index: 1},
		{Kind: convo.EvBlockStart, Index: 2, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 2, Block: convo.BlockText, Text: `Say \"hi\"`},
		{Kind: convo.EvBlockStop, Index: 2},
		{Kind: convo.EvBlockStart, Index: 3, Block: convo.BlockToolCall, ID: "toolu_1", Namespace: "agents", Name: "spawn_agent"},
		{Kind: convo.EvBlockStart, Index: 4, Block: convo.BlockToolCall, Name: "now"},
		{Kind: convo.EvDelta, Index: 3, Block: convo.BlockToolCall, Text: `{\"task\":`},
		{Kind: convo.EvDelta, Index: 3, Block: convo.BlockToolCall, Text: `\"a\"}`},
		{Kind: convo.EvBlockStop, Index: 3},
		{Kind: convo.EvBlockStop, Index: 4},
		{Kind: convo.EvBlockStart, Index: 5, Block: convo.BlockText},
		{Kind: convo.EvDelta, Index: 5, Block: convo.BlockText, Text: " Done."},
		{Kind: convo.EvBlockStop, Index: 5},
		{Kind: convo.EvUsage, Usage: convo.Usage{Input: 150, CacheRead: 30, CacheWrite: 20, Has: convo.HasInput | convo.HasCacheRead | convo.HasCacheWrite}},
		{Kind: convo.EvUsage, Usage: convo.Usage{Output: 50, Reasoning: 12, Has: convo.HasOutput | convo.HasReasoning}},
		{Kind: convo.EvStop, Stop: convo.StopToolUse},
		{Kind: convo.EvEnd},
	}
	out, err := AppendAnswer(nil, &convo.Request{}, evs, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"chatcmpl-01","object":"chat.completion","created":1700000000,"model":"claude-x","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":"Say \"hi\" Done.","reasoning_content":"Thinking.","tool_calls":[` +
		`{"id":"toolu_1","type":"function","function":{"name":"agents__spawn_agent","arguments":"{\"task\":\"a\"}"}},` +
		`{"id":"call_01_1","type":"function","function":{"name":"now","arguments":"{}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":150,"completion_tokens":50,"total_tokens":200,"prompt_tokens_details":{"cached_tokens":30},"completion_tokens_details":{"reasoning_tokens":12}}}`
	if string(out) != want {
		t.Fatalf("wrote\n%s\nwant\n%s", out, want)
	}

	for stop, finish := range map[convo.StopReason]string{convo.StopUnset: "stop", convo.StopEnd: "stop", convo.StopSequence: "stop",
		convo.StopPause: "stop", convo.StopMaxTokens: "length", convo.StopToolUse: "tool_calls", convo.StopContentFilter: "content_filter",
		convo.StopRefusal: "content_filter"} {
		evs := []convo.Event{{Kind: convo.EvStart, ID: "resp_9"}, {Kind: convo.EvStop, Stop: stop}, {Kind: convo.EvEnd}}
		out, _ := AppendAnswer(nil, &convo.Request{}, evs, 1)
		want := `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"","choices":[{"index":0,"message":{"role":"assistant","content":""},` +
			`"finish_reason":"` + finish + `"}],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`
		if string(out) != want {
			t.Errorf("stop %d:\n%s\nwant\n%s", stop, out, want)
		}
	}

	for _, c := range []struct {
		err  convo.Error
		want string
	}{
		{convo.Error{Type: "overloaded_error", Message: "Overloaded"}, `{"error":{"message":"Overloaded","type":"server_error","code":"overloaded_error","param":null}}`},
		{convo.Error{Type: "not_found_error", Message: "no model"}, `{"error":{"message":"no model","type":"invalid_request_error","code":"not_found_error","param":null}}`},
		{convo.Error{Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "slow", Param: "p"}, `{"error":{"message":"slow","type":"rate_limit_error","code":"rate_limit_exceeded","param":"p"}}`},
		{convo.Error{}, `{"error":{"message":"the upstream reported an error","type":"server_error","code":null,"param":null}}`},
	} {
		evs := []convo.Event{{Kind: convo.EvStart, ID: "x"}, {Kind: convo.EvError, Err: &c.err}}
		out, err := AppendAnswer(nil, &convo.Request{}, evs, 1)
		if err != nil || string(out) != c.want {
			t.Errorf("%+v: %s, %v\nwant %s", c.err, out, err, c.want)
		}
	}
}

// A whole answer cut short is an answer with its finish reason, not an error.
func TestAppendAnswerCutShort(t *testing.T) {
	evs := []convo.Event{{Kind: convo.EvStart, ID: "resp_1", Model: "m"},
		{Kind: convo.EvBlockStart, Index: 0, Block: convo.BlockText}, {Kind: convo.EvDelta, Index: 0, Text: "Once"},
		{Kind: convo.EvBlockStop, Index: 0},
		{Kind: convo.EvError, Err: &convo.Error{Incomplete: true, Reason: "max_output_tokens"}}}
	out, err := AppendAnswer(nil, &convo.Request{}, evs, 1)
	want := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Once"},` +
		`"finish_reason":"length"}],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`
	if err != nil || string(out) != want {
		t.Fatalf("wrote %s (%v)\nwant %s", out, err, want)
	}
}
