package convo

import "bytes"

// ParseEvent splits one SSE event into its name and its data (several data lines joined by a
// newline, as the SSE standard says). Comments and other fields are ignored.
//
// It runs several times on every event of every stream, so the common event costs no
// allocation: a known name is one of eventNames' strings, and the data of an event with one
// data line is a slice of ev; only several data lines are joined into a new slice.
func ParseEvent(ev []byte) (name string, data []byte) {
	var joined []byte // several data lines: their join
	lines := 0
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimRight(line, "\r")
		switch {
		case bytes.HasPrefix(line, eventField):
			name = internName(bytes.TrimSpace(line[len(eventField):]))
		case bytes.HasPrefix(line, dataField):
			v := line[len(dataField):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			switch lines++; lines {
			case 1:
				data = v
			case 2:
				joined = append(append(append(make([]byte, 0, len(data)+1+len(v)), data...), '\n'), v...)
			default:
				joined = append(append(joined, '\n'), v...)
			}
		}
	}
	if lines > 1 {
		return name, joined
	}
	return name, data
}

var (
	eventField = []byte("event:")
	dataField  = []byte("data:")
)

// eventNames are the event names of the streams the gateway reads (Anthropic's and the
// Responses API's): ParseEvent returns these strings rather than a new one per event.
var eventNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		"message_start", "content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop", "ping", "error",
		"response.created", "response.in_progress", "response.queued", "response.completed",
		"response.failed", "response.incomplete", "response.output_item.added",
		"response.output_item.done", "response.content_part.added", "response.content_part.done",
		"response.output_text.delta", "response.output_text.done", "response.refusal.delta",
		"response.refusal.done", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.custom_tool_call_input.delta",
		"response.custom_tool_call_input.done", "response.reasoning_summary_part.added",
		"response.reasoning_summary_part.done", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_text.delta",
		"response.reasoning_text.done", "response.output_text.annotation.added",
	} {
		m[n] = n
	}
	return m
}()

// internName is name as a string: one of eventNames' when it is known (no allocation).
func internName(name []byte) string {
	if s, ok := eventNames[string(name)]; ok {
		return s
	}
	return string(name)
}

// EventObject is one SSE event as a stream reader takes it: its name and its data read in place
// (View: valid while sse is), and whether the data is a JSON object. An event without data (a
// comment, a keep-alive) or with data of another kind says nothing to a reader, except chat's
// [DONE].
func EventObject(sse []byte) (name, data string, ok bool) {
	name, d := ParseEvent(sse)
	data = View(d)
	return name, data, Document(data, nil)
}

// appendEvent appends a named SSE event (Anthropic style: the name is mandatory there).
func AppendEvent(dst []byte, name string, data []byte) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// appendData appends a data-only SSE event (OpenAI style).
func AppendData(dst []byte, data []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// DoneEvent ends an OpenAI stream.
var DoneEvent = []byte("data: [DONE]\n\n")
