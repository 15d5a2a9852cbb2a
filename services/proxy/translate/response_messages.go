package translate

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
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

// msgEvent is what MessagesToChatStream reads of an Anthropic event, the values as they stand in
// its JSON ("" when absent).
type msgEvent struct {
	typ, index, message, block, usage, err             string
	deltaType, text, thinking, partialJSON, stopReason string
}

// readMsgEvent reads an event's data in one pass of the scanner; ok is false when it is not a
// JSON object.
func readMsgEvent(data []byte) (e msgEvent, ok bool) {
	c := string(data)
	ok = document(c, func(k string, v int) int {
		if k == "delta" && c[v] == '{' {
			return members(c, v, 2, func(k string, v int) int {
				end := valueEnd(c, v, 3)
				if end < 0 {
					return -1
				}
				switch raw := c[v:end]; k {
				case "type":
					e.deltaType = raw
				case "text":
					e.text = raw
				case "thinking":
					e.thinking = raw
				case "partial_json":
					e.partialJSON = raw
				case "stop_reason":
					e.stopReason = raw
				}
				return end
			})
		}
		end := valueEnd(c, v, 1)
		if end < 0 {
			return -1
		}
		switch raw := c[v:end]; k {
		case "type":
			e.typ = raw
		case "index":
			e.index = raw
		case "message":
			e.message = raw
		case "content_block":
			e.block = raw
		case "usage":
			e.usage = raw
		case "error":
			e.err = raw
		}
		return end
	})
	return e, ok
}

// Event translates one upstream event, appending the client events to dst. The event is read in
// one pass of the scanner and the chunks are written by hand; texts keep the escaped form they had
// in the event.
func (s *MessagesToChatStream) Event(dst, ev []byte) []byte {
	name, data := ParseEvent(ev)
	if len(data) == 0 {
		return dst
	}
	e, ok := readMsgEvent(data)
	if !ok {
		return dst // a comment, a keep-alive or something unreadable: nothing to say
	}
	typ := strAt(e.typ)
	if typ == "" {
		typ = name
	}
	index := int(gjson.Parse(e.index).Int())
	switch typ {
	case "message_start":
		if kind(e.message) == '{' {
			m := gjson.Parse(e.message)
			s.id, s.model, s.usage = chatID(m.Get("id").String()), m.Get("model").String(), msgUsageAt(m.Get("usage"))
		}
		s.started = true
		d := s.chunk(dst)
		d.str("role", "assistant").str("content", "")
		return s.end(d, "")
	case "content_block_start":
		if kind(e.block) != '{' {
			return dst
		}
		b := gjson.Parse(e.block)
		if b.Get("type").String() != "tool_use" {
			return dst
		}
		if s.tools == nil {
			s.tools = map[int]int{}
		}
		idx := s.nextTool
		s.tools[index] = idx
		s.nextTool++
		call := newObj(nil).int("index", int64(idx))
		if id := b.Get("id").String(); id != "" {
			call.str("id", id)
		}
		call.str("type", "function")
		fn := call.open("function")
		if n := b.Get("name").String(); n != "" {
			fn.str("name", n)
		}
		call.close(fn.str("arguments", ""))
		d := s.chunk(dst)
		d.key("tool_calls")
		d.b = append(append(append(d.b, '['), call.end()...), ']')
		return s.end(d, "")
	case "content_block_delta":
		switch strAt(e.deltaType) {
		case "text_delta":
			d := s.chunk(dst)
			d.text("content", textAt(e.text))
			return s.end(d, "")
		case "thinking_delta":
			d := s.chunk(dst)
			d.text("reasoning_content", textAt(e.thinking))
			return s.end(d, "")
		case "input_json_delta":
			idx, ok := s.tools[index]
			if !ok {
				return dst
			}
			call := newObj(nil).int("index", int64(idx))
			call.close(call.open("function").text("arguments", textAt(e.partialJSON)))
			d := s.chunk(dst)
			d.key("tool_calls")
			d.b = append(append(append(d.b, '['), call.end()...), ']')
			return s.end(d, "")
		}
	case "message_delta":
		if kind(e.usage) == '{' {
			u := msgUsageAt(gjson.Parse(e.usage))
			if u.InputTokens > 0 {
				s.usage.InputTokens = u.InputTokens
			}
			if u.CacheReadInputTokens > 0 {
				s.usage.CacheReadInputTokens = u.CacheReadInputTokens
			}
			if u.CacheCreationInputTokens > 0 {
				s.usage.CacheCreationInputTokens = u.CacheCreationInputTokens
			}
			s.usage.OutputTokens = u.OutputTokens
		}
		if kind(e.stopReason) == '"' {
			d := s.chunk(dst)
			return s.end(d, stopToFinish(strAt(e.stopReason)))
		}
	case "message_stop":
		s.done = true
		if s.IncludeUsage {
			o := s.head(append(dst, "data: "...))
			o.raw("choices", []byte("[]")).raw("usage", appendChatUsage(nil, s.usage))
			dst = append(o.end(), '\n', '\n')
		}
		return append(dst, DoneEvent...)
	case "error":
		s.errored = true
		return appendData(dst, chatStreamError(json.RawMessage(e.err)))
	}
	return dst
}

// msgUsageAt reads an Anthropic usage object.
func msgUsageAt(u gjson.Result) msgUsage {
	return msgUsage{InputTokens: u.Get("input_tokens").Int(), OutputTokens: u.Get("output_tokens").Int(),
		CacheCreationInputTokens: u.Get("cache_creation_input_tokens").Int(), CacheReadInputTokens: u.Get("cache_read_input_tokens").Int()}
}

// head starts a chunk object with its id, object, created and model.
func (s *MessagesToChatStream) head(dst []byte) *obj {
	return newObj(dst).str("id", s.id).str("object", "chat.completion.chunk").int("created", s.Created).str("model", s.model)
}

// chunk starts a data event with one choice and opens its delta; the caller fills the delta and
// ends the chunk with end.
func (s *MessagesToChatStream) chunk(dst []byte) (delta *obj) {
	o := s.head(append(dst, "data: "...))
	o.key("choices")
	o.b = append(o.b, '[')
	choice := &obj{b: append(o.b, '{'), first: true}
	choice.int("index", 0)
	return choice.open("delta")
}

// end closes a chunk begun by chunk, with its finish reason ("" for null).
func (s *MessagesToChatStream) end(delta *obj, finish string) []byte {
	choice := &obj{b: append(delta.b, '}'), first: false}
	if finish == "" {
		choice.raw("finish_reason", nullJSON)
	} else {
		choice.str("finish_reason", finish)
	}
	return append(choice.b, '}', ']', '}', '\n', '\n')
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
