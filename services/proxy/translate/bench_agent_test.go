package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

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

func BenchmarkAgentRequestMessagesToChat(b *testing.B) {
	body := agentRequest()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := MessagesToChat(body, Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAgentRequestChatToMessages(b *testing.B) {
	r, _ := MessagesToChat(agentRequest(), Target{})
	b.SetBytes(int64(len(r.Body)))
	for b.Loop() {
		if _, err := ChatToMessages(r.Body, Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAgentRequestValidEncodingJSON(b *testing.B) {
	body := agentRequest()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		json.Valid(body)
	}
}

func BenchmarkAgentRequestValidObject(b *testing.B) {
	body := agentRequest()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		ValidObject(body)
	}
}
