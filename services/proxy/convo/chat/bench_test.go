package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// Benchmarks on the sizes the gateway benchmark and coding agents use: a 10 KB answer, a long
// agent turn of about 170 KB, single stream chunks.

var bigText = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 225)

var bigChat = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"` + bigText +
	`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2000,"total_tokens":2010}}`)

// agentRequest is a chat request the size of a long coding-agent turn: a long system prompt, 40
// tools with schemas and 100 messages of tool calls and results.
func agentRequest() []byte {
	var tools []map[string]any
	for i := 0; i < 40; i++ {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": fmt.Sprintf("tool_%d", i),
			"description": strings.Repeat("Does a thing with care. ", 40),
			"parameters":  map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string", "description": strings.Repeat("a path ", 20)}}}}})
	}
	msgs := []map[string]any{{"role": "system", "content": strings.Repeat("You are Claude Code. ", 1500)}, {"role": "user", "content": "Go."}}
	for i := 0; i < 50; i++ {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "Looking.", "tool_calls": []any{map[string]any{"id": fmt.Sprintf("t%d", i),
			"type": "function", "function": map[string]any{"name": "tool_1", "arguments": `{"path":"/x/y"}`}}}})
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("t%d", i), "content": strings.Repeat("file line\n", 150)})
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 32000, "stream": true, "tools": tools, "messages": msgs})
	return b
}

func BenchmarkReadRequestAgent(b *testing.B) { convotest.BenchRead(b, ReadRequest, agentRequest()) }

func BenchmarkAppendRequestAgent(b *testing.B) {
	body := agentRequest()
	r, err := ReadRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		r.Dropped = r.Dropped[:0]
		out, _ = AppendRequest(out[:0], r, convo.Target{})
	}
}

// BenchmarkRequestAgentRoundTrip is what a translated chat request costs on this side: read and
// written (into a fresh buffer, as the engine sends it).
func BenchmarkRequestAgentRoundTrip(b *testing.B) {
	body := agentRequest()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ReadRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := AppendRequest(nil, r, convo.Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadAnswer(b *testing.B) { convotest.BenchReadAnswer(b, ReadAnswer, bigChat) }

func BenchmarkAppendAnswer(b *testing.B) {
	evs, _ := ReadAnswer(nil, bigChat)
	convotest.BenchAppendAnswer(b, AppendAnswer, &convo.Request{}, evs)
}

// BenchmarkAnswerRoundTrip is a 10 KB answer read and written (the answer path of a translated
// request, one side of it).
func BenchmarkAnswerRoundTrip(b *testing.B) {
	convotest.BenchAnswerThrough(b, ReadAnswer, AppendAnswer, &convo.Request{}, bigChat)
}

var textChunk = []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"Hello there, "},"finish_reason":null}]}` + "\n\n")

func BenchmarkStreamReadChunk(b *testing.B) {
	r := NewStreamReader()
	evs := r.Read(nil, textChunk) // past the start
	b.SetBytes(int64(len(textChunk)))
	b.ReportAllocs()
	for b.Loop() {
		evs = r.Read(evs[:0], textChunk)
	}
}

func BenchmarkStreamWriteChunk(b *testing.B) {
	w := NewStreamWriter(&convo.Request{}, 1)
	out := w.Write(nil, &convo.Event{Kind: convo.EvStart, ID: "chatcmpl-1", Model: "gpt-x"})
	out = w.Write(out[:0], &convo.Event{Kind: convo.EvBlockStart, Block: convo.BlockText})
	e := &convo.Event{Kind: convo.EvDelta, Block: convo.BlockText, Text: "Hello there, "}
	b.ReportAllocs()
	for b.Loop() {
		out = w.Write(out[:0], e)
	}
}

// BenchmarkStreamFirstChunk is a stream's first chunk read and written by a fresh reader and
// writer: what the model adds to the time to the first token.
func BenchmarkStreamFirstChunk(b *testing.B) {
	req := &convo.Request{}
	b.ReportAllocs()
	var evs []convo.Event
	var out []byte
	for b.Loop() {
		r, w := NewStreamReader(), NewStreamWriter(req, 1)
		evs = r.Read(evs[:0], textChunk)
		out = convotest.Write(w, out[:0], evs)
	}
}
