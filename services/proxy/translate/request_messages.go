package translate

import (
	"errors"
	"strconv"
	"strings"
)

// A messages request is read in one pass of the scanner (scan.go) and the chat request is
// written with the JSON writer (jsonw.go), as for Responses requests: an agent such as Claude Code
// sends its whole conversation, its system prompt and its tools with every turn, and reading that
// through encoding/json (the body, then each message's content, then each tool result's content,
// each decode validating its part again, then encoding the result) cost milliseconds a turn.
// Texts keep the form they had in the client's JSON.

// effortOf maps an Anthropic thinking budget to OpenAI's reasoning effort.
func effortOf(budget int) string {
	switch {
	case budget < 4096:
		return "low"
	case budget < 16384:
		return "medium"
	}
	return "high"
}

// msgFields are the top-level values of a messages request as they stand in its JSON.
type msgFields struct {
	model, messages, system, maxTokens, temperature, topP, topK, stop, stream, tools, toolChoice, thinking, metadata string
}

// kindName names the kinds the fields of a messages request have.
var kindName = map[byte]string{'"': "a string", '0': "a number", 't': "a boolean"}

// notMessages is the error for a field whose value has the wrong type.
func notMessages(field, want string) error {
	return errors.New("not a messages request: " + field + " must be " + want)
}

// MessagesToChat turns an Anthropic messages request into an OpenAI chat completions request.
// A streamed request asks for usage (stream_options.include_usage), which the Anthropic stream
// reports at its end.
func MessagesToChat(body []byte, t Target) (Request, error) {
	s := string(body) // the one copy: every value read below is a part of it
	var f msgFields
	d := &dropper{}
	ok := document(s, func(k string, v int) int {
		e := valueEnd(s, v, 1)
		if e < 0 {
			return -1
		}
		raw := s[v:e]
		switch k {
		case "model":
			f.model = raw
		case "messages":
			f.messages = raw
		case "system":
			f.system = raw
		case "max_tokens":
			f.maxTokens = raw
		case "temperature":
			f.temperature = raw
		case "top_p":
			f.topP = raw
		case "top_k":
			f.topK = raw
			d.drop(k) // OpenAI has no top_k
		case "stop_sequences":
			f.stop = raw
		case "stream":
			f.stream = raw
		case "tools":
			f.tools = raw
		case "tool_choice":
			f.toolChoice = raw
		case "thinking":
			f.thinking = raw
		case "metadata":
			f.metadata = raw
		default:
			d.drop(k)
		}
		return e
	})
	if !ok {
		return Request{}, errors.New("not a messages request: the body is not a JSON object")
	}
	for _, c := range []struct {
		raw, field, what string
		kinds            []byte
	}{
		{f.model, "model", "a string", []byte{'"'}},
		{f.messages, "messages", "a list", []byte{'['}},
		{f.maxTokens, "max_tokens", "an integer", []byte{'0'}},
		{f.temperature, "temperature", "a number", []byte{'0'}},
		{f.topP, "top_p", "a number", []byte{'0'}},
		{f.topK, "top_k", "an integer", []byte{'0'}},
		{f.stop, "stop_sequences", "a list of strings", []byte{'['}},
		{f.stream, "stream", "a boolean", []byte{'t'}},
		{f.tools, "tools", "a list", []byte{'['}},
		{f.toolChoice, "tool_choice", "an object", []byte{'{'}},
		{f.thinking, "thinking", "an object", []byte{'{'}},
		{f.metadata, "metadata", "an object", []byte{'{'}},
	} {
		if !is(c.raw, c.kinds...) {
			return Request{}, notMessages(c.field, c.what)
		}
	}
	for _, c := range [][2]string{{f.maxTokens, "max_tokens"}, {f.topK, "top_k"}} {
		if kind(c[0]) == '0' {
			if _, err := strconv.Atoi(c[0]); err != nil || !isInt(c[0]) {
				return Request{}, notMessages(c[1], "an integer")
			}
		}
	}
	var stop []string
	var err error
	if kind(f.stop) == '[' {
		eachElement(f.stop, func(v string) {
			switch kind(v) {
			case '"':
				stop = append(stop, v)
			case 'n':
				stop = append(stop, `""`)
			default:
				err = notMessages("stop_sequences", "a list of strings")
			}
		})
	}
	var thinkingType, budget, userID, choiceType, choiceName, disableParallel string
	sub := []struct {
		raw, name string
		fields    map[string]*string
		kinds     map[string]byte
	}{
		{f.thinking, "thinking", map[string]*string{"type": &thinkingType, "budget_tokens": &budget}, map[string]byte{"type": '"', "budget_tokens": '0'}},
		{f.metadata, "metadata", map[string]*string{"user_id": &userID}, map[string]byte{"user_id": '"'}},
		{f.toolChoice, "tool_choice", map[string]*string{"type": &choiceType, "name": &choiceName, "disable_parallel_tool_use": &disableParallel},
			map[string]byte{"type": '"', "name": '"', "disable_parallel_tool_use": 't'}},
	}
	for _, o := range sub {
		if kind(o.raw) != '{' {
			continue
		}
		fieldsOf(o.raw, func(k, v string) {
			if p, ok := o.fields[k]; ok {
				*p = v
				if err == nil && !is(v, o.kinds[k]) {
					err = notMessages(o.name+"."+k, kindName[o.kinds[k]])
				}
			}
		})
	}
	if kind(budget) == '0' && !isInt(budget) && err == nil {
		err = notMessages("thinking.budget_tokens", "an integer")
	}
	tools, terr := msgTools(f.tools, d)
	if err == nil {
		err = terr
	}
	if err != nil {
		return Request{}, err
	}

	out := newObj(make([]byte, 0, len(s)+256))
	out.raw("model", stringOrEmpty(f.model))
	out.key("messages")
	w := &msgChatWriter{b: append(out.b, '['), d: d}
	if sys := w.systemText(f.system); sys != "" {
		w.message("system", `"`+sys+`"`)
	}
	if kind(f.messages) == '[' {
		i := 0
		bad := false
		eachElement(f.messages, func(m string) {
			defer func() { i++ }()
			if kind(m) != '{' && kind(m) != 'n' {
				bad = true
				return
			}
			var role, content string
			if kind(m) == '{' {
				fieldsOf(m, func(k, v string) {
					switch k {
					case "role":
						role = v
					case "content":
						content = v
					}
				})
			}
			if !is(role, '"') {
				bad = true
				return
			}
			blocks, ok := contentBlocks(content)
			if !ok {
				d.drop("messages[" + strconv.Itoa(i) + "].content")
				return
			}
			switch r := strAt(role); r {
			case "user":
				w.user(blocks)
			case "assistant":
				w.assistant(blocks)
			default:
				d.drop("messages[" + strconv.Itoa(i) + "].role=" + r)
			}
		})
		if bad {
			return Request{}, notMessages("messages[]", "objects with a string role")
		}
	}
	out.b = append(w.b, ']')
	if n, _ := strconv.Atoi(f.maxTokens); kind(f.maxTokens) == '0' && n > 0 {
		if t.MaxCompletionTokens {
			out.int("max_completion_tokens", int64(n))
		} else {
			out.int("max_tokens", int64(n))
		}
	}
	if kind(f.temperature) == '0' {
		out.raw("temperature", []byte(f.temperature))
	}
	if kind(f.topP) == '0' {
		out.raw("top_p", []byte(f.topP))
	}
	if len(stop) > 0 {
		out.key("stop")
		out.b = append(out.b, '[')
		for i, v := range stop {
			if i > 0 {
				out.b = append(out.b, ',')
			}
			out.b = append(out.b, v...)
		}
		out.b = append(out.b, ']')
	}
	if f.stream == "true" {
		out.raw("stream", []byte("true")).raw("stream_options", []byte(`{"include_usage":true}`))
	}
	if len(tools) > 0 {
		out.key("tools")
		out.b = append(append(append(out.b, '['), tools...), ']')
	}
	if kind(f.toolChoice) == '{' {
		switch ct := strAt(choiceType); ct {
		case "auto":
			out.raw("tool_choice", []byte(`"auto"`))
		case "any":
			out.raw("tool_choice", []byte(`"required"`))
		case "none":
			out.raw("tool_choice", []byte(`"none"`))
		case "tool":
			tc := out.open("tool_choice").str("type", "function")
			tc.close(tc.open("function").raw("name", stringOrEmpty(choiceName)))
			out.close(tc)
		default:
			d.drop("tool_choice.type=" + ct)
		}
		if disableParallel == "true" && len(tools) > 0 {
			out.raw("parallel_tool_calls", []byte("false"))
		}
	}
	if strAt(thinkingType) == "enabled" {
		n, _ := strconv.Atoi(budget)
		out.str("reasoning_effort", effortOf(n))
	}
	if kind(userID) == '"' && userID != `""` {
		out.raw("user", []byte(userID))
	}
	return Request{Body: out.end(), Dropped: d.names}, nil
}

// msgTools writes the client tools as chat tools, comma-separated; Anthropic's server tools have
// no OpenAI twin and are dropped.
func msgTools(raw string, d *dropper) ([]byte, error) {
	if kind(raw) != '[' {
		return nil, nil
	}
	var out []byte
	var err error
	eachElement(raw, func(tool string) {
		if kind(tool) != '{' && kind(tool) != 'n' {
			err = notMessages("tools[]", "objects")
			return
		}
		var typ, name, desc, schema string
		if kind(tool) == '{' {
			fieldsOf(tool, func(k, v string) {
				switch k {
				case "type":
					typ = v
				case "name":
					name = v
				case "description":
					desc = v
				case "input_schema":
					schema = v
				}
			})
		}
		for _, c := range [][2]string{{typ, "tools[].type"}, {name, "tools[].name"}, {desc, "tools[].description"}} {
			if err == nil && !is(c[0], '"') {
				err = notMessages(c[1], "a string")
			}
		}
		if t := strAt(typ); t != "" && t != "custom" {
			d.drop("tools[].type=" + t)
			return
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		o := newObj(out).str("type", "function")
		fn := o.open("function").raw("name", stringOrEmpty(name))
		if kind(desc) == '"' && desc != `""` {
			fn.raw("description", []byte(desc))
		}
		if kind(schema) == 0 || kind(schema) == 'n' {
			fn.raw("parameters", []byte(`{"type":"object","properties":{}}`))
		} else {
			fn.raw("parameters", []byte(schema))
		}
		o.close(fn)
		out = o.end()
	})
	return out, err
}

// msgBlockRaw is one content block of a messages request, its fields as they stand in the JSON.
type msgBlockRaw struct {
	typ                                       string // unescaped
	text, id, name, toolUseID, input, content string
	isError                                   bool
	source                                    string
}

// contentBlocks reads a message content: a string (one text block) or a list of blocks. ok is
// false when it is neither, or when a block has a field of the wrong type (encoding/json refused
// the whole content then, and so does this).
func contentBlocks(raw string) (blocks []msgBlockRaw, ok bool) {
	switch kind(raw) {
	case '"':
		return []msgBlockRaw{{typ: "text", text: raw}}, true
	case 'n':
		return nil, true
	case '[':
	default:
		return nil, false
	}
	ok = true
	eachElement(raw, func(b string) {
		switch kind(b) {
		case 'n':
			blocks = append(blocks, msgBlockRaw{})
			return
		case '{':
		default:
			ok = false
			return
		}
		var x msgBlockRaw
		var typ, isError, thinking, signature string
		fieldsOf(b, func(k, v string) {
			switch k {
			case "type":
				typ = v
			case "text":
				x.text = v
			case "id":
				x.id = v
			case "name":
				x.name = v
			case "tool_use_id":
				x.toolUseID = v
			case "input":
				x.input = v
			case "content":
				x.content = v
			case "is_error":
				isError = v
			case "thinking":
				thinking = v
			case "signature":
				signature = v
			case "source":
				x.source = v
			}
		})
		for _, v := range []string{typ, x.text, x.id, x.name, x.toolUseID, thinking, signature} {
			if !is(v, '"') {
				ok = false
			}
		}
		if !is(isError, 't') || !is(x.source, '{') || !validSource(x.source) {
			ok = false
		}
		x.typ, x.isError = strAt(typ), isError == "true"
		blocks = append(blocks, x)
	})
	return blocks, ok
}

// validSource reports whether an image source's fields are strings (or null).
func validSource(raw string) bool {
	if kind(raw) != '{' {
		return true
	}
	good := true
	fieldsOf(raw, func(k, v string) {
		switch k {
		case "type", "media_type", "data", "url":
			if !is(v, '"') {
				good = false
			}
		}
	})
	return good
}

// msgChatWriter writes chat messages from a messages request.
type msgChatWriter struct {
	b []byte
	d *dropper
	n int
}

func (w *msgChatWriter) start() *obj {
	if w.n++; w.n > 1 {
		w.b = append(w.b, ',')
	}
	return newObj(w.b)
}

func (w *msgChatWriter) done(o *obj) { w.b = o.end() }

// message writes a message whose content is a JSON value as it stands.
func (w *msgChatWriter) message(role, content string) {
	w.done(w.start().str("role", role).raw("content", []byte(content)))
}

// systemText joins a system prompt given as a string or as text blocks (as jtext, "\n\n" apart).
func (w *msgChatWriter) systemText(raw string) string {
	switch kind(raw) {
	case 0, 'n':
		return ""
	case '"':
		return string(textAt(raw))
	case '[':
	default:
		w.d.drop("system")
		return ""
	}
	blocks, ok := contentBlocks(raw)
	if !ok {
		w.d.drop("system")
		return ""
	}
	var b strings.Builder
	n := 0
	for _, x := range blocks {
		if x.typ != "text" {
			w.d.drop("system[].type=" + x.typ)
			continue
		}
		if n++; n > 1 {
			b.WriteString(`\n\n`)
		}
		b.WriteString(string(textAt(x.text)))
	}
	return b.String()
}

// user writes a user turn: its tool results first, as tool messages (they answer the assistant's
// calls just before), then the rest as one user message.
func (w *msgChatWriter) user(blocks []msgBlockRaw) {
	type part struct{ text, url string } // text as it stands, or an image's URL (unescaped)
	var parts []part
	for _, b := range blocks {
		switch b.typ {
		case "tool_result":
			content := w.toolResultText(b.content)
			if b.isError && !strings.HasPrefix(content, "Error") {
				content = "Error: " + content
			}
			o := w.start().str("role", "tool").raw("content", []byte(`"`+content+`"`))
			if kind(b.toolUseID) == '"' && b.toolUseID != `""` {
				o.raw("tool_call_id", []byte(b.toolUseID))
			}
			w.done(o)
		case "text":
			parts = append(parts, part{text: string(stringOrEmpty(b.text))})
		case "image":
			if u := imageURL(b.source); u != "" {
				parts = append(parts, part{url: u})
			} else {
				w.d.drop("messages[].content[].source")
			}
		default:
			w.d.drop("messages[].content[].type=" + b.typ)
		}
	}
	switch {
	case len(parts) == 1 && parts[0].url == "":
		w.message("user", parts[0].text)
	case len(parts) > 0:
		o := w.start().str("role", "user")
		o.key("content")
		o.b = append(o.b, '[')
		for i, p := range parts {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			part := newObj(o.b)
			if p.url == "" {
				part.str("type", "text")
				if p.text != `""` {
					part.raw("text", []byte(p.text))
				}
			} else {
				part.str("type", "image_url")
				part.close(part.open("image_url").str("url", p.url))
			}
			o.b = part.end()
		}
		o.b = append(o.b, ']')
		w.done(o)
	}
}

// assistant writes an assistant turn as one chat message with its text and tool calls.
func (w *msgChatWriter) assistant(blocks []msgBlockRaw) {
	var text strings.Builder
	var calls []byte
	for _, b := range blocks {
		switch b.typ {
		case "text":
			text.WriteString(string(textAt(b.text)))
		case "tool_use":
			if len(calls) > 0 {
				calls = append(calls, ',')
			}
			c := newObj(calls)
			if kind(b.id) == '"' && b.id != `""` {
				c.raw("id", []byte(b.id))
			}
			c.str("type", "function")
			fn := c.open("function")
			if kind(b.name) == '"' && b.name != `""` {
				fn.raw("name", []byte(b.name))
			}
			args := b.input // valid JSON: only its kind is checked
			if kind(args) != '{' {
				args = "{}"
			}
			c.close(fn.str("arguments", args))
			calls = c.end()
		case "thinking", "redacted_thinking":
			w.d.drop("messages[].content[].type=" + b.typ) // reasoning is not sent back to OpenAI models
		default:
			w.d.drop("messages[].content[].type=" + b.typ)
		}
	}
	o := w.start().str("role", "assistant")
	if text.Len() > 0 || len(calls) == 0 {
		o.raw("content", []byte(`"`+text.String()+`"`))
	}
	if len(calls) > 0 {
		o.key("tool_calls")
		o.b = append(append(append(o.b, '['), calls...), ']')
	}
	w.done(o)
}

// toolResultText is a tool_result's content as jtext (images in it cannot ride a tool message).
func (w *msgChatWriter) toolResultText(raw string) string {
	switch kind(raw) {
	case '"':
		return string(textAt(raw))
	case '[':
	default:
		return ""
	}
	blocks, ok := contentBlocks(raw)
	if !ok {
		return ""
	}
	var b strings.Builder
	n := 0
	for _, x := range blocks {
		if x.typ != "text" {
			w.d.drop("messages[].content[].content[].type=" + x.typ)
			continue
		}
		if n++; n > 1 {
			b.WriteString(`\n`)
		}
		b.WriteString(string(textAt(x.text)))
	}
	return b.String()
}

// imageURL is an Anthropic image source as an OpenAI image URL (a data URL for base64).
func imageURL(src string) string {
	if kind(src) != '{' {
		return ""
	}
	var typ, mediaType, data, url string
	fieldsOf(src, func(k, v string) {
		switch k {
		case "type":
			typ = strAt(v)
		case "media_type":
			mediaType = strAt(v)
		case "data":
			data = strAt(v)
		case "url":
			url = strAt(v)
		}
	})
	switch typ {
	case "base64":
		return "data:" + mediaType + ";base64," + data
	case "url":
		return url
	}
	return ""
}
