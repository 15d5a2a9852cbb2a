// Package translate converts requests, answers and streams between the OpenAI chat completions
// format and the Anthropic messages format, so any client reaches any provider. Everything here
// is pure: bytes in, bytes out. Fields one side has and the other lacks are dropped and named in
// the result (the engine logs them at debug); they are never an error.
//
// Streams are translated event by event: each upstream SSE event yields zero or more client
// events at once, nothing is held back beyond the event being translated.
package translate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Request is a translated request body and the source fields it could not carry.
type Request struct {
	Body    []byte
	Dropped []string
}

// Target says what the upstream accepts beyond its wire format.
type Target struct {
	// MaxCompletionTokens sends max_completion_tokens instead of max_tokens (OpenAI's own API,
	// whose reasoning models refuse max_tokens).
	MaxCompletionTokens bool
	// DefaultMaxTokens is max_tokens for Anthropic when the client gave none (Anthropic requires
	// it). 0 means 4096.
	DefaultMaxTokens int
}

const defaultMaxTokens = 4096

// dropper collects the names of fields that were not carried over.
type dropper struct{ names []string }

func (d *dropper) drop(name string) {
	for _, n := range d.names {
		if n == name {
			return
		}
	}
	d.names = append(d.names, name)
}

// dropUnknownKeys names every top-level key of the JSON object body that is not in known. It
// reads the keys only: decoding the whole body into a map would copy every value of a long
// conversation once more.
func (d *dropper) dropUnknownKeys(body []byte, known ...string) {
	gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
		if !slices.Contains(known, k.String()) {
			d.drop(k.String())
		}
		return true
	})
}

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// asString decodes a raw JSON string; ok is false for any other value.
func asString(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(t, &s) != nil {
		return "", false
	}
	return s, true
}

// parseDataURL splits "data:image/png;base64,AAAA" into its media type and payload.
func parseDataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mt, enc, _ := strings.Cut(meta, ";")
	if enc != "base64" || mt == "" {
		return "", "", false
	}
	return mt, payload, true
}

// objectOrEmpty returns raw when it is a JSON object, else {} (tool inputs must be objects).
func objectOrEmpty(raw []byte) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return json.RawMessage(t)
	}
	return json.RawMessage(`{}`)
}

// rawJSON returns raw when it is valid JSON, else the JSON string of its text, so a value copied
// from one document into another can never make the result invalid.
func rawJSON(raw []byte) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && json.Valid(t) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(string(raw))
	return b
}
