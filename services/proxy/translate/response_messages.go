package translate

import (
	"encoding/json"
	"strings"
)

// stopToFinish maps Anthropic stop reasons to OpenAI finish reasons.
func stopToFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn
}

// chatUsageOf is Anthropic usage in OpenAI's terms: cached input counts as prompt tokens and is
// named in prompt_tokens_details.
func chatUsageOf(u msgUsage) *chatUsage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	out := &chatUsage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens}
	if u.CacheReadInputTokens > 0 {
		out.PromptTokensDetails = &promptDetails{CachedTokens: u.CacheReadInputTokens}
	}
	return out
}

// chatID gives a chat completion the id of the Anthropic message it came from.
func chatID(id string) string {
	if id == "" {
		return "chatcmpl-switchyard"
	}
	return "chatcmpl-" + strings.TrimPrefix(id, "msg_")
}

// MessagesToChatStream translates an Anthropic messages stream into chat completion chunks.
type MessagesToChatStream struct {
	// IncludeUsage sends the usage chunk before [DONE] (the client's stream_options).
	IncludeUsage bool
	// Created is every chunk's timestamp.
	Created int64

	id, model string
	usage     msgUsage
	tools     map[int]int // Anthropic block index → OpenAI tool call index
	nextTool  int
	done      bool
	started   bool
	errored   bool
}

// Done reports whether the upstream's message_stop was seen.
func (s *MessagesToChatStream) Done() bool { return s.done }

// Errored reports whether the upstream's error event was passed on.
func (s *MessagesToChatStream) Errored() bool { return s.errored }

// Usage is the token count seen so far (input, output).
func (s *MessagesToChatStream) Usage() (in, out int64) {
	u := chatUsageOf(s.usage)
	return u.PromptTokens, u.CompletionTokens
}

// Event translates one upstream event, appending the client events to dst.
func (s *MessagesToChatStream) Event(dst, ev []byte) []byte {
	name, data := ParseEvent(ev)
	var e struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message *struct {
			ID    string   `json:"id"`
			Model string   `json:"model"`
			Usage msgUsage `json:"usage"`
		} `json:"message"`
		ContentBlock *msgBlock `json:"content_block"`
		Delta        *struct {
			Type        string  `json:"type"`
			Text        string  `json:"text"`
			Thinking    string  `json:"thinking"`
			PartialJSON string  `json:"partial_json"`
			StopReason  *string `json:"stop_reason"`
		} `json:"delta"`
		Usage *msgUsage       `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if len(data) == 0 || json.Unmarshal(data, &e) != nil {
		return dst // a comment, a keep-alive or something unreadable: nothing to say
	}
	if e.Type == "" {
		e.Type = name
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			s.id, s.model, s.usage = chatID(e.Message.ID), e.Message.Model, e.Message.Usage
		}
		s.started = true
		empty := ""
		return s.chunk(dst, &chatRespMessage{Role: "assistant", Content: &empty}, nil)
	case "content_block_start":
		if e.ContentBlock != nil && e.ContentBlock.Type == "tool_use" {
			if s.tools == nil {
				s.tools = map[int]int{}
			}
			idx := s.nextTool
			s.tools[e.Index] = idx
			s.nextTool++
			return s.chunk(dst, &chatRespMessage{ToolCalls: []chatToolCall{{Index: &idx, ID: e.ContentBlock.ID, Type: "function",
				Function: chatFunctionCall{Name: e.ContentBlock.Name}}}}, nil)
		}
	case "content_block_delta":
		if e.Delta == nil {
			return dst
		}
		switch e.Delta.Type {
		case "text_delta":
			t := e.Delta.Text
			return s.chunk(dst, &chatRespMessage{Content: &t}, nil)
		case "thinking_delta":
			t := e.Delta.Thinking
			return s.chunk(dst, &chatRespMessage{ReasoningContent: &t}, nil)
		case "input_json_delta":
			idx, ok := s.tools[e.Index]
			if !ok {
				return dst
			}
			return s.chunk(dst, &chatRespMessage{ToolCalls: []chatToolCall{{Index: &idx,
				Function: chatFunctionCall{Arguments: e.Delta.PartialJSON}}}}, nil)
		}
	case "message_delta":
		if e.Usage != nil {
			if e.Usage.InputTokens > 0 {
				s.usage.InputTokens = e.Usage.InputTokens
			}
			if e.Usage.CacheReadInputTokens > 0 {
				s.usage.CacheReadInputTokens = e.Usage.CacheReadInputTokens
			}
			if e.Usage.CacheCreationInputTokens > 0 {
				s.usage.CacheCreationInputTokens = e.Usage.CacheCreationInputTokens
			}
			s.usage.OutputTokens = e.Usage.OutputTokens
		}
		if e.Delta != nil && e.Delta.StopReason != nil {
			finish := stopToFinish(*e.Delta.StopReason)
			return s.chunk(dst, &chatRespMessage{}, &finish)
		}
	case "message_stop":
		s.done = true
		if s.IncludeUsage {
			dst = appendData(dst, s.marshal(chatResponse{ID: s.id, Object: "chat.completion.chunk", Created: s.Created,
				Model: s.model, Choices: []chatChoice{}, Usage: chatUsageOf(s.usage)}))
		}
		return append(dst, DoneEvent...)
	case "error":
		s.errored = true
		return appendData(dst, chatStreamError(e.Error))
	}
	return dst
}

func (s *MessagesToChatStream) chunk(dst []byte, delta *chatRespMessage, finish *string) []byte {
	return appendData(dst, s.marshal(chatResponse{ID: s.id, Object: "chat.completion.chunk", Created: s.Created, Model: s.model,
		Choices: []chatChoice{{Index: 0, Delta: delta, FinishReason: finish}}}))
}

func (s *MessagesToChatStream) marshal(v chatResponse) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// chatStreamError is an Anthropic error object as an OpenAI stream error.
func chatStreamError(raw json.RawMessage) []byte {
	var e struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(raw, &e)
	if e.Message == "" {
		e.Message = "the upstream reported an error"
	}
	return marshalOrNull(map[string]any{"error": map[string]any{"message": e.Message, "type": openAITypeOf(e.Type), "code": e.Type, "param": nil}})
}

// openAITypeOf maps an Anthropic error type to OpenAI's.
func openAITypeOf(t string) string {
	switch t {
	case "invalid_request_error", "authentication_error", "permission_error", "rate_limit_error":
		return t
	case "not_found_error", "request_too_large":
		return "invalid_request_error"
	}
	return "server_error"
}
