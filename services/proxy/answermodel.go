package proxy

import (
	"github.com/tidwall/gjson"

	"switchyard/services/proxy/convo"
)

// An Anthropic client's answers name the model the client asked for ("anthropic/claude-opus-4-5",
// a bare model or a combo), not the upstream's own id: Claude Code sends a thinking block of its
// history back only when the message it came with names the model the request asks for (a
// thinking block's signature belongs to the model that wrote it), so an answer naming
// "claude-opus-4-5" to a client that asked for "anthropic/claude-opus-4-5" loses every thinking
// block from the next request on, and the model's reasoning across tool calls with it. What the
// upstream served is in the X-Switchyard-Route header and the request log. A thinking block
// replayed to an upstream that cannot take it (a combo moved to another model, an account of
// another organisation) is dropped and the attempt repeated (replay.go).
//
// The other surfaces' answers keep the upstream's id (a dated snapshot tells its reader more):
// their clients send nothing back that depends on it.

// modelSplice finds where body names its model at path: the JSON string's bytes are
// body[start:end]. ok is false when path is not a string or already names model.
func modelSplice(body []byte, path, model string) (start, end int, ok bool) {
	v := jsonAt(body, path)
	if v.Type != gjson.String || v.Index <= 0 || v.Str == model {
		return 0, 0, false
	}
	return v.Index, v.Index + len(v.Raw), true
}

// namingModel is a whole Anthropic answer naming model: body as it is when it does already (or
// names none), else a copy in a pooled buffer (one write to the client, as for any answer; written
// around the old name in three, it would take the connection more system calls), and the buffer
// body was in goes back to its pool.
func namingModel(body []byte, pooled *[]byte, model string) ([]byte, *[]byte) {
	start, end, ok := modelSplice(body, "model", model)
	if !ok {
		return body, pooled
	}
	buf := answerBufs.Get().(*[]byte)
	out := append((*buf)[:0], body[:start]...)
	out = convo.AppendString(out, model)
	out = append(out, body[end:]...)
	*buf = out
	releaseAnswer(pooled)
	return out, buf
}

// appendNamingModel appends ev, an SSE event whose data names a model at path, naming model
// there instead. data is the event's data, a part of ev (an event with several data lines has
// its data joined elsewhere: it is appended as it is).
func appendNamingModel(dst, ev, data []byte, path, model string) []byte {
	off := cap(ev) - cap(data) // data's place in ev, when it is a part of ev
	if len(data) == 0 || off < 0 || off+len(data) > len(ev) || &ev[off] != &data[0] {
		return append(dst, ev...)
	}
	start, end, ok := modelSplice(data, path, model)
	if !ok {
		return append(dst, ev...)
	}
	dst = append(dst, ev[:off+start]...)
	dst = convo.AppendString(dst, model)
	return append(dst, ev[off+end:]...)
}
