package translate

import (
	"encoding/json"
	"fmt"
	"strings"
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
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return Request{}, err
	}
	var in responsesRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return Request{}, fmt.Errorf("not a Responses request: %w", err)
	}
	d := &dropper{}
	d.dropUnknown("", obj, responsesRequestKeys...)
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
				obj["response_format"] = marshalOrNull(map[string]any{"type": "json_schema", "json_schema": js})
			case "json_object":
				obj["response_format"] = json.RawMessage(`{"type":"json_object"}`)
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
	if rf, ok := obj["response_format"]; ok && !isNull(rf) {
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

// responseObject is a Responses answer; the echoed request fields are merged in when encoded.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []any           `json:"output"`
	Usage             *responsesUsage `json:"usage"`
	Error             any             `json:"error"`
	IncompleteDetails any             `json:"incomplete_details"`
	PreviousResponse  *string         `json:"previous_response_id"`
	ResponsesEcho
}

type responsesUsage struct {
	InputTokens         int64            `json:"input_tokens"`
	InputTokensDetails  map[string]int64 `json:"input_tokens_details"`
	OutputTokens        int64            `json:"output_tokens"`
	OutputTokensDetails map[string]int64 `json:"output_tokens_details"`
	TotalTokens         int64            `json:"total_tokens"`
}

func responsesUsageOf(u *chatUsage) *responsesUsage {
	if u == nil {
		return nil
	}
	out := &responsesUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens,
		InputTokensDetails: map[string]int64{"cached_tokens": 0}, OutputTokensDetails: map[string]int64{"reasoning_tokens": 0}}
	if u.PromptTokensDetails != nil {
		out.InputTokensDetails["cached_tokens"] = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// responseID gives a Responses answer the id of the chat completion it came from.
func responseID(id string) string {
	return "resp_" + strings.TrimPrefix(strings.TrimPrefix(id, "chatcmpl-"), "chatcmpl_")
}

func messageItem(id, text, status string) map[string]any {
	return map[string]any{"type": "message", "id": id, "status": status, "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

func reasoningItem(id, text string) map[string]any {
	summary := []any{}
	if text != "" {
		summary = append(summary, map[string]any{"type": "summary_text", "text": text})
	}
	return map[string]any{"type": "reasoning", "id": id, "summary": summary}
}

func functionCallItem(id, callID, name, args, status string) map[string]any {
	return map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": name, "arguments": args, "status": status}
}

// statusOf is a Responses status for a chat finish reason, with its incomplete details.
func statusOf(finish string) (string, any) {
	switch finish {
	case "length":
		return "incomplete", map[string]string{"reason": "max_output_tokens"}
	case "content_filter":
		return "incomplete", map[string]string{"reason": "content_filter"}
	}
	return "completed", nil
}

// ChatResponseToResponses turns a chat completion into a Responses answer.
func ChatResponseToResponses(body []byte, echo ResponsesEcho) ([]byte, error) {
	var in chatResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("not a chat completion: %w", err)
	}
	out := responseObject{ID: responseID(in.ID), Object: "response", CreatedAt: in.Created, Status: "completed", Model: in.Model,
		Output: []any{}, Usage: responsesUsageOf(in.Usage), ResponsesEcho: echo}
	base := strings.TrimPrefix(out.ID, "resp_")
	if len(in.Choices) > 0 {
		ch := in.Choices[0]
		if m := ch.Message; m != nil {
			if r := reasoningOf(m); r != "" {
				out.Output = append(out.Output, reasoningItem("rs_"+base, r))
			}
			if m.Content != nil && *m.Content != "" {
				out.Output = append(out.Output, messageItem("msg_"+base, *m.Content, "completed"))
			}
			for _, tc := range m.ToolCalls {
				out.Output = append(out.Output, functionCallItem("fc_"+tc.ID, tc.ID, tc.Function.Name, tc.Function.Arguments, "completed"))
			}
		}
		if ch.FinishReason != nil {
			out.Status, out.IncompleteDetails = statusOf(*ch.FinishReason)
		}
	}
	return json.Marshal(out)
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
	items    []map[string]any // finished output items, in order
	open     *streamItem
	tools    map[int]*streamItem // chat tool call index → its item
	finish   string
	usage    *chatUsage
	baseName string
}

// streamItem is the output item being filled.
type streamItem struct {
	kind        string // message, reasoning, function_call
	id          string
	index       int
	text        strings.Builder
	callID      string
	name        string
	partStarted bool
}

// Done reports whether the stream reached its terminal event.
func (s *ChatToResponsesStream) Done() bool { return s.done }

// Usage is the token count of the answer (input, output).
func (s *ChatToResponsesStream) Usage() (in, out int64) {
	if s.usage == nil {
		return 0, 0
	}
	return s.usage.PromptTokens, s.usage.CompletionTokens
}

// Event translates one chat chunk event, appending the Responses events to dst.
func (s *ChatToResponsesStream) Event(dst, ev []byte) []byte {
	_, data := ParseEvent(ev)
	if len(data) == 0 || s.done {
		return dst
	}
	if strings.HasPrefix(string(data), "[DONE]") {
		return s.complete(dst)
	}
	var c struct {
		chatResponse
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &c) != nil {
		return dst
	}
	if !isNull(c.Error) {
		return s.fail(dst, c.Error)
	}
	dst = s.start(dst, c.ID, c.Model)
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if d := ch.Delta; d != nil {
			if r := reasoningOf(d); r != "" {
				dst = s.openItem(dst, "reasoning", "")
				s.open.text.WriteString(r)
				dst = s.emit(dst, "response.reasoning_summary_text.delta", map[string]any{"item_id": s.open.id,
					"output_index": s.open.index, "summary_index": 0, "delta": r})
			}
			if d.Content != nil && *d.Content != "" {
				dst = s.openItem(dst, "message", "")
				s.open.text.WriteString(*d.Content)
				dst = s.emit(dst, "response.output_text.delta", map[string]any{"item_id": s.open.id, "output_index": s.open.index,
					"content_index": 0, "delta": *d.Content, "logprobs": []any{}})
			}
			for _, tc := range d.ToolCalls {
				ci := 0
				if tc.Index != nil {
					ci = *tc.Index
				}
				it, known := s.tools[ci]
				if !known {
					callID := tc.ID
					if callID == "" {
						callID = fmt.Sprintf("call_%s_%d", s.baseName, ci)
					}
					dst = s.openItem(dst, "function_call", callID)
					s.open.name = tc.Function.Name
					if s.tools == nil {
						s.tools = map[int]*streamItem{}
					}
					s.tools[ci] = s.open
					it = s.open
					dst = s.emit(dst, "response.output_item.added", map[string]any{"output_index": it.index,
						"item": functionCallItem(it.id, it.callID, it.name, "", "in_progress")})
				}
				if tc.Function.Arguments != "" {
					it.text.WriteString(tc.Function.Arguments)
					dst = s.emit(dst, "response.function_call_arguments.delta", map[string]any{"item_id": it.id,
						"output_index": it.index, "delta": tc.Function.Arguments})
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
			dst = s.closeItem(dst)
		}
	}
	return dst
}

// Incomplete is the event that ends a stream the upstream left unfinished: an error event, in
// sequence.
func (s *ChatToResponsesStream) Incomplete(dst []byte) []byte {
	if s.done {
		return dst
	}
	s.done = true
	return s.emit(dst, "error", map[string]any{"code": "stream_incomplete",
		"message": "the upstream stream ended before it was complete", "param": nil})
}

func (s *ChatToResponsesStream) emit(dst []byte, typ string, fields map[string]any) []byte {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	return appendEvent(dst, typ, marshalOrNull(fields))
}

func (s *ChatToResponsesStream) response(status string) responseObject {
	r := responseObject{ID: s.id, Object: "response", CreatedAt: s.Created, Status: status, Model: s.model,
		Output: []any{}, ResponsesEcho: s.Echo}
	for _, it := range s.items {
		r.Output = append(r.Output, it)
	}
	return r
}

// start sends response.created and response.in_progress once.
func (s *ChatToResponsesStream) start(dst []byte, id, model string) []byte {
	if s.started {
		return dst
	}
	s.started, s.id, s.model = true, responseID(id), model
	s.baseName = strings.TrimPrefix(s.id, "resp_")
	r := s.response("in_progress")
	dst = s.emit(dst, "response.created", map[string]any{"response": r})
	return s.emit(dst, "response.in_progress", map[string]any{"response": r})
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
		it.id = fmt.Sprintf("msg_%s_%d", s.baseName, it.index)
		dst = s.emit(dst, "response.output_item.added", map[string]any{"output_index": it.index,
			"item": map[string]any{"type": "message", "id": it.id, "status": "in_progress", "role": "assistant", "content": []any{}}})
		dst = s.emit(dst, "response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.index,
			"content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	case "reasoning":
		it.id = fmt.Sprintf("rs_%s_%d", s.baseName, it.index)
		dst = s.emit(dst, "response.output_item.added", map[string]any{"output_index": it.index,
			"item": map[string]any{"type": "reasoning", "id": it.id, "summary": []any{}}})
		dst = s.emit(dst, "response.reasoning_summary_part.added", map[string]any{"item_id": it.id, "output_index": it.index,
			"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
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
	text := it.text.String()
	var item map[string]any
	switch it.kind {
	case "message":
		dst = s.emit(dst, "response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"content_index": 0, "text": text, "logprobs": []any{}})
		dst = s.emit(dst, "response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"content_index": 0, "part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		item = messageItem(it.id, text, "completed")
	case "reasoning":
		dst = s.emit(dst, "response.reasoning_summary_text.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"summary_index": 0, "text": text})
		dst = s.emit(dst, "response.reasoning_summary_part.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": text}})
		item = reasoningItem(it.id, text)
	case "function_call":
		dst = s.emit(dst, "response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"arguments": text})
		item = functionCallItem(it.id, it.callID, it.name, text, "completed")
	}
	s.items = append(s.items, item)
	return s.emit(dst, "response.output_item.done", map[string]any{"output_index": it.index, "item": item})
}

// complete ends the answer: response.completed, or response.incomplete when the answer was cut.
func (s *ChatToResponsesStream) complete(dst []byte) []byte {
	dst = s.start(dst, "", "")
	dst = s.closeItem(dst)
	status, details := statusOf(s.finish)
	r := s.response(status)
	r.IncompleteDetails = details
	r.Usage = responsesUsageOf(s.usage)
	s.done = true
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	return s.emit(dst, typ, map[string]any{"response": r})
}

// fail ends the answer with the upstream's error: response.failed.
func (s *ChatToResponsesStream) fail(dst []byte, raw json.RawMessage) []byte {
	dst = s.start(dst, "", "")
	var e struct {
		Message string          `json:"message"`
		Code    json.RawMessage `json:"code"`
		Type    string          `json:"type"`
	}
	if m, ok := asString(raw); ok {
		e.Message = m
	} else {
		_ = json.Unmarshal(raw, &e)
	}
	code, _ := asString(e.Code)
	if code == "" {
		code = "server_error"
	}
	r := s.response("failed")
	r.Error = map[string]string{"code": code, "message": e.Message}
	s.done, s.failed = true, true
	return s.emit(dst, "response.failed", map[string]any{"response": r})
}

// Failed reports whether the stream ended with the upstream's error (response.failed).
func (s *ChatToResponsesStream) Failed() bool { return s.failed }
