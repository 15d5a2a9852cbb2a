package translate

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"
)

// errNotAnswer is a body that is not the JSON object an answer is.
var errNotAnswer = errors.New("the answer is not a JSON object")

// parseAnswer checks an answer body and returns its root.
func parseAnswer(body []byte) (gjson.Result, error) {
	if !gjson.ValidBytes(body) {
		return gjson.Result{}, errNotAnswer
	}
	r := gjson.ParseBytes(body)
	if !r.IsObject() {
		return gjson.Result{}, errNotAnswer
	}
	return r, nil
}

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
	r, err := parseAnswer(body)
	if err != nil {
		return nil, err
	}
	var text, thinking jtext
	var calls []byte
	var id, model, stopReason string
	var usage msgUsage
	// One pass over the top level: a Get per key would re-scan the (long) content every time.
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			id = v.String()
		case "model":
			model = v.String()
		case "stop_reason":
			if v.Type == gjson.String {
				stopReason = v.Str
			}
		case "usage":
			usage = msgUsage{InputTokens: v.Get("input_tokens").Int(), OutputTokens: v.Get("output_tokens").Int(),
				CacheCreationInputTokens: v.Get("cache_creation_input_tokens").Int(), CacheReadInputTokens: v.Get("cache_read_input_tokens").Int()}
		case "content":
			v.ForEach(func(_, b gjson.Result) bool {
				var typ, bid, name string
				var txt, thk, input gjson.Result
				b.ForEach(func(k, f gjson.Result) bool {
					switch k.Str {
					case "type":
						typ = f.String()
					case "text":
						txt = f
					case "thinking":
						thk = f
					case "id":
						bid = f.String()
					case "name":
						name = f.String()
					case "input":
						input = f
					}
					return true
				})
				switch typ {
				case "text":
					text += textOf(txt) // one block (the usual answer): no copy
				case "thinking":
					thinking += textOf(thk)
				case "tool_use":
					if len(calls) > 0 {
						calls = append(calls, ',')
					}
					calls = appendToolCall(calls, bid, name, string(objectOrEmpty([]byte(input.Raw))))
				}
				return true
			})
		}
		return true
	})
	finish := "stop"
	if stopReason != "" {
		finish = stopToFinish(stopReason)
	}
	// Written front to back into one buffer the size of the whole answer.
	out := newObj(make([]byte, 0, len(text)+len(thinking)+len(calls)+len(id)+len(model)+384)).str("id", chatID(id)).
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
	r, err := parseAnswer(body)
	if err != nil {
		return chatAnswer{}, err
	}
	// One pass over each level: a Get per key would re-scan the (long) content every time.
	var a chatAnswer
	var ch gjson.Result
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			a.id = v.String()
		case "model":
			a.model = v.String()
		case "created":
			a.created = v.Int()
		case "choices":
			v.ForEach(func(_, c gjson.Result) bool { ch = c; return false })
		case "usage":
			if v.IsObject() {
				a.usage = &chatUsage{PromptTokens: v.Get("prompt_tokens").Int(), CompletionTokens: v.Get("completion_tokens").Int(),
					TotalTokens: v.Get("total_tokens").Int()}
				if d := v.Get("prompt_tokens_details.cached_tokens"); d.Exists() {
					a.usage.PromptTokensDetails = &promptDetails{CachedTokens: d.Int()}
				}
			}
		}
		return true
	})
	var reasoning, reasoningContent gjson.Result
	ch.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "finish_reason":
			if v.Type == gjson.String {
				a.finish = v.Str
			}
		case "message":
			v.ForEach(func(k, f gjson.Result) bool {
				switch k.Str {
				case "content":
					if f.Type == gjson.String {
						a.content, a.hasContent = textOf(f), true
					}
				case "reasoning_content":
					reasoningContent = f
				case "reasoning":
					reasoning = f
				case "refusal":
					a.refusal = textOf(f)
				case "tool_calls":
					a.calls = f.Array()
				}
				return true
			})
		}
		return true
	})
	if reasoningContent.Exists() {
		a.reasoning = textOf(reasoningContent)
	} else {
		a.reasoning = textOf(reasoning)
	}
	return a, nil
}

// ChatResponseToMessages turns a chat completion into an Anthropic message.
func ChatResponseToMessages(body []byte) ([]byte, error) {
	a, err := readChatAnswer(body)
	if err != nil {
		return nil, err
	}
	stop := "end_turn"
	if a.finish != "" {
		stop = finishToStop(a.finish)
	}
	// Written front to back into one buffer the size of the whole answer.
	out := newObj(make([]byte, 0, len(a.content)+len(a.reasoning)+len(a.refusal)+len(a.id)+len(a.model)+384)).
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
	a, err := readChatAnswer(body)
	if err != nil {
		return nil, err
	}
	id := responseID(a.id)
	base := strings.TrimPrefix(id, "resp_")
	var items [][]byte
	if len(a.reasoning) > 0 {
		items = append(items, reasoningItem("rs_"+base, a.reasoning))
	}
	if len(a.content) > 0 {
		items = append(items, messageItem("msg_"+base, a.content, "completed"))
	}
	for _, tc := range a.calls {
		callID := tc.Get("id").String()
		items = append(items, functionCallItem("fc_"+callID, callID, tc.Get("function.name").String(),
			tc.Get("function.arguments").String(), "completed"))
	}
	status, details := "completed", []byte(nil)
	if a.finish != "" {
		status, details = statusOf(a.finish)
	}
	return appendResponse(make([]byte, 0, len(a.content)+len(a.reasoning)+512), id, a.created, status, a.model, items,
		responsesUsageOf(a.usage), nil, details, echo), nil
}
