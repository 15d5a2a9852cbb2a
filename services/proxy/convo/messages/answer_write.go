package messages

import (
	"slices"

	"switchyard/services/proxy/convo"
)

// Answers and streams for an Anthropic client, written from the model's events: a message with
// its content blocks in order, stop reason and usage, or the same as message_start, content
// blocks started, filled and stopped one after the other, message_delta and message_stop.

// collected is a block of an answer being collected: its deltas in order (one, usually).
type collected struct {
	index     int
	stopped   bool
	kind      convo.BlockKind
	id, name  string
	text      convo.Text
	more      []convo.Text
	signature convo.Text
}

func (b *collected) add(t convo.Text) {
	if b.text == "" && b.more == nil {
		b.text = t
		return
	}
	b.more = append(b.more, t)
}

// size is the length of the block's text.
func (b *collected) size() int {
	n := len(b.text)
	for _, t := range b.more {
		n += len(t)
	}
	return n
}

// appendText writes the block's text as a JSON string.
func (b *collected) appendText(dst []byte) []byte {
	dst = append(append(dst, '"'), b.text...)
	for _, t := range b.more {
		dst = append(dst, t...)
	}
	return append(dst, '"')
}

// args is a tool call's arguments as a JSON object ({} when they are not one).
func (b *collected) args() []byte {
	t := b.text
	for _, m := range b.more {
		t += m
	}
	s := t.String()
	if len(s) == 0 || s[0] != '{' || !convo.ValidObject([]byte(s)) {
		return []byte("{}")
	}
	return []byte(s)
}

// AppendAnswer writes the events of a whole answer as an Anthropic message. r is the client's
// request: its model names the answer, as the client asked for it (the upstream's own id when r
// names none; Claude Code keeps a thinking block only with a message that names the model it
// asks for); created is unused, Anthropic
// answers carry no time. An answer that ended in an error is written as Anthropic's error object
// ({"type":"error","error":{…}}), one cut short by its token limit or a filter as a message that
// says so in its stop reason.
func AppendAnswer(dst []byte, r *convo.Request, evs []convo.Event, created int64) ([]byte, error) {
	var a convo.AnswerInfo
	var blocks []collected
	find := func(index int) *collected {
		for i := len(blocks) - 1; i >= 0; i-- {
			if blocks[i].index == index {
				return &blocks[i]
			}
		}
		return nil
	}
	for e := range a.Rest(evs) {
		switch e.Kind {
		case convo.EvBlockStart:
			// A start for an index already begun is the same block again; after its stop, a
			// new block that reuses the index.
			if b := find(e.Index); b == nil || b.stopped {
				blocks = append(blocks, collected{index: e.Index, kind: e.Block, id: e.ID, name: convo.FlatName(e.Namespace, e.Name)})
			}
		case convo.EvBlockStop:
			if b := find(e.Index); b != nil {
				b.stopped = true
			}
		case convo.EvDelta:
			if b := find(e.Index); b != nil {
				b.add(e.Text)
			}
		case convo.EvSignature:
			if b := find(e.Index); b != nil {
				b.signature = e.Text
			}
		case convo.EvError:
			s, ok := incompleteStop(e.Err)
			if !ok {
				return appendError(dst, e.Err), nil
			}
			a.Stop = s
		}
	}
	if r != nil && r.Model != "" {
		a.Model = r.Model
	}
	size := len(a.ID) + len(a.Model) + 384
	for i := range blocks {
		size += blocks[i].size() + len(blocks[i].signature) + len(blocks[i].id) + len(blocks[i].name) + 64
	}
	out := convo.NewObj(slices.Grow(dst, size)).Str("id", msgID(a.ID)).Str("type", "message").Str("role", "assistant").Str("model", a.Model)
	out.Key("content")
	out.B = append(out.B, '[')
	n := 0
	for i := range blocks {
		b := &blocks[i]
		switch {
		case b.kind == convo.BlockText && b.size() == 0, // Anthropic refuses empty text blocks when the client sends them back
			b.kind == convo.BlockThinking && b.size() == 0 && b.signature == "",
			b.kind == convo.BlockRedactedThinking && b.signature == "":
			continue
		}
		if n++; n > 1 {
			out.B = append(out.B, ',')
		}
		o := convo.NewObj(out.B)
		switch b.kind {
		case convo.BlockText:
			o.Str("type", "text").Key("text")
			o.B = b.appendText(o.B)
		case convo.BlockThinking:
			o.Str("type", "thinking").Key("thinking")
			o.B = b.appendText(o.B)
			o.Text("signature", b.signature)
		case convo.BlockRedactedThinking:
			o.Str("type", "redacted_thinking").Text("data", b.signature)
		case convo.BlockToolCall:
			o.Str("type", "tool_use").Str("id", b.id).Str("name", b.name).Raw("input", b.args())
		}
		out.B = o.End()
	}
	out.B = append(out.B, ']')
	out.Str("stop_reason", stopWord(a.Stop))
	out.StrElseNull("stop_sequence", a.StopSequence)
	u := out.Open("usage")
	appendUsage(u, a.Usage, true)
	out.Close(u)
	return out.End(), nil
}

// appendError writes an error in Anthropic's shape: an error answer's body, an error event's data.
func appendError(dst []byte, e *convo.Error) []byte {
	msg := "the upstream reported an error"
	typ := "api_error"
	if e != nil {
		if e.Message != "" {
			msg = e.Message
		}
		typ = errorType(e)
	}
	o := convo.NewObj(dst).Str("type", "error")
	o.Close(o.Open("error").Str("type", typ).Str("message", msg))
	return o.End()
}

// StreamWriter writes the events of an answer as an Anthropic messages stream. Anthropic's
// blocks come one after the other: a block that begins closes the one open. Text and thinking
// blocks begin with their first text (so an empty one is never sent, which the client could not
// send back), a redacted one with its data; message_start goes out with the first event that is
// not usage, so that it carries the input tokens a reader reports with the start.
type StreamWriter struct {
	model   string // the client's request's: it names the message (see AppendAnswer)
	id      string
	upModel string // the upstream's, when the request named none
	seen    bool   // the upstream's start was seen
	started bool   // message_start written
	ended   bool   // message_stop or an error written

	usage   convo.Usage
	stop    convo.StopReason
	stopSeq string

	blocks []streamBlock
	open   int // the client's index of the open block, -1 when none
	next   int
}

// streamBlock is a block of the answer: the event index, the client's index once started.
type streamBlock struct {
	index    int
	client   int
	stopped  bool
	kind     convo.BlockKind
	id, name string
}

var _ convo.StreamWriter = (*StreamWriter)(nil)

// NewStreamWriter starts a stream for the client whose request is r; created is unused.
func NewStreamWriter(r *convo.Request, created int64) *StreamWriter {
	w := &StreamWriter{open: -1}
	if r != nil {
		w.model = r.Model
	}
	return w
}

// event starts an Anthropic event with its type; endEvent ends it.
func event(dst []byte, typ string) *convo.Obj {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	return convo.NewObj(dst).Str("type", typ)
}

func endEvent(o *convo.Obj) []byte { return append(o.End(), '\n', '\n') }

// Write appends the client's events for one model event.
func (w *StreamWriter) Write(dst []byte, e *convo.Event) []byte {
	if w.ended {
		return dst
	}
	switch e.Kind {
	case convo.EvStart:
		if !w.started {
			w.seen, w.id, w.upModel = true, e.ID, e.Model
		}
	case convo.EvUsage:
		w.usage.Merge(e.Usage)
	case convo.EvBlockStart:
		dst = w.begin(dst)
		// A start for an index already begun is the same block again; after its stop, a new
		// block that reuses the index (find looks at the newest first).
		if b := w.find(e.Index); b != nil && !b.stopped {
			return dst
		}
		w.blocks = append(w.blocks, streamBlock{index: e.Index, client: -1, kind: e.Block, id: e.ID, name: convo.FlatName(e.Namespace, e.Name)})
		if e.Block == convo.BlockToolCall {
			dst = w.startBlock(dst, &w.blocks[len(w.blocks)-1], "")
		}
	case convo.EvDelta:
		dst = w.begin(dst)
		b := w.find(e.Index)
		if b == nil || b.kind == convo.BlockRedactedThinking {
			return dst
		}
		if b.client < 0 {
			if e.Text == "" {
				return dst
			}
			dst = w.startBlock(dst, b, "")
		}
		switch b.kind {
		case convo.BlockText:
			dst = delta(dst, b.client, "text_delta", "text", e.Text)
		case convo.BlockThinking:
			dst = delta(dst, b.client, "thinking_delta", "thinking", e.Text)
		case convo.BlockToolCall:
			dst = delta(dst, b.client, "input_json_delta", "partial_json", e.Text)
		}
	case convo.EvSignature:
		dst = w.begin(dst)
		b := w.find(e.Index)
		if b == nil || e.Text == "" {
			return dst
		}
		switch b.kind {
		case convo.BlockThinking:
			if b.client < 0 {
				dst = w.startBlock(dst, b, "")
			}
			dst = delta(dst, b.client, "signature_delta", "signature", e.Text)
		case convo.BlockRedactedThinking:
			if b.client < 0 {
				dst = w.startBlock(dst, b, e.Text)
			}
		}
	case convo.EvBlockStop:
		dst = w.begin(dst)
		if b := w.find(e.Index); b != nil {
			if b.client >= 0 && b.client == w.open {
				dst = w.closeBlock(dst)
			}
			b.stopped = true
		}
	case convo.EvStop:
		dst = w.begin(dst)
		w.stop, w.stopSeq = e.Stop, e.StopSequence
		dst = w.closeBlock(dst)
	case convo.EvEnd:
		dst = w.finish(dst)
	case convo.EvError:
		if s, ok := incompleteStop(e.Err); ok {
			w.stop = s
			return w.finish(dst)
		}
		if w.seen {
			dst = w.begin(dst) // the error of a message begun, as Anthropic sends it
		}
		w.ended = true
		dst = append(dst, "event: error\ndata: "...)
		dst = appendError(dst, e.Err)
		dst = append(dst, '\n', '\n')
	}
	return dst
}

// Abort ends a stream the gateway cuts short with Anthropic's error event; the gateway's code
// goes beside the standard fields.
func (w *StreamWriter) Abort(dst []byte, code, msg string) []byte {
	if w.ended {
		return dst
	}
	w.ended = true
	o := event(dst, "error")
	o.Close(o.Open("error").Str("type", "api_error").Str("message", msg).Str("code", code))
	return endEvent(o)
}

// find is the block of event index, nil when it never began.
func (w *StreamWriter) find(index int) *streamBlock {
	for i := len(w.blocks) - 1; i >= 0; i-- {
		if w.blocks[i].index == index {
			return &w.blocks[i]
		}
	}
	return nil
}

// begin sends message_start once, with the usage known so far.
func (w *StreamWriter) begin(dst []byte) []byte {
	if w.started {
		return dst
	}
	w.started = true
	model := w.model
	if model == "" {
		model = w.upModel
	}
	o := event(dst, "message_start")
	m := o.Open("message").Str("id", msgID(w.id)).Str("type", "message").Str("role", "assistant").Str("model", model).
		Raw("content", []byte("[]")).Raw("stop_reason", convo.Null).Raw("stop_sequence", convo.Null)
	u := m.Open("usage")
	appendUsage(u, w.usage, true)
	m.Close(u)
	o.Close(m)
	return endEvent(o)
}

// startBlock closes the open block and starts b (a redacted one with its data).
func (w *StreamWriter) startBlock(dst []byte, b *streamBlock, data convo.Text) []byte {
	dst = w.closeBlock(dst)
	b.client, w.open = w.next, w.next
	w.next++
	o := event(dst, "content_block_start").Int("index", int64(b.client))
	cb := o.Open("content_block")
	switch b.kind {
	case convo.BlockText:
		cb.Str("type", "text").Str("text", "")
	case convo.BlockThinking:
		cb.Str("type", "thinking").Str("thinking", "").Str("signature", "")
	case convo.BlockRedactedThinking:
		cb.Str("type", "redacted_thinking").Text("data", data)
	case convo.BlockToolCall:
		cb.Str("type", "tool_use").Str("id", b.id).Str("name", b.name).Raw("input", []byte("{}"))
	}
	o.Close(cb)
	return endEvent(o)
}

// closeBlock sends content_block_stop for the open block.
func (w *StreamWriter) closeBlock(dst []byte) []byte {
	if w.open < 0 {
		return dst
	}
	dst = endEvent(event(dst, "content_block_stop").Int("index", int64(w.open)))
	w.open = -1
	return dst
}

// delta writes a content_block_delta whose delta has a type and one text field.
func delta(dst []byte, index int, typ, field string, text convo.Text) []byte {
	o := event(dst, "content_block_delta").Int("index", int64(index))
	o.Close(o.Open("delta").Str("type", typ).Text(field, text))
	return endEvent(o)
}

// finish ends the message: the open block, message_delta with the stop reason and the usage,
// message_stop.
func (w *StreamWriter) finish(dst []byte) []byte {
	dst = w.begin(dst)
	dst = w.closeBlock(dst)
	w.ended = true
	o := event(dst, "message_delta")
	d := o.Open("delta").Str("stop_reason", stopWord(w.stop))
	d.StrElseNull("stop_sequence", w.stopSeq)
	o.Close(d)
	u := o.Open("usage")
	appendUsage(u, w.usage, false)
	o.Close(u)
	dst = endEvent(o)
	return append(dst, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}
