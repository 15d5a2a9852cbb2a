package responses

import (
	"slices"
	"strconv"
	"strings"

	"switchyard/services/proxy/convo"
)

// AppendAnswer writes an answer's events as a Responses answer for a client that sent r: its
// output items in the order of the answer's blocks, usage, status (completed, incomplete with
// its reason, failed with the error) and the echo of the request's fields. created is the
// answer's timestamp.
func AppendAnswer(dst []byte, r *convo.Request, evs []convo.Event, created int64) ([]byte, error) {
	return appendAnswer(dst, r, evs, created, nil)
}

// AppendAnswerKeeping is AppendAnswer that also hands keep each output item of an answer that did
// not fail, with its id, as it is kept for the client's later references by id, and last the
// answer's own id with a nil item. A reasoning item carries the thinking's signature as its
// encrypted content also when the client did not ask for it (an upstream that needs the
// signature gets it when the client names the item). The bytes are the writer's: to be copied.
func AppendAnswerKeeping(dst []byte, r *convo.Request, evs []convo.Event, created int64, keep func(id string, item []byte)) ([]byte, error) {
	return appendAnswer(dst, r, evs, created, keep)
}

func appendAnswer(dst []byte, r *convo.Request, evs []convo.Event, created int64, keep func(id string, item []byte)) ([]byte, error) {
	type block struct {
		kind    convo.BlockKind
		index   int
		id      string
		name    string
		ns      string
		text    []convo.Text
		sig     convo.Text
		hasText bool
	}
	var a convo.AnswerInfo
	var blocks []block
	var failure *convo.Error
	size := 0
	find := func(index int) *block {
		for i := len(blocks) - 1; i >= 0; i-- {
			if blocks[i].index == index {
				return &blocks[i]
			}
		}
		return nil
	}
scan:
	for e := range a.Rest(evs) {
		switch e.Kind {
		case convo.EvBlockStart:
			blocks = append(blocks, block{kind: e.Block, index: e.Index, id: e.ID, name: e.Name, ns: e.Namespace})
		case convo.EvDelta:
			if b := find(e.Index); b != nil && e.Text != "" {
				b.text = append(b.text, e.Text)
				b.hasText = true
				size += len(e.Text)
			}
		case convo.EvSignature:
			if b := find(e.Index); b != nil {
				b.sig = e.Text
				size += len(e.Text)
			}
		case convo.EvError:
			failure = e.Err
			break scan
		}
	}
	rid := responseID(r, a.ID)
	base := strings.TrimPrefix(rid, "resp_")
	status, details := statusOf(a.Stop)
	if failure != nil {
		status, details = "failed", nil
	}
	include := encrypted(r)
	// Written front to back into one buffer the size of the whole answer, items in place.
	out := responseHead(slices.Grow(dst, size+len(blocks)*160+1536), rid, created, status, a.Model)
	n := 0
	counts := [4]int{} // items written of each block kind, for unique ids
	itemID := func(prefix string, k convo.BlockKind) string {
		counts[k]++
		if counts[k] == 1 {
			return prefix + base
		}
		return prefix + base + "_" + strconv.Itoa(counts[k]-1)
	}
	if failure != nil {
		keep = nil // a failed answer's items are not kept
	}
	var kept []byte // a reasoning item as kept, with its signature
	for i := range blocks {
		b := &blocks[i]
		sig := b.sig
		if !include {
			sig = ""
		}
		reasoning := b.kind == convo.BlockThinking || b.kind == convo.BlockRedactedThinking
		switch {
		case b.kind == convo.BlockText && !b.hasText, reasoning && !b.hasText && sig == "":
			continue
		case b.kind != convo.BlockText && !reasoning && b.kind != convo.BlockToolCall:
			continue
		}
		if n++; n > 1 {
			out = append(out, ',')
		}
		start, id := len(out), ""
		switch b.kind {
		case convo.BlockText:
			id = itemID("msg_", b.kind)
			out = appendMessageItem(out, id, "completed", b.text...)
		case convo.BlockThinking, convo.BlockRedactedThinking:
			id = itemID("rs_", convo.BlockThinking)
			out = appendReasoningItem(out, id, sig, b.text...)
		case convo.BlockToolCall:
			callID := b.id
			if callID == "" {
				callID = convo.CallID(base, b.index)
			}
			name, ns := b.name, b.ns
			if ns == "" {
				name, ns = lookup(r, name)
			}
			id = callItemID(r, callID)
			out = appendCallItem(out, id, callID, name, ns, "completed", b.text...)
		}
		switch {
		case keep == nil:
		case reasoning && sig == "" && b.sig != "":
			kept = withEncrypted(kept[:0], out[start:], string(b.sig))
			keep(id, kept)
		default:
			keep(id, out[start:])
		}
	}
	if keep != nil {
		keep(rid, nil)
	}
	var errObj []byte
	if failure != nil {
		errObj = appendError(nil, failure)
	}
	u := &a.Usage
	if a.Usage.Has == 0 {
		u = nil
	}
	out = responseTail(out, u, errObj, details, appendEcho(nil, r))
	return out, nil
}

// encrypted reports whether the client asked for reasoning as encrypted content (include
// reasoning.encrypted_content): then reasoning items carry the thinking's signature.
func encrypted(r *convo.Request) bool {
	return r != nil && slices.Contains(r.Include, "reasoning.encrypted_content")
}

// statusOf is the Responses status for a stop reason, with its incomplete details.
func statusOf(stop convo.StopReason) (string, []byte) {
	switch stop {
	case convo.StopMaxTokens:
		return "incomplete", []byte(`{"reason":"max_output_tokens"}`)
	case convo.StopContentFilter, convo.StopRefusal:
		return "incomplete", []byte(`{"reason":"content_filter"}`)
	}
	return "completed", nil
}

// appendError writes a failed answer's error object: its code (server_error when the upstream
// gave none) and message.
func appendError(dst []byte, e *convo.Error) []byte {
	code := e.Code
	if code == "" {
		code = "server_error"
	}
	return convo.NewObj(dst).Str("code", code).Str("message", e.Message).End()
}

// responseHead writes a Responses answer up to its output items: they follow, separated by
// commas, and responseTail ends the answer after them.
func responseHead(dst []byte, id string, created int64, status, model string) []byte {
	o := convo.NewObj(dst).Str("id", id).Str("object", "response").Int("created_at", created).Str("status", status).Str("model", model)
	o.Key("output")
	return append(o.B, '[')
}

// responseTail ends an answer: usage (null when unknown), error, incomplete details and the echo
// of the request (appendEcho).
func responseTail(dst []byte, u *convo.Usage, errObj, details, echo []byte) []byte {
	dst = append(dst, `],"usage":`...)
	dst = appendUsage(dst, u)
	if errObj == nil {
		errObj = convo.Null
	}
	if details == nil {
		details = convo.Null
	}
	dst = append(dst, `,"error":`...)
	dst = append(dst, errObj...)
	dst = append(dst, `,"incomplete_details":`...)
	dst = append(dst, details...)
	dst = append(dst, echo...)
	return append(dst, '}')
}

// appendUsage writes usage in the Responses shape, null when nothing was reported.
func appendUsage(dst []byte, u *convo.Usage) []byte {
	if u == nil {
		return append(dst, "null"...)
	}
	o := convo.NewObj(dst).Int("input_tokens", u.Input)
	d := o.Open("input_tokens_details").Int("cached_tokens", u.CacheRead)
	o.Close(d)
	o.Int("output_tokens", u.Output)
	d = o.Open("output_tokens_details").Int("reasoning_tokens", u.Reasoning)
	o.Close(d)
	return o.Int("total_tokens", u.Input+u.Output).End()
}

// appendEcho writes what a Responses answer repeats of its request, each field after a comma:
// the response it continued, instructions, the output limit, sampling, tools and tool choice, reasoning, text format and
// metadata as the client gave them (their defaults when it did not), and whether it is stored.
func appendEcho(dst []byte, r *convo.Request) []byte {
	if r == nil {
		r = &convo.Request{}
	}
	o := &convo.Obj{B: dst}
	o.StrElseNull("previous_response_id", r.PreviousResponseID)
	// Only the instructions field: the developer messages the reader also put into System
	// are input, not instructions.
	if ins := instructions(r); ins != nil {
		o.Key("instructions")
		o.B = append(o.B, '"')
		for i, t := range ins {
			if i > 0 {
				o.B = append(o.B, `\n`...)
			}
			o.B = append(o.B, t...)
		}
		o.B = append(o.B, '"')
	} else {
		o.Raw("instructions", convo.Null)
	}
	if r.MaxTokens > 0 {
		o.Int("max_output_tokens", int64(r.MaxTokens))
	} else {
		o.Raw("max_output_tokens", convo.Null)
	}
	o.Bool("parallel_tool_calls", r.ParallelToolCalls == nil || *r.ParallelToolCalls)
	for _, f := range []struct {
		k string
		v *float64
	}{{"temperature", r.Temperature}, {"top_p", r.TopP}} {
		o.Key(f.k)
		if f.v == nil {
			o.B = append(o.B, "null"...)
		} else {
			o.B = appendFloat(o.B, *f.v)
		}
	}
	appendToolChoice(o, r.ToolChoice, true)
	o.Key("tools")
	o.B, _ = appendTools(o.B, r, true)
	rs := o.Open("reasoning")
	rs.StrElseNull("effort", r.ReasoningEffort)
	rs.StrElseNull("summary", r.ReasoningSummary)
	o.Close(rs)
	text := o.Open("text")
	text.Key("format")
	if r.Format != nil {
		text.B = appendFormat(text.B, r.Format, true)
	} else {
		text.B = append(text.B, `{"type":"text"}`...)
	}
	o.Close(text)
	if len(r.Metadata) > 0 {
		o.Key("metadata")
		o.B = appendRaw(o.B, r.Metadata, true)
	} else {
		o.Raw("metadata", []byte("{}"))
	}
	// A translated answer is stored only where the gateway keeps it (the request has an
	// IDSuffix); elsewhere, store: true would promise a previous_response_id that no later
	// request can use.
	o.Bool("store", r.IDSuffix != "")
	return o.B
}

// instructionsName marks the part of Request.System that was the request's instructions field
// (Part.Name is otherwise unused on text parts): the echo repeats it, and not the developer
// messages that opened the input.
const instructionsName = "instructions"

// instructions are the texts of the request's instructions, nil when it had none.
func instructions(r *convo.Request) []convo.Text {
	var out []convo.Text
	for _, p := range r.System {
		if p.Name == instructionsName {
			out = append(out, p.Text)
		}
	}
	return out
}

// appendMessageItem writes an assistant message item with one output_text part.
func appendMessageItem(dst []byte, id, status string, text ...convo.Text) []byte {
	o := convo.NewObj(dst).Str("type", "message").Str("id", id).Str("status", status).Str("role", "assistant")
	o.Key("content")
	o.B = append(o.B, `[{"type":"output_text","text":"`...)
	for _, t := range text {
		o.B = append(o.B, t...)
	}
	o.B = append(o.B, `","annotations":[]}]`...)
	return o.End()
}

// appendReasoningItem writes a reasoning item: its summary (none when text is empty) and, when
// given, its encrypted content.
func appendReasoningItem(dst []byte, id string, sig convo.Text, text ...convo.Text) []byte {
	o := convo.NewObj(dst).Str("type", "reasoning").Str("id", id)
	o.Key("summary")
	empty := true
	for _, t := range text {
		empty = empty && t == ""
	}
	if empty {
		o.B = append(o.B, "[]"...)
	} else {
		o.B = append(o.B, `[{"type":"summary_text","text":"`...)
		for _, t := range text {
			o.B = append(o.B, t...)
		}
		o.B = append(o.B, `"}]`...)
	}
	if sig != "" { // plain, as EvSignature carries it
		o.Str("encrypted_content", string(sig))
	}
	return o.End()
}

// withEncrypted appends a reasoning item written without encrypted content with sig as its
// encrypted content.
func withEncrypted(dst, item []byte, sig string) []byte {
	o := &convo.Obj{B: append(dst, item[:len(item)-1]...)} // the item's fields, without its closing brace
	return o.Str("encrypted_content", sig).End()
}

// appendCallItem writes a function_call item; ns is the namespace of the function, when it has
// one.
func appendCallItem(dst []byte, id, callID, name, ns, status string, args ...convo.Text) []byte {
	o := convo.NewObj(dst).Str("type", "function_call").Str("id", id).Str("call_id", callID).Str("name", name)
	if ns != "" {
		o.Str("namespace", ns)
	}
	o.Key("arguments")
	o.B = append(o.B, '"')
	for _, t := range args {
		o.B = append(o.B, t...)
	}
	o.B = append(o.B, '"')
	return o.Str("status", status).End()
}
