package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// msgRequestKeys are the messages fields MessagesToChat carries over.
var msgRequestKeys = []string{"model", "messages", "system", "max_tokens", "temperature", "top_p", "stop_sequences", "stream",
	"tools", "tool_choice", "thinking", "metadata"}

// effortOf maps an Anthropic thinking budget to OpenAI's reasoning effort.
func effortOf(budget int) string {
	switch {
	case budget < 4096:
		return "low"
	case budget < 16384:
		return "medium"
	}
	return "high"
}

// MessagesToChat turns an Anthropic messages request into an OpenAI chat completions request.
// A streamed request asks for usage (stream_options.include_usage), which the Anthropic stream
// reports at its end.
func MessagesToChat(body []byte, t Target) (Request, error) {
	var in msgRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return Request{}, fmt.Errorf("not a messages request: %w", err)
	}
	d := &dropper{}
	d.dropUnknownKeys(body, msgRequestKeys...)
	out := chatRequest{Model: in.Model, Stream: in.Stream, Temperature: in.Temperature, TopP: in.TopP}
	if in.TopK != nil {
		d.drop("top_k")
	}
	if in.MaxTokens > 0 {
		n := in.MaxTokens
		if t.MaxCompletionTokens {
			out.MaxCompletionTokens = &n
		} else {
			out.MaxTokens = &n
		}
	}
	if len(in.StopSequences) > 0 {
		out.Stop = marshalOrNull(in.StopSequences)
	}
	if in.Stream {
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if in.Metadata != nil && in.Metadata.UserID != "" {
		out.User = in.Metadata.UserID
	}
	if in.Thinking != nil && in.Thinking.Type == "enabled" {
		out.ReasoningEffort = effortOf(in.Thinking.BudgetTokens)
	}

	for _, tool := range in.Tools {
		if tool.Type != "" && tool.Type != "custom" {
			d.drop("tools[].type=" + tool.Type) // Anthropic's server tools have no OpenAI twin
			continue
		}
		params := tool.InputSchema
		if isNull(params) {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatFunction{Name: tool.Name,
			Description: tool.Description, Parameters: rawJSON(params)}})
	}
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			out.ToolChoice = json.RawMessage(`"auto"`)
		case "any":
			out.ToolChoice = json.RawMessage(`"required"`)
		case "none":
			out.ToolChoice = json.RawMessage(`"none"`)
		case "tool":
			out.ToolChoice = marshalOrNull(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		default:
			d.drop("tool_choice.type=" + tc.Type)
		}
		if tc.DisableParallelToolUse && len(out.Tools) > 0 {
			no := false
			out.ParallelToolCalls = &no
		}
	}

	if sys := systemText(in.System, d); sys != "" {
		content := marshalOrNull(sys)
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: content})
	}
	for i, m := range in.Messages {
		blocks, ok := msgBlocks(m.Content)
		if !ok {
			d.drop(fmt.Sprintf("messages[%d].content", i))
			continue
		}
		switch m.Role {
		case "user":
			out.Messages = append(out.Messages, userToChat(blocks, d)...)
		case "assistant":
			out.Messages = append(out.Messages, assistantToChat(blocks, d))
		default:
			d.drop(fmt.Sprintf("messages[%d].role=%s", i, m.Role))
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return Request{}, err
	}
	return Request{Body: b, Dropped: d.names}, nil
}

// msgBlocks reads a message content: a string (one text block) or an array of blocks.
func msgBlocks(raw json.RawMessage) ([]msgBlock, bool) {
	if s, ok := asString(raw); ok {
		return []msgBlock{{Type: "text", Text: s}}, true
	}
	var blocks []msgBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, false
	}
	return blocks, true
}

// systemText joins a system prompt given as a string or as text blocks.
func systemText(raw json.RawMessage, d *dropper) string {
	if isNull(raw) {
		return ""
	}
	if s, ok := asString(raw); ok {
		return s
	}
	var blocks []msgBlock
	if json.Unmarshal(raw, &blocks) != nil {
		d.drop("system")
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else {
			d.drop("system[].type=" + b.Type)
		}
	}
	return strings.Join(parts, "\n\n")
}

// userToChat turns a user turn into chat messages: its tool results first, as tool messages
// (they answer the assistant's calls just before), then the rest as one user message.
func userToChat(blocks []msgBlock, d *dropper) []chatMessage {
	var out []chatMessage
	var parts []chatPart
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			content := toolResultText(b, d)
			if b.IsError && !strings.HasPrefix(content, "Error") {
				content = "Error: " + content
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: marshalOrNull(content)})
		case "text":
			parts = append(parts, chatPart{Type: "text", Text: b.Text})
		case "image":
			if u := imageURL(b.Source); u != "" {
				parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: u}})
			} else {
				d.drop("messages[].content[].source")
			}
		default:
			d.drop("messages[].content[].type=" + b.Type)
		}
	}
	switch {
	case len(parts) == 1 && parts[0].Type == "text":
		out = append(out, chatMessage{Role: "user", Content: marshalOrNull(parts[0].Text)})
	case len(parts) > 0:
		out = append(out, chatMessage{Role: "user", Content: marshalOrNull(parts)})
	}
	return out
}

// assistantToChat turns an assistant turn into one chat message with its text and tool calls.
func assistantToChat(blocks []msgBlock, d *dropper) chatMessage {
	m := chatMessage{Role: "assistant"}
	var text strings.Builder
	for _, b := range blocks {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			m.ToolCalls = append(m.ToolCalls, chatToolCall{ID: b.ID, Type: "function",
				Function: chatFunctionCall{Name: b.Name, Arguments: string(objectOrEmpty(b.Input))}})
		case "thinking", "redacted_thinking":
			d.drop("messages[].content[].type=" + b.Type) // reasoning is not sent back to OpenAI models
		default:
			d.drop("messages[].content[].type=" + b.Type)
		}
	}
	if text.Len() > 0 || len(m.ToolCalls) == 0 {
		m.Content = marshalOrNull(text.String())
	}
	return m
}

// toolResultText is a tool_result's content as text (images in it cannot ride a tool message).
func toolResultText(b msgBlock, d *dropper) string {
	if s, ok := asString(b.Content); ok {
		return s
	}
	var blocks []msgBlock
	if isNull(b.Content) || json.Unmarshal(b.Content, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, x := range blocks {
		if x.Type == "text" {
			parts = append(parts, x.Text)
		} else {
			d.drop("messages[].content[].content[].type=" + x.Type)
		}
	}
	return strings.Join(parts, "\n")
}

// imageURL is an Anthropic image source as an OpenAI image URL (a data URL for base64).
func imageURL(src *msgImageSource) string {
	if src == nil {
		return ""
	}
	switch src.Type {
	case "base64":
		return "data:" + src.MediaType + ";base64," + src.Data
	case "url":
		return src.URL
	}
	return ""
}
