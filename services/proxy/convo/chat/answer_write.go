package chat

import (
	"slices"
	"strings"

	"switchyard/services/proxy/convo"
)

// AppendAnswer writes the events of a whole answer as a chat completion: the texts joined as the
// message's content, the thinking as its reasoning_content, the tool calls (a namespace's under
// their flat names) with their arguments, the finish reason and the usage. created is the
// completion's timestamp. An answer that ended in an Error event is written as OpenAI's error
// object ({"error":{message,type,code,param}}), for the caller to send with an error status; one
// the upstream cut short (Responses' response.incomplete at the token limit or by a content
// filter) is an answer with finish_reason length or content_filter.
func AppendAnswer(dst []byte, r *convo.Request, evs []convo.Event, created int64) ([]byte, error) {
	var a convo.AnswerInfo
	var blocks []writerBlock
	size, texts, thinking, calls := 0, 0, 0, 0
	for e := range a.Rest(evs) {
		switch e.Kind {
		case convo.EvBlockStart:
			blocks = append(blocks, writerBlock{index: e.Index, kind: e.Block, call: -1})
			if e.Block == convo.BlockToolCall {
				blocks[len(blocks)-1].call = calls
				calls++
				size += len(e.ID) + len(e.Name) + len(e.Namespace) + 80
			}
		case convo.EvDelta:
			size += len(e.Text)
			switch kindOf(blocks, e) {
			case convo.BlockText:
				texts++
			case convo.BlockThinking:
				thinking++
			}
		case convo.EvError:
			if f := cutShort(e.Err); f != "" {
				a.Stop = stopOf(f) // an answer cut short is an answer, as chat says it
				continue
			}
			return appendError(dst, e.Err), nil
		}
	}
	cid := chatID(a.ID)
	// Written front to back into one buffer the size of the whole answer.
	out := convo.NewObj(slices.Grow(dst, size+len(cid)+len(a.Model)+384)).Str("id", cid).
		Str("object", "chat.completion").Int("created", created).Str("model", a.Model)
	out.Key("choices")
	choice := convo.NewObj(append(out.B, '[')).Int("index", 0)
	msg := choice.Open("message").Str("role", "assistant")
	if texts > 0 || calls == 0 {
		msg.B = appendDeltas(msg, "content", evs, blocks, convo.BlockText)
	}
	if thinking > 0 {
		msg.B = appendDeltas(msg, "reasoning_content", evs, blocks, convo.BlockThinking)
	}
	if calls > 0 {
		msg.Key("tool_calls")
		msg.B = append(msg.B, '[')
		n := 0
		for i := range evs {
			e := &evs[i]
			if e.Kind != convo.EvBlockStart || e.Block != convo.BlockToolCall {
				continue
			}
			if n++; n > 1 {
				msg.B = append(msg.B, ',')
			}
			c := convo.NewObj(msg.B)
			callID := e.ID
			if callID == "" {
				callID = convo.CallID(strings.TrimPrefix(cid, "chatcmpl-"), n-1)
			}
			c.Str("id", callID).Str("type", "function")
			fn := c.Open("function").Str("name", convo.FlatName(e.Namespace, e.Name))
			fn.Key("arguments")
			fn.B = append(fn.B, '"')
			start := len(fn.B)
			for j := i + 1; j < len(evs); j++ {
				if d := &evs[j]; d.Kind == convo.EvDelta && d.Index == e.Index {
					fn.B = append(fn.B, d.Text...)
				} else if d.Kind == convo.EvBlockStart && d.Index == e.Index {
					break // the index is used again by another block
				}
			}
			if len(fn.B) == start {
				fn.B = append(fn.B, "{}"...) // a call without arguments takes none
			}
			fn.B = append(fn.B, '"')
			c.Close(fn)
			msg.B = c.End()
		}
		msg.B = append(msg.B, ']')
	}
	choice.Close(msg)
	finish := "stop"
	if a.Stop != convo.StopUnset {
		finish = finishOf(a.Stop)
	}
	choice.Str("finish_reason", finish)
	out.B = append(choice.End(), ']')
	out.Key("usage")
	out.B = appendUsage(out.B, a.Usage)
	return out.End(), nil
}

// kindOf is the kind of the block an event belongs to, as its start said.
func kindOf(blocks []writerBlock, e *convo.Event) convo.BlockKind {
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].index == e.Index {
			return blocks[i].kind
		}
	}
	return e.Block
}

// appendDeltas writes the deltas of every block of kind b, joined, as the string field k.
func appendDeltas(o *convo.Obj, k string, evs []convo.Event, blocks []writerBlock, b convo.BlockKind) []byte {
	o.Key(k)
	o.B = append(o.B, '"')
	for i := range evs {
		if e := &evs[i]; e.Kind == convo.EvDelta && kindOf(blocks, e) == b {
			o.B = append(o.B, e.Text...)
		}
	}
	return append(o.B, '"')
}
