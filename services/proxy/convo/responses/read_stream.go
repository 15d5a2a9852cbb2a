package responses

import (
	"strconv"

	"switchyard/services/proxy/convo"
)

// StreamReader reads a Responses stream from an upstream: each SSE event yields the model's
// events it implies at once. Output items become blocks in the order they are added (parallel
// function calls each a block of their own); the text, reasoning summary and argument deltas
// become deltas of their block; a reasoning item's encrypted content, which arrives with the
// item done, becomes its signature; the terminal event gives usage and the stop reason.
type StreamReader struct {
	started bool
	done    bool
	items   []streamItem // by output index
	blocks  int          // blocks opened so far
	calls   bool         // a function was called
}

// streamItem is an output item of the stream and its block.
type streamItem struct {
	state   uint8 // itemNew, itemOpen, itemDone, itemSkip
	block   int
	kind    convo.BlockKind
	text    bool // a delta was read
	summary int  // the summary part of the last reasoning delta
}

const (
	itemNew uint8 = iota
	itemOpen
	itemDone
	itemSkip // not carried (a hosted tool's call)
)

// maxItems bounds the output index a stream may name (a stream names a handful).
const maxItems = 1 << 12

// NewStreamReader is a reader for one stream.
func NewStreamReader() *StreamReader { return &StreamReader{} }

// event is an SSE event's fields as they stand in its JSON.
type event struct {
	typ, response, item, output, delta, summary, code, message, param, err string
}

// Read reads one SSE event, appending the model's events to evs. Their texts point into sse.
func (r *StreamReader) Read(evs []convo.Event, sse []byte) []convo.Event {
	if r.done {
		return evs
	}
	name, s, ok := convo.EventObject(sse)
	if !ok {
		return evs
	}
	var e event
	convo.Pick(s, nil,
		convo.Field("type", &e.typ),
		convo.Field("response", &e.response),
		convo.Field("item", &e.item),
		convo.Field("output_index", &e.output),
		convo.Field("delta", &e.delta),
		convo.Field("summary_index", &e.summary),
		convo.Field("code", &e.code),
		convo.Field("message", &e.message),
		convo.Field("param", &e.param),
		convo.Field("error", &e.err))
	typ := name
	if convo.Kind(e.typ) == '"' {
		typ = convo.StrAt(e.typ)
	}
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		return r.begin(evs, e.response)
	case "response.output_item.added":
		evs = r.begin(evs, "")
		it := r.item(e.output)
		if it == nil || it.state != itemNew {
			return evs
		}
		x, k, ok := it.read(e.item)
		if !ok {
			return evs
		}
		evs = r.open(evs, it, k, &x)
		if k == convo.BlockToolCall && convo.Kind(x.args) == '"' && x.args != `""` {
			it.text = true
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: it.block, Text: convo.TextAt(x.args)})
		}
		return evs
	case "response.output_text.delta", "response.refusal.delta":
		return r.delta(evs, &e, convo.BlockText)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return r.delta(evs, &e, convo.BlockThinking)
	case "response.reasoning_summary_part.added":
		// A new part of the summary: a blank line apart from the one before.
		it := r.item(e.output)
		if n, ok := intAt(e.summary); ok && it != nil && it.state == itemOpen && it.text && int(n) != it.summary {
			it.summary = int(n)
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: it.block, Text: `\n\n`})
		}
		return evs
	case "response.function_call_arguments.delta":
		return r.delta(evs, &e, convo.BlockToolCall)
	case "response.output_item.done":
		it := r.item(e.output)
		if it == nil || it.state == itemDone || it.state == itemSkip {
			return evs
		}
		x, k, ok := it.read(e.item)
		if !ok {
			return evs
		}
		if it.state == itemNew {
			if k == convo.BlockText && !x.hasText() || k == convo.BlockThinking && !x.hasText() && convo.Kind(x.encrypted) != '"' {
				it.state = itemDone
				return evs
			}
			evs = r.open(evs, it, k, &x)
		}
		// The item's whole text when no delta brought it, and what only the done item
		// carries (encrypted reasoning).
		evs = x.events(evs, it.block, it.kind, !it.text)
		it.state = itemDone
		r.calls = r.calls || it.kind == convo.BlockToolCall
		return append(evs, convo.Event{Kind: convo.EvBlockStop, Index: it.block})
	case "response.completed", "response.incomplete":
		evs = r.begin(evs, e.response)
		evs = r.closeOpen(evs)
		a := readResponse(e.response)
		if r.blocks == 0 && convo.Kind(a.output) == '[' { // a stream that sent its items only at the end
			convo.EachElement(a.output, func(it string) {
				evs, r.blocks, r.calls = itemEvents(evs, it, r.blocks, r.calls)
			})
		}
		r.done = true
		status := "completed"
		if typ == "response.incomplete" {
			status = "incomplete"
		}
		a.err = "" // an answer that completed has no error, whatever its object says
		return a.end(evs, status, r.calls)
	case "response.failed":
		evs = r.begin(evs, e.response)
		r.done = true
		return append(evs, convo.Event{Kind: convo.EvError, Err: readError(readResponse(e.response).err)})
	case "error":
		r.done = true
		if convo.Kind(e.err) == '{' { // the error object nested, as some servers send it
			return append(evs, convo.Event{Kind: convo.EvError, Err: readError(e.err)})
		}
		code := strOf(e.code)
		if convo.Kind(e.code) == '0' {
			code = e.code
		}
		return append(evs, convo.Event{Kind: convo.EvError, Err: newError("", code, strOf(e.message), strOf(e.param))})
	}
	return evs
}

// begin emits Start once, with the answer's id and model when the event carries them.
func (r *StreamReader) begin(evs []convo.Event, response string) []convo.Event {
	if r.started {
		return evs
	}
	r.started = true
	a := readResponse(response)
	return append(evs, convo.Event{Kind: convo.EvStart, ID: strOf(a.id), Model: strOf(a.model)})
}

// item is the output item of an output index, nil when the index is not one.
func (r *StreamReader) item(raw string) *streamItem {
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 || n >= maxItems {
		return nil
	}
	for len(r.items) <= n {
		r.items = append(r.items, streamItem{})
	}
	return &r.items[n]
}

// read reads the item an event carries and the block it makes; an item of a kind that makes
// none (a hosted tool's call) is skipped from then on, and ok is false.
func (it *streamItem) read(raw string) (x item, k convo.BlockKind, ok bool) {
	x = readItem(raw)
	if k, ok = blockOf(x.typ); !ok {
		it.state = itemSkip
	}
	return x, k, ok
}

// open starts an item's block.
func (r *StreamReader) open(evs []convo.Event, it *streamItem, k convo.BlockKind, x *item) []convo.Event {
	it.state, it.block, it.kind = itemOpen, r.blocks, k
	r.blocks++
	return append(evs, x.start(it.block, k))
}

// delta appends a delta to the block of the event's item, opening it when the stream never added
// the item.
func (r *StreamReader) delta(evs []convo.Event, e *event, k convo.BlockKind) []convo.Event {
	it := r.item(e.output)
	if it == nil || it.state == itemDone || it.state == itemSkip {
		return evs
	}
	if it.state == itemNew {
		evs = r.begin(evs, "")
		evs = r.open(evs, it, k, &item{})
	}
	t := convo.TextAt(e.delta)
	if convo.Kind(e.delta) != '"' || t == "" {
		return evs
	}
	if it.kind == convo.BlockThinking && convo.Kind(e.summary) == '0' {
		if n, ok := intAt(e.summary); ok && int(n) != it.summary {
			if it.text {
				evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: it.block, Text: `\n\n`})
			}
			it.summary = int(n)
		}
	}
	it.text = true
	return append(evs, convo.Event{Kind: convo.EvDelta, Index: it.block, Text: t})
}

// closeOpen stops the blocks whose items the stream did not finish.
func (r *StreamReader) closeOpen(evs []convo.Event) []convo.Event {
	for i := range r.items {
		if it := &r.items[i]; it.state == itemOpen {
			it.state = itemDone
			r.calls = r.calls || it.kind == convo.BlockToolCall
			evs = append(evs, convo.Event{Kind: convo.EvBlockStop, Index: it.block})
		}
	}
	return evs
}
