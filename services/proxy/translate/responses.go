package translate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// The OpenAI Responses API is translated through chat completions: a Responses request becomes
// a chat request (and, for an Anthropic provider, a messages request from there), and the
// answer comes back the same way. Chat completions carry everything the two share: text,
// images, function tools and calls, reasoning text, usage.

// responsesRequestKeys are the Responses fields ResponsesToChat carries over (or that need no
// carrying: store, because nothing is stored on this path; include and prompt_cache_key, which
// only shape what a stateful provider returns or caches).
var responsesRequestKeys = []string{"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
	"max_output_tokens", "temperature", "top_p", "reasoning", "stream", "text", "user", "store", "include",
	"prompt_cache_key", "metadata"}

type responsesRequest struct {
	Model             string          `json:"model"`
	Input             json.RawMessage `json:"input"`
	Instructions      string          `json:"instructions"`
	Tools             []responsesTool `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	MaxOutputTokens   *int            `json:"max_output_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	Reasoning         *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Stream bool `json:"stream"`
	Text   *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	User string `json:"user"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// responsesItem is any input item; which fields are set depends on Type (a message may leave
// Type out).
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Name    string          `json:"name"`
	Args    string          `json:"arguments"`
	Output  json.RawMessage `json:"output"`
}

type responsesPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
	Detail   string          `json:"detail"`
}

// ResponsesToChat turns a Responses request into a chat completions request.
func ResponsesToChat(body []byte, t Target) (Request, error) {
	var in responsesRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return Request{}, fmt.Errorf("not a Responses request: %w", err)
	}
	d := &dropper{}
	d.dropUnknownKeys(body, responsesRequestKeys...)
	out := chatRequest{Model: in.Model, Stream: in.Stream, Temperature: in.Temperature, TopP: in.TopP,
		ParallelToolCalls: in.ParallelToolCalls, User: in.User}
	if in.MaxOutputTokens != nil {
		n := *in.MaxOutputTokens
		if t.MaxCompletionTokens {
			out.MaxCompletionTokens = &n
		} else {
			out.MaxTokens = &n
		}
	}
	if in.Stream {
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if in.Reasoning != nil && in.Reasoning.Effort != "" && in.Reasoning.Effort != "none" {
		out.ReasoningEffort = in.Reasoning.Effort
	}
	for _, tool := range in.Tools {
		if tool.Type != "function" {
			d.drop("tools[].type=" + tool.Type)
			continue
		}
		params := tool.Parameters
		if isNull(params) {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatFunction{Name: tool.Name,
			Description: tool.Description, Parameters: rawJSON(params)}})
	}
	if s, ok := asString(in.ToolChoice); ok {
		out.ToolChoice = marshalOrNull(s)
	} else if !isNull(in.ToolChoice) {
		var tc struct {
			Type, Name string
		}
		if json.Unmarshal(in.ToolChoice, &tc) == nil && tc.Type == "function" && tc.Name != "" {
			out.ToolChoice = marshalOrNull(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		} else {
			d.drop("tool_choice")
		}
	}
	if len(out.Tools) == 0 {
		out.ToolChoice, out.ParallelToolCalls = nil, nil // chat completions refuse them without tools
	}
	var responseFormat json.RawMessage // chat's counterpart of text.format, when there is one
	if in.Text != nil && !isNull(in.Text.Format) {
		var f struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		}
		if json.Unmarshal(in.Text.Format, &f) == nil {
			switch f.Type {
			case "json_schema":
				js := map[string]any{"name": f.Name, "schema": rawJSON(f.Schema)}
				if f.Strict != nil {
					js["strict"] = *f.Strict
				}
				responseFormat = marshalOrNull(map[string]any{"type": "json_schema", "json_schema": js})
			case "json_object":
				responseFormat = json.RawMessage(`{"type":"json_object"}`)
			}
		}
	}

	if in.Instructions != "" {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: marshalOrNull(in.Instructions)})
	}
	if s, ok := asString(in.Input); ok {
		out.Messages = append(out.Messages, chatMessage{Role: "user", Content: marshalOrNull(s)})
	} else if !isNull(in.Input) {
		var items []responsesItem
		if err := json.Unmarshal(in.Input, &items); err != nil {
			return Request{}, fmt.Errorf("input must be a string or a list of items: %w", err)
		}
		out.Messages = append(out.Messages, itemsToChat(items, d)...)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return Request{}, err
	}
	if rf := responseFormat; !isNull(rf) {
		// response_format has no field in chatRequest; it is added to the encoded body.
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil {
			m["response_format"] = rf
			b, err = json.Marshal(m)
			if err != nil {
				return Request{}, err
			}
		}
	}
	return Request{Body: b, Dropped: d.names}, nil
}

// itemsToChat turns Responses input items into chat messages: function calls join the assistant
// message before them, their outputs become tool messages.
func itemsToChat(items []responsesItem, d *dropper) []chatMessage {
	var out []chatMessage
	lastAssistant := func() *chatMessage {
		if n := len(out); n > 0 && out[n-1].Role == "assistant" {
			return &out[n-1]
		}
		out = append(out, chatMessage{Role: "assistant"})
		return &out[len(out)-1]
	}
	for _, it := range items {
		switch it.Type {
		case "", "message":
			role := it.Role
			if role == "" {
				role = "user"
			}
			if role == "assistant" {
				text := strings.Join(responsesTexts(it.Content, d), "")
				m := chatMessage{Role: "assistant", Content: marshalOrNull(text)}
				out = append(out, m)
				continue
			}
			if role == "system" || role == "developer" {
				out = append(out, chatMessage{Role: "system", Content: marshalOrNull(strings.Join(responsesTexts(it.Content, d), "\n"))})
				continue
			}
			out = append(out, chatMessage{Role: "user", Content: responsesUserContent(it.Content, d)})
		case "function_call":
			m := lastAssistant()
			m.ToolCalls = append(m.ToolCalls, chatToolCall{ID: it.CallID, Type: "function",
				Function: chatFunctionCall{Name: it.Name, Arguments: it.Args}})
			if s, ok := asString(m.Content); ok && s == "" {
				m.Content = nil
			}
		case "function_call_output":
			content := ""
			if s, ok := asString(it.Output); ok {
				content = s
			} else {
				content = strings.Join(responsesTexts(it.Output, d), "")
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: marshalOrNull(content)})
		default:
			d.drop("input[].type=" + it.Type) // reasoning items, built-in tool calls: nothing to carry them
		}
	}
	return out
}

// responsesTexts reads a content that is a string or a list of text parts (input_text,
// output_text, refusal).
func responsesTexts(raw json.RawMessage, d *dropper) []string {
	if isNull(raw) {
		return nil
	}
	if s, ok := asString(raw); ok {
		return []string{s}
	}
	var parts []responsesPart
	if json.Unmarshal(raw, &parts) != nil {
		d.drop("input[].content")
		return nil
	}
	var out []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text", "refusal":
			out = append(out, p.Text)
		default:
			d.drop("input[].content[].type=" + p.Type)
		}
	}
	return out
}

// responsesUserContent reads a user message's content: text and images.
func responsesUserContent(raw json.RawMessage, d *dropper) json.RawMessage {
	if s, ok := asString(raw); ok {
		return marshalOrNull(s)
	}
	var parts []responsesPart
	if json.Unmarshal(raw, &parts) != nil {
		d.drop("input[].content")
		return marshalOrNull("")
	}
	var out []chatPart
	for _, p := range parts {
		switch p.Type {
		case "input_text", "text":
			out = append(out, chatPart{Type: "text", Text: p.Text})
		case "input_image":
			u, _ := asString(p.ImageURL)
			if u == "" {
				d.drop("input[].content[].file_id")
				continue
			}
			out = append(out, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: u, Detail: p.Detail}})
		default:
			d.drop("input[].content[].type=" + p.Type)
		}
	}
	if len(out) == 1 && out[0].Type == "text" {
		return marshalOrNull(out[0].Text)
	}
	return marshalOrNull(out)
}

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
	Store             bool            `json:"store"`
}

// EchoOf reads what a Responses answer repeats from its request.
func EchoOf(body []byte) ResponsesEcho {
	e := ResponsesEcho{ParallelToolCalls: true, Store: true}
	_ = json.Unmarshal(body, &e)
	if isNull(e.ToolChoice) {
		e.ToolChoice = json.RawMessage(`"auto"`)
	}
	if isNull(e.Tools) {
		e.Tools = json.RawMessage(`[]`)
	}
	if isNull(e.Reasoning) {
		e.Reasoning = json.RawMessage(`{"effort":null,"summary":null}`)
	}
	if isNull(e.Text) {
		e.Text = json.RawMessage(`{"format":{"type":"text"}}`)
	}
	if isNull(e.Metadata) {
		e.Metadata = json.RawMessage(`{}`)
	}
	return e
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
	o.raw("tool_choice", rawJSON(e.ToolChoice))
	o.raw("tools", rawJSON(e.Tools))
	o.raw("reasoning", rawJSON(e.Reasoning))
	o.raw("text", rawJSON(e.Text))
	o.raw("metadata", rawJSON(e.Metadata))
	o.raw("store", boolJSON(e.Store))
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
	o := newObj(dst).str("id", id).str("object", "response").int("created_at", created).str("status", status).str("model", model)
	o.key("output")
	o.b = append(o.b, '[')
	for i, it := range items {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = append(o.b, it...)
	}
	o.b = append(o.b, ']')
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
	o := newObj(make([]byte, 0, len(text)+len(id)+160)).str("type", "message").str("id", id).str("status", status).
		str("role", "assistant")
	o.key("content")
	o.b = append(o.b, '[')
	part := &obj{b: append(o.b, '{'), first: true}
	part.str("type", "output_text").text("text", text).raw("annotations", []byte("[]"))
	o.b = append(part.b, '}', ']')
	return o.end()
}

func reasoningItem(id string, text jtext) []byte {
	o := newObj(make([]byte, 0, len(text)+len(id)+96)).str("type", "reasoning").str("id", id)
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

func functionCallItem(id, callID, name, args, status string) []byte {
	return newObj(nil).str("type", "function_call").str("id", id).str("call_id", callID).str("name", name).
		str("arguments", args).str("status", status).end()
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
	text   strings.Builder
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

// Event translates one chat chunk event, appending the Responses events to dst.
func (s *ChatToResponsesStream) Event(dst, ev []byte) []byte {
	_, data := ParseEvent(ev)
	if len(data) == 0 || s.done {
		return dst
	}
	if strings.HasPrefix(string(data), "[DONE]") {
		return s.complete(dst)
	}
	c := gjson.ParseBytes(data)
	if !c.IsObject() {
		return dst
	}
	if e := c.Get("error"); e.Exists() && e.Type != gjson.Null {
		return s.fail(dst, e)
	}
	dst = s.start(dst, c.Get("id").String(), c.Get("model").String())
	if u := c.Get("usage"); u.IsObject() {
		s.usage = &chatUsage{PromptTokens: u.Get("prompt_tokens").Int(), CompletionTokens: u.Get("completion_tokens").Int()}
		if d := u.Get("prompt_tokens_details.cached_tokens"); d.Exists() {
			s.usage.PromptTokensDetails = &promptDetails{CachedTokens: d.Int()}
		}
	}
	c.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		if ch.Get("index").Int() != 0 {
			return true
		}
		d := ch.Get("delta")
		r := d.Get("reasoning_content")
		if !r.Exists() {
			r = d.Get("reasoning")
		}
		if t := r.String(); t != "" {
			dst = s.openItem(dst, "reasoning", "")
			s.open.text.WriteString(t)
			dst = finish(s.event(dst, "response.reasoning_summary_text.delta").str("item_id", s.open.id).
				int("output_index", int64(s.open.index)).int("summary_index", 0).str("delta", t))
		}
		if t := d.Get("content").String(); t != "" {
			dst = s.openItem(dst, "message", "")
			s.open.text.WriteString(t)
			dst = finish(s.event(dst, "response.output_text.delta").str("item_id", s.open.id).
				int("output_index", int64(s.open.index)).int("content_index", 0).str("delta", t).raw("logprobs", []byte("[]")))
		}
		d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
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
			if args := tc.Get("function.arguments").String(); args != "" {
				it.text.WriteString(args)
				dst = finish(s.event(dst, "response.function_call_arguments.delta").str("item_id", it.id).
					int("output_index", int64(it.index)).str("delta", args))
			}
			return true
		})
		if f := ch.Get("finish_reason"); f.Type == gjson.String && f.String() != "" {
			s.finish = f.String()
			dst = s.closeItem(dst)
		}
		return true
	})
	return dst
}

// Incomplete is the event that ends a stream the upstream left unfinished: an error event, in
// sequence.
func (s *ChatToResponsesStream) Incomplete(dst []byte) []byte {
	if s.done {
		return dst
	}
	s.done = true
	return finish(s.event(dst, "error").str("code", "stream_incomplete").
		str("message", "the upstream stream ended before it was complete").raw("param", nullJSON))
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
	text := quoteText(it.text.String()) // escaped once, written three times
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
		item = functionCallItem(it.id, it.callID, it.name, it.text.String(), "completed")
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
