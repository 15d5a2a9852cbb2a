package chat

import (
	"strings"

	"switchyard/services/proxy/convo"
)

// StreamWriter writes the model's events as chat completion chunks, each at once: the first
// chunk says the assistant's role, texts and thinking follow as content and reasoning_content
// deltas, each tool call as a tool_calls delta with its index, id and name and then its argument
// fragments; the finish reason has a chunk of its own, the usage chunk follows when the client
// asked for it (stream_options.include_usage), [DONE] ends the stream. An error is OpenAI's
// error chunk ({"error":…}); an answer the upstream cut short at its token limit or by a content
// filter (Responses' response.incomplete) ends as chat says that: finish_reason length or
// content_filter.
type StreamWriter struct {
	created      int64
	includeUsage bool

	id      string
	model   string
	head    []byte // every chunk's data up to its delta: id, object, created, model, choices
	started bool
	done    bool
	usage   convo.Usage
	blocks  []writerBlock
	calls   int // tool calls so far
}

// writerBlock is a block of the answer: its index, its kind and, for a tool call, its index among
// the calls.
type writerBlock struct {
	index int
	kind  convo.BlockKind
	call  int
}

// NewStreamWriter starts a stream for the client's request r; created is every chunk's
// timestamp.
func NewStreamWriter(r *convo.Request, created int64) *StreamWriter {
	w := &StreamWriter{created: created}
	if r != nil {
		w.includeUsage = r.IncludeUsage
	}
	return w
}

// start writes the first chunk, once: the assistant's role and an empty content.
func (w *StreamWriter) start(dst []byte, id, model string) []byte {
	if w.started {
		return dst
	}
	w.started = true
	w.id, w.model = chatID(id), model
	o := convo.NewObj(append(w.head[:0], "data: "...)).Str("id", w.id).Str("object", "chat.completion.chunk").
		Int("created", w.created).Str("model", model)
	o.Key("choices")
	w.head = append(o.B, `[{"index":0,"delta":`...)
	return w.chunk(dst, []byte(`{"role":"assistant","content":""}`), "")
}

// chunk writes a chunk whose delta is the JSON object delta, with its finish reason ("" for
// null).
func (w *StreamWriter) chunk(dst, delta []byte, finish string) []byte {
	dst = append(append(dst, w.head...), delta...)
	if finish == "" {
		dst = append(dst, `,"finish_reason":null}]}`...)
	} else {
		dst = append(dst, `,"finish_reason":"`...)
		dst = append(append(dst, finish...), `"}]}`...)
	}
	return append(dst, '\n', '\n')
}

// open starts a chunk and its delta object; end closes both (finish_reason null).
func (w *StreamWriter) open(dst []byte) *convo.Obj { return convo.NewObj(append(dst, w.head...)) }

func (w *StreamWriter) end(d *convo.Obj) []byte {
	return append(d.End(), `,"finish_reason":null}]}`+"\n\n"...)
}

// block is the block of index i, nil when it was never started.
func (w *StreamWriter) block(i int) *writerBlock {
	for j := range w.blocks {
		if w.blocks[j].index == i {
			return &w.blocks[j]
		}
	}
	return nil
}

// Write appends the chunks for one event to dst.
func (w *StreamWriter) Write(dst []byte, e *convo.Event) []byte {
	if w.done {
		return dst
	}
	switch e.Kind {
	case convo.EvStart:
		return w.start(dst, e.ID, e.Model)
	case convo.EvError:
		if cutShort(e.Err) != "" {
			dst = w.start(dst, "", "")
		}
	default:
		dst = w.start(dst, "", "") // an answer whose start was not seen still gets its first chunk
	}
	switch e.Kind {
	case convo.EvBlockStart:
		b := writerBlock{index: e.Index, kind: e.Block, call: -1}
		if e.Block == convo.BlockToolCall {
			b.call = w.calls
			w.calls++
		}
		if old := w.block(e.Index); old != nil {
			*old = b
		} else {
			w.blocks = append(w.blocks, b)
		}
		if e.Block != convo.BlockToolCall {
			return dst // a text's first delta says it
		}
		d := w.open(dst)
		d.Key("tool_calls")
		c := convo.NewObj(append(d.B, '[')).Int("index", int64(b.call))
		id := e.ID
		if id == "" { // chat clients answer a call by its id: one it can use
			id = convo.CallID(strings.TrimPrefix(w.id, "chatcmpl-"), b.call)
		}
		c.Str("id", id).Str("type", "function")
		c.Close(c.Open("function").Str("name", convo.FlatName(e.Namespace, e.Name)).Str("arguments", ""))
		d.B = append(c.End(), ']')
		return w.end(d)
	case convo.EvDelta:
		if e.Text == "" {
			return dst
		}
		b := w.block(e.Index)
		k := e.Block
		if b != nil {
			k = b.kind
		}
		switch k {
		case convo.BlockText:
			return w.end(w.open(dst).Text("content", e.Text))
		case convo.BlockThinking:
			return w.end(w.open(dst).Text("reasoning_content", e.Text))
		case convo.BlockToolCall:
			if b == nil {
				return dst // arguments of a call that never started: no index to give them
			}
			d := w.open(dst)
			d.Key("tool_calls")
			c := convo.NewObj(append(d.B, '[')).Int("index", int64(b.call))
			c.Close(c.Open("function").Text("arguments", e.Text))
			d.B = append(c.End(), ']')
			return w.end(d)
		}
		return dst // redacted thinking: nothing a chat client can read
	case convo.EvUsage:
		w.usage.Merge(e.Usage)
	case convo.EvStop:
		return w.chunk(dst, []byte("{}"), finishOf(e.Stop))
	case convo.EvEnd:
		return w.finish(dst)
	case convo.EvError:
		if finish := cutShort(e.Err); finish != "" {
			return w.finish(w.chunk(dst, []byte("{}"), finish))
		}
		w.done = true
		return append(appendError(append(dst, "data: "...), e.Err), '\n', '\n')
	}
	return dst
}

// finish ends the stream: the usage chunk when the client asked for it, and [DONE].
func (w *StreamWriter) finish(dst []byte) []byte {
	w.done = true
	if w.includeUsage {
		o := convo.NewObj(append(dst, "data: "...)).Str("id", w.id).Str("object", "chat.completion.chunk").
			Int("created", w.created)
		o.Str("model", w.model).Raw("choices", []byte("[]"))
		o.Key("usage")
		o.B = appendUsage(o.B, w.usage)
		dst = append(o.End(), '\n', '\n')
	}
	return append(dst, convo.DoneEvent...)
}

// Abort ends a stream the gateway cuts short with OpenAI's error chunk: code and message are the
// gateway's.
func (w *StreamWriter) Abort(dst []byte, code, msg string) []byte {
	if w.done {
		return dst
	}
	w.done = true
	o := convo.NewObj(append(dst, "data: "...))
	eo := o.Open("error").Str("message", msg).Str("type", "upstream_error").Str("code", code).Raw("param", convo.Null)
	o.Close(eo)
	return append(o.End(), '\n', '\n')
}
