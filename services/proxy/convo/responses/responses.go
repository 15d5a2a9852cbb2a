// Package responses is the OpenAI Responses wire format (/v1/responses) in the conversation
// model: a reader and a writer for requests, whole answers and streams.
//
// As a client format it is what Codex CLI and the OpenAI SDKs' responses.create send: the writers
// answer them in the shape translate wrote until now, echo of the request fields included. As an
// upstream format it is the only one OpenAI serves some models on (gpt-5-codex, o1-pro, o3-pro,
// codex-mini) and the only one ChatGPT/Codex accounts speak: AppendRequest writes a stateless
// request (store false, reasoning carried as encrypted content), and the answer and stream
// readers turn what comes back into the model's events.
package responses

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"switchyard/services/proxy/convo"
)

// The stream reader and writer are the model's.
var (
	_ convo.StreamReader = (*StreamReader)(nil)
	_ convo.StreamWriter = (*StreamWriter)(nil)
)

// typeError is the error for a field whose value has the wrong type (the words translate gave).
func typeError(field, want string) error {
	return errors.New("not a Responses request: " + field + " must be " + want)
}

var (
	errNotObject = errors.New("not a Responses request: the body is not a JSON object")
	errInput     = errors.New("input must be a string or a list of items")
	errNotAnswer = errors.New("the answer is not a JSON object")
)

// reasoningModel reports whether a model name is one of OpenAI's reasoning models (o-series,
// gpt-5 except its chat variants, codex): they refuse temperature and top_p, and only they
// return encrypted reasoning (asking another model for it is an error).
func reasoningModel(model string) bool {
	m := strings.ToLower(model[strings.LastIndexByte(model, '/')+1:])
	switch {
	case strings.Contains(m, "codex"):
		return true
	case len(m) >= 2 && m[0] == 'o' && '1' <= m[1] && m[1] <= '9':
		return true
	case strings.HasPrefix(m, "gpt-5"):
		return !strings.Contains(m, "chat")
	}
	return false
}

// errorType is the OpenAI error type for a Responses error code (response.failed and error
// events carry a code, not a type).
func errorType(code string) string {
	switch code {
	case "rate_limit_exceeded":
		return "rate_limit_error"
	case "insufficient_quota":
		return "insufficient_quota"
	case "", "server_error", "vector_store_timeout":
		return "server_error"
	case "context_length_exceeded", "invalid_prompt", "empty_image_file", "failed_to_download_image":
		return "invalid_request_error"
	}
	if strings.HasPrefix(code, "invalid_") || strings.HasPrefix(code, "image_") || strings.HasPrefix(code, "unsupported_") {
		return "invalid_request_error"
	}
	return "server_error"
}

// responseID is the id of a Responses answer for the upstream's answer id: chat's chatcmpl-…
// and Anthropic's msg_… keep their tail (chatcmpl-9XYZ → resp_9XYZ, as translate wrote it),
// followed by the request's IDSuffix when it has one.
func responseID(r *convo.Request, id string) string {
	for _, p := range [...]string{"chatcmpl-", "chatcmpl_", "msg_", "resp_"} {
		if rest, ok := strings.CutPrefix(id, p); ok {
			id = rest
			break
		}
	}
	if id == "" {
		id = "switchyard"
	}
	if r != nil && r.IDSuffix != "" {
		return "resp_" + id + "_" + r.IDSuffix
	}
	return "resp_" + id
}

// callItemID is the id of the function_call item of a call: the call's id, with the request's
// IDSuffix when it has one (the call id itself is the upstream's, which the tool's result names).
func callItemID(r *convo.Request, callID string) string {
	if r != nil && r.IDSuffix != "" {
		return "fc_" + callID + "_" + r.IDSuffix
	}
	return "fc_" + callID
}

// appendFloat writes a number the way encoding/json does.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' { // e-09 → e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendJoined writes the concatenation of parts as one JSON string.
func appendJoined(dst []byte, parts ...string) []byte {
	dst = append(dst, '"')
	for _, p := range parts {
		n := len(dst)
		dst = convo.AppendString(dst, p) // "p": drop its quotes
		copy(dst[n:], dst[n+1:len(dst)-1])
		dst = dst[:len(dst)-2]
	}
	return append(dst, '"')
}

// lookup finds the namespace of a flat function name (convo.FlatName) among the client's tools:
// a format without namespaces called ns__fn, the client knows it as fn in namespace ns. A
// top-level function of that very name wins.
func lookup(r *convo.Request, name string) (string, string) {
	if r == nil || !strings.Contains(name, "__") {
		return name, ""
	}
	for i := range r.Tools {
		if t := &r.Tools[i]; t.Kind == convo.ToolFunction && t.Name == name {
			return name, ""
		}
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		if t.Kind != convo.ToolNamespace || !strings.HasPrefix(name, t.Name) {
			continue
		}
		for j := range t.Tools {
			if convo.FlatName(t.Name, t.Tools[j].Name) == name {
				return t.Tools[j].Name, t.Name
			}
		}
	}
	return name, ""
}

// appendToolChoice writes a tool choice in Responses' words. An unset choice is left out of a
// request and echoed in an answer as "auto", the default it stands for.
func appendToolChoice(o *convo.Obj, c convo.ToolChoice, echo bool) {
	switch c.Mode {
	case convo.ChoiceNone:
		o.Str("tool_choice", "none")
	case convo.ChoiceAny:
		o.Str("tool_choice", "required")
	case convo.ChoiceTool:
		o.Close(o.Open("tool_choice").Str("type", "function").Str("name", c.Name))
	case convo.ChoiceAuto:
		o.Str("tool_choice", "auto")
	default:
		if echo {
			o.Str("tool_choice", "auto")
		}
	}
}
