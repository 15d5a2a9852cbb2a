package responses

import (
	"strconv"

	"switchyard/services/proxy/convo"
)

// ReadAnswer reads a Responses answer from an upstream into the model's events, appended to evs:
// its message, reasoning and function call items as blocks in their order, usage, and the stop
// reason its status gives (a failed answer is an error). The events' texts point into body.
func ReadAnswer(evs []convo.Event, body []byte) ([]convo.Event, error) {
	s := convo.View(body) // every value read below is a part of it
	if !convo.Document(s, nil) {
		return evs, errNotAnswer
	}
	a := readResponse(s)
	evs = append(evs, convo.Event{Kind: convo.EvStart, ID: convo.StrAt(a.id), Model: convo.StrAt(a.model)})
	block, calls := 0, false
	if convo.Kind(a.output) == '[' {
		convo.EachElement(a.output, func(it string) {
			evs, block, calls = itemEvents(evs, it, block, calls)
		})
	}
	return a.end(evs, convo.StrAt(a.status), calls), nil
}

// response is a Responses answer object's fields as they stand in its JSON.
type response struct {
	id, model, status, output, usage, err, details string
}

func readResponse(s string) response {
	var a response
	if convo.Kind(s) != '{' {
		return a
	}
	convo.Pick(s, nil,
		convo.Field("id", &a.id),
		convo.Field("model", &a.model),
		convo.Field("status", &a.status),
		convo.Field("output", &a.output),
		convo.Field("usage", &a.usage),
		convo.Field("error", &a.err),
		convo.Field("incomplete_details", &a.details))
	return a
}

// end appends an answer's last events: its usage, and the stop reason for its status (with End),
// or the error of a failed answer.
func (a *response) end(evs []convo.Event, status string, calls bool) []convo.Event {
	if u, ok := readUsage(a.usage); ok {
		evs = append(evs, convo.Event{Kind: convo.EvUsage, Usage: u})
	}
	switch {
	case convo.Kind(a.err) == '{' || status == "failed":
		return append(evs, convo.Event{Kind: convo.EvError, Err: readError(a.err)})
	case status == "cancelled":
		return append(evs, convo.Event{Kind: convo.EvError, Err: &convo.Error{Type: "server_error", Code: "cancelled",
			Message: "the upstream cancelled the response"}})
	}
	stop := convo.StopEnd
	switch {
	case status == "incomplete":
		stop = incompleteStop(a.details)
	case calls:
		stop = convo.StopToolUse
	}
	return append(evs, convo.Event{Kind: convo.EvStop, Stop: stop}, convo.Event{Kind: convo.EvEnd})
}

// incompleteStop is the stop reason of an incomplete answer, by incomplete_details.reason.
func incompleteStop(details string) convo.StopReason {
	if convo.Kind(details) == '{' {
		stop := convo.StopMaxTokens
		convo.FieldsOf(details, func(k, v string) {
			if k == "reason" && convo.StrAt(v) == "content_filter" {
				stop = convo.StopContentFilter
			}
		})
		return stop
	}
	return convo.StopMaxTokens
}

// readError reads an error object ({code, message, param}, or with its type), or a bare message.
func readError(raw string) *convo.Error {
	var typ, code, msg, param string
	switch convo.Kind(raw) {
	case '{':
		convo.FieldsOf(raw, func(k, v string) {
			switch k {
			case "code":
				if convo.Kind(v) == '"' || convo.Kind(v) == '0' {
					code = convo.StrAt(v)
				}
			case "message":
				msg = strOf(v)
			case "type":
				typ = strOf(v)
			case "param":
				param = strOf(v)
			}
		})
	case '"':
		msg = convo.StrAt(raw)
	}
	return newError(typ, code, msg, param)
}

// newError is an upstream's error: its type is OpenAI's for its code when it gave none.
func newError(typ, code, msg, param string) *convo.Error {
	if typ == "" {
		typ = errorType(code)
	}
	if msg == "" {
		msg = "the upstream reported an error"
	}
	return &convo.Error{Type: typ, Code: code, Message: msg, Param: param}
}

// readUsage reads a Responses usage object; ok is false when there is none.
func readUsage(raw string) (convo.Usage, bool) {
	var u convo.Usage
	if convo.Kind(raw) != '{' {
		return u, false
	}
	detail := func(raw, key string) (int64, bool) {
		var n int64
		var ok bool
		if convo.Kind(raw) == '{' {
			convo.FieldsOf(raw, func(k, v string) {
				if k == key {
					n, ok = intAt(v)
				}
			})
		}
		return n, ok
	}
	convo.FieldsOf(raw, func(k, v string) {
		var ok bool
		switch k {
		case "input_tokens":
			if u.Input, ok = intAt(v); ok {
				u.Has |= convo.HasInput
			}
		case "output_tokens":
			if u.Output, ok = intAt(v); ok {
				u.Has |= convo.HasOutput
			}
		case "input_tokens_details":
			if u.CacheRead, ok = detail(v, "cached_tokens"); ok {
				u.Has |= convo.HasCacheRead
			}
		case "output_tokens_details":
			if u.Reasoning, ok = detail(v, "reasoning_tokens"); ok {
				u.Has |= convo.HasReasoning
			}
		}
	})
	return u, true
}

// intAt reads a count.
func intAt(raw string) (int64, bool) {
	if convo.Kind(raw) != '0' {
		return 0, false
	}
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || f < -9e18 || f > 9e18 {
		return 0, false
	}
	return int64(f), true
}

// item is an output item's fields as they stand in its JSON.
type item struct {
	typ, id, callID, name, namespace, args, content, summary, encrypted string
}

func readItem(raw string) item {
	var it item
	if convo.Kind(raw) != '{' {
		return it
	}
	var typ string
	convo.Pick(raw, nil,
		convo.Field("type", &typ),
		convo.Field("id", &it.id),
		convo.Field("call_id", &it.callID),
		convo.Field("name", &it.name),
		convo.Field("namespace", &it.namespace),
		convo.Field("arguments", &it.args),
		convo.Field("content", &it.content),
		convo.Field("summary", &it.summary),
		convo.Field("encrypted_content", &it.encrypted))
	it.typ = convo.StrAt(typ)
	return it
}

// blockOf is the block kind of an output item's type; ok is false for the items the model does
// not carry (hosted tools' calls: their results are in the message text).
func blockOf(typ string) (convo.BlockKind, bool) {
	switch typ {
	case "message":
		return convo.BlockText, true
	case "reasoning":
		return convo.BlockThinking, true
	case "function_call":
		return convo.BlockToolCall, true
	}
	return 0, false
}

// start is the BlockStart event of an item.
func (it *item) start(block int, k convo.BlockKind) convo.Event {
	e := convo.Event{Kind: convo.EvBlockStart, Index: block, Block: k}
	switch k {
	case convo.BlockToolCall:
		e.ID, e.Name = strOf(it.callID), strOf(it.name)
		e.Namespace = strOf(it.namespace)
	case convo.BlockThinking:
		e.ID = strOf(it.id)
	}
	return e
}

// strOf is a string value's text, "" for anything else.
func strOf(raw string) string {
	if convo.Kind(raw) != '"' {
		return ""
	}
	return convo.StrAt(raw)
}

// itemEvents appends the events of one whole output item as block number block; it returns the
// next block number and whether a function was called.
func itemEvents(evs []convo.Event, raw string, block int, calls bool) ([]convo.Event, int, bool) {
	it := readItem(raw)
	k, ok := blockOf(it.typ)
	if !ok || k == convo.BlockText && !it.hasText() {
		return evs, block, calls
	}
	if k == convo.BlockThinking && !it.hasText() && convo.Kind(it.encrypted) != '"' {
		return evs, block, calls
	}
	evs = append(evs, it.start(block, k))
	evs = it.events(evs, block, k, true)
	evs = append(evs, convo.Event{Kind: convo.EvBlockStop, Index: block})
	return evs, block + 1, calls || k == convo.BlockToolCall
}

// hasText reports whether a message or reasoning item has some text.
func (it *item) hasText() bool {
	found := false
	for _, list := range []string{it.content, it.summary} {
		if convo.Kind(list) != '[' {
			continue
		}
		convo.EachElement(list, func(p string) {
			if found || convo.Kind(p) != '{' {
				return
			}
			convo.FieldsOf(p, func(k, v string) {
				if (k == "text" || k == "refusal") && convo.Kind(v) == '"' && v != `""` {
					found = true
				}
			})
		})
	}
	return found
}

// events appends the events of an item's content for block: its texts as deltas (when text),
// and a reasoning item's encrypted content.
func (it *item) events(evs []convo.Event, block int, k convo.BlockKind, text bool) []convo.Event {
	delta := func(t convo.Text) {
		if t != "" {
			evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: block, Text: t})
		}
	}
	switch k {
	case convo.BlockText:
		if text && convo.Kind(it.content) == '[' {
			convo.EachElement(it.content, func(p string) {
				if convo.Kind(p) != '{' {
					return
				}
				convo.FieldsOf(p, func(k, v string) {
					if (k == "text" || k == "refusal") && convo.Kind(v) == '"' {
						delta(convo.TextAt(v))
					}
				})
			})
		}
	case convo.BlockThinking:
		if text {
			list := it.summary
			if !hasTexts(list) {
				list = it.content // open models' reasoning_text
			}
			n := 0
			if convo.Kind(list) == '[' {
				convo.EachElement(list, func(p string) {
					if convo.Kind(p) != '{' {
						return
					}
					convo.FieldsOf(p, func(k, v string) {
						if k == "text" && convo.Kind(v) == '"' && v != `""` {
							if n++; n > 1 {
								delta(`\n\n`)
							}
							delta(convo.TextAt(v))
						}
					})
				})
			}
		}
		if convo.Kind(it.encrypted) == '"' && it.encrypted != `""` {
			evs = append(evs, convo.Event{Kind: convo.EvSignature, Index: block, Text: convo.Text(convo.StrAt(it.encrypted))})
		}
	case convo.BlockToolCall:
		if text && convo.Kind(it.args) == '"' {
			delta(convo.TextAt(it.args))
		}
	}
	return evs
}

// hasTexts reports whether a list of parts has a part with a text.
func hasTexts(list string) bool {
	found := false
	if convo.Kind(list) == '[' {
		convo.EachElement(list, func(p string) {
			if !found && convo.Kind(p) == '{' {
				convo.FieldsOf(p, func(k, v string) {
					found = found || k == "text" && convo.Kind(v) == '"' && v != `""`
				})
			}
		})
	}
	return found
}
