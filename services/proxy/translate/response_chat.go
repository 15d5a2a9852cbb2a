package translate

import (
	"encoding/json"
	"strings"
)

// finishToStop maps OpenAI finish reasons to Anthropic stop reasons.
func finishToStop(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// msgUsageOf is OpenAI usage in Anthropic's terms: cached prompt tokens are reported apart.
func msgUsageOf(u *chatUsage) msgUsage {
	if u == nil {
		return msgUsage{}
	}
	out := msgUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens > 0 && u.PromptTokensDetails.CachedTokens <= u.PromptTokens {
		out.CacheReadInputTokens = u.PromptTokensDetails.CachedTokens
		out.InputTokens -= u.PromptTokensDetails.CachedTokens
	}
	return out
}

// msgID gives a message the id of the chat completion it came from.
func msgID(id string) string {
	if id == "" {
		return "msg_switchyard"
	}
	return "msg_" + strings.TrimPrefix(id, "chatcmpl-")
}

// reasoningOf is a message's reasoning text, under either name OpenAI-compatible servers use.
func reasoningOf(m *chatRespMessage) string {
	if m.ReasoningContent != nil {
		return *m.ReasoningContent
	}
	if m.Reasoning != nil {
		return *m.Reasoning
	}
	return ""
}

// ChatToMessagesStream translates chat completion chunks into an Anthropic messages stream:
// message_start first, each content block started, filled and stopped in order, message_delta
// with the stop reason and usage, message_stop last.
type ChatToMessagesStream struct {
	id, model string
	started   bool
	block     int         // index of the open block, -1 when none
	kind      string      // type of the open block
	next      int         // index of the next block
	tools     map[int]int // OpenAI tool call index → block index
	stop      string
	usage     msgUsage
	done      bool
	errored   bool
}

// NewChatToMessagesStream starts a translation.
func NewChatToMessagesStream() *ChatToMessagesStream {
	return &ChatToMessagesStream{block: -1, tools: map[int]int{}}
}

// Done reports whether the upstream's [DONE] was seen.
func (s *ChatToMessagesStream) Done() bool { return s.done }

// Errored reports whether the upstream's error was passed on as an error event.
func (s *ChatToMessagesStream) Errored() bool { return s.errored }

// Usage is the token count seen so far (input including cache reads, output).
func (s *ChatToMessagesStream) Usage() (in, out int64) {
	return s.usage.InputTokens + s.usage.CacheReadInputTokens, s.usage.OutputTokens
}

// Event translates one upstream event, appending the client events to dst.
func (s *ChatToMessagesStream) Event(dst, ev []byte) []byte {
	_, data := ParseEvent(ev)
	if len(data) == 0 {
		return dst
	}
	if strings.HasPrefix(string(data), "[DONE]") {
		s.done = true
		return s.finish(dst)
	}
	var c struct {
		chatResponse
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &c) != nil {
		return dst
	}
	if !isNull(c.Error) {
		s.errored = true
		return appendEvent(dst, "error", anthropicStreamError(c.Error))
	}
	dst = s.start(dst, c.ID, c.Model)
	if c.Usage != nil {
		s.usage = msgUsageOf(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // Anthropic has one answer; n > 1 is not carried over
		}
		if d := ch.Delta; d != nil {
			if r := reasoningOf(d); r != "" {
				dst = s.open(dst, "thinking", `{"type":"thinking","thinking":"","signature":""}`)
				dst = s.delta(dst, s.block, map[string]any{"type": "thinking_delta", "thinking": r})
			}
			if d.Content != nil && *d.Content != "" {
				dst = s.open(dst, "text", `{"type":"text","text":""}`)
				dst = s.delta(dst, s.block, map[string]any{"type": "text_delta", "text": *d.Content})
			}
			for _, tc := range d.ToolCalls {
				oi := 0
				if tc.Index != nil {
					oi = *tc.Index
				}
				bi, known := s.tools[oi]
				if !known {
					dst = s.closeBlock(dst)
					bi = s.next
					s.tools[oi] = bi
					dst = s.openAt(dst, "tool_use", marshalOrNull(map[string]any{"type": "tool_use", "id": tc.ID,
						"name": tc.Function.Name, "input": map[string]any{}}))
				}
				if tc.Function.Arguments != "" {
					dst = s.delta(dst, bi, map[string]any{"type": "input_json_delta", "partial_json": tc.Function.Arguments})
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.stop = finishToStop(*ch.FinishReason)
			dst = s.closeBlock(dst)
		}
	}
	return dst
}

// start sends message_start once.
func (s *ChatToMessagesStream) start(dst []byte, id, model string) []byte {
	if s.started {
		return dst
	}
	s.started, s.id, s.model = true, msgID(id), model
	return appendEvent(dst, "message_start", marshalOrNull(map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int64{"input_tokens": 0, "output_tokens": 0}}}))
}

// open makes sure a block of kind is the open one (closing another and starting a new one).
func (s *ChatToMessagesStream) open(dst []byte, kind, block string) []byte {
	if s.block >= 0 && s.kind == kind {
		return dst
	}
	dst = s.closeBlock(dst)
	return s.openAt(dst, kind, json.RawMessage(block))
}

func (s *ChatToMessagesStream) openAt(dst []byte, kind string, block json.RawMessage) []byte {
	s.block, s.kind = s.next, kind
	s.next++
	return appendEvent(dst, "content_block_start", marshalOrNull(map[string]any{"type": "content_block_start",
		"index": s.block, "content_block": block}))
}

func (s *ChatToMessagesStream) closeBlock(dst []byte) []byte {
	if s.block < 0 {
		return dst
	}
	dst = appendEvent(dst, "content_block_stop", marshalOrNull(map[string]any{"type": "content_block_stop", "index": s.block}))
	s.block, s.kind = -1, ""
	return dst
}

func (s *ChatToMessagesStream) delta(dst []byte, index int, delta map[string]any) []byte {
	return appendEvent(dst, "content_block_delta", marshalOrNull(map[string]any{"type": "content_block_delta", "index": index,
		"delta": delta}))
}

// finish ends the message: the open block, message_delta with the stop reason and usage, and
// message_stop.
func (s *ChatToMessagesStream) finish(dst []byte) []byte {
	dst = s.start(dst, "", "")
	dst = s.closeBlock(dst)
	stop := s.stop
	if stop == "" {
		stop = "end_turn"
	}
	usage := map[string]int64{"output_tokens": s.usage.OutputTokens, "input_tokens": s.usage.InputTokens}
	if s.usage.CacheReadInputTokens > 0 {
		usage["cache_read_input_tokens"] = s.usage.CacheReadInputTokens
	}
	dst = appendEvent(dst, "message_delta", marshalOrNull(map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage}))
	return appendEvent(dst, "message_stop", []byte(`{"type":"message_stop"}`))
}

// anthropicStreamError is an OpenAI error object as an Anthropic error event's data.
func anthropicStreamError(raw json.RawMessage) []byte {
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if s, ok := asString(raw); ok {
		e.Message = s
	} else {
		_ = json.Unmarshal(raw, &e)
	}
	if e.Message == "" {
		e.Message = "the upstream reported an error"
	}
	return marshalOrNull(map[string]any{"type": "error", "error": map[string]string{"type": anthropicTypeOf(e.Type), "message": e.Message}})
}

// anthropicTypeOf maps an OpenAI error type to Anthropic's.
func anthropicTypeOf(t string) string {
	switch t {
	case "invalid_request_error", "authentication_error", "permission_error", "rate_limit_error":
		return t
	case "not_found_error":
		return t
	}
	return "api_error"
}
