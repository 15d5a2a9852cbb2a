package translate

import (
	"errors"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// errNotAnswer is a body that is not the JSON object an answer is.
var errNotAnswer = errors.New("the answer is not a JSON object")

// appendChatUsage writes Anthropic usage as OpenAI's.
func appendChatUsage(dst []byte, u msgUsage) []byte {
	c := chatUsageOf(u)
	o := newObj(dst).int("prompt_tokens", c.PromptTokens).int("completion_tokens", c.CompletionTokens).int("total_tokens", c.TotalTokens)
	if c.PromptTokensDetails != nil {
		o.raw("prompt_tokens_details", newObj(nil).int("cached_tokens", c.PromptTokensDetails.CachedTokens).end())
	}
	return o.end()
}

// appendToolCall writes one chat tool call.
func appendToolCall(dst []byte, id, name, args string) []byte {
	return newObj(dst).str("id", id).str("type", "function").
		raw("function", newObj(nil).str("name", name).str("arguments", args).end()).end()
}

// MessagesResponseToChat turns an Anthropic messages answer into a chat completion. created is
// the completion's timestamp (Anthropic answers carry none).
func MessagesResponseToChat(body []byte, created int64) ([]byte, error) {
	return AppendMessagesResponseToChat(nil, body, created)
}

// AppendMessagesResponseToChat is MessagesResponseToChat appending to dst.
func AppendMessagesResponseToChat(dst, body []byte, created int64) ([]byte, error) {
	s := view(body) // every value read below is a part of it, copied once into the answer
	var text, thinking jtext
	var calls []byte
	var id, model, stopReason string
	var usage msgUsage
	block := func(v int) int {
		if s[v] != '{' {
			return valueEnd(s, v, 2)
		}
		var typ, bid, name, txt, thk, input string
		e := members(s, v, 2, func(k string, v int) int {
			e := valueEnd(s, v, 3)
			if e < 0 {
				return -1
			}
			switch raw := s[v:e]; k {
			case "type":
				typ = strAt(raw)
			case "text":
				txt = raw
			case "thinking":
				thk = raw
			case "id":
				bid = strAt(raw)
			case "name":
				name = strAt(raw)
			case "input":
				input = raw
			}
			return e
		})
		switch typ {
		case "text":
			text += textAt(txt) // one block (the usual answer): no copy
		case "thinking":
			thinking += textAt(thk)
		case "tool_use":
			if len(calls) > 0 {
				calls = append(calls, ',')
			}
			calls = appendToolCall(calls, bid, name, string(objectOrEmpty([]byte(input))))
		}
		return e
	}
	ok := document(s, func(k string, v int) int {
		if k == "content" && s[v] == '[' {
			return elements(s, v, 1, block)
		}
		e := valueEnd(s, v, 1)
		if e < 0 {
			return -1
		}
		switch raw := s[v:e]; k {
		case "id":
			id = strAt(raw)
		case "model":
			model = strAt(raw)
		case "stop_reason":
			if raw[0] == '"' {
				stopReason = strAt(raw)
			}
		case "usage":
			u := gjson.Parse(raw)
			usage = msgUsage{InputTokens: u.Get("input_tokens").Int(), OutputTokens: u.Get("output_tokens").Int(),
				CacheCreationInputTokens: u.Get("cache_creation_input_tokens").Int(), CacheReadInputTokens: u.Get("cache_read_input_tokens").Int()}
		}
		return e
	})
	if !ok {
		return nil, errNotAnswer
	}
	finish := "stop"
	if stopReason != "" {
		finish = stopToFinish(stopReason)
	}
	// Written front to back into one buffer the size of the whole answer.
	out := newObj(slices.Grow(dst, len(text)+len(thinking)+len(calls)+len(id)+len(model)+384)).str("id", chatID(id)).
		str("object", "chat.completion").int("created", created).str("model", model)
	out.key("choices")
	out.b = append(out.b, '[')
	choice := &obj{b: append(out.b, '{'), first: true}
	choice.int("index", 0)
	msg := choice.open("message").str("role", "assistant")
	if len(text) > 0 || len(calls) == 0 {
		msg.text("content", text)
	}
	if len(thinking) > 0 {
		msg.text("reasoning_content", thinking)
	}
	if len(calls) > 0 {
		msg.key("tool_calls")
		msg.b = append(append(append(msg.b, '['), calls...), ']')
	}
	choice.close(msg)
	choice.str("finish_reason", finish)
	out.b = append(choice.b, '}', ']')
	out.raw("usage", appendChatUsage(nil, usage))
	return out.end(), nil
}

// chatAnswer is what the translators read of a chat completion's first choice.
type chatAnswer struct {
	id, model, finish           string
	content, reasoning, refusal jtext
	created                     int64
	hasContent                  bool
	calls                       []gjson.Result
	usage                       *chatUsage
}

func readChatAnswer(body []byte) (chatAnswer, error) {
	s := view(body) // every value read below is a part of it; the caller copies what it keeps
	var a chatAnswer
	var reasoning, reasoningContent string
	message := func(k string, v int) int {
		e := valueEnd(s, v, 4)
		if e < 0 {
			return -1
		}
		switch raw := s[v:e]; k {
		case "content":
			if raw[0] == '"' {
				a.content, a.hasContent = textAt(raw), true
			}
		case "reasoning_content":
			reasoningContent = raw
		case "reasoning":
			reasoning = raw
		case "refusal":
			a.refusal = textAt(raw)
		case "tool_calls":
			a.calls = gjson.Parse(raw).Array()
		}
		return e
	}
	choice := func(k string, v int) int {
		switch {
		case k == "message" && s[v] == '{':
			return members(s, v, 3, message)
		case k == "finish_reason":
			e := valueEnd(s, v, 3)
			if e > 0 && s[v] == '"' {
				a.finish = strAt(s[v:e])
			}
			return e
		}
		return valueEnd(s, v, 3)
	}
	first := true
	ok := document(s, func(k string, v int) int {
		if k == "choices" && s[v] == '[' {
			return elements(s, v, 1, func(v int) int {
				if first && s[v] == '{' {
					first = false
					return members(s, v, 2, choice)
				}
				first = false
				return valueEnd(s, v, 2)
			})
		}
		e := valueEnd(s, v, 1)
		if e < 0 {
			return -1
		}
		switch raw := s[v:e]; k {
		case "id":
			a.id = strAt(raw)
		case "model":
			a.model = strAt(raw)
		case "created":
			a.created = gjson.Parse(raw).Int()
		case "usage":
			if u := gjson.Parse(raw); u.IsObject() {
				a.usage = &chatUsage{PromptTokens: u.Get("prompt_tokens").Int(), CompletionTokens: u.Get("completion_tokens").Int(),
					TotalTokens: u.Get("total_tokens").Int()}
				if d := u.Get("prompt_tokens_details.cached_tokens"); d.Exists() {
					a.usage.PromptTokensDetails = &promptDetails{CachedTokens: d.Int()}
				}
			}
		}
		return e
	})
	if !ok {
		return chatAnswer{}, errNotAnswer
	}
	if reasoningContent != "" {
		a.reasoning = textAt(reasoningContent)
	} else {
		a.reasoning = textAt(reasoning)
	}
	return a, nil
}

// strAt is the string form of a value read by the scanner (as gjson's String gives it): a
// string's text, a number's digits, "" for null.
func strAt(raw string) string {
	if len(raw) >= 2 && raw[0] == '"' && strings.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	return gjson.Parse(raw).String()
}

// textAt is textOf for a value read by the scanner: a string's text as it stands in the document.
func textAt(raw string) jtext {
	if len(raw) >= 2 && raw[0] == '"' {
		return jtext(raw[1 : len(raw)-1])
	}
	if raw == "" || raw == "null" {
		return ""
	}
	return quoteText(gjson.Parse(raw).String())
}

// ChatResponseToMessages turns a chat completion into an Anthropic message.
func ChatResponseToMessages(body []byte) ([]byte, error) {
	return AppendChatResponseToMessages(nil, body)
}

// AppendChatResponseToMessages is ChatResponseToMessages appending to dst.
func AppendChatResponseToMessages(dst, body []byte) ([]byte, error) {
	a, err := readChatAnswer(body)
	if err != nil {
		return nil, err
	}
	stop := "end_turn"
	if a.finish != "" {
		stop = finishToStop(a.finish)
	}
	// Written front to back into one buffer the size of the whole answer.
	out := newObj(slices.Grow(dst, len(a.content)+len(a.reasoning)+len(a.refusal)+len(a.id)+len(a.model)+384)).
		str("id", msgID(a.id)).str("type", "message").str("role", "assistant").str("model", a.model)
	out.key("content")
	out.b = append(out.b, '[')
	n := 0
	block := func() *obj {
		if n++; n > 1 {
			out.b = append(out.b, ',')
		}
		return &obj{b: append(out.b, '{'), first: true}
	}
	end := func(b *obj) { out.b = append(b.b, '}') }
	if len(a.reasoning) > 0 {
		b := block()
		end(b.str("type", "thinking").text("thinking", a.reasoning).str("signature", ""))
	}
	switch {
	case len(a.content) > 0:
		b := block()
		end(b.str("type", "text").text("text", a.content))
	case len(a.refusal) > 0:
		b := block()
		end(b.str("type", "text").text("text", a.refusal))
	}
	for _, tc := range a.calls {
		b := block()
		end(b.str("type", "tool_use").str("id", tc.Get("id").String()).str("name", tc.Get("function.name").String()).
			raw("input", objectOrEmpty([]byte(tc.Get("function.arguments").String()))))
	}
	out.b = append(out.b, ']')
	u := msgUsageOf(a.usage)
	usage := out.str("stop_reason", stop).raw("stop_sequence", nullJSON).open("usage").
		int("input_tokens", u.InputTokens).int("output_tokens", u.OutputTokens)
	if u.CacheReadInputTokens > 0 {
		usage.int("cache_read_input_tokens", u.CacheReadInputTokens)
	}
	out.close(usage)
	return out.end(), nil
}

// ChatResponseToResponses turns a chat completion into a Responses answer.
func ChatResponseToResponses(body []byte, echo ResponsesEcho) ([]byte, error) {
	return AppendChatResponseToResponses(nil, body, echo)
}

// AppendChatResponseToResponses is ChatResponseToResponses appending to dst.
func AppendChatResponseToResponses(dst, body []byte, echo ResponsesEcho) ([]byte, error) {
	a, err := readChatAnswer(body)
	if err != nil {
		return nil, err
	}
	id := responseID(a.id)
	base := strings.TrimPrefix(id, "resp_")
	status, details := "completed", []byte(nil)
	if a.finish != "" {
		status, details = statusOf(a.finish)
	}
	// Written front to back into one buffer the size of the whole answer, items in place.
	out := responseHead(slices.Grow(dst, len(a.content)+len(a.reasoning)+len(a.id)*3+1024), id, a.created, status, a.model)
	n := 0
	sep := func() {
		if n++; n > 1 {
			out = append(out, ',')
		}
	}
	if len(a.reasoning) > 0 {
		sep()
		out = appendReasoningItem(out, "rs_"+base, a.reasoning)
	}
	if len(a.content) > 0 {
		sep()
		out = appendMessageItem(out, "msg_"+base, a.content, "completed")
	}
	for _, tc := range a.calls {
		sep()
		callID := tc.Get("id").String()
		out = appendFunctionCallItem(out, "fc_"+callID, callID, tc.Get("function.name").String(),
			textOf(tc.Get("function.arguments")), "completed")
	}
	return responseTail(out, responsesUsageOf(a.usage), nil, details, echo), nil
}
