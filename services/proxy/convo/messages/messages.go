// Package messages is the Anthropic messages wire format of the conversation model: a reader and
// a writer for requests (request_read.go, request_write.go), whole answers and streams
// (answer_read.go, answer_write.go).
//
// Everything is read in one pass of the scanner (convo.Document, FieldsOf, EachElement) and
// written by hand with convo.Obj; texts stay in the escaped form they had in the JSON they came
// from. Same-format traffic never comes here (the engine passes it through byte-exact): a
// messages request meets this writer when a chat or Responses client addresses an Anthropic
// upstream, and this reader when a Claude Code client addresses any other.
package messages

import (
	"errors"
	"strconv"
	"strings"

	"switchyard/services/proxy/convo"

	"github.com/tidwall/gjson"
)

// intOf is a number's value as an integer (0 for anything else).
func intOf(raw string) int64 {
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return n
	}
	if convo.Kind(raw) != '0' {
		return 0
	}
	return gjson.Parse(raw).Int()
}

// notMessages is the error for a field whose value has the wrong type: the words translate gave.
func notMessages(field, want string) error {
	return errors.New("not a messages request: " + field + " must be " + want)
}

// errNotAnswer is a body that is not the JSON object an answer is.
var errNotAnswer = errors.New("the answer is not a JSON object")

// msgID gives a message the id of the answer it came from: an Anthropic id as it is, a chat
// completion's or a response's with its prefix changed.
func msgID(id string) string {
	switch {
	case id == "":
		return "msg_switchyard"
	case strings.HasPrefix(id, "msg_"):
		return id
	}
	id = strings.TrimPrefix(id, "chatcmpl-")
	id = strings.TrimPrefix(id, "resp_")
	return "msg_" + id
}

// stopOf reads an Anthropic stop reason.
func stopOf(word string) convo.StopReason {
	switch word {
	case "end_turn":
		return convo.StopEnd
	case "max_tokens", "model_context_window_exceeded":
		return convo.StopMaxTokens
	case "tool_use":
		return convo.StopToolUse
	case "stop_sequence":
		return convo.StopSequence
	case "refusal":
		return convo.StopRefusal
	case "pause_turn":
		return convo.StopPause
	}
	return convo.StopEnd
}

// stopWord is a stop reason in Anthropic's words; a content filter is a refusal there.
func stopWord(s convo.StopReason) string {
	switch s {
	case convo.StopMaxTokens:
		return "max_tokens"
	case convo.StopToolUse:
		return "tool_use"
	case convo.StopSequence:
		return "stop_sequence"
	case convo.StopContentFilter, convo.StopRefusal:
		return "refusal"
	case convo.StopPause:
		return "pause_turn"
	}
	return "end_turn"
}

// incompleteStop is the stop reason that says in Anthropic's words why an answer was cut short
// (a Responses upstream's response.incomplete): Anthropic ends such an answer normally, with
// max_tokens or refusal, not with an error. ok is false for a reason it has no word for.
func incompleteStop(e *convo.Error) (convo.StopReason, bool) {
	if e == nil || !e.Incomplete {
		return 0, false
	}
	switch e.Reason {
	case "max_output_tokens", "max_tokens", "length":
		return convo.StopMaxTokens, true
	case "content_filter":
		return convo.StopContentFilter, true
	}
	return 0, false
}

// openAITypeOf maps an Anthropic error type to OpenAI's (the model's words).
func openAITypeOf(t string) string {
	if ot, ok := convo.OpenAIErrorType(t); ok {
		return ot
	}
	return "server_error"
}

// anthropicTypeOf maps an OpenAI error type to Anthropic's.
func anthropicTypeOf(t string) string {
	switch t {
	case "invalid_request_error", "authentication_error", "permission_error", "rate_limit_error", "not_found_error":
		return t
	}
	return "api_error"
}

// errorType is an error's type in Anthropic's words: its code when that is one (an Anthropic
// upstream's own type, kept by the reader as the code), else its type mapped.
func errorType(e *convo.Error) string {
	switch e.Code {
	case "invalid_request_error", "authentication_error", "billing_error", "permission_error", "not_found_error",
		"request_too_large", "rate_limit_error", "api_error", "overloaded_error", "timeout_error":
		return e.Code
	}
	return anthropicTypeOf(e.Type)
}

// usageState is the token counts an answer has reported so far, in Anthropic's terms: each
// usage object names some of them (message_start the input, message_delta the output and, on
// the current API, all of them again).
type usageState struct {
	in, out, cacheWrite, cacheRead int64
	has                            convo.UsageFields
}

// read takes the counts a usage object reports and returns the whole usage so far in the
// model's terms (Input counts the cached tokens too). A zero input or cache count after a
// non-zero one is a server that fills in what it does not know, not a correction.
func (u *usageState) read(raw string) convo.Usage {
	if convo.Kind(raw) == '{' {
		convo.FieldsOf(raw, func(k, v string) {
			if convo.Kind(v) != '0' {
				return
			}
			n := intOf(v)
			switch k {
			case "input_tokens":
				if n > 0 || u.in == 0 {
					u.in, u.has = n, u.has|convo.HasInput
				}
			case "output_tokens":
				u.out, u.has = n, u.has|convo.HasOutput
			case "cache_creation_input_tokens":
				if n > 0 || u.cacheWrite == 0 {
					u.cacheWrite, u.has = n, u.has|convo.HasCacheWrite
				}
			case "cache_read_input_tokens":
				if n > 0 || u.cacheRead == 0 {
					u.cacheRead, u.has = n, u.has|convo.HasCacheRead
				}
			}
		})
	}
	out := convo.Usage{Output: u.out, CacheRead: u.cacheRead, CacheWrite: u.cacheWrite, Has: u.has}
	if u.has&(convo.HasCacheRead|convo.HasCacheWrite) != 0 {
		out.Has |= convo.HasInput // the cached tokens are input tokens
	}
	out.Input = u.in + u.cacheWrite + u.cacheRead
	return out
}

// appendUsage writes usage in Anthropic's terms: input_tokens without the cached ones, which are
// named apart. The counts the upstream did not report are left out, output_tokens excepted
// (Anthropic's usage always has it).
func appendUsage(o *convo.Obj, u convo.Usage, withInput bool) {
	in := u.Input - u.CacheRead - u.CacheWrite
	if in < 0 {
		in = 0
	}
	if withInput || u.Has&convo.HasInput != 0 {
		o.Int("input_tokens", in)
	}
	if u.Has&convo.HasCacheWrite != 0 {
		o.Int("cache_creation_input_tokens", u.CacheWrite)
	}
	if u.Has&convo.HasCacheRead != 0 {
		o.Int("cache_read_input_tokens", u.CacheRead)
	}
	o.Int("output_tokens", u.Output)
}
