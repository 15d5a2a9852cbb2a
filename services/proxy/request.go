package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// ChatRequest is what the engine needs to know of a chat completions body; the body itself is
// forwarded untouched except for the model name.
type ChatRequest struct {
	Body   []byte
	Model  string
	Stream bool
}

// DecodeChatRequest validates the JSON body of a chat completions request and extracts the
// fields routing needs. It rejects malformed JSON, a non-object body and a missing model. The
// body is validated once and read with gjson instead of being decoded into Go values: only the
// model and the stream flag are needed, the rest is forwarded as it came.
func DecodeChatRequest(body []byte) (ChatRequest, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return ChatRequest{}, errors.New("request body is empty; send a JSON object")
	}
	if trimmed[0] != '{' {
		return ChatRequest{}, errors.New("request body must be a JSON object")
	}
	if !json.Valid(trimmed) {
		var v any
		return ChatRequest{}, errors.New("request body is not valid JSON: " + jsonErrorText(json.Unmarshal(trimmed, &v)))
	}
	m := gjson.GetBytes(trimmed, "model")
	switch {
	case !m.Exists():
		return ChatRequest{}, errors.New("missing required field: model")
	case m.Type != gjson.String:
		return ChatRequest{}, errors.New("field model must be a string")
	}
	model := strings.TrimSpace(m.String())
	if model == "" {
		return ChatRequest{}, errors.New("field model must not be empty")
	}
	req := ChatRequest{Body: trimmed, Model: model}
	if st := gjson.GetBytes(trimmed, "stream"); st.Exists() {
		switch st.Type {
		case gjson.True:
			req.Stream = true
		case gjson.False, gjson.Null:
		default:
			return ChatRequest{}, errors.New("field stream must be a boolean")
		}
	}
	return req, nil
}

// withModel returns body with its model field replaced by the upstream model name.
func withModel(body []byte, model string) ([]byte, error) {
	return sjson.SetBytes(body, "model", model)
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
