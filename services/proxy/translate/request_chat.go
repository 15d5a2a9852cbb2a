package translate

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// A chat completions request is read in one pass of the scanner (scan.go) and the messages
// request is written with the JSON writer (jsonw.go), as the other request translators do: no
// reflection, no second validation of nested parts, texts copied in the form they came in.

// minThinkingBudget is the smallest thinking budget Anthropic accepts.
const minThinkingBudget = 1024

// thinkingBudgets maps OpenAI's reasoning effort to an Anthropic thinking budget.
var thinkingBudgets = map[string]int{"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}

// notChat is the error for a field whose value has the wrong type.
func notChat(field, want string) error {
	return errors.New("not a chat completions request: " + field + " must be " + want)
}

// chatFields are the top-level values of a chat completions request as they stand in its JSON.
type chatFields struct {
	model, messages, maxTokens, maxCompletionTokens, temperature, topP, stop, stream, streamOptions,
	tools, toolChoice, parallel, effort, user string
}

// turn is a messages turn being built: its role and its content blocks, each written as JSON.
type turn struct {
	role   string
	blocks [][]byte
	result []bool // whether each block is a tool_result
}

// ChatToMessages turns an OpenAI chat completions request into an Anthropic messages request.
func ChatToMessages(body []byte, t Target) (Request, error) {
	s := string(body) // the one copy: every value read below is a part of it
	var f chatFields
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
		case "max_tokens":
			f.maxTokens = raw
		case "max_completion_tokens":
			f.maxCompletionTokens = raw
		case "temperature":
			f.temperature = raw
		case "top_p":
			f.topP = raw
		case "stop":
			f.stop = raw
		case "stream":
			f.stream = raw
		case "stream_options":
			f.streamOptions = raw
		case "tools":
			f.tools = raw
		case "tool_choice":
			f.toolChoice = raw
		case "parallel_tool_calls":
			f.parallel = raw
		case "reasoning_effort":
			f.effort = raw
		case "user":
			f.user = raw
		default:
			d.drop(k)
		}
		return e
	})
	if !ok {
		return Request{}, errors.New("not a chat completions request: the body is not a JSON object")
	}
	for _, c := range []struct {
		raw, field, what string
		kinds            []byte
	}{
		{f.model, "model", "a string", []byte{'"'}},
		{f.messages, "messages", "a list", []byte{'['}},
		{f.maxTokens, "max_tokens", "an integer", []byte{'0'}},
		{f.maxCompletionTokens, "max_completion_tokens", "an integer", []byte{'0'}},
		{f.temperature, "temperature", "a number", []byte{'0'}},
		{f.topP, "top_p", "a number", []byte{'0'}},
		{f.stream, "stream", "a boolean", []byte{'t'}},
		{f.streamOptions, "stream_options", "an object", []byte{'{'}},
		{f.tools, "tools", "a list", []byte{'['}},
		{f.parallel, "parallel_tool_calls", "a boolean", []byte{'t'}},
		{f.effort, "reasoning_effort", "a string", []byte{'"'}},
		{f.user, "user", "a string", []byte{'"'}},
	} {
		if !is(c.raw, c.kinds...) {
			return Request{}, notChat(c.field, c.what)
		}
	}
	for _, c := range [][2]string{{f.maxTokens, "max_tokens"}, {f.maxCompletionTokens, "max_completion_tokens"}} {
		if kind(c[0]) == '0' {
			if _, err := strconv.Atoi(c[0]); err != nil || !isInt(c[0]) {
				return Request{}, notChat(c[1], "an integer")
			}
		}
	}
	if kind(f.streamOptions) == '{' {
		var err error
		fieldsOf(f.streamOptions, func(k, v string) {
			if k == "include_usage" && !is(v, 't') {
				err = notChat("stream_options.include_usage", "a boolean")
			}
		})
		if err != nil {
			return Request{}, err
		}
	}

	clientMax := true
	var maxTokens int
	switch {
	case kind(f.maxCompletionTokens) == '0':
		maxTokens, _ = strconv.Atoi(f.maxCompletionTokens)
	case kind(f.maxTokens) == '0':
		maxTokens, _ = strconv.Atoi(f.maxTokens)
	default:
		clientMax = false
		maxTokens = t.DefaultMaxTokens
		if maxTokens <= 0 {
			maxTokens = defaultMaxTokens
		}
	}
	temperature, topP := f.temperature, f.topP
	if kind(temperature) == '0' {
		if v, err := strconv.ParseFloat(temperature, 64); err == nil && v > 1 {
			temperature = "1" // Anthropic's range is 0–1
		}
	}
	var stop []string // JSON strings
	switch kind(f.stop) {
	case '"':
		stop = []string{f.stop}
	case 0, 'n':
	case '[':
		good := true
		eachElement(f.stop, func(v string) {
			switch kind(v) {
			case '"':
				stop = append(stop, v)
			case 'n':
				stop = append(stop, `""`)
			default:
				good = false
			}
		})
		if !good {
			stop = nil
			d.drop("stop")
		}
	default:
		d.drop("stop")
	}
	effort := strAt(f.effort)
	budget, thinking := thinkingBudgets[effort]
	if thinking {
		// Anthropic counts thinking inside max_tokens and wants the budget below it (and at
		// least 1,024): a limit the client set is kept and the budget fits under it.
		switch {
		case !clientMax:
			maxTokens += budget
		case maxTokens > budget:
		case maxTokens > minThinkingBudget:
			budget = maxTokens - 1
		default:
			budget = minThinkingBudget
			maxTokens += minThinkingBudget
		}
		// Anthropic refuses sampling changes while thinking.
		if kind(temperature) == '0' {
			temperature = ""
			d.drop("temperature")
		}
		if kind(topP) == '0' {
			topP = ""
			d.drop("top_p")
		}
	} else if effort != "" && effort != "none" {
		d.drop("reasoning_effort")
	}
	tools, err := chatTools(f.tools, d)
	if err != nil {
		return Request{}, err
	}
	choice := chatToolChoice(json.RawMessage(f.toolChoice), d)
	if f.parallel == "false" && len(tools) > 0 {
		if choice == nil {
			choice = &msgToolChoice{Type: "auto"}
		}
		if choice.Type != "none" {
			choice.DisableParallelToolUse = true
		}
	}

	var system [][]byte
	var turns []turn
	if kind(f.messages) == '[' {
		i := 0
		eachElement(f.messages, func(m string) {
			defer func() { i++ }()
			if err != nil {
				return
			}
			if kind(m) != '{' && kind(m) != 'n' {
				err = notChat("messages[]", "objects")
				return
			}
			var role, content, toolCalls, toolCallID, reasoning, name string
			if kind(m) == '{' {
				fieldsOf(m, func(k, v string) {
					switch k {
					case "role":
						role = v
					case "content":
						content = v
					case "tool_calls":
						toolCalls = v
					case "tool_call_id":
						toolCallID = v
					case "reasoning_content":
						reasoning = v
					case "name":
						name = v
					}
				})
			}
			for _, c := range [][2]string{{role, "role"}, {toolCallID, "tool_call_id"}, {reasoning, "reasoning_content"}, {name, "name"}} {
				if err == nil && !is(c[0], '"') {
					err = notChat("messages[]."+c[1], "a string")
				}
			}
			calls, cerr := chatToolCalls(toolCalls)
			if err == nil {
				err = cerr
			}
			if err != nil {
				return
			}
			switch r := strAt(role); r {
			case "system", "developer":
				for _, text := range chatTexts(content, d) {
					if text != "" { // Anthropic refuses empty text blocks
						system = append(system, textBlock(text))
					}
				}
			case "user":
				if blocks := chatUserBlocks(content, d); len(blocks) > 0 {
					turns = appendTurn(turns, "user", blocks, false)
				}
			case "assistant":
				if kind(reasoning) == '"' && reasoning != `""` {
					d.drop("messages[].reasoning_content") // Anthropic wants its own signed thinking back
				}
				var blocks [][]byte
				for _, text := range chatTexts(content, d) {
					if text != "" {
						blocks = append(blocks, textBlock(text))
					}
				}
				blocks = append(blocks, calls...)
				if len(blocks) > 0 {
					turns = appendTurn(turns, "assistant", blocks, false)
				}
			case "tool", "function":
				res := newObj(nil).str("type", "tool_result")
				if kind(toolCallID) == '"' && toolCallID != `""` {
					res.raw("tool_use_id", []byte(toolCallID))
				}
				res.key("content")
				res.b = toolResultContent(res.b, content, d)
				turns = appendTurn(turns, "user", [][]byte{res.end()}, true)
			default:
				d.drop("messages[" + strconv.Itoa(i) + "].role=" + r)
			}
		})
		if err != nil {
			return Request{}, err
		}
	}

	out := newObj(make([]byte, 0, len(s)+256))
	out.raw("model", stringOrEmpty(f.model))
	out.key("messages")
	out.b = append(out.b, '[')
	for i, tn := range turns {
		if i > 0 {
			out.b = append(out.b, ',')
		}
		m := newObj(out.b).str("role", tn.role)
		m.key("content")
		m.b = appendList(m.b, tn.blocks)
		out.b = m.end()
	}
	out.b = append(out.b, ']')
	if len(system) > 0 {
		out.key("system")
		out.b = appendList(out.b, system)
	}
	out.int("max_tokens", int64(maxTokens))
	if kind(temperature) == '0' {
		out.raw("temperature", []byte(temperature))
	}
	if kind(topP) == '0' {
		out.raw("top_p", []byte(topP))
	}
	if len(stop) > 0 {
		out.key("stop_sequences")
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
		out.raw("stream", []byte("true"))
	}
	if len(tools) > 0 {
		out.key("tools")
		out.b = append(append(append(out.b, '['), tools...), ']')
	}
	if choice != nil {
		tc := out.open("tool_choice").str("type", choice.Type)
		if choice.Name != "" {
			tc.str("name", choice.Name)
		}
		if choice.DisableParallelToolUse {
			tc.raw("disable_parallel_tool_use", []byte("true"))
		}
		out.close(tc)
	}
	if thinking {
		out.close(out.open("thinking").str("type", "enabled").int("budget_tokens", int64(budget)))
	}
	if kind(f.user) == '"' && f.user != `""` {
		out.close(out.open("metadata").raw("user_id", []byte(f.user)))
	}
	return Request{Body: out.end(), Dropped: d.names}, nil
}

// appendList writes JSON values as a list.
func appendList(dst []byte, items [][]byte) []byte {
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, it...)
	}
	return append(dst, ']')
}

// textBlock is a text content block.
func textBlock(text jtext) []byte {
	return newObj(make([]byte, 0, len(text)+32)).str("type", "text").text("text", text).end()
}

// chatTools writes the function tools as Anthropic tools, comma-separated; other tools are
// dropped.
func chatTools(raw string, d *dropper) ([]byte, error) {
	if kind(raw) != '[' {
		return nil, nil
	}
	var out []byte
	var err error
	eachElement(raw, func(tool string) {
		if kind(tool) != '{' && kind(tool) != 'n' {
			err = notChat("tools[]", "objects")
			return
		}
		var typ, fn string
		if kind(tool) == '{' {
			fieldsOf(tool, func(k, v string) {
				switch k {
				case "type":
					typ = v
				case "function":
					fn = v
				}
			})
		}
		if err == nil && !is(typ, '"') {
			err = notChat("tools[].type", "a string")
		}
		if err == nil && !is(fn, '{') {
			err = notChat("tools[].function", "an object")
		}
		var name, desc, params string
		if kind(fn) == '{' {
			fieldsOf(fn, func(k, v string) {
				switch k {
				case "name":
					name = v
				case "description":
					desc = v
				case "parameters":
					params = v
				}
			})
		}
		for _, c := range [][2]string{{name, "tools[].function.name"}, {desc, "tools[].function.description"}} {
			if err == nil && !is(c[0], '"') {
				err = notChat(c[1], "a string")
			}
		}
		if t := strAt(typ); t != "" && t != "function" {
			d.drop("tools[].type=" + t)
			return
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		o := newObj(out).raw("name", stringOrEmpty(name))
		if kind(desc) == '"' && desc != `""` {
			o.raw("description", []byte(desc))
		}
		if kind(params) == 0 || kind(params) == 'n' {
			o.raw("input_schema", []byte(`{"type":"object","properties":{}}`))
		} else {
			o.raw("input_schema", []byte(params))
		}
		out = o.end()
	})
	return out, err
}

// chatToolCalls writes an assistant message's tool calls as tool_use blocks.
func chatToolCalls(raw string) ([][]byte, error) {
	if kind(raw) == 0 || kind(raw) == 'n' {
		return nil, nil
	}
	if kind(raw) != '[' {
		return nil, notChat("messages[].tool_calls", "a list")
	}
	var out [][]byte
	var err error
	eachElement(raw, func(tc string) {
		if kind(tc) != '{' && kind(tc) != 'n' {
			err = notChat("messages[].tool_calls[]", "objects")
			return
		}
		var index, id, typ, fn, name, args string
		if kind(tc) == '{' {
			fieldsOf(tc, func(k, v string) {
				switch k {
				case "index":
					index = v
				case "id":
					id = v
				case "type":
					typ = v
				case "function":
					fn = v
				}
			})
		}
		if !is(fn, '{') {
			err = notChat("messages[].tool_calls[].function", "an object")
			return
		}
		if kind(fn) == '{' {
			fieldsOf(fn, func(k, v string) {
				switch k {
				case "name":
					name = v
				case "arguments":
					args = v
				}
			})
		}
		for _, c := range []string{id, typ, name, args} {
			if err == nil && !is(c, '"') {
				err = notChat("messages[].tool_calls[]", "strings where strings belong")
			}
		}
		if err == nil && (!is(index, '0') || kind(index) == '0' && !isInt(index)) {
			err = notChat("messages[].tool_calls[].index", "an integer")
		}
		b := newObj(nil).str("type", "tool_use")
		if kind(id) == '"' && id != `""` {
			b.raw("id", []byte(id))
		}
		if kind(name) == '"' && name != `""` {
			b.raw("name", []byte(name))
		}
		b.raw("input", objectOrEmpty([]byte(strAt(args))))
		out = append(out, b.end())
	})
	return out, err
}

// appendTurn adds blocks as a turn of role, joining them to the previous turn when it has the
// same role (tool results of parallel calls belong in one user turn). Tool results come first in
// a user turn.
func appendTurn(list []turn, role string, blocks [][]byte, results bool) []turn {
	flags := make([]bool, len(blocks))
	for i := range flags {
		flags[i] = results
	}
	n := len(list)
	if n == 0 || list[n-1].role != role {
		return append(list, turn{role: role, blocks: blocks, result: flags})
	}
	prev := &list[n-1]
	if role == "user" && results {
		i := 0
		for i < len(prev.result) && prev.result[i] {
			i++
		}
		prev.blocks = append(prev.blocks[:i:i], append(blocks, prev.blocks[i:]...)...)
		prev.result = append(prev.result[:i:i], append(flags, prev.result[i:]...)...)
		return list
	}
	prev.blocks = append(prev.blocks, blocks...)
	prev.result = append(prev.result, flags...)
	return list
}

func marshalOrNull(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// chatParts reads a content list (raw is an array) as its parts' types, texts and image URLs;
// ok is false when a part is not an object or a field has the wrong type (encoding/json refused
// the whole list then, and so does this).
func chatParts(raw string) (parts []contentPart, ok bool) {
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
		var typ, image string
		var c contentPart
		fieldsOf(p, func(k, v string) {
			switch k {
			case "type":
				typ = v
			case "text":
				c.text = v
			case "image_url":
				image = v
			}
		})
		if !is(typ, '"') || !is(c.text, '"') || !is(image, '{') {
			ok = false
			return
		}
		if kind(image) == '{' {
			c.image = `""`
			fieldsOf(image, func(k, v string) {
				switch {
				case !is(v, '"'):
					if k == "url" || k == "detail" {
						ok = false
					}
				case k == "url":
					c.image = v
				}
			})
		}
		c.typ = strAt(typ)
		parts = append(parts, c)
	})
	return parts, ok
}

// chatTexts reads a message content that is a string or a list of text parts.
func chatTexts(raw string, d *dropper) []jtext {
	switch kind(raw) {
	case 0, 'n':
		return nil
	case '"':
		return []jtext{textAt(raw)}
	case '[':
	default:
		d.drop("messages[].content")
		return nil
	}
	parts, ok := chatParts(raw)
	if !ok {
		d.drop("messages[].content")
		return nil
	}
	var out []jtext
	for _, p := range parts {
		if p.typ == "text" {
			out = append(out, textAt(p.text))
		} else {
			d.drop("messages[].content[].type=" + p.typ)
		}
	}
	return out
}

// chatUserBlocks reads a user message's content: text and images.
func chatUserBlocks(raw string, d *dropper) [][]byte {
	switch kind(raw) {
	case 0, 'n':
		return nil
	case '"':
		if raw == `""` {
			return nil
		}
		return [][]byte{textBlock(textAt(raw))}
	case '[':
	default:
		d.drop("messages[].content")
		return nil
	}
	parts, ok := chatParts(raw)
	if !ok {
		d.drop("messages[].content")
		return nil
	}
	var out [][]byte
	for _, p := range parts {
		switch p.typ {
		case "text":
			if t := textAt(p.text); t != "" { // Anthropic refuses empty text blocks
				out = append(out, textBlock(t))
			}
		case "image_url":
			if p.image == "" {
				continue // no image_url object
			}
			u := strAt(p.image)
			if mt, data, ok := parseDataURL(u); ok {
				b := newObj(nil).str("type", "image")
				b.close(b.open("source").str("type", "base64").str("media_type", mt).str("data", data))
				out = append(out, b.end())
			} else if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
				b := newObj(nil).str("type", "image")
				b.close(b.open("source").str("type", "url").str("url", u))
				out = append(out, b.end())
			} else {
				d.drop("messages[].content[].image_url")
			}
		default:
			d.drop("messages[].content[].type=" + p.typ)
		}
	}
	return out
}

// toolResultContent writes a tool message's content as a tool_result's: a string, or text
// blocks.
func toolResultContent(dst []byte, raw string, d *dropper) []byte {
	if kind(raw) == '"' {
		return append(dst, raw...)
	}
	var blocks [][]byte
	for _, t := range chatTexts(raw, d) {
		if t != "" {
			blocks = append(blocks, textBlock(t))
		}
	}
	if len(blocks) == 0 {
		return append(dst, `""`...)
	}
	return appendList(dst, blocks)
}

// chatToolChoice maps "none", "auto", "required" and {"type":"function",...}.
func chatToolChoice(raw json.RawMessage, d *dropper) *msgToolChoice {
	if isNull(raw) {
		return nil
	}
	if s, ok := asString(raw); ok {
		switch s {
		case "auto":
			return &msgToolChoice{Type: "auto"}
		case "none":
			return &msgToolChoice{Type: "none"}
		case "required":
			return &msgToolChoice{Type: "any"}
		}
		d.drop("tool_choice")
		return nil
	}
	var tc struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &tc) != nil || tc.Function.Name == "" {
		d.drop("tool_choice")
		return nil
	}
	return &msgToolChoice{Type: "tool", Name: tc.Function.Name}
}
