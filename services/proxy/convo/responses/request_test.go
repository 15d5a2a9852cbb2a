package responses

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// The request fixtures in testdata/request: translate's two (codex.json, simple.json), a real
// Codex CLI request (codex_cli.json: Codex CLI 0.171.0, `codex exec "say hi"` against a local
// server configured as a custom provider with wire_api "responses"; the second request of the
// turn, after the server answered with a reasoning item and two function calls, one of them in
// the multi_agent_v1 namespace; long prompt texts cut to their first line), and two that use
// every field the model carries or drops.

// A Responses request read into the model and written back is the request it was: every item,
// text, image, file, call, output, reasoning (with its encrypted content), tool, namespace and
// setting comes back, up to what the format allows to be written differently (normalize), and
// writing it once more changes nothing.
func TestRequestRoundTrip(t *testing.T) {
	for _, f := range files(t, "request", ".json") {
		t.Run(strings.TrimSuffix(f[len("testdata/request/"):], ".json"), func(t *testing.T) {
			in := convotest.Read(t, f)
			_, out := convotest.Through(t, ReadRequest, AppendRequest, in)
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			want, got := normalize(t, in), normalize(t, out)
			if !reflect.DeepEqual(want, got) {
				w, _ := json.MarshalIndent(want, "", " ")
				g, _ := json.MarshalIndent(got, "", " ")
				t.Fatalf("round trip changed the request\n--- got\n%s\n--- want\n%s", g, w)
			}
			r2, err := ReadRequest(out)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := AppendRequest(nil, r2, convo.Target{})
			if !bytes.Equal(out, again) {
				t.Fatalf("a second trip changed the request\n%s\n%s", out, again)
			}
		})
	}
}

// listOf is a field that holds a list or a string standing for a list of one: the string as
// one makes it an element.
func listOf(v any, one func(s string) any) []any {
	switch v := v.(type) {
	case string:
		return []any{one(v)}
	case []any:
		return v
	}
	return nil
}

// normalize reads a Responses request into plain values, writing what the format lets a request
// say in several ways in one way (a string content as its one part, the instructions and the
// developer messages that open the input as one list of system texts, a call's arguments as the
// object they hold, …) and leaving out what the model does not carry (ids of input items,
// unknown fields and item types) or what a stateless upstream request always says (store,
// include).
func normalize(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, k := range []string{"model", "user", "metadata", "previous_response_id", "truncation", "service_tier", "stream"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	model, _ := m["model"].(string)
	var system []any
	if s, ok := m["instructions"].(string); ok && s != "" {
		system = append(system, s)
	}
	input := listOf(m["input"], func(s string) any { return map[string]any{"role": "user", "content": s} })
	var items []any
	leading := true
	for _, x := range input {
		it, _ := x.(map[string]any)
		if it == nil {
			continue
		}
		typ, _ := it["type"].(string)
		switch typ {
		case "", "message":
			role, _ := it["role"].(string)
			if role == "system" {
				role = "developer"
			}
			parts := listOf(it["content"], func(s string) any { return map[string]any{"type": "input_text", "text": s} })
			var content []any
			for _, p := range parts {
				p, _ := p.(map[string]any)
				switch p["type"] {
				case "input_text", "output_text", "text":
					if s, _ := p["text"].(string); role == "user" || s != "" {
						content = append(content, map[string]any{"type": "text", "text": s})
					}
				case "refusal":
					content = append(content, map[string]any{"type": "text", "text": p["refusal"]})
				case "input_image":
					if p["image_url"] != nil {
						content = append(content, map[string]any{"type": "input_image", "image_url": p["image_url"], "detail": p["detail"]})
					}
				case "input_file":
					content = append(content, map[string]any{"type": "input_file", "filename": p["filename"],
						"file_data": p["file_data"], "file_url": p["file_url"]})
				}
			}
			if role == "developer" && leading {
				for _, c := range content {
					system = append(system, c.(map[string]any)["text"])
				}
				continue
			}
			leading = false
			if len(content) > 0 {
				items = append(items, map[string]any{"role": role, "content": content})
			}
		case "function_call":
			leading = false
			var args any = map[string]any{}
			if s, ok := it["arguments"].(string); ok {
				var v any
				if json.Unmarshal([]byte(s), &v) == nil {
					if o, ok := v.(map[string]any); ok {
						args = o
					}
				}
			}
			items = append(items, map[string]any{"type": typ, "call_id": it["call_id"], "name": it["name"],
				"namespace": it["namespace"], "arguments": args})
		case "function_call_output":
			leading = false
			output := it["output"]
			if list, ok := output.([]any); ok {
				var texts []string
				for _, p := range list {
					if p, _ := p.(map[string]any); p["type"] == "input_text" {
						texts = append(texts, p["text"].(string))
					} else {
						texts = nil
						break
					}
				}
				if texts != nil {
					output = strings.Join(texts, "\n")
				}
			}
			items = append(items, map[string]any{"type": typ, "call_id": it["call_id"], "output": output})
		case "reasoning":
			leading = false
			var texts []string
			list, _ := it["summary"].([]any)
			for _, p := range list {
				texts = append(texts, p.(map[string]any)["text"].(string))
			}
			items = append(items, map[string]any{"type": typ, "id": it["id"], "summary": strings.Join(texts, "\n\n"),
				"encrypted_content": it["encrypted_content"]})
		default:
			leading = false
		}
	}
	out["system"], out["input"] = system, items
	var tools []any
	var function func(t map[string]any) map[string]any
	function = func(t map[string]any) map[string]any {
		f := map[string]any{}
		for k, v := range t {
			f[k] = v
		}
		switch t["type"] {
		case "function":
			if f["strict"] == nil {
				f["strict"] = false
			}
			if f["parameters"] == nil {
				f["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
			}
			if f["description"] == "" {
				delete(f, "description")
			}
		case "namespace":
			if f["description"] == nil {
				f["description"] = ""
			}
			var members []any
			for _, x := range t["tools"].([]any) {
				members = append(members, function(x.(map[string]any)))
			}
			f["tools"] = members
		}
		return f
	}
	list, _ := m["tools"].([]any)
	for _, x := range list {
		if t, ok := x.(map[string]any); ok && t["type"] != nil {
			tools = append(tools, function(t))
		}
	}
	if len(tools) > 0 {
		out["tools"] = tools
		switch tc := m["tool_choice"].(type) {
		case string:
			out["tool_choice"] = tc
		case map[string]any:
			if tc["type"] == "function" {
				out["tool_choice"] = map[string]any{"type": "function", "name": tc["name"]}
			}
		}
		if v, ok := m["parallel_tool_calls"]; ok {
			out["parallel_tool_calls"] = v
		}
	}
	if n, ok := m["max_output_tokens"].(float64); ok {
		out["max_output_tokens"] = max(n, 16)
	}
	if !reasoningModel(model) {
		for _, k := range []string{"temperature", "top_p"} {
			if v, ok := m[k]; ok {
				out[k] = v
			}
		}
	}
	if rs, ok := m["reasoning"].(map[string]any); ok {
		x := map[string]any{}
		for k, v := range rs {
			x[k] = v
		}
		if x["effort"] != nil && x["summary"] == nil {
			x["summary"] = "auto"
		}
		out["reasoning"] = x
	}
	if text, ok := m["text"].(map[string]any); ok {
		if f, ok := text["format"].(map[string]any); ok && f["type"] != "text" {
			out["text"] = map[string]any{"format": f}
		}
	}
	return out
}

// The Codex CLI request's tools come out of the model as it sent them: functions with their
// schemas and strict flags, its namespace of sub-agent tools with its description and members,
// its web search tool whole.
func TestCodexNamespaceToolsReadAsSent(t *testing.T) {
	body := convotest.Read(t, "testdata/request/codex_cli.json")
	r, err := ReadRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if len(r.Tools) != len(sent.Tools) {
		t.Fatalf("%d tools read, %d sent", len(r.Tools), len(sent.Tools))
	}
	var ns *convo.Tool
	for i := range r.Tools {
		one, _ := appendTools(nil, &convo.Request{Tools: r.Tools[i : i+1]}, true)
		var a, b any
		json.Unmarshal(one, &a)
		json.Unmarshal(sent.Tools[i], &b)
		if !reflect.DeepEqual([]any{b}, a) {
			t.Errorf("tool %d read as\n%s\nsent as\n%s", i, one, sent.Tools[i])
		}
		if r.Tools[i].Kind == convo.ToolNamespace {
			ns = &r.Tools[i]
		}
	}
	if ns == nil || ns.Name != "multi_agent_v1" || ns.Description != "Tools for spawning and managing sub-agents." {
		t.Fatalf("namespace %+v", ns)
	}
	var names []string
	for _, m := range ns.Tools {
		names = append(names, m.Name)
		if m.Kind != convo.ToolFunction || len(m.Parameters) == 0 || m.Strict == nil || *m.Strict {
			t.Errorf("member %+v", m)
		}
	}
	if !slices.Equal(names, []string{"close_agent", "resume_agent", "send_input", "spawn_agent", "wait_agent"}) {
		t.Fatalf("members %v", names)
	}
	// Its call to a namespaced tool keeps the namespace; its reasoning item its encrypted content.
	var call, thinking *convo.Part
	for i := range r.Messages {
		for j := range r.Messages[i].Parts {
			p := &r.Messages[i].Parts[j]
			if p.Kind == convo.PartToolCall && p.Name == "close_agent" {
				call = p
			}
			if p.Kind == convo.PartThinking {
				thinking = p
			}
		}
	}
	if call == nil || call.Namespace != "multi_agent_v1" || string(call.Args) != `{"target":"agent_x"}` {
		t.Fatalf("call %+v", call)
	}
	if thinking == nil || thinking.Encrypted != "gAAAAABfakeEncryptedReasoning==" || thinking.Text != "Run echo." || thinking.ID != "rs_cap1" {
		t.Fatalf("reasoning %+v", thinking)
	}
	// Its developer messages open the system prompt; its unknown client_metadata is named.
	if len(r.System) != 3 || !slices.Contains(r.Dropped, "client_metadata") {
		t.Fatalf("system %d parts, dropped %v", len(r.System), r.Dropped)
	}
}

// A field of the wrong type is refused with translate's words.
func TestReadRequestRefusesWrongTypes(t *testing.T) {
	for body, want := range map[string]string{
		`[]`:                            "not a Responses request: the body is not a JSON object",
		`{"model":1}`:                   "not a Responses request: model must be a string",
		`{"instructions":[]}`:           "not a Responses request: instructions must be a string",
		`{"tools":{}}`:                  "not a Responses request: tools must be a list",
		`{"parallel_tool_calls":"yes"}`: "not a Responses request: parallel_tool_calls must be a boolean",
		`{"max_output_tokens":1.5}`:     "not a Responses request: max_output_tokens must be an integer",
		`{"temperature":"hot"}`:         "not a Responses request: temperature must be a number",
		`{"top_p":true}`:                "not a Responses request: top_p must be a number",
		`{"reasoning":"high"}`:          "not a Responses request: reasoning must be an object",
		`{"reasoning":{"effort":3}}`:    "not a Responses request: reasoning.effort must be a string",
		`{"stream":1}`:                  "not a Responses request: stream must be a boolean",
		`{"text":"json"}`:               "not a Responses request: text must be an object",
		`{"user":7}`:                    "not a Responses request: user must be a string",
		`{"tools":[1]}`:                 "not a Responses request: tools[] must be an object",
		`{"tools":[{"type":"function","name":2}]}`: "not a Responses request: tools[].name must be a string",
		`{"input":5}`: "input must be a string or a list of items",
		`{"input":[{"type":"function_call","arguments":{}}]}`: "input must be a string or a list of items",
	} {
		_, err := ReadRequest([]byte(body))
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
