package chat

import (
	"strings"

	"switchyard/services/proxy/convo"
)

// StreamReader reads a chat completions stream: each chunk yields its events at once. Reasoning
// (reasoning_content, or reasoning) and content open a thinking or text block, closed when the
// other kind begins; each tool call (by its index: parallel calls interleave) opens a block of its
// own that stays open until the finish reason, so a late fragment of a call still finds it. The
// usage chunk that stream_options.include_usage adds comes after the finish reason: the stop
// reason is held until [DONE], which ends the answer. An error object in a chunk
// ({"error":…}, sent with status 200) ends it as an Error event.
type StreamReader struct {
	started, done bool
	next          int // index of the next block
	open          int // the open text or thinking block, -1 when none
	openKind      convo.BlockKind
	calls         []streamCall
	stop          convo.StopReason
}

// streamCall is a tool call of the stream: its chat index (or, for a server that gives none, a
// number of its own), its id, its block and whether the block is open.
type streamCall struct {
	index, block int
	id           string
	open         bool
}

// NewStreamReader starts reading a stream.
func NewStreamReader() *StreamReader { return &StreamReader{open: -1} }

// Read reads one SSE event and appends the events it implies to evs. Texts point into sse.
func (r *StreamReader) Read(evs []convo.Event, sse []byte) []convo.Event {
	if r.done {
		return evs
	}
	_, c, ok := convo.EventObject(sse)
	if !ok {
		if strings.HasPrefix(c, "[DONE]") {
			return r.finish(evs)
		}
		return evs // a comment, a keep-alive or something unreadable: nothing to say
	}
	var id, model, usage, errRaw, choices string
	convo.Pick(c, nil,
		convo.Field("id", &id),
		convo.Field("model", &model),
		convo.Field("usage", &usage),
		convo.Field("error", &errRaw),
		convo.Field("choices", &choices))
	if e, ok := errorAt(errRaw); ok {
		r.done = true
		return append(evs, convo.Event{Kind: convo.EvError, Err: e})
	}
	if !r.started {
		r.started = true
		evs = append(evs, convo.Event{Kind: convo.EvStart, ID: convo.StrAt(id), Model: convo.StrAt(model)})
	}
	if convo.Kind(choices) == '[' {
		convo.EachElement(choices, func(ch string) {
			if convo.Kind(ch) == '{' {
				evs = r.choice(evs, ch)
			}
		})
	}
	if u, ok := usageAt(usage); ok {
		evs = append(evs, convo.Event{Kind: convo.EvUsage, Usage: u})
	}
	return evs
}

// choice reads one choice of a chunk; only the first (index 0) is the model's answer.
func (r *StreamReader) choice(evs []convo.Event, ch string) []convo.Event {
	var index, finish string
	var m message
	convo.FieldsOf(ch, func(k, v string) {
		switch k {
		case "index":
			index = v
		case "finish_reason":
			finish = v
		case "delta":
			m.read(v)
		}
	})
	if convo.Kind(index) == '0' && intOf(index) != 0 {
		return evs // n > 1: the other answers are not carried
	}
	if th := m.thinking(); convo.Kind(th) == '"' && th != `""` {
		evs = r.text(evs, convo.BlockThinking, convo.TextAt(th))
	}
	if convo.Kind(m.content) == '"' && m.content != `""` {
		evs = r.text(evs, convo.BlockText, convo.TextAt(m.content))
	}
	if convo.Kind(m.refusal) == '"' && m.refusal != `""` {
		evs = r.text(evs, convo.BlockText, convo.TextAt(m.refusal))
	}
	if convo.Kind(m.calls) == '[' {
		convo.EachElement(m.calls, func(tc string) {
			if convo.Kind(tc) == '{' {
				evs = r.call(evs, readCall(tc))
			}
		})
	}
	if convo.Kind(finish) == '"' && finish != `""` {
		r.stop = stopOf(convo.StrAt(finish))
		evs = r.closeAll(evs)
	}
	return evs
}

// intOf is a JSON number as an int (0 when it is none, or not whole).
func intOf(raw string) int {
	n := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c < '0' || c > '9' || n > 1<<30 {
			if i == 0 && c == '-' {
				continue
			}
			return 0
		}
		n = n*10 + int(c-'0')
	}
	if len(raw) > 0 && raw[0] == '-' {
		return -n
	}
	return n
}

// text appends a text or thinking delta, opening its block when another kind is open.
func (r *StreamReader) text(evs []convo.Event, b convo.BlockKind, t convo.Text) []convo.Event {
	if r.open < 0 || r.openKind != b {
		evs = r.closeAll(evs)
		r.open, r.openKind = r.next, b
		r.next++
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: r.open, Block: b})
	}
	return append(evs, convo.Event{Kind: convo.EvDelta, Index: r.open, Block: b, Text: t})
}

// call appends a tool call fragment: the call's block opens when the call first appears (with
// its id and name), its arguments follow as deltas.
func (r *StreamReader) call(evs []convo.Event, c callFields) []convo.Event {
	id := convo.StrAt(c.id)
	at := -1
	switch {
	case convo.Kind(c.index) == '0':
		idx := intOf(c.index)
		for i := range r.calls {
			if r.calls[i].index == idx {
				at = i
				break
			}
		}
		if at < 0 {
			at = r.newCall(idx, id)
		}
	case id != "": // no index: a new id is a new call
		for i := range r.calls {
			if r.calls[i].id == id {
				at = i
				break
			}
		}
		if at < 0 {
			at = r.newCall(-1-len(r.calls), id)
		}
	case len(r.calls) > 0: // neither: the last call goes on
		at = len(r.calls) - 1
	default:
		at = r.newCall(-1, "")
	}
	sc := &r.calls[at]
	if sc.block < 0 { // new: open its block
		if r.open >= 0 {
			evs = append(evs, convo.Event{Kind: convo.EvBlockStop, Index: r.open, Block: r.openKind})
			r.open = -1
		}
		sc.block, sc.open = r.next, true
		r.next++
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: sc.block, Block: convo.BlockToolCall,
			ID: id, Name: convo.StrAt(c.name)})
	}
	if !sc.open {
		return evs // a fragment after the finish reason: its call is complete
	}
	if a := convo.TextAt(c.args); a != "" {
		evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: sc.block, Block: convo.BlockToolCall, Text: a})
	}
	return evs
}

// newCall adds a tool call whose block is not open yet; it returns its place in r.calls.
func (r *StreamReader) newCall(index int, id string) int {
	r.calls = append(r.calls, streamCall{index: index, block: -1, id: id})
	return len(r.calls) - 1
}

// closeAll closes the open blocks: the text or thinking block, then the open tool calls in order.
func (r *StreamReader) closeAll(evs []convo.Event) []convo.Event {
	if r.open >= 0 {
		evs = append(evs, convo.Event{Kind: convo.EvBlockStop, Index: r.open, Block: r.openKind})
		r.open = -1
	}
	for i := range r.calls {
		if c := &r.calls[i]; c.open {
			c.open = false
			evs = append(evs, convo.Event{Kind: convo.EvBlockStop, Index: c.block, Block: convo.BlockToolCall})
		}
	}
	return evs
}

// finish ends the answer at [DONE]: the open blocks, the stop reason (the end of the turn when
// the stream gave none) and End.
func (r *StreamReader) finish(evs []convo.Event) []convo.Event {
	r.done = true
	if !r.started {
		r.started = true
		evs = append(evs, convo.Event{Kind: convo.EvStart})
	}
	evs = r.closeAll(evs)
	stop := r.stop
	if stop == convo.StopUnset {
		stop = convo.StopEnd
	}
	return append(evs, convo.Event{Kind: convo.EvStop, Stop: stop}, convo.Event{Kind: convo.EvEnd})
}
