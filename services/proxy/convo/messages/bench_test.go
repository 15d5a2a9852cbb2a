package messages

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// Benchmarks beside translate's (bench_test.go, bench_agent_test.go there), on the same inputs:
// a coding agent's 170 KB turn, a 10 KB answer, one stream delta.

// agentRequest is a messages request the size of a long coding-agent turn (about 170 KB): a
// long system prompt, 40 tools with schemas and 100 messages of tool calls and results.
func agentRequest() []byte {
	var tools []map[string]any
	for i := 0; i < 40; i++ {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("tool_%d", i), "description": strings.Repeat("Does a thing with care. ", 40),
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string", "description": strings.Repeat("a path ", 20)}}}})
	}
	var msgs []map[string]any
	for i := 0; i < 50; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": fmt.Sprintf("t%d", i), "content": strings.Repeat("file line\n", 150)}}})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Looking."},
			map[string]any{"type": "tool_use", "id": fmt.Sprintf("t%d", i+1), "name": "tool_1", "input": map[string]any{"path": "/x/y"}}}})
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 32000, "stream": true,
		"system": []any{map[string]any{"type": "text", "text": strings.Repeat("You are Claude Code. ", 1500)}}, "tools": tools, "messages": msgs})
	return b
}

func BenchmarkReadRequestAgent(b *testing.B) { convotest.BenchRead(b, ReadRequest, agentRequest()) }

func BenchmarkAppendRequestAgent(b *testing.B) {
	r, err := ReadRequest(agentRequest())
	if err != nil {
		b.Fatal(err)
	}
	out, _ := AppendRequest(nil, r, convo.Target{})
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ = AppendRequest(out[:0], r, convo.Target{})
	}
}

func BenchmarkReadRequestClaudeCode(b *testing.B) {
	body := files(b, "testdata/request", ".json")["claude_code"]
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

var bigText = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 225)

var bigMessage = []byte(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"` + bigText +
	`"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":2000}}`)

func BenchmarkReadAnswer(b *testing.B) { convotest.BenchReadAnswer(b, ReadAnswer, bigMessage) }

func BenchmarkAppendAnswer(b *testing.B) {
	evs, err := ReadAnswer(nil, bigMessage)
	if err != nil {
		b.Fatal(err)
	}
	convotest.BenchAppendAnswer(b, AppendAnswer, nil, evs)
}

// BenchmarkAnswerThrough is a 10 KB answer read and written, what a translated answer costs on
// the messages side (translate's BenchmarkMessagesResponseToChat does it in one piece).
func BenchmarkAnswerThrough(b *testing.B) {
	convotest.BenchAnswerThrough(b, ReadAnswer, AppendAnswer, nil, bigMessage)
}

var deltaEvent = []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there\"}}\n\n")

func BenchmarkStreamReadDelta(b *testing.B) {
	s := NewStreamReader()
	b.ReportAllocs()
	var evs []convo.Event
	for b.Loop() {
		evs = s.Read(evs[:0], deltaEvent)
	}
}

func BenchmarkStreamWriteDelta(b *testing.B) {
	w := NewStreamWriter(nil, 1)
	out := w.Write(nil, &convo.Event{Kind: convo.EvBlockStart, Block: convo.BlockText})
	e := &convo.Event{Kind: convo.EvDelta, Text: "c07 lorem ipsum "}
	b.ReportAllocs()
	for b.Loop() {
		out = w.Write(out[:0], e)
	}
}

// BenchmarkStreamDelta is one delta read and written again (translate's
// BenchmarkMessagesStreamToChatDelta reads the same event into a chat chunk).
func BenchmarkStreamDelta(b *testing.B) {
	s := NewStreamReader()
	w := NewStreamWriter(nil, 1)
	out := w.Write(nil, &convo.Event{Kind: convo.EvBlockStart, Block: convo.BlockText})
	b.ReportAllocs()
	var evs []convo.Event
	for b.Loop() {
		evs = s.Read(evs[:0], deltaEvent)
		out = convotest.Write(w, out[:0], evs)
	}
}
