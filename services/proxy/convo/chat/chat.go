// Package chat is the OpenAI chat completions wire format in the conversation model: a reader
// and a writer for requests (request_read.go, request_write.go), whole answers (answer_read.go,
// answer_write.go) and streams of chunks (stream_read.go, stream_write.go). It knows no other
// format.
//
// Everything is read in one pass of the convo scanner and written with hand-written appends;
// texts stay in their escaped JSON form (convo.Text) from the document they were read from to the
// one they are written into.
package chat

import (
	"errors"
	"strconv"
	"strings"

	"switchyard/services/proxy/convo"
)

// notChat is the error for a request field whose value has the wrong type (the engine answers it
// with a 400 invalid_request).
func notChat(field, want string) error {
	return errors.New("not a chat completions request: " + field + " must be " + want)
}

// errNotObject is a request body that is not a JSON object.
var errNotObject = errors.New("not a chat completions request: the body is not a JSON object")

// errNotAnswer is a body that is not the JSON object an answer is.
var errNotAnswer = errors.New("the answer is not a JSON object")

// chatID gives a chat completion the id of the answer it came from: an Anthropic message's
// msg_… or a Responses resp_… becomes chatcmpl-…; an id that is one already stays.
func chatID(id string) string {
	switch {
	case id == "":
		return "chatcmpl-switchyard"
	case strings.HasPrefix(id, "chatcmpl-"):
		return id
	case strings.HasPrefix(id, "msg_"):
		return "chatcmpl-" + id[len("msg_"):]
	case strings.HasPrefix(id, "resp_"):
		return "chatcmpl-" + id[len("resp_"):]
	}
	return "chatcmpl-" + id
}

// stopOf maps a chat finish reason to the model's stop reason.
func stopOf(finish string) convo.StopReason {
	switch finish {
	case "length":
		return convo.StopMaxTokens
	case "tool_calls", "function_call":
		return convo.StopToolUse
	case "content_filter":
		return convo.StopContentFilter
	}
	return convo.StopEnd // stop, and what a server invents
}

// finishOf maps the model's stop reason to a chat finish reason.
func finishOf(s convo.StopReason) string {
	switch s {
	case convo.StopMaxTokens:
		return "length"
	case convo.StopToolUse:
		return "tool_calls"
	case convo.StopContentFilter, convo.StopRefusal:
		return "content_filter"
	}
	return "stop" // end of turn, a stop sequence, a paused turn
}

// cutShort is the finish reason of an answer the upstream cut short (Responses'
// response.incomplete): chat completions say that with finish_reason length or content_filter,
// not with an error, and their clients keep the answer so far. "" when e is another error.
func cutShort(e *convo.Error) string {
	if e == nil || !e.Incomplete {
		return ""
	}
	switch e.Reason {
	case "max_output_tokens", "max_tokens":
		return "length"
	case "content_filter":
		return "content_filter"
	}
	return ""
}

// openAITypeOf is an error type in OpenAI's words. The model keeps OpenAI's words already; the
// Anthropic ones a reader may have left are mapped as the gateway always has (what OpenAI's SDKs
// know), and an error without a type is a server error.
func openAITypeOf(t string) string {
	if t == "" {
		return "server_error"
	}
	if ot, ok := convo.OpenAIErrorType(t); ok {
		return ot
	}
	return t
}

// appendError writes an error object as OpenAI writes it: {"error":{message,type,code,param}}.
// An Anthropic type the model carried is mapped, and kept as the code when there is none.
func appendError(dst []byte, e *convo.Error) []byte {
	msg, typ, code, param := "the upstream reported an error", "", "", ""
	if e != nil {
		if e.Message != "" {
			msg = e.Message
		}
		typ, code, param = e.Type, e.Code, e.Param
	}
	ot := openAITypeOf(typ)
	if code == "" && ot != typ {
		code = typ
	}
	o := convo.NewObj(dst)
	eo := o.Open("error").Str("message", msg).Str("type", ot)
	eo.StrElseNull("code", code)
	eo.StrElseNull("param", param)
	o.Close(eo)
	return o.End()
}

// appendUsage writes the model's usage as OpenAI's: prompt_tokens count the cached ones, which
// prompt_tokens_details names; completion_tokens_details names the reasoning tokens.
func appendUsage(dst []byte, u convo.Usage) []byte {
	o := convo.NewObj(dst).Int("prompt_tokens", u.Input).Int("completion_tokens", u.Output).
		Int("total_tokens", u.Input+u.Output)
	if u.Has&convo.HasCacheRead != 0 {
		o.Close(o.Open("prompt_tokens_details").Int("cached_tokens", u.CacheRead))
	}
	if u.Has&convo.HasReasoning != 0 {
		o.Close(o.Open("completion_tokens_details").Int("reasoning_tokens", u.Reasoning))
	}
	return o.End()
}

// usageAt reads a chat usage object (a valid object as it stands): prompt and completion tokens,
// cached prompt tokens (prompt_tokens_details.cached_tokens, or DeepSeek's
// prompt_cache_hit_tokens) and reasoning tokens. ok is false when raw is not an object.
func usageAt(raw string) (u convo.Usage, ok bool) {
	if convo.Kind(raw) != '{' {
		return u, false
	}
	num := func(v string) (int64, bool) {
		if convo.Kind(v) != '0' {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(v, 64)
			if ferr != nil {
				return 0, false
			}
			n = int64(f)
		}
		return n, true
	}
	set := func(dst *int64, bit convo.UsageFields, v string) {
		if n, ok := num(v); ok {
			*dst = n
			u.Has |= bit
		}
	}
	var hit string
	convo.FieldsOf(raw, func(k, v string) {
		switch k {
		case "prompt_tokens":
			set(&u.Input, convo.HasInput, v)
		case "completion_tokens":
			set(&u.Output, convo.HasOutput, v)
		case "prompt_tokens_details":
			if convo.Kind(v) == '{' {
				convo.FieldsOf(v, func(k, v string) {
					if k == "cached_tokens" {
						set(&u.CacheRead, convo.HasCacheRead, v)
					}
				})
			}
		case "completion_tokens_details":
			if convo.Kind(v) == '{' {
				convo.FieldsOf(v, func(k, v string) {
					if k == "reasoning_tokens" {
						set(&u.Reasoning, convo.HasReasoning, v)
					}
				})
			}
		case "prompt_cache_hit_tokens":
			hit = v
		}
	})
	if u.Has&convo.HasCacheRead == 0 && hit != "" {
		set(&u.CacheRead, convo.HasCacheRead, hit)
	}
	return u, true
}

// errorAt reads an error a chat answer or chunk carries in its "error" field: an object with
// message, type, code and param, or a bare message. ok is false for null.
func errorAt(raw string) (*convo.Error, bool) {
	switch convo.Kind(raw) {
	case 0, 'n':
		return nil, false
	case '{':
		var msg, typ, code, param string
		convo.Pick(raw, nil,
			convo.Field("message", &msg),
			convo.Field("type", &typ),
			convo.Field("code", &code),
			convo.Field("param", &param))
		return &convo.Error{Message: convo.StrAt(msg), Type: convo.StrAt(typ), Code: convo.StrAt(code), Param: convo.StrAt(param)}, true
	}
	return &convo.Error{Message: convo.StrAt(raw)}, true
}
