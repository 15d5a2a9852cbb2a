package translate

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A chat request that both formats can carry entirely comes back from a trip through the
// Anthropic format as it went: roles, texts, tool calls with their arguments, tool results
// matched to their calls, tools and tool choice.
func TestChatRequestRoundTrip(t *testing.T) {
	in := `{"model":"m","max_tokens":100,"stream":true,"temperature":0.5,"stop":["X"],"messages":[
	 {"role":"system","content":"Be brief."},
	 {"role":"user","content":"Weather?"},
	 {"role":"assistant","content":"Checking.","tool_calls":[
	   {"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}},
	   {"id":"c2","type":"function","function":{"name":"w","arguments":"{\"city\":\"Rome\"}"}}]},
	 {"role":"tool","tool_call_id":"c1","content":"sunny"},
	 {"role":"tool","tool_call_id":"c2","content":"rain"},
	 {"role":"user","content":"Thanks"}],
	 "tools":[{"type":"function","function":{"name":"w","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
	 "tool_choice":{"type":"function","function":{"name":"w"}}}`
	there, err := ChatToMessages([]byte(in), Target{})
	if err != nil || len(there.Dropped) != 0 {
		t.Fatalf("to messages: %v, dropped %v", err, there.Dropped)
	}
	back, err := MessagesToChat(there.Body, Target{})
	if err != nil || len(back.Dropped) != 0 {
		t.Fatalf("back to chat: %v, dropped %v", err, back.Dropped)
	}
	var want, got chatRequest
	json.Unmarshal([]byte(in), &want)
	json.Unmarshal(back.Body, &got)
	want.StreamOptions = &streamOptions{IncludeUsage: true} // asked for on the way back, to count tokens
	if !reflect.DeepEqual(normalizeChat(want), normalizeChat(got)) {
		t.Fatalf("round trip changed the request\n got %s\nwant %s", mustJSON(normalizeChat(got)), mustJSON(normalizeChat(want)))
	}
}

// And the other way: an Anthropic request through the OpenAI format.
func TestMessagesRequestRoundTrip(t *testing.T) {
	in := `{"model":"m","max_tokens":100,"system":"Be brief.","stop_sequences":["X"],"messages":[
	 {"role":"user","content":"Weather?"},
	 {"role":"assistant","content":[{"type":"text","text":"Checking."},
	   {"type":"tool_use","id":"t1","name":"w","input":{"city":"Paris"}},{"type":"tool_use","id":"t2","name":"w","input":{"city":"Rome"}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"sunny"},{"type":"tool_result","tool_use_id":"t2","content":"rain"},
	   {"type":"text","text":"Thanks"}]}],
	 "tools":[{"name":"w","description":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
	 "tool_choice":{"type":"any"}}`
	there, err := MessagesToChat([]byte(in), Target{})
	if err != nil || len(there.Dropped) != 0 {
		t.Fatalf("to chat: %v, dropped %v", err, there.Dropped)
	}
	back, err := ChatToMessages(there.Body, Target{})
	if err != nil || len(back.Dropped) != 0 {
		t.Fatalf("back to messages: %v, dropped %v", err, back.Dropped)
	}
	var want, got map[string]any
	json.Unmarshal([]byte(in), &want)
	json.Unmarshal(back.Body, &got)
	// The string forms come back as their block forms.
	want["system"] = []any{map[string]any{"type": "text", "text": "Be brief."}}
	want["messages"].([]any)[0].(map[string]any)["content"] = []any{map[string]any{"type": "text", "text": "Weather?"}}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("round trip changed the request\n got %s\nwant %s", mustJSON(got), mustJSON(want))
	}
}

// normalizeChat writes string contents as they decode, so equal requests compare equal.
func normalizeChat(r chatRequest) chatRequest {
	for i := range r.Messages {
		var s string
		if json.Unmarshal(r.Messages[i].Content, &s) == nil {
			r.Messages[i].Content, _ = json.Marshal(s)
		}
		if len(r.Messages[i].ToolCalls) > 0 {
			for j := range r.Messages[i].ToolCalls {
				var v any
				json.Unmarshal([]byte(r.Messages[i].ToolCalls[j].Function.Arguments), &v)
				b, _ := json.Marshal(v)
				r.Messages[i].ToolCalls[j].Function.Arguments = string(b)
			}
		}
	}
	for i := range r.Tools {
		var v any
		json.Unmarshal(r.Tools[i].Function.Parameters, &v)
		r.Tools[i].Function.Parameters, _ = json.Marshal(v)
	}
	var tc any
	json.Unmarshal(r.ToolChoice, &tc)
	r.ToolChoice, _ = json.Marshal(tc)
	var stop any
	json.Unmarshal(r.Stop, &stop)
	r.Stop, _ = json.Marshal(stop)
	return r
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The answer mappings that carry meaning beyond text.
func TestStopReasonsAndUsage(t *testing.T) {
	for stop, finish := range map[string]string{"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
		"tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "stop"} {
		if got := stopToFinish(stop); got != finish {
			t.Errorf("stop %s → %s, want %s", stop, got, finish)
		}
	}
	for finish, stop := range map[string]string{"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
		"content_filter": "refusal", "function_call": "tool_use"} {
		if got := finishToStop(finish); got != stop {
			t.Errorf("finish %s → %s, want %s", finish, got, stop)
		}
	}
	u := chatUsageOf(msgUsage{InputTokens: 10, OutputTokens: 5, CacheReadInputTokens: 30, CacheCreationInputTokens: 7})
	if u.PromptTokens != 47 || u.CompletionTokens != 5 || u.TotalTokens != 52 || u.PromptTokensDetails.CachedTokens != 30 {
		t.Errorf("chat usage %+v", u)
	}
	m := msgUsageOf(&chatUsage{PromptTokens: 47, CompletionTokens: 5, PromptTokensDetails: &promptDetails{CachedTokens: 30}})
	if m.InputTokens != 17 || m.CacheReadInputTokens != 30 || m.OutputTokens != 5 {
		t.Errorf("messages usage %+v", m)
	}
}
