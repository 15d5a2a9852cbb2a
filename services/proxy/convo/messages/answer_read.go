package messages

import (
	"switchyard/services/proxy/convo"
)

// Answers and streams of an Anthropic upstream, read into the model's events. A whole answer
// yields the events its stream would: Start, each block (BlockStart, Delta, Signature,
// BlockStop), Usage, Stop, End. Block indexes are Anthropic's own (a block the model has no kind
// for, a server tool's call or result, is left out and its index skipped).

// ReadAnswer reads an Anthropic message (a whole answer) and appends its events to evs. Texts
// point into body. A 200 answer that is an error object yields an Error event.
func ReadAnswer(evs []convo.Event, body []byte) ([]convo.Event, error) {
	s := convo.View(body) // every text read below is a part of it
	if !convo.Document(s, nil) {
		return evs, errNotAnswer
	}
	var typ, id, model, content, stop, stopSeq, usage, errRaw string
	convo.Pick(s, nil,
		convo.Field("type", &typ),
		convo.Field("id", &id),
		convo.Field("model", &model),
		convo.Field("content", &content),
		convo.Field("stop_reason", &stop),
		convo.Field("stop_sequence", &stopSeq),
		convo.Field("usage", &usage),
		convo.Field("error", &errRaw))
	if typ == `"error"` {
		return append(evs, errorEvent(errRaw)), nil
	}
	evs = append(evs, convo.Event{Kind: convo.EvStart, ID: convo.StrAt(id), Model: convo.StrAt(model)})
	if convo.Kind(content) == '[' {
		i := -1
		convo.EachElement(content, func(b string) {
			i++
			if convo.Kind(b) == '{' {
				evs = readBlock(evs, i, b)
			}
		})
	}
	if convo.Kind(usage) == '{' {
		var u usageState
		evs = append(evs, convo.Event{Kind: convo.EvUsage, Usage: u.read(usage)})
	}
	if convo.Kind(stop) == '"' {
		e := convo.Event{Kind: convo.EvStop, Stop: stopOf(convo.StrAt(stop)), StopSequence: convo.Str(stopSeq)}
		evs = append(evs, e)
	}
	return append(evs, convo.Event{Kind: convo.EvEnd}), nil
}

// blockAt reads the fields of a content block (a whole answer's, or one a stream starts), as
// they stand.
func blockAt(raw string) (typ, text, thinking, signature, data, id, name, input string) {
	convo.Pick(raw, nil,
		convo.Field("type", &typ),
		convo.Field("text", &text),
		convo.Field("thinking", &thinking),
		convo.Field("signature", &signature),
		convo.Field("data", &data),
		convo.Field("id", &id),
		convo.Field("name", &name),
		convo.Field("input", &input))
	return
}

// readBlock appends the events of content block i of a whole answer.
func readBlock(evs []convo.Event, i int, raw string) []convo.Event {
	typ, text, thinking, signature, data, id, name, input := blockAt(raw)
	switch convo.StrAt(typ) {
	case "text":
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockText},
			convo.Event{Kind: convo.EvDelta, Index: i, Text: convo.TextAt(text)})
	case "thinking":
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockThinking},
			convo.Event{Kind: convo.EvDelta, Index: i, Text: convo.TextAt(thinking)})
		if s := convo.TextAt(signature); s != "" {
			evs = append(evs, convo.Event{Kind: convo.EvSignature, Index: i, Text: s})
		}
	case "redacted_thinking":
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockRedactedThinking},
			convo.Event{Kind: convo.EvSignature, Index: i, Text: convo.TextAt(data)})
	case "tool_use":
		args := "{}"
		if convo.Kind(input) == '{' {
			args = input
		}
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockToolCall, ID: convo.StrAt(id), Name: convo.StrAt(name)},
			convo.Event{Kind: convo.EvDelta, Index: i, Text: convo.QuoteText(args)})
	default:
		return evs // server tool calls and results, and what else the model has no block for
	}
	return append(evs, convo.Event{Kind: convo.EvBlockStop, Index: i})
}

// errorEvent reads an Anthropic error object ({"type","message"}) as an Error event: its type
// in OpenAI's words, Anthropic's own kept as the code.
func errorEvent(raw string) convo.Event {
	e := &convo.Error{}
	if convo.Kind(raw) == '{' {
		convo.FieldsOf(raw, func(k, v string) {
			switch k {
			case "type":
				e.Code = convo.StrAt(v)
			case "message":
				e.Message = convo.StrAt(v)
			}
		})
	}
	e.Type = openAITypeOf(e.Code)
	return convo.Event{Kind: convo.EvError, Err: e}
}

// StreamReader reads an Anthropic messages stream, one SSE event at a time.
type StreamReader struct {
	usage usageState
	// skipped are the indexes of blocks the model has no kind for, whose deltas and stop are
	// left out with them.
	skipped []int
	done    bool
}

var _ convo.StreamReader = (*StreamReader)(nil)

// NewStreamReader starts reading a stream.
func NewStreamReader() *StreamReader { return &StreamReader{} }

// streamEvent is what the reader reads of an event's data, the values as they stand in its JSON.
type streamEvent struct {
	typ, index, message, block, usage, err        string
	deltaType, text, thinking, signature, partial string
	stop, stopSeq                                 string
}

// Read appends the events one SSE event of the stream implies; texts point into sse. Pings,
// comments and events that are not JSON objects imply none.
func (s *StreamReader) Read(evs []convo.Event, sse []byte) []convo.Event {
	if s.done {
		return evs
	}
	name, c, ok := convo.EventObject(sse)
	if !ok {
		return evs
	}
	var e streamEvent
	convo.FieldsOf(c, func(k, v string) {
		switch k {
		case "type":
			e.typ = v
		case "index":
			e.index = v
		case "message":
			e.message = v
		case "content_block":
			e.block = v
		case "usage":
			e.usage = v
		case "error":
			e.err = v
		case "delta":
			if convo.Kind(v) == '{' {
				convo.Pick(v, nil,
					convo.Field("type", &e.deltaType),
					convo.Field("text", &e.text),
					convo.Field("thinking", &e.thinking),
					convo.Field("signature", &e.signature),
					convo.Field("partial_json", &e.partial),
					convo.Field("stop_reason", &e.stop),
					convo.Field("stop_sequence", &e.stopSeq))
			}
		}
	})
	typ := convo.StrAt(e.typ)
	if typ == "" {
		typ = name
	}
	index := int(intOf(e.index))
	switch typ {
	case "message_start":
		var id, model, usage string
		if convo.Kind(e.message) == '{' {
			convo.Pick(e.message, nil,
				convo.Field("id", &id),
				convo.Field("model", &model),
				convo.Field("usage", &usage))
		}
		evs = append(evs, convo.Event{Kind: convo.EvStart, ID: convo.StrAt(id), Model: convo.StrAt(model)})
		if convo.Kind(usage) == '{' {
			evs = append(evs, convo.Event{Kind: convo.EvUsage, Usage: s.usage.read(usage)})
		}
	case "content_block_start":
		if convo.Kind(e.block) == '{' {
			evs = s.blockStart(evs, index, e.block)
		}
	case "content_block_delta":
		if s.skip(index) {
			return evs
		}
		switch convo.StrAt(e.deltaType) {
		case "text_delta":
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: index, Text: convo.TextAt(e.text)})
		case "thinking_delta":
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: index, Text: convo.TextAt(e.thinking)})
		case "input_json_delta":
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: index, Text: convo.TextAt(e.partial)})
		case "signature_delta":
			evs = append(evs, convo.Event{Kind: convo.EvSignature, Index: index, Text: convo.TextAt(e.signature)})
		}
	case "content_block_stop":
		if !s.skip(index) {
			evs = append(evs, convo.Event{Kind: convo.EvBlockStop, Index: index})
		}
	case "message_delta":
		if convo.Kind(e.usage) == '{' {
			evs = append(evs, convo.Event{Kind: convo.EvUsage, Usage: s.usage.read(e.usage)})
		}
		if convo.Kind(e.stop) == '"' {
			st := convo.Event{Kind: convo.EvStop, Stop: stopOf(convo.StrAt(e.stop)), StopSequence: convo.Str(e.stopSeq)}
			evs = append(evs, st)
		}
	case "message_stop":
		s.done = true
		evs = append(evs, convo.Event{Kind: convo.EvEnd})
	case "error":
		s.done = true
		evs = append(evs, errorEvent(e.err))
	}
	return evs
}

// blockStart reads content_block_start. Text and thinking blocks start empty in Anthropic's
// streams; whatever a server puts in them anyway is passed on, and so is a tool call's whole
// input given at its start (some compatible servers send no deltas).
func (s *StreamReader) blockStart(evs []convo.Event, index int, raw string) []convo.Event {
	typ, text, thinking, signature, data, id, name, input := blockAt(raw)
	switch convo.StrAt(typ) {
	case "text":
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: index, Block: convo.BlockText})
		if t := convo.TextAt(text); t != "" {
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: index, Text: t})
		}
	case "thinking":
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: index, Block: convo.BlockThinking})
		if t := convo.TextAt(thinking); t != "" {
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: index, Text: t})
		}
		if t := convo.TextAt(signature); t != "" {
			evs = append(evs, convo.Event{Kind: convo.EvSignature, Index: index, Text: t})
		}
	case "redacted_thinking":
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: index, Block: convo.BlockRedactedThinking},
			convo.Event{Kind: convo.EvSignature, Index: index, Text: convo.TextAt(data)})
	case "tool_use":
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: index, Block: convo.BlockToolCall, ID: convo.StrAt(id), Name: convo.StrAt(name)})
		if convo.Kind(input) == '{' && !emptyObject(input) {
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: index, Text: convo.QuoteText(input)})
		}
	default:
		if len(s.skipped) < 1024 { // a stream of nothing but unknown blocks is not kept without end
			s.skipped = append(s.skipped, index)
		}
	}
	return evs
}

// skip reports whether block index is one the reader leaves out.
func (s *StreamReader) skip(index int) bool {
	for _, i := range s.skipped {
		if i == index {
			return true
		}
	}
	return false
}

// emptyObject reports whether a valid object has no members.
func emptyObject(raw string) bool {
	for i := 1; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return raw[i] == '}'
		}
	}
	return true
}
