package responses

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

func ptr[T any](v T) *T { return &v }

func text(t convo.Text) convo.Part { return convo.Part{Kind: convo.PartText, Text: t} }

// claudeCodeRequest is what a Claude Code turn reads as in the model (the messages reader's
// work): a system prompt of blocks with a cache mark, thinking with Anthropic's signature and
// with OpenAI's encrypted content (a reasoning item a messages client got from a Responses
// upstream comes back as its thinking's signature), tool calls and results (an error, an
// image), a mid-conversation system message, an Anthropic server tool, a thinking budget, a
// sampling temperature and a one-token output limit.
func claudeCodeRequest() *convo.Request {
	return &convo.Request{
		Model: "gpt-5-codex",
		System: []convo.Part{text("x-anthropic-billing-header: cc_version=2.0"),
			{Kind: convo.PartText, Text: `You are Claude Code, Anthropic's official CLI for Claude.`, Cache: []byte(`{"type":"ephemeral"}`)}},
		Messages: []convo.Message{
			{Role: convo.RoleUser, Parts: []convo.Part{text("What is in this screenshot and the spec?"),
				{Kind: convo.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
				{Kind: convo.PartDocument, MediaType: "application/pdf", Data: "JVBERi0xLjQ=", Title: "spec.pdf"},
				{Kind: convo.PartDocument, Text: "plain notes"}}},
			{Role: convo.RoleAssistant, Parts: []convo.Part{
				{Kind: convo.PartThinking, Text: "Claude thought this.", Signature: "EqQBCkYIBxgCKkAnthropicSignature"},
				text("Let me look."),
				{Kind: convo.PartToolCall, ID: "toolu_1", Name: "Bash", Args: []byte(`{"command":"ls \"a b\""}`)}}},
			{Role: convo.RoleTool, Parts: []convo.Part{{Kind: convo.PartToolResult, ID: "toolu_1", IsError: true,
				Content: []convo.Part{text(`ls: a b: No such file`)}}}},
			{Role: convo.RoleSystem, Parts: []convo.Part{text("Token usage: 5000/200000")}},
			{Role: convo.RoleAssistant, Parts: []convo.Part{
				{Kind: convo.PartThinking, Text: "Try the screenshot tool.", Signature: "gAAAAABopenaiEncrypted"},
				{Kind: convo.PartToolCall, ID: "call_2", Name: "Screenshot", Args: []byte(`{}`)},
				{Kind: convo.PartToolCall, ID: "call_3", Name: "Read", Args: []byte(`{"path":"/x"}`)}}},
			{Role: convo.RoleTool, Parts: []convo.Part{
				{Kind: convo.PartToolResult, ID: "call_2", Content: []convo.Part{text("shot:"), {Kind: convo.PartImage, MediaType: "image/jpeg", Data: "/9j/"}}},
				{Kind: convo.PartToolResult, ID: "call_3", Content: []convo.Part{text("line 1"), text("line 2")}}}},
			{Role: convo.RoleUser, Parts: []convo.Part{text("Thanks")}},
		},
		Tools: []convo.Tool{
			{Kind: convo.ToolFunction, Name: "Bash", Description: "Runs a command", Cache: []byte(`{"type":"ephemeral"}`),
				Parameters: []byte(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
			{Kind: convo.ToolFunction, Name: "Screenshot"},
			{Kind: convo.ToolFunction, Name: "Read", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			{Kind: convo.ToolServer, Type: "web_search_20250305", Family: "anthropic", Name: "web_search", Raw: []byte(`{"type":"web_search_20250305","name":"web_search","max_uses":5}`)},
		},
		ToolChoice:        convo.ToolChoice{Mode: convo.ChoiceAny},
		ParallelToolCalls: ptr(false),
		MaxTokens:         1,
		Temperature:       ptr(1.0),
		TopK:              ptr(40),
		Stop:              []string{"\n\nHuman:"},
		ThinkingBudget:    10000,
		Metadata:          []byte(`{"user_id":"user_abc_account_1_session_2"}`),
		Stream:            true,
	}
}

// chatRequest is a chat client's request for a model served only on /v1/responses, with a JSON
// schema without a name and sampling for a model that takes it.
func chatRequest() *convo.Request {
	return &convo.Request{
		Model:  "openai/gpt-4.1",
		System: []convo.Part{text("Answer in JSON.")},
		Messages: []convo.Message{
			{Role: convo.RoleUser, Name: "alice", Parts: []convo.Part{text(`Weather in \"Paris\"?`), {Kind: convo.PartImage, URL: "https://example.com/sky.jpg", Detail: "low"}}},
			{Role: convo.RoleAssistant, Parts: []convo.Part{{Kind: convo.PartToolCall, ID: "c1", Name: "multi_agent_v1__wait_agent", Args: []byte(`{"targets":["a"]}`)}}},
			{Role: convo.RoleTool, Parts: []convo.Part{{Kind: convo.PartToolResult, ID: "c1", Content: []convo.Part{text("done")}}}},
		},
		Tools: []convo.Tool{{Kind: convo.ToolFunction, Name: "multi_agent_v1__wait_agent", Strict: ptr(true),
			Parameters: []byte(`{"type":"object","properties":{"targets":{"type":"array","items":{"type":"string"}}},"required":["targets"],"additionalProperties":false}`)}},
		ToolChoice:      convo.ToolChoice{Mode: convo.ChoiceTool, Name: "multi_agent_v1__wait_agent"},
		MaxTokens:       500,
		Temperature:     ptr(0.2),
		TopP:            ptr(1e-7),
		Format:          &convo.ResponseFormat{Kind: convo.FormatJSONSchema, Schema: []byte(`{"type":"object"}`)},
		ReasoningEffort: "",
		User:            "u1",
		Metadata:        []byte(`{"nested":{"x":1}}`),
	}
}

// Requests of other formats are written as the goldens in testdata/upstream_request say, with
// what could not be carried named.
func TestAppendRequestGoldens(t *testing.T) {
	for name, r := range map[string]*convo.Request{"claude_code": claudeCodeRequest(), "chat_client": chatRequest()} {
		t.Run(name, func(t *testing.T) {
			out, err := AppendRequest(nil, r, convo.Target{})
			if err != nil {
				t.Fatal(err)
			}
			got := convotest.Indent(t, out)
			got = append(got, "dropped: "+strings.Join(r.Dropped, ", ")+"\n"...)
			convotest.Golden(t, "testdata/upstream_request/"+name+".golden", got)
		})
	}
}

// The decisions behind those goldens, one by one.
func TestAppendRequestForAResponsesUpstream(t *testing.T) {
	r := claudeCodeRequest()
	out, _ := AppendRequest(nil, r, convo.Target{})
	get := func(path string) gjson.Result { return gjson.GetBytes(out, path) }

	// Stateless: nothing stored, reasoning asked for as encrypted content, with a summary (what
	// other formats show as thinking) at the effort the thinking budget asks for.
	if get("store").Type != gjson.False || !slices.Contains(strs(get("include")), "reasoning.encrypted_content") ||
		get("reasoning.effort").String() != "medium" || get("reasoning.summary").String() != "auto" {
		t.Errorf("store %s include %s reasoning %s", get("store").Raw, get("include").Raw, get("reasoning").Raw)
	}
	// The opening system prompt: instructions, then a developer message.
	if get("instructions").String() != "x-anthropic-billing-header: cc_version=2.0" ||
		get("input.0.role").String() != "developer" || !strings.HasPrefix(get("input.0.content.0.text").String(), "You are Claude Code") {
		t.Errorf("instructions %s, first item %s", get("instructions").Raw, get("input.0").Raw)
	}
	// Functions are sent non-strict unless they say otherwise (Responses functions are strict
	// by default and refuse schemas like these), and get a schema when they have none.
	if get("tools.0.strict").Type != gjson.False || get("tools.1.parameters.type").String() != "object" {
		t.Errorf("tools %s", get("tools").Raw)
	}
	// Anthropic's server tools have no place here.
	if n := len(get("tools").Array()); n != 3 || !slices.Contains(r.Dropped, "tools.web_search_20250305") {
		t.Errorf("%d tools, dropped %v", n, r.Dropped)
	}
	// OpenAI's floor for the output limit; its reasoning models take no sampling parameters.
	if get("max_output_tokens").Int() != 16 || get("temperature").Exists() || !slices.Contains(r.Dropped, "temperature") {
		t.Errorf("max_output_tokens %s temperature %s dropped %v", get("max_output_tokens").Raw, get("temperature").Raw, r.Dropped)
	}
	if get("tool_choice").String() != "required" || get("parallel_tool_calls").Type != gjson.False {
		t.Errorf("tool_choice %s parallel %s", get("tool_choice").Raw, get("parallel_tool_calls").Raw)
	}
	var reasoning, results []gjson.Result
	for _, it := range get("input").Array() {
		switch it.Get("type").String() {
		case "reasoning":
			reasoning = append(reasoning, it)
		case "function_call_output":
			results = append(results, it)
		}
	}
	// Only OpenAI's own encrypted reasoning goes back; Anthropic's thinking cannot.
	if len(reasoning) != 1 || reasoning[0].Get("encrypted_content").String() != "gAAAAABopenaiEncrypted" ||
		reasoning[0].Get("summary.0.text").String() != "Try the screenshot tool." || !slices.Contains(r.Dropped, "messages[].thinking") {
		t.Errorf("reasoning items %v, dropped %v", reasoning, r.Dropped)
	}
	// An error result says so; a result with an image is a list of parts; texts join by lines.
	if len(results) != 3 || results[0].Get("output").String() != "Error: ls: a b: No such file" ||
		results[1].Get("output.1.image_url").String() != "data:image/jpeg;base64,/9j/" || results[2].Get("output").String() != "line 1\nline 2" {
		t.Errorf("results %v", results)
	}
	// The mid-conversation system message stays in place, as a developer message.
	found := false
	for _, it := range get("input").Array() {
		found = found || it.Get("role").String() == "developer" && it.Get("content.0.text").String() == "Token usage: 5000/200000"
	}
	if !found || !slices.Contains(r.Dropped, "top_k") || !slices.Contains(r.Dropped, "stop") {
		t.Errorf("input %s dropped %v", get("input").Raw, r.Dropped)
	}
	// Anthropic's metadata is a string map, which OpenAI takes.
	if get("metadata.user_id").String() != "user_abc_account_1_session_2" {
		t.Errorf("metadata %s", get("metadata").Raw)
	}

	c := chatRequest()
	out, _ = AppendRequest(nil, c, convo.Target{})
	// A model that is not a reasoning model keeps its sampling and is not asked for encrypted
	// reasoning (OpenAI refuses that for it).
	if get("temperature").Float() != 0.2 || get("top_p").Raw != "1e-7" || get("include").Exists() || get("reasoning").Exists() {
		t.Errorf("temperature %s top_p %s include %s reasoning %s", get("temperature").Raw, get("top_p").Raw, get("include").Raw, get("reasoning").Raw)
	}
	// A JSON schema without a name gets one (OpenAI requires it); metadata that is not a
	// string map is dropped.
	if get("text.format.name").String() != "response" || get("metadata").Exists() || !slices.Contains(c.Dropped, "metadata") {
		t.Errorf("text %s metadata %s dropped %v", get("text").Raw, get("metadata").Raw, c.Dropped)
	}
}

// A call of a flattened namespace member (a client without namespaces called ns__fn) goes
// upstream in its namespace when the request's tools say it is one.
func TestAppendRequestMapsFlatNamesToNamespaces(t *testing.T) {
	r := mustRead(t, `{"model":"gpt-5-codex","input":[
	 {"type":"function_call","call_id":"c1","name":"multi_agent_v1__wait_agent","arguments":"{}"},
	 {"type":"function_call","call_id":"c2","name":"top__level","arguments":"{}"}],
	 "tools":[{"type":"namespace","name":"multi_agent_v1","tools":[{"type":"function","name":"wait_agent"}]},
	  {"type":"function","name":"top__level"}]}`)
	out, _ := AppendRequest(nil, r, convo.Target{})
	items := gjson.GetBytes(out, "input").Array()
	if items[0].Get("name").String() != "wait_agent" || items[0].Get("namespace").String() != "multi_agent_v1" ||
		items[1].Get("name").String() != "top__level" || items[1].Get("namespace").Exists() {
		t.Fatalf("%s", gjson.GetBytes(out, "input").Raw)
	}
}

// Without tools there is no tool choice (OpenAI refuses a choice among none), and a request
// without reasoning settings for a non-reasoning model says nothing about reasoning.
func TestAppendRequestMinimal(t *testing.T) {
	r := &convo.Request{Model: "gpt-4.1-mini", Messages: []convo.Message{{Role: convo.RoleUser, Parts: []convo.Part{text("hi")}}},
		ToolChoice: convo.ToolChoice{Mode: convo.ChoiceAny}, ParallelToolCalls: ptr(true)}
	out, _ := AppendRequest(nil, r, convo.Target{})
	want := `{"model":"gpt-4.1-mini","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"store":false}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	var v any
	if json.Unmarshal(out, &v) != nil {
		t.Fatal("invalid JSON")
	}
}

func strs(r gjson.Result) []string {
	var out []string
	for _, v := range r.Array() {
		out = append(out, v.String())
	}
	return out
}
