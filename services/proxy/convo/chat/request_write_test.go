package chat

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"switchyard/services/proxy/convo"
)

// text is a text part.
func text(t convo.Text) convo.Part { return convo.Part{Kind: convo.PartText, Text: t} }

// A request as other formats' readers give it (Claude Code's through messages, Codex CLI's
// through Responses) is written as a chat request an OpenAI-compatible server takes: the opening
// system prompt as one system message, a system message in the middle in place, images as data
// URLs, documents as files, tool results as tool messages (an error says so), thinking not sent
// back, namespace tools and calls under their flat names, server tools dropped by name.
func TestAppendRequestFromModel(t *testing.T) {
	tr := true
	r := &convo.Request{
		Model: "gpt-5-codex",
		System: []convo.Part{{Kind: convo.PartText, Text: "You are Claude Code.", Cache: []byte(`{"type":"ephemeral"}`)},
			text(`Line \"two\"`)},
		Messages: []convo.Message{
			{Role: convo.RoleUser, Parts: []convo.Part{text("Look"),
				{Kind: convo.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
				{Kind: convo.PartImage, URL: "https://example.com/cat.jpg", Detail: "high"},
				{Kind: convo.PartDocument, MediaType: "application/pdf", Data: "JVBERi0=", Title: "spec.pdf"},
				{Kind: convo.PartDocument, URL: "https://example.com/a.pdf"},
				{Kind: convo.PartDocument, Text: "plain text document"}}},
			{Role: convo.RoleAssistant, Parts: []convo.Part{
				{Kind: convo.PartThinking, Text: "let me think", Signature: "sig"},
				{Kind: convo.PartThinking, Redacted: true, Encrypted: "xyz"},
				text("Spawning "), text("two."),
				{Kind: convo.PartToolCall, ID: "call_1", Namespace: "agents", Name: "spawn_agent", Args: []byte(`{"task":"a"}`)},
				{Kind: convo.PartToolCall, ID: "call_2", Name: "shell", Args: []byte(`{"cmd":"ls \"x\""}`)},
				{Kind: convo.PartToolCall, ID: "call_3", Name: "noargs"}}},
			{Role: convo.RoleTool, Parts: []convo.Part{
				{Kind: convo.PartToolResult, ID: "call_1", Content: []convo.Part{text("started"), text("agent 7")}},
				{Kind: convo.PartToolResult, ID: "call_2", IsError: true, Content: []convo.Part{text("no such file"),
					{Kind: convo.PartImage, Data: "AAAA", MediaType: "image/png"}}},
				{Kind: convo.PartToolResult, ID: "call_3", IsError: true, Content: []convo.Part{text("Error: already said")}}}},
			{Role: convo.RoleUser, Parts: []convo.Part{text("Which is done?")}},
			{Role: convo.RoleSystem, Parts: []convo.Part{text("Plan mode is on.")}},
			{Role: convo.RoleUser, Parts: []convo.Part{text("Go on.")}},
		},
		Tools: []convo.Tool{
			{Kind: convo.ToolFunction, Name: "shell", Description: "Runs a command", Parameters: []byte(`{"type":"object"}`), Strict: &tr},
			{Kind: convo.ToolNamespace, Name: "agents", Tools: []convo.Tool{
				{Kind: convo.ToolFunction, Name: "spawn_agent", Description: "Spawns"},
				{Kind: convo.ToolFunction, Name: "wait_agent"}}},
			{Kind: convo.ToolServer, Type: "web_search", Family: "openai", Raw: []byte(`{"type":"web_search"}`)},
			{Kind: convo.ToolServer, Type: "web_search_20250305", Name: "web_search", Family: "anthropic", Raw: []byte(`{}`)},
			{Kind: convo.ToolFunction, Name: "noargs", Cache: []byte(`{"type":"ephemeral"}`)},
		},
		ToolChoice:        convo.ToolChoice{Mode: convo.ChoiceTool, Name: "agents__wait_agent"},
		ParallelToolCalls: &tr,
		MaxTokens:         20000,
		TopK:              ptr(40),
		Stop:              []string{"END"},
		ThinkingBudget:    10000,
		Metadata:          []byte(`{"user_id":"user-42"}`),
		Stream:            true,
		Format:            &convo.ResponseFormat{Kind: convo.FormatJSONSchema, Schema: []byte(`{"type":"object"}`)},
		ServiceTier:       "standard_only",
	}
	out, err := AppendRequest(nil, r, convo.Target{MaxCompletionTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"gpt-5-codex","messages":[` +
		`{"role":"system","content":"You are Claude Code.\n\nLine \"two\""},` +
		`{"role":"user","content":[{"type":"text","text":"Look"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg","detail":"high"}},` +
		`{"type":"file","file":{"filename":"spec.pdf","file_data":"data:application/pdf;base64,JVBERi0="}},` +
		`{"type":"text","text":"plain text document"}]},` +
		`{"role":"assistant","content":"Spawning two.","tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"agents__spawn_agent","arguments":"{\"task\":\"a\"}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"ls \\\"x\\\"\"}"}},` +
		`{"id":"call_3","type":"function","function":{"name":"noargs","arguments":"{}"}}]},` +
		`{"role":"tool","content":"started\nagent 7","tool_call_id":"call_1"},` +
		`{"role":"tool","content":"Error: no such file","tool_call_id":"call_2"},` +
		`{"role":"tool","content":"Error: already said","tool_call_id":"call_3"},` +
		`{"role":"user","content":"Which is done?"},` +
		`{"role":"system","content":"Plan mode is on."},` +
		`{"role":"user","content":"Go on."}],` +
		`"max_completion_tokens":20000,"stop":["END"],"stream":true,"stream_options":{"include_usage":true},` +
		`"tools":[{"type":"function","function":{"name":"shell","description":"Runs a command","parameters":{"type":"object"},"strict":true}},` +
		`{"type":"function","function":{"name":"agents__spawn_agent","description":"Spawns","parameters":{"type":"object","properties":{}}}},` +
		`{"type":"function","function":{"name":"agents__wait_agent","parameters":{"type":"object","properties":{}}}},` +
		`{"type":"function","function":{"name":"noargs","parameters":{"type":"object","properties":{}}}}],` +
		`"tool_choice":{"type":"function","function":{"name":"agents__wait_agent"}},"parallel_tool_calls":true,` +
		`"reasoning_effort":"medium","user":"user-42",` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object"}}}}`
	if string(out) != want {
		t.Fatalf("wrote\n%s\nwant\n%s", out, want)
	}
	if !json.Valid(out) {
		t.Fatal("not JSON")
	}
	d := slices.Clone(r.Dropped)
	slices.Sort(d)
	wantDropped := []string{"messages[].content[].content[].type=image", "messages[].content[].document.url",
		"messages[].content[].type=redacted_thinking", "messages[].content[].type=thinking",
		"service_tier", "tools.web_search", "tools.web_search_20250305", "top_k"}
	if !slices.Equal(d, wantDropped) {
		t.Fatalf("dropped %q\nwant %q", d, wantDropped)
	}
}

// The small choices: max_tokens by default, effort as given (none is not sent), no stream
// options without a stream, tool choice and parallel_tool_calls only with tools (chat completions
// refuse them alone), a tool choice naming a dropped tool dropped too, other metadata dropped,
// the user field winning over Anthropic's user_id.
func TestAppendRequestChoices(t *testing.T) {
	f := false
	for _, c := range []struct {
		name string
		r    convo.Request
		want string
		drop []string
	}{
		{"defaults", convo.Request{Model: "m", MaxTokens: 5, ReasoningEffort: "none", ThinkingBudget: 1,
			Messages: []convo.Message{{Role: convo.RoleUser, Parts: []convo.Part{text("hi")}}}},
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`, nil},
		{"no tools", convo.Request{Model: "m", ToolChoice: convo.ToolChoice{Mode: convo.ChoiceAny}, ParallelToolCalls: &f,
			Tools: []convo.Tool{{Kind: convo.ToolServer, Type: "code_execution_20250522"}}},
			`{"model":"m","messages":[]}`, []string{"tools.code_execution_20250522"}},
		{"dropped choice", convo.Request{Model: "m", ToolChoice: convo.ToolChoice{Mode: convo.ChoiceTool, Name: "web_search"},
			Tools: []convo.Tool{{Kind: convo.ToolFunction, Name: "f"}, {Kind: convo.ToolServer, Type: "web_search"}}},
			`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]}`,
			[]string{"tools.web_search", "tool_choice"}},
		{"choices", convo.Request{Model: "m", ToolChoice: convo.ToolChoice{Mode: convo.ChoiceNone}, ParallelToolCalls: &f,
			Tools: []convo.Tool{{Kind: convo.ToolFunction, Name: "f", Parameters: []byte(`{}`)}}},
			`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"none","parallel_tool_calls":false}`, nil},
		{"metadata", convo.Request{Model: "m", User: "mine", Metadata: []byte(`{"user_id":"theirs","session":"s"}`)},
			`{"model":"m","messages":[],"user":"mine"}`, []string{"metadata"}},
		{"json object and effort", convo.Request{Model: "m", ReasoningEffort: "high", ThinkingBudget: 1024,
			Format: &convo.ResponseFormat{Kind: convo.FormatJSONObject}, Temperature: ptr(1.0), TopP: ptr(0.95)},
			`{"model":"m","messages":[],"temperature":1,"top_p":0.95,"reasoning_effort":"high","response_format":{"type":"json_object"}}`, nil},
		{"budgets", convo.Request{Model: "m", ThinkingBudget: 1024, Format: &convo.ResponseFormat{Kind: convo.FormatText}},
			`{"model":"m","messages":[],"reasoning_effort":"low"}`, nil},
		{"numbers JSON cannot say", convo.Request{Model: "m", Temperature: ptr(math.NaN()), TopP: ptr(math.Inf(1))},
			`{"model":"m","messages":[]}`, nil},
		{"stateful", convo.Request{Model: "m", PreviousResponseID: "resp_1", ThinkingBudget: 30000},
			`{"model":"m","messages":[],"reasoning_effort":"high"}`, []string{"previous_response_id"}},
		{"empty turns", convo.Request{Model: "m", System: []convo.Part{text("")}, Messages: []convo.Message{
			{Role: convo.RoleUser, Parts: []convo.Part{text("")}},
			{Role: convo.RoleAssistant, Parts: []convo.Part{{Kind: convo.PartThinking, Text: "t"}}},
			{Role: convo.RoleTool, Parts: []convo.Part{{Kind: convo.PartToolResult, ID: "c"}, text("and text")}}}},
			`{"model":"m","messages":[{"role":"assistant","content":""},{"role":"tool","content":"","tool_call_id":"c"},{"role":"user","content":"and text"}]}`,
			[]string{"messages[].content[].type=thinking"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := AppendRequest(nil, &c.r, convo.Target{})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want {
				t.Fatalf("wrote\n%s\nwant\n%s", out, c.want)
			}
			if !slices.Equal(c.r.Dropped, c.drop) {
				t.Fatalf("dropped %q, want %q", c.r.Dropped, c.drop)
			}
		})
	}
}
