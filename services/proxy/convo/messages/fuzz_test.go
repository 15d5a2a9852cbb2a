package messages

import (
	"encoding/json"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// FuzzReadRequest: any body is refused or read; what is read is written as valid JSON, which
// reads again. Nothing panics. The Claude Code seeds are 17 KB: each new input the engine finds
// is minimized for up to a minute by default, so run it with -fuzzminimizetime 3s.
func FuzzReadRequest(f *testing.F) {
	convotest.FuzzRequests(f, ReadRequest, func(_ *testing.T, body []byte, r *convo.Request) ([]byte, error) {
		return AppendRequest(nil, r, convo.Target{DefaultMaxTokens: len(body) % 3})
	},
		`{"system":[{"type":"image"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":{"x":1}}]}]}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"\u2028\"x"}]},{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":""}]}]}],"thinking":{"type":"enabled"}}`,
		`{"messages":[{"role":"assistant","content":[{"type":"tool_use","input":[1]},{"type":"redacted_thinking","data":"x"}]}],"output_format":{"type":"json_schema","schema":{}},"tools":[{"type":"bash_20250124"},null]}`,
		`{"temperature":1e999,"top_p":-1e400,"thinking":{"type":"enabled","budget_tokens":99999999999999999999}}`)
}

// FuzzReadAnswer: any body is refused or read; its events make a valid answer and a stream of
// named JSON events.
func FuzzReadAnswer(f *testing.F) {
	convotest.Seed(f, "answer", ".json")
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
		convotest.NamedEvents(t, convotest.Write(w, nil, evs))
		convotest.NamedEvents(t, w.Abort(nil, "c", "m"))
	})
}

// FuzzStreamReader feeds arbitrary events (split at blank lines) to the reader and its events to
// the writer: nothing panics, and what is written is named events with JSON data.
func FuzzStreamReader(f *testing.F) {
	convotest.Seed(f, "stream", ".sse")
	convotest.Seed(f, "writer", ".sse")
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"input_json_delta\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_start\",\"index\":-1,\"content_block\":{\"type\":\"tool_use\",\"input\":{\"a\":1}}}\n\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":-5}}\n\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		w := NewStreamWriter(&convo.Request{Model: "m"}, 0)
		out := convotest.Relay(NewStreamReader(), w, nil, doc)
		convotest.NamedEvents(t, w.Abort(out, "stream_incomplete", "the upstream stream ended before it was complete"))
	})
}

// texts are valid Text values (escaped as a reader hands them out) the model fuzzers pick from.
var texts = []convo.Text{"", "a", `\"q\"`, `line\nnext`, `{\"x\":1}`, `\u00e9\ud83d\ude00`, "{", "}", `\\`, "<b>&"}

// modelOf builds a request of the model from fuzz bytes: each pair of bytes adds a message, a
// part of the last message, a tool or a setting.
func modelOf(b []byte) *convo.Request {
	r := &convo.Request{Model: "m"}
	no, yes := false, true
	pick := func(c byte) string { return texts[int(c)%len(texts)].String() }
	for i := 0; i+1 < len(b); i += 2 {
		op, c := b[i], b[i+1]
		t := texts[int(c)%len(texts)]
		if op%16 > 0 && op%16 < 9 && len(r.Messages) == 0 {
			r.Messages = append(r.Messages, convo.Message{})
		}
		last := func() *convo.Message { return &r.Messages[len(r.Messages)-1] }
		switch op % 16 {
		case 0:
			r.Messages = append(r.Messages, convo.Message{Role: convo.Role(c % 4)})
		case 1:
			last().Parts = append(last().Parts, convo.Part{Kind: convo.PartText, Text: t, Cache: cacheIf(c)})
		case 2:
			urls := []string{"data:image/png;base64,AAAA", "https://x/i.png", "ftp://x", "", "data:,x"}
			last().Parts = append(last().Parts, convo.Part{Kind: convo.PartImage, URL: urls[int(c)%len(urls)], Data: pick(c / 3), MediaType: "image/png"})
		case 3:
			last().Parts = append(last().Parts, convo.Part{Kind: convo.PartDocument, Text: t, Title: pick(c / 2), URL: []string{"", "https://x/d.pdf"}[c%2]})
		case 4:
			args := [][]byte{nil, []byte(`{}`), []byte(`{"a":[1,2]}`), []byte(`[1]`)}
			last().Parts = append(last().Parts, convo.Part{Kind: convo.PartToolCall, ID: pick(c), Name: pick(c / 2), Namespace: pick(c / 5), Args: args[int(c)%len(args)]})
		case 5:
			content := [][]convo.Part{nil, {}, {{Kind: convo.PartText, Text: t}}, {{Kind: convo.PartText}, {Kind: convo.PartImage, URL: "ftp://x"}}, {{Kind: convo.PartThinking}}}
			last().Parts = append(last().Parts, convo.Part{Kind: convo.PartToolResult, ID: pick(c), IsError: c%2 == 0, Content: content[int(c)%len(content)], Cache: cacheIf(c / 2)})
		case 6:
			last().Parts = append(last().Parts, convo.Part{Kind: convo.PartThinking, Text: t, Signature: pick(c / 2), Encrypted: pick(c / 3), Redacted: c%3 == 0})
		case 7:
			last().Name = pick(c)
		case 8:
			r.System = append(r.System, convo.Part{Kind: convo.PartKind(c % 3), Text: t, Cache: cacheIf(c / 2)})
		case 9:
			r.Tools = append(r.Tools, convo.Tool{Kind: convo.ToolKind(c % 3), Name: pick(c / 3), Description: pick(c / 4), Type: pick(c / 5),
				Family: []string{"anthropic", "openai"}[c%2], Raw: []byte(`{"type":"x"}`), Parameters: []byte(`{"type":"object"}`)[:int(c%2)*17],
				Tools: []convo.Tool{{Name: pick(c)}}, Strict: &yes})
		case 10:
			r.ToolChoice = convo.ToolChoice{Mode: convo.ChoiceMode(c % 5), Name: pick(c / 5)}
		case 11:
			r.ParallelToolCalls = []*bool{nil, &no, &yes}[c%3]
		case 12:
			r.ReasoningEffort = []string{"", "minimal", "low", "medium", "high", "none", "odd"}[c%7]
			r.ThinkingBudget = int(c%4) * 700
			r.ThinkingAdaptive = c%5 == 0
		case 13:
			r.MaxTokens = int(c) * 37
			f := float64(c) / 100
			r.Temperature, r.TopP = &f, &f
		case 14:
			r.Format = &convo.ResponseFormat{Kind: convo.FormatKind(c % 3), Schema: []byte(`{"type":"object"}`)}
			r.User, r.Metadata = pick(c), []byte(`{"user_id":"u","k":1}`)[:int(c%2)*21]
		case 15:
			r.Stop = append(r.Stop, pick(c))
			r.Stream = c%2 == 0
		}
	}
	return r
}

func cacheIf(c byte) []byte {
	if c%3 == 0 {
		return []byte(`{"type":"ephemeral"}`)
	}
	return nil
}

// FuzzAppendRequest: whatever request the model holds (as any reader may make it), the writer
// writes valid JSON that reads back as a messages request.
func FuzzAppendRequest(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 0, 1, 4, 2, 0, 3, 5, 2, 0, 2, 1, 3, 5, 7, 9, 4, 11, 1, 12, 2})
	f.Add([]byte{8, 1, 0, 2, 1, 9, 0, 3, 5, 1, 5, 2, 1, 4, 6, 3, 6, 4, 14, 3, 15, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := modelOf(b)
		out, err := AppendRequest([]byte("x"), r, convo.Target{DefaultMaxTokens: len(b)})
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out[1:]) {
			t.Fatalf("invalid request for %v: %s", b, out[1:])
		}
		if _, err := ReadRequest(out[1:]); err != nil {
			t.Fatalf("the request does not read: %v\n%s", err, out[1:])
		}
	})
}

// eventsOf builds a sequence of model events from fuzz bytes, as any reader may emit them:
// blocks that interleave, deltas for blocks never begun, usage anywhere, errors.
func eventsOf(b []byte) []convo.Event {
	var evs []convo.Event
	for i := 0; i+1 < len(b); i += 2 {
		op, c := b[i], b[i+1]
		e := convo.Event{Kind: convo.EventKind(op % 9), Index: int(c % 4), Block: convo.BlockKind(c / 4 % 4), Text: texts[int(c)%len(texts)]}
		switch e.Kind {
		case convo.EvStart:
			e.ID, e.Model = []string{"", "msg_1", "chatcmpl-2", "resp_3"}[c%4], e.Text.String()
		case convo.EvBlockStart:
			e.ID, e.Name, e.Namespace = "call_"+e.Text.String(), e.Text.String(), []string{"", "ns"}[c%2]
		case convo.EvUsage:
			e.Usage = convo.Usage{Input: int64(c) * 3, Output: int64(c), CacheRead: int64(c % 5), CacheWrite: int64(c % 7), Has: convo.UsageFields(op / 9)}
		case convo.EvStop:
			e.Stop, e.StopSequence = convo.StopReason(c%8), e.Text.String()
		case convo.EvError:
			e.Err = &convo.Error{Type: e.Text.String(), Code: []string{"", "overloaded_error", "x"}[c%3], Message: e.Text.String(),
				Incomplete: c%2 == 0, Reason: []string{"max_output_tokens", "content_filter", "other"}[c%3]}
		}
		evs = append(evs, e)
	}
	return evs
}

// FuzzWriters: whatever events come, the stream writer writes named events with JSON data that
// the SDK accumulates (a tool's arguments are passed on as they come: a stream cannot wait to
// see whether they end as JSON), and the answer writer a valid answer.
func FuzzWriters(f *testing.F) {
	f.Add([]byte{0, 1, 1, 12, 2, 12, 1, 13, 2, 14, 4, 12, 5, 1, 6, 2, 7, 0})
	f.Add([]byte{1, 0, 2, 1, 1, 5, 2, 5, 3, 0, 8, 3, 2, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		evs := eventsOf(b)
		w := NewStreamWriter(&convo.Request{Model: "m"}, 0)
		out := w.Abort(convotest.Write(w, nil, evs), "stream_incomplete", "cut")
		convotest.NamedEvents(t, out)
		sdkAccumulate(t, out)
		answer, err := AppendAnswer(nil, nil, evs, 0)
		if err != nil || !json.Valid(answer) {
			t.Fatalf("invalid answer: %v %s", err, answer)
		}
	})
}
