package chat

import "switchyard/services/proxy/convo"

// ReadAnswer reads a chat completion into the model's events, appended to evs: Start, a
// thinking block (reasoning_content, or reasoning as some servers name it), a text block (the
// content, or the refusal when there is no content), a block per tool call with its arguments as
// one delta, the usage, the stop reason and End. Only the first choice is read: the model has one
// answer. An error object in a 200 answer ({"error":…}) is an Error event. The events' texts
// point into body.
func ReadAnswer(evs []convo.Event, body []byte) ([]convo.Event, error) {
	s := convo.View(body)
	if !convo.Document(s, nil) {
		return evs, errNotAnswer
	}
	var id, model, usage, errRaw, choice string
	convo.FieldsOf(s, func(k, v string) {
		switch k {
		case "id":
			id = v
		case "model":
			model = v
		case "usage":
			usage = v
		case "error":
			errRaw = v
		case "choices":
			if convo.Kind(v) == '[' && choice == "" {
				convo.EachElement(v, func(c string) {
					if choice == "" && convo.Kind(c) == '{' {
						choice = c
					}
				})
			}
		}
	})
	if e, ok := errorAt(errRaw); ok {
		return append(evs, convo.Event{Kind: convo.EvError, Err: e}), nil
	}
	evs = append(evs, convo.Event{Kind: convo.EvStart, ID: convo.StrAt(id), Model: convo.StrAt(model)})
	var m message
	var finish string
	if choice != "" {
		convo.FieldsOf(choice, func(k, v string) {
			switch k {
			case "message":
				m.read(v)
			case "finish_reason":
				finish = v
			}
		})
	}
	block := 0
	whole := func(b convo.BlockKind, text convo.Text) {
		evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: block, Block: b},
			convo.Event{Kind: convo.EvDelta, Index: block, Block: b, Text: text},
			convo.Event{Kind: convo.EvBlockStop, Index: block, Block: b})
		block++
	}
	if th := m.thinking(); convo.Kind(th) == '"' && th != `""` {
		whole(convo.BlockThinking, convo.TextAt(th))
	}
	switch {
	case convo.Kind(m.content) == '"' && m.content != `""`:
		whole(convo.BlockText, convo.TextAt(m.content))
	case convo.Kind(m.refusal) == '"' && m.refusal != `""`:
		whole(convo.BlockText, convo.TextAt(m.refusal))
	}
	if convo.Kind(m.calls) == '[' {
		convo.EachElement(m.calls, func(tc string) {
			if convo.Kind(tc) != '{' {
				return
			}
			c := readCall(tc)
			evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: block, Block: convo.BlockToolCall,
				ID: convo.StrAt(c.id), Name: convo.StrAt(c.name)})
			if a := convo.TextAt(c.args); a != "" {
				evs = append(evs, convo.Event{Kind: convo.EvDelta, Index: block, Block: convo.BlockToolCall, Text: a})
			}
			evs = append(evs, convo.Event{Kind: convo.EvBlockStop, Index: block, Block: convo.BlockToolCall})
			block++
		})
	}
	if u, ok := usageAt(usage); ok {
		evs = append(evs, convo.Event{Kind: convo.EvUsage, Usage: u})
	}
	stop := convo.StopEnd
	if convo.Kind(finish) == '"' {
		stop = stopOf(convo.StrAt(finish))
	}
	return append(evs, convo.Event{Kind: convo.EvStop, Stop: stop}, convo.Event{Kind: convo.EvEnd}), nil
}

// message is the fields of an answer's message or a chunk's delta (the same fields, whole or in
// part), as they stand.
type message struct{ content, reasoningContent, reasoning, refusal, calls string }

// read reads a message or delta object; a field it does not name keeps its value.
func (m *message) read(raw string) {
	if convo.Kind(raw) != '{' {
		return
	}
	convo.Pick(raw, nil,
		convo.Field("content", &m.content),
		convo.Field("reasoning_content", &m.reasoningContent),
		convo.Field("reasoning", &m.reasoning),
		convo.Field("refusal", &m.refusal),
		convo.Field("tool_calls", &m.calls))
}

// thinking is the message's reasoning text as it stands: reasoning_content wins when it is given
// as a string at all, else reasoning.
func (m *message) thinking() string {
	if convo.Kind(m.reasoningContent) != '"' {
		return m.reasoning
	}
	return m.reasoningContent
}

// callFields are one tool call (or a fragment of one in a chunk), as they stand in its JSON.
type callFields struct{ index, id, name, args string }

// readCall reads a tool call object.
func readCall(tc string) (c callFields) {
	convo.Pick(tc, func(k, v string) {
		if k == "function" && convo.Kind(v) == '{' {
			convo.Pick(v, nil, convo.Field("name", &c.name), convo.Field("arguments", &c.args))
		}
	}, convo.Field("index", &c.index), convo.Field("id", &c.id))
	return c
}
