package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A Responses request is read in one pass of the scanner (scan.go) and the chat request is
// written with the JSON writer (jsonw.go): a coding agent sends its whole conversation, its tools
// and their schemas with every turn, and reading that through encoding/json's reflection (then
// the input items, then their content parts again, then the echo once more) cost several times
// what copying it does. Texts keep the form they had in the client's JSON.

// responsesFields are the top-level values of a Responses request as they stand in its JSON
// ("" when absent).
type responsesFields struct {
	model, input, instructions, tools, toolChoice, parallel, maxOut, temperature, topP,
	reasoning, stream, text, user, metadata string
	unknown []string
}

// kind names a JSON value's type by its first byte.
func kind(raw string) byte {
	switch {
	case raw == "":
		return 0
	case raw[0] == '-' || isDigit(raw[0]):
		return '0'
	case raw[0] == 'f':
		return 't'
	}
	return raw[0]
}

// typeError is the error for a field whose value has the wrong type.
func typeError(field, want string) error {
	return fmt.Errorf("not a Responses request: %s must be %s", field, want)
}

// is reports whether raw is absent, null or of one of the kinds (what encoding/json accepts for
// a field of that type).
func is(raw string, kinds ...byte) bool {
	k := kind(raw)
	return k == 0 || k == 'n' || slices.Contains(kinds, k)
}

// readResponsesFields reads the top level of a Responses request.
func readResponsesFields(s string) (responsesFields, bool) {
	var f responsesFields
	ok := document(s, func(k string, v int) int {
		e := valueEnd(s, v, 1)
		if e < 0 {
			return -1
		}
		raw := s[v:e]
		switch k {
		case "model":
			f.model = raw
		case "input":
			f.input = raw
		case "instructions":
			f.instructions = raw
		case "tools":
			f.tools = raw
		case "tool_choice":
			f.toolChoice = raw
		case "parallel_tool_calls":
			f.parallel = raw
		case "max_output_tokens":
			f.maxOut = raw
		case "temperature":
			f.temperature = raw
		case "top_p":
			f.topP = raw
		case "reasoning":
			f.reasoning = raw
		case "stream":
			f.stream = raw
		case "text":
			f.text = raw
		case "user":
			f.user = raw
		case "metadata":
			f.metadata = raw
		case "store":
			// Accepted and not carried: nothing is stored on this path, and the answer says
			// store: false.
		case "include", "prompt_cache_key":
			// Nothing to carry: they only shape what a stateful provider returns or caches.
		default:
			f.unknown = append(f.unknown, k)
		}
		return e
	})
	return f, ok
}

// isInt reports whether a number is written as an integer (encoding/json puts nothing else into an int).
func isInt(raw string) bool { return kind(raw) == '0' && !strings.ContainsAny(raw, ".eE") }

// echo is what the answer repeats of the request; values of the wrong type leave their default.
func (f *responsesFields) echo() ResponsesEcho {
	e := ResponsesEcho{ParallelToolCalls: f.parallel != "false", checked: true}
	if kind(f.instructions) == '"' {
		s := strAt(f.instructions)
		e.Instructions = &s
	}
	if isInt(f.maxOut) {
		if n, err := strconv.Atoi(f.maxOut); err == nil {
			e.MaxOutputTokens = &n
		}
	}
	num := func(raw string) *float64 {
		if kind(raw) != '0' {
			return nil
		}
		n, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return nil
		}
		return &n
	}
	e.Temperature, e.TopP = num(f.temperature), num(f.topP)
	rawOr := func(raw, def string) json.RawMessage {
		if kind(raw) == 0 || kind(raw) == 'n' {
			return json.RawMessage(def)
		}
		return json.RawMessage(raw)
	}
	e.ToolChoice = rawOr(f.toolChoice, `"auto"`)
	e.Tools = rawOr(f.tools, `[]`)
	e.Reasoning = rawOr(f.reasoning, `{"effort":null,"summary":null}`)
	e.Text = rawOr(f.text, `{"format":{"type":"text"}}`)
	e.Metadata = rawOr(f.metadata, `{}`)
	return e
}

// EchoOf reads what a Responses answer repeats from its request.
func EchoOf(body []byte) ResponsesEcho {
	f, ok := readResponsesFields(string(body))
	if !ok {
		f = responsesFields{}
	}
	return f.echo()
}

// ResponsesToChat turns a Responses request into a chat completions request.
func ResponsesToChat(body []byte, t Target) (Request, error) {
	r, _, err := ResponsesToChatEcho(body, t)
	return r, err
}

// ResponsesToChatEcho is ResponsesToChat that also returns EchoOf the request, read in the same
// pass.
func ResponsesToChatEcho(body []byte, t Target) (Request, ResponsesEcho, error) {
	s := string(body) // the one copy: every value read below is a part of it
	f, ok := readResponsesFields(s)
	if !ok {
		return Request{}, ResponsesEcho{}, errors.New("not a Responses request: the body is not a JSON object")
	}
	for _, c := range []struct {
		raw, field, what string
		kinds            []byte
	}{
		{f.model, "model", "a string", []byte{'"'}},
		{f.instructions, "instructions", "a string", []byte{'"'}},
		{f.tools, "tools", "a list", []byte{'['}},
		{f.parallel, "parallel_tool_calls", "a boolean", []byte{'t'}},
		{f.maxOut, "max_output_tokens", "an integer", []byte{'0'}},
		{f.temperature, "temperature", "a number", []byte{'0'}},
		{f.topP, "top_p", "a number", []byte{'0'}},
		{f.reasoning, "reasoning", "an object", []byte{'{'}},
		{f.stream, "stream", "a boolean", []byte{'t'}},
		{f.text, "text", "an object", []byte{'{'}},
		{f.user, "user", "a string", []byte{'"'}},
	} {
		if !is(c.raw, c.kinds...) {
			return Request{}, ResponsesEcho{}, typeError(c.field, c.what)
		}
	}
	d := &dropper{}
	for _, k := range f.unknown {
		d.drop(k)
	}
	var maxOut int
	if kind(f.maxOut) == '0' {
		n, err := strconv.Atoi(f.maxOut)
		if err != nil || !isInt(f.maxOut) {
			return Request{}, ResponsesEcho{}, typeError("max_output_tokens", "an integer")
		}
		maxOut = n
	}
	var effort string
	if kind(f.reasoning) == '{' {
		var bad bool
		fieldsOf(f.reasoning, func(k, raw string) {
			if k == "effort" {
				bad = !is(raw, '"')
				if kind(raw) == '"' {
					effort = strAt(raw)
				}
			}
		})
		if bad {
			return Request{}, ResponsesEcho{}, typeError("reasoning.effort", "a string")
		}
	}
	tools, err := responsesTools(f.tools, d)
	if err != nil {
		return Request{}, ResponsesEcho{}, err
	}
	stream := f.stream == "true"

	out := newObj(make([]byte, 0, len(s)+256))
	if kind(f.model) == '"' {
		out.raw("model", []byte(f.model))
	} else {
		out.str("model", "")
	}
	out.key("messages")
	out.b = append(out.b, '[')
	m := &chatWriter{b: out.b, d: d}
	if kind(f.instructions) == '"' && f.instructions != `""` {
		m.message("system", f.instructions)
	}
	switch kind(f.input) {
	case '"':
		m.message("user", f.input)
	case 0, 'n':
	case '[':
		if !m.items(f.input) {
			return Request{}, ResponsesEcho{}, errors.New("input must be a string or a list of items")
		}
	default:
		return Request{}, ResponsesEcho{}, errors.New("input must be a string or a list of items")
	}
	out.b = append(m.end(), ']')
	if kind(f.maxOut) == '0' {
		if t.MaxCompletionTokens {
			out.int("max_completion_tokens", int64(maxOut))
		} else {
			out.int("max_tokens", int64(maxOut))
		}
	}
	if kind(f.temperature) == '0' {
		out.raw("temperature", []byte(f.temperature))
	}
	if kind(f.topP) == '0' {
		out.raw("top_p", []byte(f.topP))
	}
	if stream {
		out.raw("stream", []byte("true")).raw("stream_options", []byte(`{"include_usage":true}`))
	}
	// Chat completions refuse tool_choice and parallel_tool_calls without tools.
	if tc := responsesToolChoice(f.toolChoice, d); len(tools) > 0 {
		out.key("tools")
		out.b = append(append(append(out.b, '['), tools...), ']')
		if tc != nil {
			out.raw("tool_choice", tc)
		}
		if kind(f.parallel) == 't' {
			out.raw("parallel_tool_calls", []byte(f.parallel))
		}
	}
	if effort != "" && effort != "none" {
		out.str("reasoning_effort", effort)
	}
	if kind(f.user) == '"' && f.user != `""` {
		out.raw("user", []byte(f.user))
	}
	if rf := responsesFormat(f.text); rf != nil {
		out.raw("response_format", rf)
	}
	return Request{Body: out.end(), Dropped: d.names}, f.echo(), nil
}

// responsesTools writes the function tools as chat tools, comma-separated; other tools are
// dropped.
func responsesTools(raw string, d *dropper) ([]byte, error) {
	if kind(raw) != '[' {
		return nil, nil
	}
	var out []byte
	var err error
	eachElement(raw, func(tool string) {
		switch kind(tool) {
		case 'n':
			d.drop("tools[].type=")
			return
		case '{':
		default:
			err = typeError("tools[]", "an object")
			return
		}
		var typ, name, desc, params string
		fieldsOf(tool, func(k, val string) {
			switch k {
			case "type":
				typ = val
			case "name":
				name = val
			case "description":
				desc = val
			case "parameters":
				params = val
			}
		})
		for _, c := range [][2]string{{typ, "tools[].type"}, {name, "tools[].name"}, {desc, "tools[].description"}} {
			if err == nil && !is(c[0], '"') {
				err = typeError(c[1], "a string")
			}
		}
		if t := strAt(typ); t != "function" {
			d.drop("tools[].type=" + t)
			return
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		o := newObj(out).str("type", "function")
		fn := o.open("function")
		fn.raw("name", stringOrEmpty(name))
		if kind(desc) == '"' && desc != `""` {
			fn.raw("description", []byte(desc))
		}
		if kind(params) == 0 || kind(params) == 'n' {
			fn.raw("parameters", []byte(`{"type":"object","properties":{}}`))
		} else {
			fn.raw("parameters", []byte(params))
		}
		o.close(fn)
		out = o.end()
	})
	return out, err
}

// stringOrEmpty is a JSON string as it stands, or "" for null or nothing.
func stringOrEmpty(raw string) []byte {
	if kind(raw) == '"' {
		return []byte(raw)
	}
	return []byte(`""`)
}

// responsesToolChoice is chat's tool_choice for a Responses one, nil when there is none.
func responsesToolChoice(raw string, d *dropper) json.RawMessage {
	switch kind(raw) {
	case 0, 'n':
		return nil
	case '"':
		return json.RawMessage(raw)
	}
	var tc struct {
		Type, Name string
	}
	if json.Unmarshal([]byte(raw), &tc) == nil && tc.Type == "function" && tc.Name != "" {
		return marshalOrNull(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
	}
	d.drop("tool_choice")
	return nil
}

// responsesFormat is chat's response_format for text.format, nil when there is none.
func responsesFormat(text string) json.RawMessage {
	if kind(text) != '{' {
		return nil
	}
	var in struct {
		Format json.RawMessage `json:"format"`
	}
	if json.Unmarshal([]byte(text), &in) != nil || isNull(in.Format) {
		return nil
	}
	var f struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if json.Unmarshal(in.Format, &f) != nil {
		return nil
	}
	switch f.Type {
	case "json_schema":
		js := map[string]any{"name": f.Name, "schema": rawJSON(f.Schema)}
		if f.Strict != nil {
			js["strict"] = *f.Strict
		}
		return marshalOrNull(map[string]any{"type": "json_schema", "json_schema": js})
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`)
	}
	return nil
}

// chatWriter writes chat messages from Responses input items. Function calls join the assistant
// message before them, so the last message stays open until the next one starts.
type chatWriter struct {
	b []byte
	d *dropper
	n int // messages written

	// The open assistant message, when the last item was one: its content and tool calls.
	open    bool
	content string // JSON string, "" for none
	calls   []byte // tool calls, comma-separated
}

// flush writes the open assistant message.
func (w *chatWriter) flush() {
	if !w.open {
		return
	}
	w.open = false
	w.start()
	o := &obj{b: w.b, first: true}
	o.str("role", "assistant")
	if w.content != "" && !(w.content == `""` && len(w.calls) > 0) {
		o.raw("content", []byte(w.content))
	}
	if len(w.calls) > 0 {
		o.key("tool_calls")
		o.b = append(append(append(o.b, '['), w.calls...), ']')
	}
	w.b = append(o.b, '}')
	w.content, w.calls = "", w.calls[:0]
}

// start begins a message object.
func (w *chatWriter) start() {
	if w.n++; w.n > 1 {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '{')
}

// message writes a message whose content is a JSON value as it stands.
func (w *chatWriter) message(role, content string) {
	w.flush()
	w.start()
	o := &obj{b: w.b, first: true}
	o.str("role", role).raw("content", []byte(content))
	w.b = append(o.b, '}')
}

func (w *chatWriter) end() []byte {
	w.flush()
	return w.b
}

// items writes the input items; it reports false when the input is not a list of items.
func (w *chatWriter) items(input string) bool {
	good := true
	eachElement(input, func(it string) {
		switch kind(it) {
		case '{':
			good = good && w.item(it)
		case 'n':
			good = good && w.item("{}")
		default:
			good = false
		}
	})
	return good
}

// item writes one input item; it reports false when a field has the wrong type.
func (w *chatWriter) item(it string) bool {
	var typ, role, callID, name, args, content, output string
	fieldsOf(it, func(k, val string) {
		switch k {
		case "type":
			typ = val
		case "role":
			role = val
		case "call_id":
			callID = val
		case "name":
			name = val
		case "arguments":
			args = val
		case "content":
			content = val
		case "output":
			output = val
		}
	})
	for _, f := range []string{typ, role, callID, name, args} {
		if !is(f, '"') {
			return false
		}
	}
	switch t := strAt(typ); t {
	case "", "message":
		switch r := strAt(role); r {
		case "assistant": // kept open: function calls that follow join it
			text := w.texts(content, "")
			w.flush()
			w.open, w.content = true, text
		case "system", "developer":
			w.message("system", w.texts(content, `\n`))
		default:
			w.flush()
			w.start()
			o := &obj{b: w.b, first: true}
			o.str("role", "user")
			o.key("content")
			o.b = w.userContent(o.b, content)
			w.b = append(o.b, '}')
		}
	case "function_call":
		w.open = true // the assistant message before, or a new one
		if len(w.calls) > 0 {
			w.calls = append(w.calls, ',')
		}
		o := newObj(w.calls)
		if kind(callID) == '"' && callID != `""` {
			o.raw("id", []byte(callID))
		}
		o.str("type", "function")
		fn := o.open("function")
		if kind(name) == '"' && name != `""` {
			fn.raw("name", []byte(name))
		}
		fn.raw("arguments", stringOrEmpty(args))
		o.close(fn)
		w.calls = o.end()
	case "function_call_output":
		text := output
		if kind(output) != '"' {
			text = w.texts(output, "")
		}
		w.flush()
		w.start()
		o := &obj{b: w.b, first: true}
		o.str("role", "tool").raw("content", []byte(text))
		if kind(callID) == '"' && callID != `""` {
			o.raw("tool_call_id", []byte(callID))
		}
		w.b = append(o.b, '}')
	default:
		w.d.drop("input[].type=" + t)
	}
	return true
}

// contentPart is one part of a content list: its type, and its fields as they stand in the JSON.
type contentPart struct{ typ, text, image, detail string }

// contentParts reads a content list (raw is an array). A null part reads as a part without a
// type; ok is false when a part is not an object or a field has the wrong type (encoding/json
// refused the whole list then, and so does this).
func contentParts(raw string) (parts []contentPart, ok bool) {
	ok = true
	eachElement(raw, func(p string) {
		switch kind(p) {
		case '{':
		case 'n':
			parts = append(parts, contentPart{})
			return
		default:
			ok = false
			return
		}
		var typ string
		var c contentPart
		fieldsOf(p, func(k, v string) {
			switch k {
			case "type":
				typ = v
			case "text":
				c.text = v
			case "image_url":
				c.image = v
			case "detail":
				c.detail = v
			}
		})
		if !is(typ, '"') || !is(c.text, '"') || !is(c.detail, '"') {
			ok = false
			return
		}
		c.typ = strAt(typ)
		parts = append(parts, c)
	})
	return parts, ok
}

// texts joins a content's texts (a string, or text parts: input_text, output_text, text, refusal)
// with sep (as JSON text) into one JSON string.
func (w *chatWriter) texts(raw, sep string) string {
	switch kind(raw) {
	case 0, 'n':
		return `""`
	case '"':
		return raw
	case '[':
	default:
		w.d.drop("input[].content")
		return `""`
	}
	parts, ok := contentParts(raw)
	if !ok {
		w.d.drop("input[].content")
		return `""`
	}
	var b strings.Builder
	b.WriteByte('"')
	n := 0
	for _, p := range parts {
		switch p.typ {
		case "input_text", "output_text", "text", "refusal":
			if n++; n > 1 {
				b.WriteString(sep)
			}
			b.WriteString(string(textAt(p.text)))
		default:
			w.d.drop("input[].content[].type=" + p.typ)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// userContent writes a user message's content: a string, text and images.
func (w *chatWriter) userContent(dst []byte, raw string) []byte {
	switch kind(raw) {
	case '"':
		return append(dst, raw...)
	case 'n':
		return append(dst, "null"...)
	case '[':
	default:
		w.d.drop("input[].content")
		return append(dst, `""`...)
	}
	in, ok := contentParts(raw)
	if !ok {
		w.d.drop("input[].content")
		return append(dst, `""`...)
	}
	type part struct{ text, url, detail string } // text: a JSON string, or "" for an image
	var parts []part
	for _, p := range in {
		switch p.typ {
		case "input_text", "text":
			parts = append(parts, part{text: string(stringOrEmpty(p.text))})
		case "input_image":
			if kind(p.image) != '"' || p.image == `""` {
				w.d.drop("input[].content[].file_id")
				continue
			}
			parts = append(parts, part{url: p.image, detail: p.detail})
		default:
			w.d.drop("input[].content[].type=" + p.typ)
		}
	}
	switch {
	case len(parts) == 0:
		return append(dst, "null"...)
	case len(parts) == 1 && parts[0].url == "":
		return append(dst, parts[0].text...)
	}
	dst = append(dst, '[')
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		o := newObj(dst)
		if p.url == "" {
			o.str("type", "text")
			if p.text != `""` {
				o.raw("text", []byte(p.text))
			}
		} else {
			img := o.str("type", "image_url").open("image_url")
			img.raw("url", []byte(p.url))
			if kind(p.detail) == '"' && p.detail != `""` {
				img.raw("detail", []byte(p.detail))
			}
			o.close(img)
		}
		dst = o.end()
	}
	return append(dst, ']')
}
