package chat

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// requestGolden is a written request, indented, with the fields that were dropped.
func requestGolden(t *testing.T, out []byte, dropped []string) []byte {
	t.Helper()
	b := convotest.Indent(t, out)
	if len(dropped) > 0 {
		d := slices.Clone(dropped)
		slices.Sort(d)
		b = append(b, "dropped: "+strings.Join(d, ", ")+"\n"...)
	}
	return b
}

// The request fixtures through the model and back: what is written, as a golden a reviewer
// reads.
func TestRequestGolden(t *testing.T) {
	convotest.Goldens(t, "request", ".json", ".golden", func(t *testing.T, in []byte) []byte {
		r, out := convotest.Through(t, ReadRequest, AppendRequest, in)
		return requestGolden(t, out, r.Dropped)
	})
}

// Every request fixture comes back from a trip through the model meaning what it meant: the
// same messages in the same order and roles (system messages in the middle in place), texts,
// images, files, tool calls with their arguments, tool results matched to their calls, tools,
// tool choice, sampling, stop, response format. What differs is only form (normalize) or named
// in Dropped.
func TestRequestRoundTrip(t *testing.T) {
	cases := map[string][]string{ // fixture → what must be named as dropped
		"images":                {"messages[].content[].image_url"},
		"reasoning":             {"messages[].content[].type=thinking"},
		"text_system":           nil,
		"tool_results_parallel": nil,
		"tools":                 nil,
		"unknown_fields":        {"logprobs", "n", "seed"},
		"system_middle":         nil,
		"response_format":       nil,
		"files":                 {"messages[].content[].file.file_id", "messages[].content[].type=input_audio"},
		"tool_loop":             {"tools[].type=custom"},
	}
	for name, wantDropped := range cases {
		t.Run(name, func(t *testing.T) {
			in := convotest.Read(t, "testdata/request/"+name+".json")
			r, err := ReadRequest(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := AppendRequest(nil, r, convo.Target{MaxCompletionTokens: strings.Contains(string(in), "max_completion_tokens")})
			if err != nil {
				t.Fatal(err)
			}
			got, want := normalizeRequest(t, out, nil), normalizeRequest(t, in, r.Dropped)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the request\n got %s\nwant %s", mustJSON(got), mustJSON(want))
			}
			d := slices.Clone(r.Dropped)
			slices.Sort(d)
			if !slices.Equal(d, wantDropped) {
				t.Fatalf("dropped %q, want %q", d, wantDropped)
			}
		})
	}
}

// normalizeRequest decodes a chat request and writes the forms that mean the same one way:
// developer is system, the opening system messages are one (joined by a blank line), a content
// of one text is a string, empty texts and empty messages are nothing, a single stop is a list,
// arguments are compared as JSON, a streamed request asks for its usage, a tool choice without
// tools is none. Top-level fields named in dropped are removed, so are the parts of a message
// chat completions cannot send back (reasoning, images and files of an unusable kind).
func normalizeRequest(t *testing.T, body []byte, dropped []string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	for _, d := range dropped {
		delete(m, d)
	}
	if v, ok := m["max_completion_tokens"]; ok {
		m["max_tokens"] = v
		delete(m, "max_completion_tokens")
	}
	if s, ok := m["stop"].(string); ok {
		m["stop"] = []any{s}
	}
	if m["stream"] == true {
		m["stream_options"] = map[string]any{"include_usage": true}
	} else {
		delete(m, "stream")
		delete(m, "stream_options")
	}
	if rf, ok := m["response_format"].(map[string]any); ok && rf["type"] == "text" {
		delete(m, "response_format")
	}
	tools, _ := m["tools"].([]any)
	var kept []any
	for _, tool := range tools {
		tm := tool.(map[string]any)
		if tm["type"] != "function" {
			continue
		}
		fn := tm["function"].(map[string]any)
		if fn["parameters"] == nil {
			fn["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		if fn["description"] == "" {
			delete(fn, "description")
		}
		kept = append(kept, tm)
	}
	if len(kept) == 0 {
		delete(m, "tools")
		delete(m, "tool_choice")
		delete(m, "parallel_tool_calls")
	} else {
		m["tools"] = kept
	}

	var msgs []any
	var system []string
	opening := true
	for _, raw := range m["messages"].([]any) {
		msg := raw.(map[string]any)
		role := msg["role"].(string)
		if role == "developer" {
			role = "system"
			msg["role"] = role
		}
		delete(msg, "reasoning_content")
		content := normalizeContent(msg["content"], role)
		if content == nil {
			delete(msg, "content")
		} else {
			msg["content"] = content
		}
		if role == "system" && opening {
			if s, ok := content.(string); ok {
				system = append(system, s)
			}
			continue
		}
		opening = false
		if calls, ok := msg["tool_calls"].([]any); ok {
			for _, c := range calls {
				fn := c.(map[string]any)["function"].(map[string]any)
				var v any
				if json.Unmarshal([]byte(fn["arguments"].(string)), &v) != nil {
					v = map[string]any{}
				}
				fn["arguments"] = v
			}
			if content == "" {
				delete(msg, "content")
			}
		}
		if msg["content"] == nil && msg["tool_calls"] == nil && role != "tool" {
			continue // nothing said
		}
		msgs = append(msgs, msg)
	}
	if len(system) > 0 {
		msgs = append([]any{map[string]any{"role": "system", "content": strings.Join(system, "\n\n")}}, msgs...)
	}
	m["messages"] = msgs
	return m
}

// normalizeContent is a message's content in one form: a string for texts (the texts of a list
// joined; a tool's and a system message's by newlines), a list only when it holds images or files, nil for nothing.
func normalizeContent(c any, role string) any {
	switch c := c.(type) {
	case nil:
		return nil
	case string:
		if c == "" && role != "tool" {
			return nil
		}
		return c
	case []any:
		var texts []string
		var parts []any
		media := false
		for _, p := range c {
			pm, _ := p.(map[string]any)
			switch pm["type"] {
			case "text":
				if s, _ := pm["text"].(string); s != "" {
					texts = append(texts, s)
					parts = append(parts, map[string]any{"type": "text", "text": s})
				}
			case "image_url":
				url := pm["image_url"].(map[string]any)["url"].(string)
				if strings.HasPrefix(url, "data:") || strings.HasPrefix(url, "http") {
					parts = append(parts, pm)
					media = true
				}
			case "file":
				if _, ok := pm["file"].(map[string]any)["file_data"]; ok {
					parts = append(parts, pm)
					media = true
				}
			}
		}
		if !media {
			sep := "" // an assistant's texts are one text
			if role == "tool" || role == "system" {
				sep = "\n" // as tool results and system messages have always been joined
			}
			if len(texts) == 0 {
				if role == "tool" {
					return ""
				}
				return nil
			}
			return strings.Join(texts, sep)
		}
		return parts
	}
	return c
}
