package messages

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// canonical writes a messages request in one form of the several Anthropic takes for the same
// thing, so that equal requests compare equal as decoded JSON:
//   - a string content (of a turn, of the system prompt) is its one text block; a tool result's
//     one plain text block is its string;
//   - is_error: false and stream: false are left out; a tool without input_schema has the empty
//     object schema; output_format is output_config.format;
//   - the top-level fields named in dropped are left out, and tools' strict when it is named;
//   - a mid-conversation system message is the text block the writer makes of it
//     (<system-reminder>…</system-reminder>, its cache mark kept) at the end of the user turn
//     before it (or of a user turn of its own), and consecutive turns of one side are one.
func canonical(v any, dropped []string) any {
	m := v.(map[string]any)
	for _, d := range dropped {
		delete(m, d) // a top-level field
	}
	if m["stream"] == false {
		delete(m, "stream")
	}
	if s, ok := m["system"].(string); ok {
		m["system"] = []any{textBlock(s)}
	}
	if f, ok := m["output_format"]; ok {
		oc, _ := m["output_config"].(map[string]any)
		if oc == nil {
			oc = map[string]any{}
		}
		oc["format"] = f
		m["output_config"] = oc
		delete(m, "output_format")
	}
	if tools, ok := m["tools"].([]any); ok {
		for _, t := range tools {
			t := t.(map[string]any)
			if slices.Contains(dropped, "tools[].strict") {
				delete(t, "strict")
			}
			if _, typed := t["type"]; !typed {
				if _, ok := t["input_schema"]; !ok {
					t["input_schema"] = map[string]any{"type": "object", "properties": map[string]any{}}
				}
			}
		}
	}
	msgs, _ := m["messages"].([]any)
	var out []any
	for _, msg := range msgs {
		msg := msg.(map[string]any)
		role := msg["role"].(string)
		blocks := contentBlocks(msg["content"])
		if role == "system" {
			role = "user"
			for i, b := range blocks {
				b := b.(map[string]any)
				b["text"] = "<system-reminder>\n" + b["text"].(string) + "\n</system-reminder>"
				blocks[i] = b
			}
		}
		for _, b := range blocks {
			b := b.(map[string]any)
			if b["is_error"] == false {
				delete(b, "is_error")
			}
			if b["type"] == "tool_result" {
				if c, ok := b["content"].([]any); ok && len(c) == 1 {
					if t := c[0].(map[string]any); t["type"] == "text" && t["cache_control"] == nil {
						b["content"] = t["text"]
					}
				}
			}
		}
		if n := len(out); n > 0 && out[n-1].(map[string]any)["role"] == role {
			prev := out[n-1].(map[string]any)
			prev["content"] = append(prev["content"].([]any), blocks...)
			continue
		}
		out = append(out, map[string]any{"role": role, "content": blocks})
	}
	if msgs != nil {
		m["messages"] = out
	}
	return m
}

func textBlock(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func contentBlocks(c any) []any {
	if s, ok := c.(string); ok {
		return []any{textBlock(s)}
	}
	l, _ := c.([]any)
	return l
}

// What each request fixture loses on the way through the model: Claude Code's
// context_management (Anthropic's own, nothing any other format has), and a strict tool's
// strictness (the writer does not send it: see appendTools); nothing else.
var wantDropped = map[string][]string{
	"claude_code":       {"context_management"},
	"claude_code_first": {"context_management"},
	"server_tools":      {"tools[].strict"},
}

// A messages request read into the model and written back is the request it was (in the
// canonical form above): every field, block, cache mark, signature and server tool comes back,
// and a mid-conversation system message comes back as the system reminder of the user turn.
func TestRequestRoundTrip(t *testing.T) {
	for name, in := range files(t, "testdata/request", ".json") {
		t.Run(name, func(t *testing.T) {
			r, out := convotest.Through(t, ReadRequest, AppendRequest, in)
			if !slices.Equal(r.Dropped, wantDropped[name]) {
				t.Fatalf("dropped %q, want %q", r.Dropped, wantDropped[name])
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			sameJSON(t, canonical(decode(t, in), r.Dropped), canonical(decode(t, out), nil))
		})
	}
}

// What the reader makes of a real Claude Code turn: the system prompt with its cache marks, the
// mid-conversation system message in place, the signed thinking, the tool call and its result
// with its cache mark, adaptive thinking with its effort, the tools, the user.
func TestReadClaudeCodeRequest(t *testing.T) {
	in := files(t, "testdata/request", ".json")["claude_code"]
	r, err := ReadRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	var roles []convo.Role
	for _, m := range r.Messages {
		roles = append(roles, m.Role)
	}
	if want := []convo.Role{convo.RoleUser, convo.RoleSystem, convo.RoleAssistant, convo.RoleTool}; !slices.Equal(roles, want) {
		t.Fatalf("roles %v, want %v", roles, want)
	}
	if p := r.Messages[1].Parts; len(p) != 1 || !strings.HasPrefix(p[0].Text.String(), "Available agent types") {
		t.Errorf("system message %+v", p)
	}
	if p := r.Messages[2].Parts; len(p) != 2 || p[0].Kind != convo.PartThinking || p[0].Signature != "EqQBCkYIBxgCKkBfakesig" ||
		p[1].Kind != convo.PartToolCall || p[1].Name != "Bash" || string(p[1].Args) != `{"command":"echo hi","description":"Print hi"}` {
		t.Errorf("assistant turn %+v", p)
	}
	if p := r.Messages[3].Parts; len(p) != 1 || p[0].Kind != convo.PartToolResult || p[0].ID != "toolu_01cap" ||
		string(p[0].Cache) != `{"type":"ephemeral"}` || p[0].IsError || len(p[0].Content) != 1 || p[0].Content[0].Text != "hi" {
		t.Errorf("tool result %+v", p)
	}
	if len(r.System) != 3 || r.System[0].Cache != nil || r.System[1].Cache == nil || r.System[2].Cache == nil {
		t.Errorf("system %+v", r.System)
	}
	if !r.ThinkingAdaptive || r.ReasoningEffort != "high" || r.ThinkingBudget != 0 || r.MaxTokens != 64000 || !r.Stream {
		t.Errorf("thinking %v %q %d, max_tokens %d, stream %v", r.ThinkingAdaptive, r.ReasoningEffort, r.ThinkingBudget, r.MaxTokens, r.Stream)
	}
	if len(r.Tools) != 24 || r.Tools[0].Kind != convo.ToolFunction || r.Tools[0].Name != "Agent" || !json.Valid(r.Tools[0].Parameters) {
		t.Errorf("tools %d, first %+v", len(r.Tools), r.Tools[0].Name)
	}
	if !strings.Contains(r.User, `"device_id"`) || !json.Valid(r.Metadata) {
		t.Errorf("user %q, metadata %s", r.User, r.Metadata)
	}
}

// A user turn's tool results become RoleTool messages around the user's own blocks, in order;
// server tool blocks and unknown roles are named, not kept; Anthropic's own tools are kept
// opaque.
func TestReadRequestParts(t *testing.T) {
	r, err := ReadRequest([]byte(`{"model":"m","messages":[
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"x"},{"type":"search_result","source":"s"}],"is_error":true},
	   {"type":"text","text":"between"},{"type":"tool_result","tool_use_id":"b"},{"type":"tool_result","tool_use_id":"c","content":"y"}]},
	 {"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}},
	   {"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"text","text":"Found.","citations":[{"type":"web_search_result_location"}]}]},
	 {"role":"developer","content":"x"},
	 {"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f1"}},{"type":"text","text":"hi"}]}],
	 "tools":[{"max_uses":1,"name":"web_search","type":"web_search_20250305"},{"name":"f","defer_loading":true}],
	 "context_management":{},"container":"c1"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.Messages {
		var parts []string
		for _, p := range m.Parts {
			parts = append(parts, p.Kind.Word()+":"+p.ID+string(p.Text))
		}
		got = append(got, []string{"user", "assistant", "system", "tool"}[m.Role]+"["+strings.Join(parts, " ")+"]")
	}
	want := []string{"tool[tool_result:a]", "user[text:between]", "tool[tool_result:b tool_result:c]", "assistant[text:Found.]", "user[text:hi]"}
	if !slices.Equal(got, want) {
		t.Fatalf("messages %q, want %q", got, want)
	}
	if a := r.Messages[0].Parts[0]; !a.IsError || len(a.Content) != 1 || a.Content[0].Text != "x" {
		t.Errorf("first result %+v", a)
	}
	if b := r.Messages[2].Parts[0]; b.Content != nil {
		t.Errorf("a result without content has content %+v", b.Content)
	}
	if s := r.Tools[0]; s.Kind != convo.ToolServer || s.Type != "web_search_20250305" || s.Family != "anthropic" || string(s.Raw) != `{"max_uses":1,"name":"web_search","type":"web_search_20250305"}` {
		t.Errorf("server tool %+v", s)
	}
	wantDrops := []string{"context_management", "container", "tools[].defer_loading", "messages[].content[].content[].type=search_result",
		"messages[].content[].type=server_tool_use", "messages[].content[].type=web_search_tool_result", "messages[].content[].citations",
		"messages[2].role=developer", "messages[].content[].source"}
	slices.Sort(wantDrops)
	gotDrops := slices.Clone(r.Dropped)
	slices.Sort(gotDrops)
	if !slices.Equal(gotDrops, wantDrops) {
		t.Errorf("dropped %q\nwant %q", gotDrops, wantDrops)
	}
}

// A field of the wrong type is refused with the words translate used (oracle_test.go checks
// them against translate); content of the wrong type is dropped, not refused.
func TestReadRequestErrors(t *testing.T) {
	for _, c := range requestErrors {
		_, err := ReadRequest([]byte(c.body))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.body, err, c.want)
		}
	}
	for _, c := range newRequestErrors {
		_, err := ReadRequest([]byte(c.body))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.body, err, c.want)
		}
	}
	r, err := ReadRequest([]byte(`{"messages":[{"role":"user","content":5},{"role":"user","content":[{"type":"text","text":5}]},{"role":"user","content":"ok"}]}`))
	if err != nil || len(r.Messages) != 1 || !slices.Equal(r.Dropped, []string{"messages[0].content", "messages[1].content"}) {
		t.Fatalf("bad content: %v, %d messages, dropped %q", err, len(r.Messages), r.Dropped)
	}
}

// The malformed requests translate refused, with its words.
var requestErrors = []struct{ body, want string }{
	{`[]`, "not a messages request: the body is not a JSON object"},
	{`{"model":"m"`, "not a messages request: the body is not a JSON object"},
	{`{"model":1}`, "not a messages request: model must be a string"},
	{`{"messages":{}}`, "not a messages request: messages must be a list"},
	{`{"max_tokens":1.5}`, "not a messages request: max_tokens must be an integer"},
	{`{"max_tokens":"5"}`, "not a messages request: max_tokens must be an integer"},
	{`{"temperature":"hot"}`, "not a messages request: temperature must be a number"},
	{`{"top_p":true}`, "not a messages request: top_p must be a number"},
	{`{"top_k":2.5}`, "not a messages request: top_k must be an integer"},
	{`{"stop_sequences":"END"}`, "not a messages request: stop_sequences must be a list of strings"},
	{`{"stop_sequences":[1]}`, "not a messages request: stop_sequences must be a list of strings"},
	{`{"stream":"yes"}`, "not a messages request: stream must be a boolean"},
	{`{"tools":{}}`, "not a messages request: tools must be a list"},
	{`{"tools":[1]}`, "not a messages request: tools[] must be objects"},
	{`{"tools":[{"name":1}]}`, "not a messages request: tools[].name must be a string"},
	{`{"tools":[{"name":"a","description":[]}]}`, "not a messages request: tools[].description must be a string"},
	{`{"tool_choice":"auto"}`, "not a messages request: tool_choice must be an object"},
	{`{"tool_choice":{"type":1}}`, "not a messages request: tool_choice.type must be a string"},
	{`{"tool_choice":{"type":"tool","name":2}}`, "not a messages request: tool_choice.name must be a string"},
	{`{"tool_choice":{"type":"auto","disable_parallel_tool_use":"yes"}}`, "not a messages request: tool_choice.disable_parallel_tool_use must be a boolean"},
	{`{"thinking":true}`, "not a messages request: thinking must be an object"},
	{`{"thinking":{"type":"enabled","budget_tokens":"many"}}`, "not a messages request: thinking.budget_tokens must be a number"},
	{`{"thinking":{"type":"enabled","budget_tokens":1.5}}`, "not a messages request: thinking.budget_tokens must be an integer"},
	{`{"metadata":[]}`, "not a messages request: metadata must be an object"},
	{`{"metadata":{"user_id":5}}`, "not a messages request: metadata.user_id must be a string"},
	{`{"messages":[1]}`, "not a messages request: messages[] must be objects with a string role"},
	{`{"messages":[{"role":5,"content":"x"}]}`, "not a messages request: messages[] must be objects with a string role"},
}

// Fields translate did not read, refused the same way.
var newRequestErrors = []struct{ body, want string }{
	{`{"output_config":"high"}`, "not a messages request: output_config must be an object"},
	{`{"output_config":{"effort":3}}`, "not a messages request: output_config.effort must be a string"},
	{`{"output_config":{"format":"json"}}`, "not a messages request: output_config.format must be an object"},
	{`{"output_format":[]}`, "not a messages request: output_format must be an object"},
	{`{"thinking":{"type":"adaptive","display":1}}`, "not a messages request: thinking.display must be a string"},
}

// Numbers beyond a float64 are dropped, not written as infinity; a budget beyond an int is the
// largest one.
func TestReadRequestHugeNumbers(t *testing.T) {
	r, err := ReadRequest([]byte(`{"temperature":1e999,"top_p":-1e400,"thinking":{"type":"enabled","budget_tokens":99999999999999999999}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Temperature != nil || r.TopP != nil || !slices.Equal(r.Dropped, []string{"temperature", "top_p"}) || r.ThinkingBudget <= 0 {
		t.Fatalf("temperature %v, top_p %v, budget %d, dropped %q", r.Temperature, r.TopP, r.ThinkingBudget, r.Dropped)
	}
	out, _ := AppendRequest(nil, r, convo.Target{})
	if !json.Valid(out) {
		t.Fatalf("invalid JSON %s", out)
	}
}

// A request from a chat or Responses client, written for an Anthropic upstream.
func TestAppendRequest(t *testing.T) {
	no, yes := false, true
	temp, topP := 0.5, 0.9
	hot := 1.5
	text := func(s string) convo.Part { return convo.Part{Kind: convo.PartText, Text: convo.QuoteText(s)} }
	result := func(id, s string) convo.Part {
		return convo.Part{Kind: convo.PartToolResult, ID: id, Content: []convo.Part{text(s)}}
	}
	cases := []struct {
		name    string
		r       convo.Request
		t       convo.Target
		want    string
		dropped []string
	}{{
		name:    "effort becomes a thinking budget under a default limit, sampling dropped",
		r:       convo.Request{Model: "m", ReasoningEffort: "medium", Temperature: &temp, TopP: &topP, Messages: []convo.Message{{Parts: []convo.Part{text("hi")}}}},
		want:    `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":12288,"thinking":{"type":"enabled","budget_tokens":8192}}`,
		dropped: []string{"temperature", "top_p"},
	}, {
		name: "a budget fits under the client's limit",
		r:    convo.Request{Model: "m", ReasoningEffort: "high", MaxTokens: 5000},
		want: `{"model":"m","messages":[],"max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":4999}}`,
	}, {
		name: "a small limit grows by the least budget",
		r:    convo.Request{Model: "m", ReasoningEffort: "low", MaxTokens: 500},
		want: `{"model":"m","messages":[],"max_tokens":1524,"thinking":{"type":"enabled","budget_tokens":1024}}`,
	}, {
		name:    "the target's default limit, a temperature above Anthropic's range, an unknown effort",
		r:       convo.Request{Model: "m", Temperature: &hot, ReasoningEffort: "extreme", Stop: []string{"E\"ND"}, Stream: true},
		t:       convo.Target{DefaultMaxTokens: 1000},
		want:    `{"model":"m","messages":[],"max_tokens":1000,"temperature":1,"stop_sequences":["E\"ND"],"stream":true}`,
		dropped: []string{"reasoning_effort"},
	}, {
		name: "turns merge, tool results first, a system message as a reminder, unsigned reasoning dropped",
		r: convo.Request{Model: "m", System: []convo.Part{text("Be brief."), text("")}, Messages: []convo.Message{
			{Role: convo.RoleUser, Parts: []convo.Part{text("a")}},
			{Role: convo.RoleUser, Parts: []convo.Part{text(""), text("b")}},
			{Role: convo.RoleAssistant, Parts: []convo.Part{{Kind: convo.PartThinking, Text: "hmm"}, text("Calling."),
				{Kind: convo.PartToolCall, ID: "c1", Name: "w", Args: []byte(`{"city":"Paris"}`)},
				{Kind: convo.PartToolCall, ID: "c2", Name: "w", Args: []byte(`{"city":"Rome"}`)}}},
			{Role: convo.RoleTool, Parts: []convo.Part{result("c1", "sunny")}},
			{Role: convo.RoleSystem, Parts: []convo.Part{text("Answer in French.")}},
			{Role: convo.RoleTool, Parts: []convo.Part{result("c2", "rain")}},
			{Role: convo.RoleUser, Parts: []convo.Part{text("Thanks")}, Name: "bob"},
		}},
		want: `{"model":"m","messages":[
		 {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
		 {"role":"assistant","content":[{"type":"text","text":"Calling."},{"type":"tool_use","id":"c1","name":"w","input":{"city":"Paris"}},{"type":"tool_use","id":"c2","name":"w","input":{"city":"Rome"}}]},
		 {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"},{"type":"tool_result","tool_use_id":"c2","content":"rain"},
		   {"type":"text","text":"<system-reminder>\nAnswer in French.\n</system-reminder>"},{"type":"text","text":"Thanks"}]}],
		 "system":[{"type":"text","text":"Be brief."}],"max_tokens":4096}`,
		dropped: []string{"messages[].content[].type=thinking", "messages[].name"},
	}, {
		name: "tool results after a user's text go in front of it, in order",
		r: convo.Request{Model: "m", Messages: []convo.Message{
			{Role: convo.RoleUser, Parts: []convo.Part{text("?")}},
			{Role: convo.RoleTool, Parts: []convo.Part{result("a", "1"), result("b", "2")}},
			{Role: convo.RoleTool, Parts: []convo.Part{result("c", "3")}},
		}},
		want: `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"1"},
		 {"type":"tool_result","tool_use_id":"b","content":"2"},{"type":"tool_result","tool_use_id":"c","content":"3"},{"type":"text","text":"?"}]}],"max_tokens":4096}`,
	}, {
		name: "namespaces flatten, other families' server tools drop, parallel calls off",
		r: convo.Request{Model: "m", ParallelToolCalls: &no, Tools: []convo.Tool{
			{Kind: convo.ToolNamespace, Name: "multi_agent", Tools: []convo.Tool{{Name: "spawn_agent", Description: "Spawns", Parameters: []byte(`{"type":"object"}`)}, {Name: "wait_agent", Strict: &yes}}},
			{Kind: convo.ToolServer, Type: "web_search", Family: "openai", Raw: []byte(`{"type":"web_search"}`)},
			{Kind: convo.ToolServer, Type: "bash_20250124", Family: "anthropic", Raw: []byte(`{"type":"bash_20250124","name":"bash"}`)},
		}, Messages: []convo.Message{{Role: convo.RoleAssistant, Parts: []convo.Part{{Kind: convo.PartToolCall, ID: "c", Namespace: "multi_agent", Name: "spawn_agent", Args: []byte(`{}`)}}}}},
		want: `{"model":"m","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"multi_agent__spawn_agent","input":{}}]}],"max_tokens":4096,
		 "tools":[{"name":"multi_agent__spawn_agent","description":"Spawns","input_schema":{"type":"object"}},{"name":"multi_agent__wait_agent","input_schema":{"type":"object","properties":{}}},{"type":"bash_20250124","name":"bash"}],
		 "tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`,
		dropped: []string{"tools[].strict", "tools.web_search"},
	}, {
		name: "no parallel calls beside a required tool; none stays none",
		r:    convo.Request{Model: "m", ParallelToolCalls: &no, ToolChoice: convo.ToolChoice{Mode: convo.ChoiceTool, Name: "w"}, Tools: []convo.Tool{{Name: "w"}}},
		want: `{"model":"m","messages":[],"max_tokens":4096,"tools":[{"name":"w","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"tool","name":"w","disable_parallel_tool_use":true}}`,
	}, {
		name: "tool choice none",
		r:    convo.Request{Model: "m", ParallelToolCalls: &no, ToolChoice: convo.ToolChoice{Mode: convo.ChoiceNone}, Tools: []convo.Tool{{Name: "w"}}},
		want: `{"model":"m","messages":[],"max_tokens":4096,"tools":[{"name":"w","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"none"}}`,
	}, {
		name: "images by data URL and by URL; another scheme cannot go",
		r: convo.Request{Model: "m", Messages: []convo.Message{{Parts: []convo.Part{
			{Kind: convo.PartImage, URL: "data:image/png;base64,iVBO", Detail: "low"},
			{Kind: convo.PartImage, URL: "https://x/cat.jpg"},
			{Kind: convo.PartImage, URL: "ftp://x/cat.jpg"},
			{Kind: convo.PartImage, MediaType: "image/gif", Data: "R0lG"},
			{Kind: convo.PartDocument, URL: "data:application/pdf;base64,JVBE", Title: "T"},
		}}}},
		want: `{"model":"m","messages":[{"role":"user","content":[
		 {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},
		 {"type":"image","source":{"type":"url","url":"https://x/cat.jpg"}},
		 {"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}},
		 {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"T"}]}],"max_tokens":4096}`,
		dropped: []string{"messages[].content[].image_url"},
	}, {
		name: "a JSON schema is Anthropic's output format; a plain JSON mode has none; metadata is the user",
		r: convo.Request{Model: "m", Format: &convo.ResponseFormat{Kind: convo.FormatJSONSchema, Name: "x", Schema: []byte(`{"type":"object"}`)},
			User: "u1", Metadata: []byte(`{"team":"a"}`)},
		want:    `{"model":"m","messages":[],"max_tokens":4096,"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},"metadata":{"user_id":"u1"}}`,
		dropped: []string{"metadata"},
	}, {
		name:    "plain JSON mode",
		r:       convo.Request{Model: "m", Format: &convo.ResponseFormat{Kind: convo.FormatJSONObject}, PreviousResponseID: "resp_1", ServiceTier: "flex"},
		want:    `{"model":"m","messages":[],"max_tokens":4096}`,
		dropped: []string{"response_format", "previous_response_id", "service_tier"},
	}, {
		// Its signature may come back as a Responses reasoning item's encrypted content (what a
		// Responses client was shown of it); OpenAI's own starts "gAAAA", and a signature without
		// its thinking's text is none.
		name: "Anthropic's own reasoning goes back; another's does not",
		r: convo.Request{Model: "m", Messages: []convo.Message{{Role: convo.RoleAssistant, Parts: []convo.Part{
			{Kind: convo.PartThinking, Redacted: true, Encrypted: "EmwK"},
			{Kind: convo.PartThinking, Text: "t", Signature: "sig"},
			{Kind: convo.PartThinking, Text: "summary", Encrypted: "gAAAA"},
			{Kind: convo.PartThinking, Text: "shown", Encrypted: "EqQBsig"},
			{Kind: convo.PartThinking, Encrypted: "EqQBother"},
			{Kind: convo.PartToolCall, ID: "c", Name: "n", Args: []byte(`[1]`)},
		}}}},
		want: `{"model":"m","messages":[{"role":"assistant","content":[{"type":"redacted_thinking","data":"EmwK"},{"type":"thinking","thinking":"t","signature":"sig"},
		 {"type":"thinking","thinking":"shown","signature":"EqQBsig"},{"type":"tool_use","id":"c","name":"n","input":{}}]}],"max_tokens":4096}`,
		dropped: []string{"messages[].content[].type=thinking"},
	}, {
		name: "tool results with blocks, an error, an empty list",
		r: convo.Request{Model: "m", Messages: []convo.Message{{Role: convo.RoleTool, Parts: []convo.Part{
			{Kind: convo.PartToolResult, ID: "a", IsError: true, Content: []convo.Part{text("x"), text(""), {Kind: convo.PartImage, URL: "https://x/i.png"}}},
			{Kind: convo.PartToolResult, ID: "b", Content: []convo.Part{text("")}},
			{Kind: convo.PartToolResult, ID: "c", Content: []convo.Part{{Kind: convo.PartToolCall}}},
		}}}},
		want: `{"model":"m","messages":[{"role":"user","content":[
		 {"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"url","url":"https://x/i.png"}}],"is_error":true},
		 {"type":"tool_result","tool_use_id":"b","content":""},{"type":"tool_result","tool_use_id":"c","content":""}]}],"max_tokens":4096}`,
		dropped: []string{"messages[].content[].content[].type=tool_use"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := AppendRequest([]byte("prefix"), &c.r, c.t)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(out), "prefix") {
				t.Fatalf("dst not kept: %s", out)
			}
			sameJSON(t, decode(t, []byte(c.want)), decode(t, out[len("prefix"):]))
			if !slices.Equal(c.r.Dropped, c.dropped) {
				t.Fatalf("dropped %q, want %q", c.r.Dropped, c.dropped)
			}
		})
	}
}
