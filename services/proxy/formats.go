package proxy

import (
	"strings"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/chat"
	"switchyard/services/proxy/convo/messages"
	"switchyard/services/proxy/convo/responses"
)

// codec is one wire format's readers and writers: a translation is the reader of one format
// feeding the writer of another, through the conversation model.
type codec struct {
	readRequest   func(body []byte) (*convo.Request, error)
	appendRequest func(dst []byte, r *convo.Request, t convo.Target) ([]byte, error)
	readAnswer    func(evs []convo.Event, body []byte) ([]convo.Event, error)
	appendAnswer  func(dst []byte, r *convo.Request, evs []convo.Event, created int64) ([]byte, error)
	streamReader  func() convo.StreamReader
	streamWriter  func(r *convo.Request, created int64) convo.StreamWriter
}

var codecs = [...]codec{
	FormatChat: {
		readRequest: chat.ReadRequest, appendRequest: chat.AppendRequest,
		readAnswer: chat.ReadAnswer, appendAnswer: chat.AppendAnswer,
		streamReader: func() convo.StreamReader { return chat.NewStreamReader() },
		streamWriter: func(r *convo.Request, created int64) convo.StreamWriter { return chat.NewStreamWriter(r, created) },
	},
	FormatMessages: {
		readRequest: messages.ReadRequest, appendRequest: messages.AppendRequest,
		readAnswer: messages.ReadAnswer, appendAnswer: messages.AppendAnswer,
		streamReader: func() convo.StreamReader { return messages.NewStreamReader() },
		streamWriter: func(r *convo.Request, created int64) convo.StreamWriter {
			return messages.NewStreamWriter(r, created)
		},
	},
	FormatResponses: {
		readRequest: responses.ReadRequest, appendRequest: responses.AppendRequest,
		readAnswer: responses.ReadAnswer, appendAnswer: responses.AppendAnswer,
		streamReader: func() convo.StreamReader { return responses.NewStreamReader() },
		streamWriter: func(r *convo.Request, created int64) convo.StreamWriter {
			return responses.NewStreamWriter(r, created)
		},
	},
}

// bridge relays a stream between two formats: each upstream event is read into model events,
// which the client's writer turns into its events at once. It is also where the stream's outcome
// and usage are read: nothing parses the upstream's events a second time.
type bridge struct {
	r   convo.StreamReader
	w   convo.StreamWriter
	evs []convo.Event

	done, errored bool
	usage         convo.Usage
	stop          convo.StopReason
	// responses: the client speaks Responses, whose stream ends in response.failed or
	// response.incomplete when the answer failed or was cut short.
	responses bool
	// keep, when set, is handed the output items of a Responses answer as it completes, before
	// the client has its last event (items.go).
	keep func(id string, item []byte)
}

func newBridge(src, dst Format, req *convo.Request, created int64) *bridge {
	return &bridge{r: codecs[dst].streamReader(), w: codecs[src].streamWriter(req, created), responses: src == FormatResponses}
}

func (b *bridge) Event(dst, ev []byte, _ eventLook) []byte {
	b.evs = b.r.Read(b.evs[:0], ev)
	for i := range b.evs {
		e := &b.evs[i]
		switch e.Kind {
		case convo.EvEnd:
			b.done = true
		case convo.EvError:
			b.errored, b.done = true, true
		case convo.EvUsage:
			b.usage.Merge(e.Usage)
		case convo.EvStop:
			b.stop = e.Stop
		case convo.EvStart, convo.EvBlockStart:
			// Writers keep ids and names for the rest of the stream, and the reader's input is
			// the relay's one read buffer, overwritten by the next event: these few strings are
			// copied (the texts, which are not kept, are not).
			e.ID, e.Model = strings.Clone(e.ID), strings.Clone(e.Model)
			e.Name, e.Namespace = strings.Clone(e.Name), strings.Clone(e.Namespace)
		}
		dst = b.w.Write(dst, e)
		if e.Kind == convo.EvEnd && b.keep != nil {
			if il, ok := b.w.(interface {
				Items(keep func(id string, item []byte))
			}); ok {
				il.Items(b.keep)
			}
		}
	}
	return dst
}

func (b *bridge) Done() bool    { return b.done }
func (b *bridge) Errored() bool { return b.errored }

// Failed and Cut report a Responses client's stream that ended in response.failed (the
// upstream's error) or response.incomplete (the answer cut short by its token limit or a
// content filter).
func (b *bridge) Failed() bool { return b.responses && b.errored }
func (b *bridge) Cut() bool {
	return b.responses && b.done && !b.errored && (b.stop == convo.StopMaxTokens || b.stop == convo.StopContentFilter)
}

// Abort ends the client's stream with its format's error event.
func (b *bridge) Abort(dst []byte, code, msg string) []byte { return b.w.Abort(dst, code, msg) }

// Usage is what the upstream reported, read by the stream's reader.
func (b *bridge) Usage() convo.Usage { return b.usage }
