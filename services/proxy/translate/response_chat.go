package translate

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
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

// Event translates one upstream event, appending the client events to dst. The chunk is read in
// one pass of the scanner and the events are written by hand; texts keep the escaped form they
// had in the chunk.
func (s *ChatToMessagesStream) Event(dst, ev []byte) []byte {
	_, data := ParseEvent(ev)
	if len(data) == 0 {
		return dst
	}
	if strings.HasPrefix(string(data), "[DONE]") {
		s.done = true
		return s.finish(dst)
	}
	k, ok := readChatChunk(data)
	if !ok {
		return dst
	}
	if k.err != "" && k.err != "null" {
		s.errored = true
		return appendEvent(dst, "error", anthropicStreamError(json.RawMessage(k.err)))
	}
	dst = s.start(dst, strAt(k.id), strAt(k.model))
	if u := chatUsageAt(k.usage); u != nil {
		s.usage = msgUsageOf(u)
	}
	for _, ch := range k.choices {
		if !ch.first() {
			continue // Anthropic has one answer; n > 1 is not carried over
		}
		r := ch.reasoningContent // reasoning_content wins when it is given at all
		if kind(r) == 0 || kind(r) == 'n' {
			r = ch.reasoning
		}
		if t := textAt(r); kind(r) == '"' && t != "" {
			dst = s.open(dst, "thinking", `{"type":"thinking","thinking":"","signature":""}`)
			dst = s.delta(dst, s.block, "thinking_delta", "thinking", t)
		}
		if t := textAt(ch.content); kind(ch.content) == '"' && t != "" {
			dst = s.open(dst, "text", `{"type":"text","text":""}`)
			dst = s.delta(dst, s.block, "text_delta", "text", t)
		}
		if kind(ch.toolCalls) == '[' {
			gjson.Parse(ch.toolCalls).ForEach(func(_, tc gjson.Result) bool {
				oi := int(tc.Get("index").Int())
				bi, known := s.tools[oi]
				if !known {
					dst = s.closeBlock(dst)
					bi = s.next
					s.tools[oi] = bi
					dst = s.openAt(dst, "tool_use", newObj(nil).str("type", "tool_use").str("id", tc.Get("id").String()).
						str("name", tc.Get("function.name").String()).raw("input", []byte("{}")).end())
				}
				if args := textOf(tc.Get("function.arguments")); args != "" {
					dst = s.delta(dst, bi, "input_json_delta", "partial_json", args)
				}
				return true
			})
		}
		if kind(ch.finish) == '"' {
			if f := strAt(ch.finish); f != "" {
				s.stop = finishToStop(f)
				dst = s.closeBlock(dst)
			}
		}
	}
	return dst
}

// event starts an Anthropic event: its name line and the opening of its data with its type; the
// caller adds its fields and ends it with endEvent.
func event(dst []byte, typ string) *obj {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	return newObj(dst).str("type", typ)
}

func endEvent(o *obj) []byte { return append(o.end(), '\n', '\n') }

// start sends message_start once.
func (s *ChatToMessagesStream) start(dst []byte, id, model string) []byte {
	if s.started {
		return dst
	}
	s.started, s.id, s.model = true, msgID(id), model
	o := event(dst, "message_start")
	m := o.open("message").str("id", s.id).str("type", "message").str("role", "assistant").str("model", model).
		raw("content", []byte("[]")).raw("stop_reason", nullJSON).raw("stop_sequence", nullJSON).
		raw("usage", []byte(`{"input_tokens":0,"output_tokens":0}`))
	o.close(m)
	return endEvent(o)
}

// open makes sure a block of kind is the open one (closing another and starting a new one).
func (s *ChatToMessagesStream) open(dst []byte, kind, block string) []byte {
	if s.block >= 0 && s.kind == kind {
		return dst
	}
	dst = s.closeBlock(dst)
	return s.openAt(dst, kind, []byte(block))
}

func (s *ChatToMessagesStream) openAt(dst []byte, kind string, block []byte) []byte {
	s.block, s.kind = s.next, kind
	s.next++
	return endEvent(event(dst, "content_block_start").int("index", int64(s.block)).raw("content_block", block))
}

func (s *ChatToMessagesStream) closeBlock(dst []byte) []byte {
	if s.block < 0 {
		return dst
	}
	dst = endEvent(event(dst, "content_block_stop").int("index", int64(s.block)))
	s.block, s.kind = -1, ""
	return dst
}

// delta writes a content_block_delta whose delta has a type and one text field.
func (s *ChatToMessagesStream) delta(dst []byte, index int, typ, field string, text jtext) []byte {
	o := event(dst, "content_block_delta").int("index", int64(index))
	o.close(o.open("delta").str("type", typ).text(field, text))
	return endEvent(o)
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
	o := event(dst, "message_delta")
	o.close(o.open("delta").str("stop_reason", stop).raw("stop_sequence", nullJSON))
	u := o.open("usage").int("input_tokens", s.usage.InputTokens).int("output_tokens", s.usage.OutputTokens)
	if s.usage.CacheReadInputTokens > 0 {
		u.int("cache_read_input_tokens", s.usage.CacheReadInputTokens)
	}
	o.close(u)
	return appendEvent(endEvent(o), "message_stop", []byte(`{"type":"message_stop"}`))
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
