package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"switchyard/services/errs"
	"switchyard/services/proxy/convo"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Request is what the engine needs to know of a client's body (chat completions or messages);
// the body itself is forwarded untouched except for the model name, or translated.
type Request struct {
	Body   []byte
	Model  string
	Stream bool
	// Reasoning: the request asks the model to think first (see reasoningField).
	Reasoning bool
	// Raw is the body exactly as the client sent it, for forwarding it byte for byte.
	Raw []byte
	// StreamOptions is the body's stream_options value as it stands ("" when it has none).
	StreamOptions string
}

// DecodeRequest validates the JSON body of a chat completions or messages request and extracts
// the fields routing needs. It rejects malformed JSON, a non-object body and a missing model. The
// body is validated once and read with gjson instead of being decoded into Go values: only the
// model and the stream flag are needed, the rest is forwarded as it came.
func DecodeRequest(body []byte) (Request, *errs.Error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return Request{}, errInvalid("invalid_request", "proxy.body_empty")
	}
	if trimmed[0] != '{' {
		return Request{}, errInvalid("invalid_request", "proxy.body_not_object")
	}
	doc := convo.View(trimmed) // read in place: what is kept below is copied
	// The walk that validates the document finds a duplicate key and the values routing needs.
	var model, stream, options string
	reasoning := false
	valid, dup := topKeys(doc, func(k, v string) {
		switch k {
		case "model":
			model = v
		case "stream":
			stream = v
		case "stream_options":
			options = v
		default:
			reasoning = reasoning || reasoningField(k, v)
		}
	})
	if !valid {
		var v any
		return Request{}, errInvalid("invalid_request", "proxy.body_invalid_json", jsonErrorText(json.Unmarshal(trimmed, &v)))
	}
	if dup != "" {
		return Request{}, errInvalid("duplicate_key", "proxy.duplicate_key", dup)
	}
	switch {
	case model == "":
		return Request{}, errInvalid("invalid_request", "proxy.model_missing")
	case model[0] != '"':
		return Request{}, errInvalid("invalid_request", "proxy.model_not_string")
	}
	name := strings.TrimSpace(convo.StrAt(model))
	if name == "" {
		return Request{}, errInvalid("invalid_request", "proxy.model_empty")
	}
	// The name outlives the body (trace, log, metric labels) and the body's buffer is reused.
	req := Request{Body: trimmed, Model: strings.Clone(name), Raw: body, Reasoning: reasoning, StreamOptions: options}
	switch stream {
	case "", "false", "null":
	case "true":
		req.Stream = true
	default:
		return Request{}, errInvalid("invalid_request", "proxy.stream_not_bool")
	}
	return req, nil
}

// peekModel reads the model of a body without validating the rest; "" when there is none.
func peekModel(body []byte) string {
	m := gjson.GetBytes(body, "model")
	if m.Type != gjson.String {
		return ""
	}
	return strings.TrimSpace(m.String())
}

// peekStream reads whether a body asks for a stream (a true stream field) without validating
// the rest, for the log of a request refused before its body was read; count_tokens never
// streams.
func peekStream(body []byte, countTokens bool) bool {
	return !countTokens && gjsonBool(body, "stream")
}

// withModel returns body with its model field naming the upstream model. The body is validated
// and has one model key (DecodeRequest refuses duplicates), so the field is found and replaced
// where it stands: the body as it came when it already names that model, else one copy with the
// value spliced in. Nothing else of the body is parsed or rewritten.
func withModel(body []byte, model string) ([]byte, error) {
	return forUpstream(body, model, false)
}

// askUsage is what a stream request without stream_options gets at its end to have the
// upstream send the stream's usage.
const askUsage = `,"stream_options":{"include_usage":true}}`

// forUpstream is withModel that, with usage set, also ends the body with askUsage: for a body
// without stream_options (DecodeRequest says), in the same copy.
func forUpstream(body []byte, model string, usage bool) ([]byte, error) {
	m := gjson.GetBytes(body, "model")
	same := m.Type == gjson.String && m.Str == model
	if !same && (!m.Exists() || m.Index <= 0) {
		b, err := sjson.SetBytes(body, "model", model) // no model field: add one
		if err != nil || !usage {
			return b, err
		}
		return append(b[:len(b)-1], askUsage...), nil
	}
	if same && !usage {
		return body, nil
	}
	out := make([]byte, 0, len(body)+len(model)+len(askUsage))
	if same {
		out = append(out, body...)
	} else {
		start, end := m.Index, m.Index+len(m.Raw)
		out = append(out, body[:start]...)
		out = convo.AppendString(out, model)
		out = append(out, body[end:]...)
	}
	if usage {
		out = append(out[:len(out)-1], askUsage...) // the body is trimmed: it ends with its brace
	}
	return out, nil
}

func jsonErrorText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " (at byte " + strconv.FormatInt(se.Offset, 10) + ")"
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "field " + te.Field + " has the wrong type"
	}
	return err.Error()
}

// gjsonBool reads a boolean at a path; anything else is false.
func gjsonBool(body []byte, path string) bool {
	return jsonAt(body, path).Type == gjson.True
}

// jsonAt reads the value at path in b without copying it: its strings are b's bytes, valid while
// b is. gjson.GetBytes copies them; the checks run on every event of a stream read the value
// and let it go.
func jsonAt(b []byte, path string) gjson.Result { return gjson.Get(convo.View(b), path) }

// duplicateKey returns a key that appears twice at the top level of a JSON object, or inside
// its stream_options, "" when none does. The gateway reads model, stream and
// stream_options.include_usage from the first occurrence while upstreams take the last: a request
// that names one twice could be checked as one thing and run as another. Other nested objects
// are never read on the way through (a translated body is decoded and written anew, so the
// upstream sees what was read).
func duplicateKey(obj []byte) string {
	_, dup := topKeys(convo.View(obj), nil)
	return dup
}

// topKeys validates the object doc while it walks its members, calling f (when not nil) with
// each key and its value as it stands; it reports whether doc is valid and the first key met
// twice (see duplicateKey), copied.
func topKeys(doc string, f func(k, v string)) (valid bool, dup string) {
	var small [24]string
	seen := small[:0]
	valid = convo.Members(doc, func(k, v string) {
		if dup != "" {
			return
		}
		if slices.Contains(seen, k) {
			dup = strings.Clone(k)
			return
		}
		seen = append(seen, k)
		if k == "stream_options" && len(v) > 0 && v[0] == '{' {
			var inner [8]string
			in := inner[:0]
			convo.FieldsOf(v, func(ik, _ string) {
				if dup == "" && slices.Contains(in, ik) {
					dup = k + "." + ik
				}
				in = append(in, ik)
			})
			if dup != "" {
				return
			}
		}
		if f != nil {
			f(k, v)
		}
	})
	return valid, dup
}
