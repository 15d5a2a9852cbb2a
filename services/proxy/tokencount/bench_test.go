package tokencount

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// agentRequest builds an Anthropic request of about size bytes as a coding agent sends it: a
// system prompt, tool definitions, and turns of text, tool calls and tool results with code.
func agentRequest(size int) []byte {
	type block map[string]any
	code := "func (e *Engine) resolve(ctx context.Context, model string) (target, *errs.Error) {\n" +
		"\treg := e.opt.Catalog.Registry()\n\tif prov, name, ok := SplitModel(model); ok {\n\t\treturn e.checkListed(ctx, prov, name)\n\t}\n}\n"
	prose := "The request still passes auth, model resolution and the client key checks; no upstream call is made. "
	req := map[string]any{
		"model":  "vllm/gpt-5",
		"system": strings.Repeat("You are a careful coding agent. Read files before editing them. ", 40),
		"tools": []block{
			{"name": "read_file", "description": "Reads a file from the workspace.", "input_schema": block{"type": "object",
				"properties": block{"path": block{"type": "string", "description": "The file's path."}}, "required": []string{"path"}}},
			{"name": "bash", "description": "Runs a shell command.", "input_schema": block{"type": "object",
				"properties": block{"command": block{"type": "string"}, "timeout": block{"type": "integer"}}}},
		},
	}
	var msgs []block
	for i := 0; ; i++ {
		b, _ := json.Marshal(append(msgs, block{}))
		if len(b) >= size {
			break
		}
		id := fmt.Sprintf("toolu_%04d", i)
		msgs = append(msgs,
			block{"role": "user", "content": strings.Repeat(prose, 3)},
			block{"role": "assistant", "content": []block{{"type": "text", "text": "Let me read the file."},
				{"type": "tool_use", "id": id, "name": "read_file", "input": block{"path": fmt.Sprintf("services/proxy/file%d.go", i)}}}},
			block{"role": "user", "content": []block{{"type": "tool_result", "tool_use_id": id, "content": strings.Repeat(code, 4)}}},
		)
	}
	req["messages"] = msgs
	b, _ := json.Marshal(req)
	return b
}

// BenchmarkCount100KB counts a 100 KB agent request (the vocabulary already loaded, as it is
// after the first count).
func BenchmarkCount100KB(b *testing.B) {
	body := agentRequest(100 << 10)
	benchCount(b, body)
}

// BenchmarkCount100KBWhitespace counts 100 KB of alternating spaces and newlines, the input on
// which the tokenizer's pre-tokenizer backtracks most (5 s in one piece).
func BenchmarkCount100KBWhitespace(b *testing.B) {
	body, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": strings.Repeat(" \n", 50<<10)}}})
	benchCount(b, body)
}

// benchCount counts body for gpt-5 once before the timer starts (the vocabulary loads on the
// first count), then once an iteration.
func benchCount(b *testing.B, body []byte) {
	c := New()
	if _, _, err := c.Messages(context.Background(), body, "gpt-5"); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := c.Messages(context.Background(), body, "gpt-5"); err != nil {
			b.Fatal(err)
		}
	}
}
