package translate

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// The OpenAI Responses API is translated through chat completions: a Responses request becomes
// a chat request (and, for an Anthropic provider, a messages request from there), and the
// answer comes back the same way. Chat completions carry everything the two share: text,
// images, function tools and calls, reasoning text, usage.

// ResponsesEcho is what a Responses answer repeats of its request.
type ResponsesEcho struct {
	Instructions      *string         `json:"instructions"`
	MaxOutputTokens   *int            `json:"max_output_tokens"`
	ParallelToolCalls bool            `json:"parallel_tool_calls"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Tools             json.RawMessage `json:"tools"`
	Reasoning         json.RawMessage `json:"reasoning"`
	Text              json.RawMessage `json:"text"`
	Metadata          json.RawMessage `json:"metadata"`

	checked bool // the raw fields are known to be valid JSON (read by the scanner)
}

// appendFields writes the echoed request fields of a Responses answer.
func (e ResponsesEcho) appendFields(o *obj) {
	o.strOrNull("instructions", e.Instructions)
	if e.MaxOutputTokens != nil {
		o.int("max_output_tokens", int64(*e.MaxOutputTokens))
	} else {
		o.raw("max_output_tokens", nullJSON)
	}
	o.raw("parallel_tool_calls", boolJSON(e.ParallelToolCalls))
	o.raw("temperature", floatJSON(e.Temperature))
	o.raw("top_p", floatJSON(e.TopP))
	raw := rawJSON
	if e.checked {
		raw = func(b []byte) json.RawMessage { return b }
	}
	o.raw("tool_choice", raw(e.ToolChoice))
	o.raw("tools", raw(e.Tools))
	o.raw("reasoning", raw(e.Reasoning))
	o.raw("text", raw(e.Text))
	o.raw("metadata", raw(e.Metadata))
	// A translated answer is stored nowhere, whatever the request asked for: saying store: true
	// would promise a previous_response_id that no later request can use.
	o.raw("store", boolJSON(false))
}

func boolJSON(b bool) []byte {
	if b {
		return []byte("true")
	}
	return []byte("false")
}

func floatJSON(f *float64) []byte {
	if f == nil {
		return nullJSON
	}
	return marshalOrNull(*f)
}

type responsesUsage struct {
	InputTokens, CachedTokens, OutputTokens int64
}

func responsesUsageOf(u *chatUsage) *responsesUsage {
	if u == nil {
		return nil
	}
	out := &responsesUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

func (u *responsesUsage) json() []byte {
	if u == nil {
		return nullJSON
	}
	return newObj(nil).int("input_tokens", u.InputTokens).
		raw("input_tokens_details", newObj(nil).int("cached_tokens", u.CachedTokens).end()).
		int("output_tokens", u.OutputTokens).
		raw("output_tokens_details", []byte(`{"reasoning_tokens":0}`)).
		int("total_tokens", u.InputTokens+u.OutputTokens).end()
}

// appendResponse writes a Responses answer object.
func appendResponse(dst []byte, id string, created int64, status, model string, items [][]byte, usage *responsesUsage,
	errObj, details []byte, echo ResponsesEcho) []byte {
	dst = responseHead(dst, id, created, status, model)
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, it...)
	}
	return responseTail(dst, usage, errObj, details, echo)
}

// responseHead writes a Responses answer up to its output items: they follow, separated by
// commas, and responseTail ends the answer after them.
func responseHead(dst []byte, id string, created int64, status, model string) []byte {
	o := newObj(dst).str("id", id).str("object", "response").int("created_at", created).str("status", status).str("model", model)
	o.key("output")
	return append(o.b, '[')
}

func responseTail(dst []byte, usage *responsesUsage, errObj, details []byte, echo ResponsesEcho) []byte {
	o := &obj{b: append(dst, ']')}
	o.raw("usage", usage.json())
	if errObj == nil {
		errObj = nullJSON
	}
	if details == nil {
		details = nullJSON
	}
	o.raw("error", errObj).raw("incomplete_details", details).raw("previous_response_id", nullJSON)
	echo.appendFields(o)
	return o.end()
}

// responseID gives a Responses answer the id of the chat completion it came from.
func responseID(id string) string {
	return "resp_" + strings.TrimPrefix(strings.TrimPrefix(id, "chatcmpl-"), "chatcmpl_")
}

func messageItem(id string, text jtext, status string) []byte {
	return appendMessageItem(make([]byte, 0, len(text)+len(id)+160), id, text, status)
}

func appendMessageItem(dst []byte, id string, text jtext, status string) []byte {
	o := newObj(dst).str("type", "message").str("id", id).str("status", status).
		str("role", "assistant")
	o.key("content")
	o.b = append(o.b, '[')
	part := &obj{b: append(o.b, '{'), first: true}
	part.str("type", "output_text").text("text", text).raw("annotations", []byte("[]"))
	o.b = append(part.b, '}', ']')
	return o.end()
}

func reasoningItem(id string, text jtext) []byte {
	return appendReasoningItem(make([]byte, 0, len(text)+len(id)+96), id, text)
}

func appendReasoningItem(dst []byte, id string, text jtext) []byte {
	o := newObj(dst).str("type", "reasoning").str("id", id)
	o.key("summary")
	o.b = append(o.b, '[')
	if len(text) > 0 {
		part := &obj{b: append(o.b, '{'), first: true}
		part.str("type", "summary_text").text("text", text)
		o.b = append(part.b, '}')
	}
	o.b = append(o.b, ']')
	return o.end()
}

func functionCallItem(id, callID, name string, args jtext, status string) []byte {
	return appendFunctionCallItem(nil, id, callID, name, args, status)
}

func appendFunctionCallItem(dst []byte, id, callID, name string, args jtext, status string) []byte {
	return newObj(dst).str("type", "function_call").str("id", id).str("call_id", callID).str("name", name).
		text("arguments", args).str("status", status).end()
}

// statusOf is a Responses status for a chat finish reason, with its incomplete details.
func statusOf(finish string) (string, []byte) {
	switch finish {
	case "length":
		return "incomplete", []byte(`{"reason":"max_output_tokens"}`)
	case "content_filter":
		return "incomplete", []byte(`{"reason":"content_filter"}`)
	}
	return "completed", nil
}

// ChatToResponsesStream translates chat completion chunks into the Responses event sequence:
// response.created and response.in_progress first; each output item added, filled and done in
// order (reasoning summary, message text, function call arguments); response.completed (or
// response.incomplete) with the whole answer and its usage last. Every event carries the next
// sequence number.
type ChatToResponsesStream struct {
	// Echo is what the answer repeats of its request.
	Echo ResponsesEcho
	// Created is the answer's timestamp.
	Created int64

	seq      int64
	started  bool
	done     bool
	failed   bool
	id       string
	model    string
	items    [][]byte // finished output items, in order
	open     *streamItem
	tools    map[int]*streamItem // chat tool call index → its item
	finish   string
	usage    *chatUsage
	baseName string
}

// streamItem is the output item being filled.
type streamItem struct {
	kind   string // message, reasoning, function_call
	id     string
	index  int
	text   strings.Builder // the deltas so far, as jtext
	callID string
	name   string
}

// Done reports whether the stream reached its terminal event.
func (s *ChatToResponsesStream) Done() bool { return s.done }

// Failed reports whether the stream ended with the upstream's error (response.failed).
func (s *ChatToResponsesStream) Failed() bool { return s.failed }

// Usage is the token count of the answer (input, output).
func (s *ChatToResponsesStream) Usage() (in, out int64) {
	if s.usage == nil {
		return 0, 0
	}
	return s.usage.PromptTokens, s.usage.CompletionTokens
}

// event starts an event of a type: its name line and the opening of its data, with type and
// sequence number; the caller adds its fields and ends it with finish.
func (s *ChatToResponsesStream) event(dst []byte, typ string) *obj {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	o := newObj(dst).str("type", typ).int("sequence_number", s.seq)
	s.seq++
	return o
}

func finish(o *obj) []byte { return append(o.end(), '\n', '\n') }

// Event translates one chat chunk event, appending the Responses events to dst. The chunk is
// read in one pass of the scanner; texts keep the escaped form they had in the chunk.
func (s *ChatToResponsesStream) Event(dst, ev []byte) []byte {
	_, data := ParseEvent(ev)
	if len(data) == 0 || s.done {
		return dst
	}
	if strings.HasPrefix(string(data), "[DONE]") {
		return s.complete(dst)
	}
	k, ok := readChatChunk(data)
	if !ok {
		return dst
	}
	if k.err != "" && k.err != "null" {
		return s.fail(dst, gjson.Parse(k.err))
	}
	dst = s.start(dst, strAt(k.id), strAt(k.model))
	if u := chatUsageAt(k.usage); u != nil {
		s.usage = u
	}
	for _, ch := range k.choices {
		if !ch.first() {
			continue
		}
		r := ch.reasoningContent
		if r == "" {
			r = ch.reasoning
		}
		if t := textAt(r); t != "" {
			dst = s.openItem(dst, "reasoning", "")
			s.open.text.WriteString(string(t))
			dst = finish(s.event(dst, "response.reasoning_summary_text.delta").str("item_id", s.open.id).
				int("output_index", int64(s.open.index)).int("summary_index", 0).text("delta", t))
		}
		if t := textAt(ch.content); t != "" {
			dst = s.openItem(dst, "message", "")
			s.open.text.WriteString(string(t))
			dst = finish(s.event(dst, "response.output_text.delta").str("item_id", s.open.id).
				int("output_index", int64(s.open.index)).int("content_index", 0).text("delta", t).raw("logprobs", []byte("[]")))
		}
		if ch.toolCalls != "" {
			gjson.Parse(ch.toolCalls).ForEach(func(_, tc gjson.Result) bool {
				dst = s.toolCall(dst, tc)
				return true
			})
		}
		if kind(ch.finish) == '"' {
			if f := strAt(ch.finish); f != "" {
				s.finish = f
				dst = s.closeItem(dst)
			}
		}
	}
	return dst
}

// toolCall translates one tool call delta: the call's item is added when it first appears, its
// arguments follow as deltas.
func (s *ChatToResponsesStream) toolCall(dst []byte, tc gjson.Result) []byte {
	ci := int(tc.Get("index").Int())
	it, known := s.tools[ci]
	if !known {
		callID := tc.Get("id").String()
		if callID == "" {
			callID = "call_" + s.baseName + "_" + strconv.Itoa(ci)
		}
		dst = s.openItem(dst, "function_call", callID)
		s.open.name = tc.Get("function.name").String()
		if s.tools == nil {
			s.tools = map[int]*streamItem{}
		}
		s.tools[ci] = s.open
		it = s.open
		dst = finish(s.event(dst, "response.output_item.added").int("output_index", int64(it.index)).
			raw("item", functionCallItem(it.id, it.callID, it.name, "", "in_progress")))
	}
	if args := textOf(tc.Get("function.arguments")); args != "" {
		it.text.WriteString(string(args))
		dst = finish(s.event(dst, "response.function_call_arguments.delta").str("item_id", it.id).
			int("output_index", int64(it.index)).text("delta", args))
	}
	return dst
}

// Abort is the event that ends a stream the upstream left unfinished, or the gateway ended: an
// error event with code and message, in sequence.
func (s *ChatToResponsesStream) Abort(dst []byte, code, msg string) []byte {
	if s.done {
		return dst
	}
	s.done = true
	return finish(s.event(dst, "error").str("code", code).str("message", msg).raw("param", nullJSON))
}

// Cut reports whether the stream ended in response.incomplete (an answer cut short by its token
// limit or a content filter).
func (s *ChatToResponsesStream) Cut() bool {
	status, _ := statusOf(s.finish)
	return s.done && !s.failed && status == "incomplete"
}

// start sends response.created and response.in_progress once; both carry the same answer so far.
func (s *ChatToResponsesStream) start(dst []byte, id, model string) []byte {
	if s.started {
		return dst
	}
	s.started, s.id, s.model = true, responseID(id), model
	s.baseName = strings.TrimPrefix(s.id, "resp_")
	r := appendResponse(nil, s.id, s.Created, "in_progress", s.model, nil, nil, nil, nil, s.Echo)
	dst = finish(s.event(dst, "response.created").raw("response", r))
	return finish(s.event(dst, "response.in_progress").raw("response", r))
}

// openItem makes sure an item of kind is the open one (a function call always opens anew).
func (s *ChatToResponsesStream) openItem(dst []byte, kind, callID string) []byte {
	if s.open != nil && s.open.kind == kind && kind != "function_call" {
		return dst
	}
	dst = s.closeItem(dst)
	it := &streamItem{kind: kind, index: len(s.items), callID: callID}
	s.open = it
	switch kind {
	case "message":
		it.id = "msg_" + s.baseName + "_" + strconv.Itoa(it.index)
		dst = finish(s.event(dst, "response.output_item.added").int("output_index", int64(it.index)).
			raw("item", newObj(nil).str("type", "message").str("id", it.id).str("status", "in_progress").
				str("role", "assistant").raw("content", []byte("[]")).end()))
		dst = finish(s.event(dst, "response.content_part.added").str("item_id", it.id).int("output_index", int64(it.index)).
			int("content_index", 0).raw("part", []byte(`{"type":"output_text","text":"","annotations":[]}`)))
	case "reasoning":
		it.id = "rs_" + s.baseName + "_" + strconv.Itoa(it.index)
		dst = finish(s.event(dst, "response.output_item.added").int("output_index", int64(it.index)).
			raw("item", reasoningItem(it.id, "")))
		dst = finish(s.event(dst, "response.reasoning_summary_part.added").str("item_id", it.id).
			int("output_index", int64(it.index)).int("summary_index", 0).raw("part", []byte(`{"type":"summary_text","text":""}`)))
	case "function_call":
		it.id = "fc_" + callID
	}
	return dst
}

// closeItem finishes the open item with its done events.
func (s *ChatToResponsesStream) closeItem(dst []byte) []byte {
	it := s.open
	if it == nil {
		return dst
	}
	s.open = nil
	text := jtext(it.text.String()) // the deltas as they came, escaped: written three times
	idx := int64(it.index)
	var item []byte
	switch it.kind {
	case "message":
		dst = finish(s.event(dst, "response.output_text.done").str("item_id", it.id).int("output_index", idx).
			int("content_index", 0).text("text", text).raw("logprobs", []byte("[]")))
		dst = finish(s.event(dst, "response.content_part.done").str("item_id", it.id).int("output_index", idx).
			int("content_index", 0).raw("part", newObj(nil).str("type", "output_text").text("text", text).
			raw("annotations", []byte("[]")).end()))
		item = messageItem(it.id, text, "completed")
	case "reasoning":
		dst = finish(s.event(dst, "response.reasoning_summary_text.done").str("item_id", it.id).int("output_index", idx).
			int("summary_index", 0).text("text", text))
		dst = finish(s.event(dst, "response.reasoning_summary_part.done").str("item_id", it.id).int("output_index", idx).
			int("summary_index", 0).raw("part", newObj(nil).str("type", "summary_text").text("text", text).end()))
		item = reasoningItem(it.id, text)
	case "function_call":
		dst = finish(s.event(dst, "response.function_call_arguments.done").str("item_id", it.id).int("output_index", idx).
			text("arguments", text))
		item = functionCallItem(it.id, it.callID, it.name, text, "completed")
	}
	s.items = append(s.items, item)
	return finish(s.event(dst, "response.output_item.done").int("output_index", idx).raw("item", item))
}

// complete ends the answer: response.completed, or response.incomplete when the answer was cut.
func (s *ChatToResponsesStream) complete(dst []byte) []byte {
	dst = s.start(dst, "", "")
	dst = s.closeItem(dst)
	status, details := statusOf(s.finish)
	r := appendResponse(nil, s.id, s.Created, status, s.model, s.items, responsesUsageOf(s.usage), nil, details, s.Echo)
	s.done = true
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	return finish(s.event(dst, typ).raw("response", r))
}

// fail ends the answer with the upstream's error: response.failed.
func (s *ChatToResponsesStream) fail(dst []byte, e gjson.Result) []byte {
	dst = s.start(dst, "", "")
	msg, code := e.String(), "server_error"
	if e.IsObject() {
		msg = e.Get("message").String()
		if c := e.Get("code"); c.Type == gjson.String && c.String() != "" {
			code = c.String()
		}
	}
	errObj := newObj(nil).str("code", code).str("message", msg).end()
	r := appendResponse(nil, s.id, s.Created, "failed", s.model, s.items, nil, errObj, nil, s.Echo)
	s.done, s.failed = true, true
	return finish(s.event(dst, "response.failed").raw("response", r))
}
