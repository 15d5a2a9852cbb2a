package convo

import "bytes"

// ParseEvent splits one SSE event into its name and its data (several data lines joined by a
// newline, as the SSE standard says). Comments and other fields are ignored.
func ParseEvent(ev []byte) (name string, data []byte) {
	var parts [][]byte
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimRight(line, "\r")
		switch {
		case bytes.HasPrefix(line, []byte("event:")):
			name = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			v := line[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			parts = append(parts, v)
		}
	}
	switch len(parts) {
	case 0:
		return name, nil
	case 1:
		return name, parts[0]
	}
	return name, bytes.Join(parts, []byte("\n"))
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
