package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// chatRequestKeys are the chat completions fields ChatToMessages carries over.
var chatRequestKeys = []string{"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
	"stream", "stream_options", "tools", "tool_choice", "parallel_tool_calls", "reasoning_effort", "user"}

// minThinkingBudget is the smallest thinking budget Anthropic accepts.
const minThinkingBudget = 1024

// thinkingBudgets maps OpenAI's reasoning effort to an Anthropic thinking budget.
var thinkingBudgets = map[string]int{"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}

// ChatToMessages turns an OpenAI chat completions request into an Anthropic messages request.
func ChatToMessages(body []byte, t Target) (Request, error) {
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return Request{}, fmt.Errorf("not a chat completions request: %w", err)
	}
	d := &dropper{}
	d.dropUnknownKeys(body, chatRequestKeys...)
	out := msgRequest{Model: in.Model, Stream: in.Stream, Temperature: in.Temperature, TopP: in.TopP}

	clientMax := true
	switch {
	case in.MaxCompletionTokens != nil:
		out.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		out.MaxTokens = *in.MaxTokens
	default:
		clientMax = false
		out.MaxTokens = t.DefaultMaxTokens
		if out.MaxTokens <= 0 {
			out.MaxTokens = defaultMaxTokens
		}
	}
	if out.Temperature != nil && *out.Temperature > 1 {
		v := 1.0 // Anthropic's range is 0–1
		out.Temperature = &v
	}
	if s, ok := asString(in.Stop); ok {
		out.StopSequences = []string{s}
	} else if !isNull(in.Stop) {
		if err := json.Unmarshal(in.Stop, &out.StopSequences); err != nil {
			d.drop("stop")
		}
	}
	if in.User != "" {
		out.Metadata = &msgMetadata{UserID: in.User}
	}
	if budget, ok := thinkingBudgets[in.ReasoningEffort]; ok {
		// Anthropic counts thinking inside max_tokens and wants the budget below it (and at
		// least 1,024): a limit the client set is kept and the budget fits under it.
		switch {
		case !clientMax:
			out.MaxTokens += budget
		case out.MaxTokens > budget:
		case out.MaxTokens > minThinkingBudget:
			budget = out.MaxTokens - 1
		default:
			budget = minThinkingBudget
			out.MaxTokens += minThinkingBudget
		}
		out.Thinking = &msgThinking{Type: "enabled", BudgetTokens: budget}
		// Anthropic refuses sampling changes while thinking.
		if out.Temperature != nil {
			out.Temperature = nil
			d.drop("temperature")
		}
		if out.TopP != nil {
			out.TopP = nil
			d.drop("top_p")
		}
	} else if in.ReasoningEffort != "" && in.ReasoningEffort != "none" {
		d.drop("reasoning_effort")
	}

	for _, tool := range in.Tools {
		if tool.Type != "" && tool.Type != "function" {
			d.drop("tools[].type=" + tool.Type)
			continue
		}
		schema := tool.Function.Parameters
		if isNull(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, msgTool{Name: tool.Function.Name, Description: tool.Function.Description,
			InputSchema: rawJSON(schema)})
	}
	out.ToolChoice = chatToolChoice(in.ToolChoice, d)
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls && len(out.Tools) > 0 {
		if out.ToolChoice == nil {
			out.ToolChoice = &msgToolChoice{Type: "auto"}
		}
		if out.ToolChoice.Type != "none" {
			out.ToolChoice.DisableParallelToolUse = true
		}
	}

	var system []msgBlock
	for i, m := range in.Messages {
		switch m.Role {
		case "system", "developer":
			for _, text := range chatTexts(m.Content, d) {
				if text != "" { // Anthropic refuses empty text blocks
					system = append(system, msgBlock{Type: "text", Text: text})
				}
			}
		case "user":
			blocks := chatUserBlocks(m.Content, d)
			if len(blocks) > 0 {
				out.Messages = appendMessage(out.Messages, "user", blocks)
			}
		case "assistant":
			var blocks []msgBlock
			if m.ReasoningContent != "" {
				d.drop("messages[].reasoning_content") // Anthropic wants its own signed thinking back
			}
			for _, text := range chatTexts(m.Content, d) {
				if text != "" {
					blocks = append(blocks, msgBlock{Type: "text", Text: text})
				}
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, msgBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name,
					Input: objectOrEmpty([]byte(tc.Function.Arguments))})
			}
			if len(blocks) > 0 {
				out.Messages = appendMessage(out.Messages, "assistant", blocks)
			}
		case "tool", "function":
			res := msgBlock{Type: "tool_result", ToolUseID: m.ToolCallID}
			res.Content = marshalOrNull(toolResultContent(m.Content, d))
			out.Messages = appendMessage(out.Messages, "user", []msgBlock{res})
		default:
			d.drop(fmt.Sprintf("messages[%d].role=%s", i, m.Role))
		}
	}
	if len(system) > 0 {
		out.System = marshalOrNull(system)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return Request{}, err
	}
	return Request{Body: b, Dropped: d.names}, nil
}

// appendMessage adds blocks as a turn of role, joining them to the previous turn when it has the
// same role (tool results of parallel calls belong in one user turn).
func appendMessage(list []msgMessage, role string, blocks []msgBlock) []msgMessage {
	if n := len(list); n > 0 && list[n-1].Role == role {
		var prev []msgBlock
		if json.Unmarshal(list[n-1].Content, &prev) == nil {
			// Tool results must come first in a user turn.
			if role == "user" && len(blocks) > 0 && blocks[0].Type == "tool_result" {
				i := 0
				for i < len(prev) && prev[i].Type == "tool_result" {
					i++
				}
				merged := append(append(append([]msgBlock{}, prev[:i]...), blocks...), prev[i:]...)
				list[n-1].Content = marshalOrNull(merged)
				return list
			}
			list[n-1].Content = marshalOrNull(append(prev, blocks...))
			return list
		}
	}
	return append(list, msgMessage{Role: role, Content: marshalOrNull(blocks)})
}

func marshalOrNull(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// chatTexts reads a message content that is a string or an array of text parts.
func chatTexts(raw json.RawMessage, d *dropper) []string {
	if isNull(raw) {
		return nil
	}
	if s, ok := asString(raw); ok {
		return []string{s}
	}
	var parts []chatPart
	if json.Unmarshal(raw, &parts) != nil {
		d.drop("messages[].content")
		return nil
	}
	var out []string
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		} else {
			d.drop("messages[].content[].type=" + p.Type)
		}
	}
	return out
}

// chatUserBlocks reads a user message's content: text and images.
func chatUserBlocks(raw json.RawMessage, d *dropper) []msgBlock {
	if isNull(raw) {
		return nil
	}
	if s, ok := asString(raw); ok {
		if s == "" {
			return nil
		}
		return []msgBlock{{Type: "text", Text: s}}
	}
	var parts []chatPart
	if json.Unmarshal(raw, &parts) != nil {
		d.drop("messages[].content")
		return nil
	}
	var out []msgBlock
	for _, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" { // Anthropic refuses empty text blocks
				out = append(out, msgBlock{Type: "text", Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				continue
			}
			if mt, data, ok := parseDataURL(p.ImageURL.URL); ok {
				out = append(out, msgBlock{Type: "image", Source: &msgImageSource{Type: "base64", MediaType: mt, Data: data}})
			} else if strings.HasPrefix(p.ImageURL.URL, "http://") || strings.HasPrefix(p.ImageURL.URL, "https://") {
				out = append(out, msgBlock{Type: "image", Source: &msgImageSource{Type: "url", URL: p.ImageURL.URL}})
			} else {
				d.drop("messages[].content[].image_url")
			}
		default:
			d.drop("messages[].content[].type=" + p.Type)
		}
	}
	return out
}

// toolResultContent is a tool message's content as a tool_result's: a string, or text blocks.
func toolResultContent(raw json.RawMessage, d *dropper) any {
	if s, ok := asString(raw); ok {
		return s
	}
	texts := chatTexts(raw, d)
	if len(texts) == 0 {
		return ""
	}
	blocks := make([]msgBlock, 0, len(texts))
	for _, t := range texts {
		if t != "" {
			blocks = append(blocks, msgBlock{Type: "text", Text: t})
		}
	}
	if len(blocks) == 0 {
		return ""
	}
	return blocks
}

// chatToolChoice maps "none", "auto", "required" and {"type":"function",...}.
func chatToolChoice(raw json.RawMessage, d *dropper) *msgToolChoice {
	if isNull(raw) {
		return nil
	}
	if s, ok := asString(raw); ok {
		switch s {
		case "auto":
			return &msgToolChoice{Type: "auto"}
		case "none":
			return &msgToolChoice{Type: "none"}
		case "required":
			return &msgToolChoice{Type: "any"}
		}
		d.drop("tool_choice")
		return nil
	}
	var tc struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &tc) != nil || tc.Function.Name == "" {
		d.drop("tool_choice")
		return nil
	}
	return &msgToolChoice{Type: "tool", Name: tc.Function.Name}
}
