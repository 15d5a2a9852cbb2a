package chat

import (
	"reflect"
	"testing"

	"switchyard/services/proxy/convo"
)

// What the reader puts into the model, field by field.
func TestReadRequestModel(t *testing.T) {
	in := `{"model":"gpt-x","max_tokens":10,"max_completion_tokens":200,"temperature":0.5,"top_p":0.25,
	 "stop":["A",null,"B\n"],"stream":true,"stream_options":{"include_usage":true},"parallel_tool_calls":false,
	 "reasoning_effort":"minimal","user":"u","metadata":{"k":"v"},"store":true,"service_tier":"priority",
	 "tool_choice":{"type":"function","function":{"name":"f"}},
	 "response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":false}},
	 "tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}}],
	 "messages":[
	  {"role":"developer","content":[{"type":"text","text":"Be \"brief\".","cache_control":{"type":"ephemeral"}}]},
	  {"role":"system","content":"Second."},
	  {"role":"user","name":"ann","content":[{"type":"text","text":"Look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA=","detail":"low"}},
	    {"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVB="}}]},
	  {"role":"assistant","reasoning_content":"hmm","content":"Ok","tool_calls":[
	    {"id":"c1","type":"function","function":{"name":"f","arguments":" {\"a\":1}"}},
	    {"id":"c2","type":"function","function":{"name":"f","arguments":"[1]"}}]},
	  {"role":"tool","tool_call_id":"c1","content":"one"},
	  {"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"two"},{"type":"text","text":"three"}]},
	  {"role":"system","content":"Mid."},
	  {"role":"assistant","reasoning":"other name","content":[{"type":"text","text":"x"},{"type":"refusal","refusal":"no"}]},
	  {"role":"critic","content":"?"}]}`
	r, err := ReadRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	f := false
	tr := true
	want := &convo.Request{
		Model: "gpt-x",
		System: []convo.Part{{Kind: convo.PartText, Text: `Be \"brief\".`, Cache: []byte(`{"type":"ephemeral"}`)},
			{Kind: convo.PartText, Text: "Second."}},
		Messages: []convo.Message{
			{Role: convo.RoleUser, Name: "ann", Parts: []convo.Part{{Kind: convo.PartText, Text: "Look"},
				{Kind: convo.PartImage, MediaType: "image/png", Data: "AAA=", Detail: "low"},
				{Kind: convo.PartImage, URL: "https://x/y.png"},
				{Kind: convo.PartDocument, MediaType: "application/pdf", Data: "JVB=", Title: "a.pdf"}}},
			{Role: convo.RoleAssistant, Parts: []convo.Part{{Kind: convo.PartThinking, Text: "hmm"}, {Kind: convo.PartText, Text: "Ok"},
				{Kind: convo.PartToolCall, ID: "c1", Name: "f", Args: []byte(` {"a":1}`)},
				{Kind: convo.PartToolCall, ID: "c2", Name: "f", Args: []byte(`{}`)}}},
			{Role: convo.RoleTool, Parts: []convo.Part{
				{Kind: convo.PartToolResult, ID: "c1", Content: []convo.Part{{Kind: convo.PartText, Text: "one"}}},
				{Kind: convo.PartToolResult, ID: "c2", Content: []convo.Part{{Kind: convo.PartText, Text: "two"}, {Kind: convo.PartText, Text: "three"}}}}},
			{Role: convo.RoleSystem, Parts: []convo.Part{{Kind: convo.PartText, Text: "Mid."}}},
			{Role: convo.RoleAssistant, Parts: []convo.Part{{Kind: convo.PartThinking, Text: "other name"}, {Kind: convo.PartText, Text: "x"}}},
		},
		Tools:             []convo.Tool{{Kind: convo.ToolFunction, Name: "f", Description: "d", Parameters: []byte(`{"type":"object"}`), Strict: &tr}},
		ToolChoice:        convo.ToolChoice{Mode: convo.ChoiceTool, Name: "f"},
		ParallelToolCalls: &f,
		MaxTokens:         200,
		Temperature:       ptr(0.5),
		TopP:              ptr(0.25),
		Stop:              []string{"A", "B\n"},
		Format:            &convo.ResponseFormat{Kind: convo.FormatJSONSchema, Name: "n", Schema: []byte(`{"type":"object"}`), Strict: &f},
		ReasoningEffort:   "minimal",
		User:              "u",
		Metadata:          []byte(`{"k":"v"}`),
		Stream:            true,
		IncludeUsage:      true,
		Store:             &tr,
		ServiceTier:       "priority",
		Dropped:           []string{"messages[].content[].type=refusal", "messages[8].role=critic"},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("read\n%s\nwant\n%s", mustJSON(r), mustJSON(want))
	}
}

func ptr[T any](v T) *T { return &v }

// A request the gateway refuses says which field is wrong, in the words the gateway has always
// used (the engine answers 400 invalid_request with it).
func TestReadRequestErrors(t *testing.T) {
	for body, want := range map[string]string{
		`[]`:                                              "not a chat completions request: the body is not a JSON object",
		`{"model":"m"`:                                    "not a chat completions request: the body is not a JSON object",
		`{"model":1}`:                                     "not a chat completions request: model must be a string",
		`{"messages":{}}`:                                 "not a chat completions request: messages must be a list",
		`{"max_tokens":1.5}`:                              "not a chat completions request: max_tokens must be an integer",
		`{"max_tokens":"1"}`:                              "not a chat completions request: max_tokens must be an integer",
		`{"max_completion_tokens":1e3}`:                   "not a chat completions request: max_completion_tokens must be an integer",
		`{"temperature":"hot"}`:                           "not a chat completions request: temperature must be a number",
		`{"top_p":true}`:                                  "not a chat completions request: top_p must be a number",
		`{"stream":"yes"}`:                                "not a chat completions request: stream must be a boolean",
		`{"stream_options":[]}`:                           "not a chat completions request: stream_options must be an object",
		`{"stream_options":{"include_usage":1}}`:          "not a chat completions request: stream_options.include_usage must be a boolean",
		`{"tools":{}}`:                                    "not a chat completions request: tools must be a list",
		`{"tools":[1]}`:                                   "not a chat completions request: tools[] must be objects",
		`{"tools":[{"type":1}]}`:                          "not a chat completions request: tools[].type must be a string",
		`{"tools":[{"function":[]}]}`:                     "not a chat completions request: tools[].function must be an object",
		`{"tools":[{"function":{"name":1}}]}`:             "not a chat completions request: tools[].function.name must be a string",
		`{"tools":[{"function":{"description":{}}}]}`:     "not a chat completions request: tools[].function.description must be a string",
		`{"parallel_tool_calls":0}`:                       "not a chat completions request: parallel_tool_calls must be a boolean",
		`{"reasoning_effort":3}`:                          "not a chat completions request: reasoning_effort must be a string",
		`{"user":{}}`:                                     "not a chat completions request: user must be a string",
		`{"response_format":"json"}`:                      "not a chat completions request: response_format must be an object",
		`{"metadata":[]}`:                                 "not a chat completions request: metadata must be an object",
		`{"messages":["hi"]}`:                             "not a chat completions request: messages[] must be objects",
		`{"messages":[{"role":1}]}`:                       "not a chat completions request: messages[].role must be a string",
		`{"messages":[{"role":"tool","tool_call_id":2}]}`: "not a chat completions request: messages[].tool_call_id must be a string",
		`{"messages":[{"role":"assistant","reasoning_content":[]}]}`:                     "not a chat completions request: messages[].reasoning_content must be a string",
		`{"messages":[{"role":"user","name":false}]}`:                                    "not a chat completions request: messages[].name must be a string",
		`{"messages":[{"role":"assistant","tool_calls":{}}]}`:                            "not a chat completions request: messages[].tool_calls must be a list",
		`{"messages":[{"role":"assistant","tool_calls":[1]}]}`:                           "not a chat completions request: messages[].tool_calls[] must be objects",
		`{"messages":[{"role":"assistant","tool_calls":[{"function":"f"}]}]}`:            "not a chat completions request: messages[].tool_calls[].function must be an object",
		`{"messages":[{"role":"assistant","tool_calls":[{"id":1,"function":{}}]}]}`:      "not a chat completions request: messages[].tool_calls[] must be strings where strings belong",
		`{"messages":[{"role":"assistant","tool_calls":[{"index":0.5,"function":{}}]}]}`: "not a chat completions request: messages[].tool_calls[].index must be an integer",
	} {
		_, err := ReadRequest([]byte(body))
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

// What the reader keeps going: parts of the wrong shape are dropped by name, not refused (as the
// gateway always did).
func TestReadRequestDrops(t *testing.T) {
	for body, want := range map[string][]string{
		`{"messages":[{"role":"user","content":7}]}`:                                                    {"messages[].content"},
		`{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`:                           {"messages[].content"},
		`{"messages":[{"role":"user","content":[null]}]}`:                                               {"messages[].content[].type="},
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`: {"messages[].content[].image_url"},
		`{"stop":5}`:                                                           {"stop"},
		`{"stop":["a",1]}`:                                                     {"stop"},
		`{"tool_choice":"sometimes"}`:                                          {"tool_choice"},
		`{"tool_choice":{"type":"allowed_tools"}}`:                             {"tool_choice"},
		`{"response_format":{"type":"grammar"}}`:                               {"response_format"},
		`{"response_format":{"type":"json_schema"}}`:                           {"response_format"},
		`{"tools":[{"type":"custom","custom":{"name":"x"}}]}`:                  {"tools[].type=custom"},
		`{"messages":[{"role":"user","content":[{"type":"file","file":{}}]}]}`: {"messages[].content[].file"},
		`{"frequency_penalty":1,"seed":2}`:                                     {"frequency_penalty", "seed"},
	} {
		r, err := ReadRequest([]byte(body))
		if err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if !reflect.DeepEqual(r.Dropped, want) {
			t.Errorf("%s: dropped %q, want %q", body, r.Dropped, want)
		}
	}
}
