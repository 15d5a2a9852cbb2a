package responses

import (
	"slices"
	"strconv"
	"strings"

	"switchyard/services/proxy/convo"
)

// StreamWriter writes an answer's events as the Responses event sequence: response.created and
// response.in_progress first; each output item added, filled and done (reasoning summary,
// message text, function call arguments); response.completed (or response.incomplete, or
// response.failed) with the whole answer and its usage last. Every event carries the next
// sequence number. Each event is written at once; the writer keeps only what the done events
// and the final answer repeat (the texts of the items).
type StreamWriter struct {
	r       *convo.Request
	created int64
	include bool   // the client asked for encrypted reasoning
	keeping bool   // the answer's items are kept (the request has an IDSuffix): see Items
	echo    []byte // the request's echoed fields, written once

	seq       int64
	started   bool
	done      bool
	completed bool // the answer ended in response.completed or response.incomplete
	id        string
	base      string
	model     string

	blocks []*streamBlock // the answer's blocks not yet stopped
	next   int            // the output index of the next item

	// The finished items, in one buffer, and where each one is (items finish in their order
	// unless parallel tool calls interleave).
	items []byte
	spans []span

	stop  convo.StopReason
	usage convo.Usage
}

// span is a finished item: its output index, its id and its bytes in StreamWriter.items; sig
// is a reasoning item's signature the client was not shown, for the item as kept.
type span struct {
	out, start, end int
	id, sig         string
}

// streamBlock is a block of the answer and its output item.
type streamBlock struct {
	index int
	kind  convo.BlockKind
	open  bool // its item was added
	part  bool // a reasoning item's summary part was added
	out   int
	id    string

	callID, name, ns string
	text             []byte // the deltas so far, as Text
	sig              string
}

// NewStreamWriter is a writer for the client that sent r; created is the answer's timestamp.
func NewStreamWriter(r *convo.Request, created int64) *StreamWriter {
	return &StreamWriter{r: r, created: created, include: encrypted(r), keeping: r != nil && r.IDSuffix != ""}
}

// event starts an event of a type: its name line and the opening of its data, with type and
// sequence number; the caller adds its fields and ends it with finish.
func (s *StreamWriter) event(dst []byte, typ string) *convo.Obj {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	o := convo.NewObj(dst).Str("type", typ).Int("sequence_number", s.seq)
	s.seq++
	return o
}

func finish(o *convo.Obj) []byte { return append(o.End(), '\n', '\n') }

// Write appends the client's events for one event of the answer.
func (s *StreamWriter) Write(dst []byte, e *convo.Event) []byte {
	if s.done {
		return dst
	}
	switch e.Kind {
	case convo.EvStart:
		return s.start(dst, e.ID, e.Model)
	case convo.EvBlockStart:
		dst = s.start(dst, "", "")
		b := &streamBlock{index: e.Index, kind: e.Block, callID: e.ID, name: e.Name, ns: e.Namespace}
		s.blocks = append(s.blocks, b)
		if b.kind == convo.BlockToolCall { // a call's item is added when it appears
			dst = s.openItem(dst, b)
		}
		return dst
	case convo.EvDelta:
		b := s.find(e.Index)
		if b == nil || e.Text == "" {
			return dst
		}
		if !b.open {
			dst = s.openItem(dst, b)
		}
		b.text = append(b.text, e.Text...)
		idx := int64(b.out)
		switch b.kind {
		case convo.BlockText:
			return finish(s.event(dst, "response.output_text.delta").Str("item_id", b.id).Int("output_index", idx).
				Int("content_index", 0).Text("delta", e.Text).Raw("logprobs", []byte("[]")))
		case convo.BlockThinking:
			if !b.part {
				dst = s.summaryPart(dst, b)
			}
			return finish(s.event(dst, "response.reasoning_summary_text.delta").Str("item_id", b.id).
				Int("output_index", idx).Int("summary_index", 0).Text("delta", e.Text))
		case convo.BlockToolCall:
			return finish(s.event(dst, "response.function_call_arguments.delta").Str("item_id", b.id).
				Int("output_index", idx).Text("delta", e.Text))
		}
		return dst
	case convo.EvSignature:
		b := s.find(e.Index)
		if b == nil || b.kind == convo.BlockText || b.kind == convo.BlockToolCall || !s.include && !s.keeping {
			return dst
		}
		b.sig = strings.Clone(string(e.Text)) // when not shown, for the item as kept
		if !b.open && s.include {             // reasoning that is only encrypted content is an item all the same
			dst = s.openItem(dst, b)
		}
		return dst
	case convo.EvBlockStop:
		for i, b := range s.blocks {
			if b.index == e.Index {
				s.blocks = slices.Delete(s.blocks, i, i+1)
				return s.closeItem(dst, b)
			}
		}
		return dst
	case convo.EvUsage:
		s.usage.Merge(e.Usage)
		return dst
	case convo.EvStop:
		s.stop = e.Stop
		return s.closeAll(dst)
	case convo.EvEnd:
		return s.complete(dst)
	case convo.EvError:
		return s.fail(dst, e.Err)
	}
	return dst
}

// find is the open block of an index.
func (s *StreamWriter) find(index int) *streamBlock {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		if s.blocks[i].index == index {
			return s.blocks[i]
		}
	}
	return nil
}

// Abort is the event that ends a stream the upstream left unfinished, or the gateway ended: an
// error event with code and message, in sequence.
func (s *StreamWriter) Abort(dst []byte, code, msg string) []byte {
	if s.done {
		return dst
	}
	s.done = true
	return finish(s.event(dst, "error").Str("code", code).Str("message", msg).Raw("param", convo.Null))
}

// start sends response.created and response.in_progress once; both carry the answer so far.
func (s *StreamWriter) start(dst []byte, id, model string) []byte {
	if s.started {
		return dst
	}
	s.started, s.id, s.model = true, responseID(s.r, id), model
	s.base = strings.TrimPrefix(s.id, "resp_")
	s.echo = appendEcho(nil, s.r)
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		o := s.event(dst, typ)
		o.Key("response")
		o.B = responseTail(responseHead(o.B, s.id, s.created, "in_progress", s.model), nil, nil, nil, s.echo)
		dst = finish(o)
	}
	return dst
}

// openItem adds the output item of a block. Texts and reasoning do not interleave: an item of
// theirs still open is done first.
func (s *StreamWriter) openItem(dst []byte, b *streamBlock) []byte {
	for i := 0; i < len(s.blocks); i++ {
		if o := s.blocks[i]; o != b && o.open && o.kind != convo.BlockToolCall {
			dst = s.closeItem(dst, o)
			o.open = false
			o.text = o.text[:0]
			o.part = false
			o.sig = ""
		}
	}
	b.open, b.out = true, s.next
	s.next++
	idx := int64(b.out)
	switch b.kind {
	case convo.BlockText:
		b.id = "msg_" + s.base + "_" + strconv.Itoa(b.out)
		o := s.event(dst, "response.output_item.added").Int("output_index", idx)
		o.Key("item")
		o.B = convo.NewObj(o.B).Str("type", "message").Str("id", b.id).Str("status", "in_progress").
			Str("role", "assistant").Raw("content", []byte("[]")).End()
		dst = finish(o)
		return finish(s.event(dst, "response.content_part.added").Str("item_id", b.id).Int("output_index", idx).
			Int("content_index", 0).Raw("part", []byte(`{"type":"output_text","text":"","annotations":[]}`)))
	case convo.BlockThinking, convo.BlockRedactedThinking:
		b.id = "rs_" + s.base + "_" + strconv.Itoa(b.out)
		o := s.event(dst, "response.output_item.added").Int("output_index", idx)
		o.Key("item")
		o.B = appendReasoningItem(o.B, b.id, "")
		return finish(o)
	case convo.BlockToolCall:
		if b.callID == "" {
			b.callID = convo.CallID(s.base, b.index)
		}
		if b.ns == "" {
			b.name, b.ns = lookup(s.r, b.name)
		}
		b.id = callItemID(s.r, b.callID)
		o := s.event(dst, "response.output_item.added").Int("output_index", idx)
		o.Key("item")
		o.B = appendCallItem(o.B, b.id, b.callID, b.name, b.ns, "in_progress")
		return finish(o)
	}
	return dst
}

// summaryPart adds a reasoning item's summary part, before its first text.
func (s *StreamWriter) summaryPart(dst []byte, b *streamBlock) []byte {
	b.part = true
	return finish(s.event(dst, "response.reasoning_summary_part.added").Str("item_id", b.id).
		Int("output_index", int64(b.out)).Int("summary_index", 0).Raw("part", []byte(`{"type":"summary_text","text":""}`)))
}

// closeItem finishes a block's item with its done events.
func (s *StreamWriter) closeItem(dst []byte, b *streamBlock) []byte {
	if !b.open {
		return dst
	}
	text := convo.Text(convo.View(b.text)) // the deltas as they came: written three times
	idx := int64(b.out)
	start, keptSig := len(s.items), ""
	switch b.kind {
	case convo.BlockText:
		dst = finish(s.event(dst, "response.output_text.done").Str("item_id", b.id).Int("output_index", idx).
			Int("content_index", 0).Text("text", text).Raw("logprobs", []byte("[]")))
		o := s.event(dst, "response.content_part.done").Str("item_id", b.id).Int("output_index", idx).Int("content_index", 0)
		o.Key("part")
		o.B = convo.NewObj(o.B).Str("type", "output_text").Text("text", text).Raw("annotations", []byte("[]")).End()
		dst = finish(o)
		s.items = appendMessageItem(s.items, b.id, "completed", text)
	case convo.BlockThinking, convo.BlockRedactedThinking:
		if b.part {
			dst = finish(s.event(dst, "response.reasoning_summary_text.done").Str("item_id", b.id).Int("output_index", idx).
				Int("summary_index", 0).Text("text", text))
			o := s.event(dst, "response.reasoning_summary_part.done").Str("item_id", b.id).Int("output_index", idx).
				Int("summary_index", 0)
			o.Key("part")
			o.B = convo.NewObj(o.B).Str("type", "summary_text").Text("text", text).End()
			dst = finish(o)
		}
		if s.include {
			s.items = appendReasoningItem(s.items, b.id, convo.Text(b.sig), text)
		} else {
			s.items = appendReasoningItem(s.items, b.id, "", text)
			keptSig = b.sig
		}
	case convo.BlockToolCall:
		dst = finish(s.event(dst, "response.function_call_arguments.done").Str("item_id", b.id).Int("output_index", idx).
			Text("arguments", text))
		s.items = appendCallItem(s.items, b.id, b.callID, b.name, b.ns, "completed", text)
	}
	s.spans = append(s.spans, span{out: b.out, start: start, end: len(s.items), id: b.id, sig: keptSig})
	o := s.event(dst, "response.output_item.done").Int("output_index", idx)
	o.Key("item")
	o.B = append(o.B, s.items[start:]...)
	return finish(o)
}

// closeAll finishes every open item, in output order.
func (s *StreamWriter) closeAll(dst []byte) []byte {
	slices.SortStableFunc(s.blocks, func(a, b *streamBlock) int { return a.out - b.out })
	for _, b := range s.blocks {
		dst = s.closeItem(dst, b)
	}
	s.blocks = s.blocks[:0]
	return dst
}

// appendItems writes the finished items in output order, comma-separated.
func (s *StreamWriter) appendItems(dst []byte) []byte {
	slices.SortStableFunc(s.spans, func(a, b span) int { return a.out - b.out })
	for i, sp := range s.spans {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, s.items[sp.start:sp.end]...)
	}
	return dst
}

// Items hands each output item of a completed answer (response.completed or
// response.incomplete written) to keep, in output order, with its id, as it is kept for the
// client's later references by id, and last the answer's own id with a nil item. For a request
// with an IDSuffix, a reasoning item carries the
// thinking's signature as its encrypted content also when the client did not ask for it (see
// AppendAnswerKeeping). An answer that failed or is not complete has none. The bytes are the
// writer's: to be copied.
func (s *StreamWriter) Items(keep func(id string, item []byte)) {
	if !s.done || !s.completed {
		return
	}
	var kept []byte
	for _, sp := range s.spans {
		item := s.items[sp.start:sp.end]
		if sp.sig != "" {
			kept = withEncrypted(kept[:0], item, sp.sig)
			item = kept
		}
		keep(sp.id, item)
	}
	keep(s.id, nil)
}

// complete ends the answer: response.completed, or response.incomplete when the answer was cut.
func (s *StreamWriter) complete(dst []byte) []byte {
	dst = s.start(dst, "", "")
	dst = s.closeAll(dst)
	status, details := statusOf(s.stop)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	o := s.event(dst, typ)
	o.Key("response")
	o.B = s.appendItems(responseHead(o.B, s.id, s.created, status, s.model))
	u := &s.usage
	if s.usage.Has == 0 {
		u = nil
	}
	o.B = responseTail(o.B, u, nil, details, s.echo)
	s.done, s.completed = true, true
	return finish(o)
}

// fail ends the answer with the upstream's error: response.failed, with the items finished so
// far.
func (s *StreamWriter) fail(dst []byte, e *convo.Error) []byte {
	dst = s.start(dst, "", "")
	if e == nil {
		e = &convo.Error{}
	}
	o := s.event(dst, "response.failed")
	o.Key("response")
	o.B = s.appendItems(responseHead(o.B, s.id, s.created, "failed", s.model))
	o.B = responseTail(o.B, nil, appendError(nil, e), nil, s.echo)
	s.done = true
	return finish(o)
}
