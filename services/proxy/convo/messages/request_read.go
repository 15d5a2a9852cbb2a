package messages

import (
	"errors"
	"strconv"

	"switchyard/services/proxy/convo"
)

// A messages request is validated in one pass of the scanner and then walked without a second
// validation; every text and raw value of the model is a part of the request's one copy. An agent
// such as Claude Code sends its whole conversation, its system prompt and its tools with every
// turn: nothing of that is unescaped, decoded into maps or copied again.

// top are the top-level values of a messages request as they stand in its JSON.
type top struct {
	model, messages, system, maxTokens, temperature, topP, topK, stop, stream, tools, toolChoice,
	thinking, metadata, outputConfig, outputFormat string
}

// ReadRequest reads an Anthropic messages request. A field of the wrong type is an error in the
// words translate gave; what the model cannot hold (an unknown field, a block of a kind it does
// not know) is named in Dropped.
func ReadRequest(body []byte) (*convo.Request, error) {
	s := string(body) // the one copy: every value read below is a part of it
	if !convo.Document(s, nil) {
		return nil, errors.New("not a messages request: the body is not a JSON object")
	}
	r := &convo.Request{}
	var f top
	// Of two fields of the wrong kind, the one earlier in this list is named.
	slots := [...]convo.FieldSlot{
		convo.Field("model", &f.model).Want('"', "a string"),
		convo.Field("messages", &f.messages).Want('[', "a list"),
		convo.Field("system", &f.system),
		convo.Field("max_tokens", &f.maxTokens).WantInt(),
		convo.Field("temperature", &f.temperature).Want('0', "a number"),
		convo.Field("top_p", &f.topP).Want('0', "a number"),
		convo.Field("top_k", &f.topK).WantInt(),
		convo.Field("stop_sequences", &f.stop).Want('[', "a list of strings"),
		convo.Field("stream", &f.stream).Want('t', "a boolean"),
		convo.Field("tools", &f.tools).Want('[', "a list"),
		convo.Field("tool_choice", &f.toolChoice).Want('{', "an object"),
		convo.Field("thinking", &f.thinking).Want('{', "an object"),
		convo.Field("metadata", &f.metadata).Want('{', "an object"),
		convo.Field("output_config", &f.outputConfig).Want('{', "an object"),
		convo.Field("output_format", &f.outputFormat).Want('{', "an object"),
	}
	if name, what, bad := convo.PickRequest(r, s, slots[:]); bad {
		return nil, notMessages(name, what)
	}
	r.Model = convo.StrAt(f.model)
	if convo.Kind(f.maxTokens) == '0' {
		r.MaxTokens, _ = strconv.Atoi(f.maxTokens)
	}
	r.Temperature = floatOf(r, f.temperature, "temperature")
	r.TopP = floatOf(r, f.topP, "top_p")
	if convo.Kind(f.topK) == '0' {
		v, _ := strconv.Atoi(f.topK)
		r.TopK = &v
	}
	r.Stream = f.stream == "true"
	if err := readStop(r, f.stop); err != nil {
		return nil, err
	}
	if err := readThinking(r, f.thinking); err != nil {
		return nil, err
	}
	if err := readOutput(r, f.outputConfig, f.outputFormat); err != nil {
		return nil, err
	}
	if err := readMetadata(r, f.metadata); err != nil {
		return nil, err
	}
	if err := readToolChoice(r, f.toolChoice); err != nil {
		return nil, err
	}
	if err := readTools(r, f.tools); err != nil {
		return nil, err
	}
	r.System = readSystem(r, f.system)
	if err := readMessages(r, f.messages); err != nil {
		return nil, err
	}
	return r, nil
}

// floatOf reads a number; one beyond a float64 (1e999) is dropped rather than written as
// infinity, which is no JSON.
func floatOf(r *convo.Request, raw, field string) *float64 {
	v := convo.Float(raw)
	if v == nil && convo.Kind(raw) == '0' {
		r.Drop(field)
	}
	return v
}

// readStop reads stop_sequences (a null in the list is the empty string, as encoding/json had it).
func readStop(r *convo.Request, raw string) error {
	if convo.Kind(raw) != '[' {
		return nil
	}
	var err error
	convo.EachElement(raw, func(v string) {
		switch convo.Kind(v) {
		case '"':
			r.Stop = append(r.Stop, convo.StrAt(v))
		case 'n':
			r.Stop = append(r.Stop, "")
		default:
			err = notMessages("stop_sequences", "a list of strings")
		}
	})
	return err
}

// subFields picks the members of an object field into fields, refusing the first member, in the
// order they stand, whose value has another kind than its slot wants; rest, when not nil, gets
// the members fields has no slot for.
func subFields(raw, name string, rest func(k, v string), fields ...convo.FieldSlot) error {
	if convo.Kind(raw) != '{' {
		return nil
	}
	var err error
	convo.FieldsOf(raw, func(k, v string) {
		if !convo.Put(fields, k, v) {
			if rest != nil {
				rest(k, v)
			}
			return
		}
		// Every slot held a value of its kind before this one: a bad kind now is k's.
		if _, what, bad := convo.BadKind(fields); bad && err == nil {
			err = notMessages(name+"."+k, what)
		}
	})
	return err
}

// readThinking reads thinking: enabled with a budget, or adaptive (the model decides; the effort
// in output_config guides it).
func readThinking(r *convo.Request, raw string) error {
	var typ, budget, display string
	err := subFields(raw, "thinking", nil,
		convo.Field("type", &typ).Want('"', "a string"),
		convo.Field("budget_tokens", &budget).Want('0', "a number"),
		convo.Field("display", &display).Want('"', "a string"))
	if err != nil {
		return err
	}
	if convo.Kind(budget) == '0' && !convo.IsInt(budget) {
		return notMessages("thinking.budget_tokens", "an integer")
	}
	if convo.Kind(raw) != '{' {
		return nil
	}
	switch t := convo.StrAt(typ); t {
	case "enabled":
		if n := intOf(budget); n > 0 {
			r.ThinkingBudget = int(n)
		} else {
			r.ThinkingBudget = 1024 // enabled without a budget: the least Anthropic accepts
		}
	case "adaptive":
		r.ThinkingAdaptive = true
	case "disabled", "":
	default:
		r.Drop("thinking.type=" + t)
	}
	if convo.Kind(display) == '"' {
		r.Drop("thinking.display")
	}
	return nil
}

// readOutput reads output_config (the effort, the output format) and the older output_format.
func readOutput(r *convo.Request, config, format string) error {
	var effort string
	err := subFields(config, "output_config", func(k, _ string) { r.Drop("output_config." + k) },
		convo.Field("effort", &effort).Want('"', "a string"),
		convo.Field("format", &format).Want('{', "an object"))
	if err != nil {
		return err
	}
	switch e := convo.StrAt(effort); e {
	case "":
	case "low", "medium", "high":
		r.ReasoningEffort = e
	case "xhigh", "max":
		// Above high: the model's efforts end at high, the other formats' too.
		r.ReasoningEffort = "high"
	default:
		r.Drop("output_config.effort=" + e)
	}
	if convo.Kind(format) != '{' {
		return nil
	}
	var typ, schema string
	err = subFields(format, "output_config.format", nil,
		convo.Field("type", &typ).Want('"', "a string"),
		convo.Field("schema", &schema).Want('{', "an object"))
	if err != nil {
		return err
	}
	if t := convo.StrAt(typ); t == "json_schema" && convo.Kind(schema) == '{' {
		r.Format = &convo.ResponseFormat{Kind: convo.FormatJSONSchema, Schema: convo.BytesOf(schema)}
	} else {
		r.Drop("output_config.format")
	}
	return nil
}

// readMetadata keeps the metadata object and reads its user_id as the request's user.
func readMetadata(r *convo.Request, raw string) error {
	var userID string
	err := subFields(raw, "metadata", nil, convo.Field("user_id", &userID).Want('"', "a string"))
	if err != nil || convo.Kind(raw) != '{' {
		return err
	}
	r.Metadata = convo.BytesOf(raw)
	r.User = convo.StrAt(userID)
	return nil
}

// readToolChoice reads tool_choice: auto, any, tool (by name) or none, and
// disable_parallel_tool_use, which is parallel_tool_calls: false.
func readToolChoice(r *convo.Request, raw string) error {
	var typ, name, disable string
	err := subFields(raw, "tool_choice", nil,
		convo.Field("type", &typ).Want('"', "a string"),
		convo.Field("name", &name).Want('"', "a string"),
		convo.Field("disable_parallel_tool_use", &disable).Want('t', "a boolean"))
	if err != nil || convo.Kind(raw) != '{' {
		return err
	}
	switch t := convo.StrAt(typ); t {
	case "auto":
		r.ToolChoice.Mode = convo.ChoiceAuto
	case "any":
		r.ToolChoice.Mode = convo.ChoiceAny
	case "none":
		r.ToolChoice.Mode = convo.ChoiceNone
	case "tool":
		r.ToolChoice = convo.ToolChoice{Mode: convo.ChoiceTool, Name: convo.StrAt(name)}
	default:
		r.Drop("tool_choice.type=" + t)
	}
	switch disable {
	case "true":
		no := false
		r.ParallelToolCalls = &no
	case "false":
		yes := true
		r.ParallelToolCalls = &yes
	}
	return nil
}

// readTools reads the tools: the client's own (no type, or "custom") as functions, Anthropic's
// (web search, code execution, bash, the text editor, computer use, …) opaque, as they came.
func readTools(r *convo.Request, raw string) error {
	if convo.Kind(raw) != '[' {
		return nil
	}
	var err error
	convo.EachElement(raw, func(tool string) {
		if err != nil || convo.Kind(tool) == 'n' {
			return
		}
		if convo.Kind(tool) != '{' {
			err = notMessages("tools[]", "objects")
			return
		}
		var typ, name, desc, schema, strict, cache string
		var other []string // keys a function has no place for (a server tool keeps them in Raw)
		convo.FieldsOf(tool, func(k, v string) {
			switch k {
			case "type":
				typ = v
			case "name":
				name = v
			case "description":
				desc = v
			case "input_schema":
				schema = v
			case "strict":
				strict = v
			case "cache_control":
				cache = v
			default:
				other = append(other, k)
			}
		})
		for _, c := range [][2]string{{typ, "tools[].type"}, {name, "tools[].name"}, {desc, "tools[].description"}} {
			if err == nil && !convo.Is(c[0], '"') {
				err = notMessages(c[1], "a string")
			}
		}
		if err != nil {
			return
		}
		if t := convo.StrAt(typ); t != "" && t != "custom" {
			r.Tools = append(r.Tools, convo.Tool{Kind: convo.ToolServer, Type: t, Name: convo.StrAt(name),
				Family: "anthropic", Raw: convo.BytesOf(tool)})
			return
		}
		for _, k := range other {
			r.Drop("tools[]." + k)
		}
		t := convo.Tool{Kind: convo.ToolFunction, Name: convo.StrAt(name), Description: convo.StrAt(desc),
			Parameters: convo.ObjectBytes(schema), Cache: convo.ObjectBytes(cache)}
		t.Strict = convo.Bool(strict)
		r.Tools = append(r.Tools, t)
	})
	return err
}

// readSystem reads the system prompt: a string, or text blocks with their cache marks.
func readSystem(r *convo.Request, raw string) []convo.Part {
	switch convo.Kind(raw) {
	case 0, 'n':
		return nil
	case '"':
		return []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(raw)}}
	case '[':
	default:
		r.Drop("system")
		return nil
	}
	if !validBlocks(raw) {
		r.Drop("system")
		return nil
	}
	var parts []convo.Part
	convo.EachElement(raw, func(v string) {
		if convo.Kind(v) != '{' {
			return
		}
		b := blockOf(v)
		if b.typ != "text" {
			r.Drop("system[].type=" + b.typ)
			return
		}
		parts = append(parts, convo.Part{Kind: convo.PartText, Text: convo.TextAt(b.text), Cache: convo.ObjectBytes(b.cache)})
	})
	return parts
}

// block is one content block of a messages request, its fields as they stand in the JSON.
type block struct {
	typ                                        string // unescaped
	text, id, name, toolUseID, input, content  string
	isError, thinking, signature, data, source string
	title, cache, citations, context           string
}

// blockOf reads a content block (an object).
func blockOf(raw string) block {
	var b block
	var typ string
	convo.Pick(raw, nil,
		convo.Field("type", &typ),
		convo.Field("text", &b.text),
		convo.Field("id", &b.id),
		convo.Field("name", &b.name),
		convo.Field("tool_use_id", &b.toolUseID),
		convo.Field("input", &b.input),
		convo.Field("content", &b.content),
		convo.Field("is_error", &b.isError),
		convo.Field("thinking", &b.thinking),
		convo.Field("signature", &b.signature),
		convo.Field("data", &b.data),
		convo.Field("source", &b.source),
		convo.Field("title", &b.title),
		convo.Field("cache_control", &b.cache),
		convo.Field("citations", &b.citations),
		convo.Field("context", &b.context))
	b.typ = convo.StrAt(typ)
	return b
}

// validBlocks reports whether a list of content blocks has the types encoding/json demanded:
// each an object or null, its strings strings, is_error a boolean, source an object of strings
// (or a search result's string).
// A content that fails is dropped whole, as translate dropped it.
func validBlocks(raw string) bool {
	ok := true
	convo.EachElement(raw, func(v string) {
		switch convo.Kind(v) {
		case 'n':
			return
		case '{':
		default:
			ok = false
			return
		}
		convo.FieldsOf(v, func(k, v string) {
			switch k {
			case "type", "text", "id", "name", "tool_use_id", "thinking", "signature", "data", "title":
				ok = ok && convo.Is(v, '"')
			case "is_error":
				ok = ok && convo.Is(v, 't')
			case "source":
				// An image's or a document's source is an object of strings; a search
				// result's is a string.
				ok = ok && (convo.Is(v, '{') && validSource(v) || convo.Kind(v) == '"')
			}
		})
	})
	return ok
}

// validSource reports whether a source's fields are strings (or null).
func validSource(raw string) bool {
	if convo.Kind(raw) != '{' {
		return true
	}
	good := true
	convo.FieldsOf(raw, func(k, v string) {
		switch k {
		case "type", "media_type", "data", "url", "file_id":
			good = good && convo.Is(v, '"')
		}
	})
	return good
}

// readMessages reads the conversation. A user turn's tool results become a RoleTool message
// (the runs of them, in order, around the runs of other blocks); a system message in the middle
// of the conversation (Claude Code's mid-conversation-system beta) stays where it was.
func readMessages(r *convo.Request, raw string) error {
	if convo.Kind(raw) != '[' {
		return nil
	}
	i := -1
	err := convo.EachObject(raw, func(m string) error {
		i++
		var role, content string
		if convo.Kind(m) == '{' {
			convo.Pick(m, nil, convo.Field("role", &role), convo.Field("content", &content))
		}
		if !convo.Is(role, '"') {
			return notMessages("messages[]", "objects with a string role")
		}
		switch convo.Kind(content) {
		case '"':
		case 'n':
			return nil // a turn of nothing
		case '[':
			if validBlocks(content) {
				break
			}
			fallthrough
		default:
			r.Drop("messages[" + strconv.Itoa(i) + "].content")
			return nil
		}
		switch rl := convo.StrAt(role); rl {
		case "user":
			readUser(r, content)
		case "assistant":
			if parts := readParts(r, content, convo.RoleAssistant); len(parts) > 0 {
				r.Messages = append(r.Messages, convo.Message{Role: convo.RoleAssistant, Parts: parts})
			}
		case "system":
			if parts := readParts(r, content, convo.RoleSystem); len(parts) > 0 {
				r.Messages = append(r.Messages, convo.Message{Role: convo.RoleSystem, Parts: parts})
			}
		default:
			r.Drop("messages[" + strconv.Itoa(i) + "].role=" + rl)
		}
		return nil
	})
	if err == convo.ErrNotObject {
		err = notMessages("messages[]", "objects with a string role")
	}
	return err
}

// readUser reads a user turn: its runs of tool results as RoleTool messages, the rest as RoleUser
// messages, in the order they came.
func readUser(r *convo.Request, content string) {
	if convo.Kind(content) == '"' {
		r.Messages = append(r.Messages, convo.Message{Role: convo.RoleUser, Parts: []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(content)}}})
		return
	}
	first := len(r.Messages)
	convo.EachElement(content, func(v string) {
		if convo.Kind(v) != '{' {
			return
		}
		b := blockOf(v)
		role := convo.RoleUser
		var p convo.Part
		if b.typ == "tool_result" {
			role, p = convo.RoleTool, toolResult(r, b)
		} else if !partOf(r, b, convo.RoleUser, &p) {
			return
		}
		if n := len(r.Messages); n > first && r.Messages[n-1].Role == role {
			r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, p)
			return
		}
		r.Messages = append(r.Messages, convo.Message{Role: role, Parts: []convo.Part{p}})
	})
}

// readParts reads an assistant or system turn's content: a string or a list of blocks.
func readParts(r *convo.Request, content string, role convo.Role) []convo.Part {
	if convo.Kind(content) == '"' {
		return []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(content)}}
	}
	var parts []convo.Part
	convo.EachElement(content, func(v string) {
		if convo.Kind(v) != '{' {
			return
		}
		var p convo.Part
		if partOf(r, blockOf(v), role, &p) {
			parts = append(parts, p)
		}
	})
	return parts
}

// allowed reports whether a block of type typ belongs in a turn of role (a tool result is read
// apart, by readUser).
func allowed(typ string, role convo.Role) bool {
	switch typ {
	case "text":
		return true
	case "image", "document":
		return role == convo.RoleUser
	case "tool_use", "thinking", "redacted_thinking":
		return role == convo.RoleAssistant
	}
	return false
}

// partOf reads a content block of a turn of role into p; false when the model has no part for
// it (the block is named in Dropped).
func partOf(r *convo.Request, b block, role convo.Role, p *convo.Part) bool {
	return partAt(r, b, role, p, "messages[].content[]")
}

// partAt is partOf with the path drops are named by.
func partAt(r *convo.Request, b block, role convo.Role, p *convo.Part, at string) bool {
	if !allowed(b.typ, role) {
		r.Drop(at + ".type=" + b.typ)
		return false
	}
	if convo.Kind(b.citations) != 0 && convo.Kind(b.citations) != 'n' {
		r.Drop(at + ".citations")
	}
	*p = convo.Part{Cache: convo.ObjectBytes(b.cache)}
	switch b.typ {
	case "text":
		p.Kind, p.Text = convo.PartText, convo.TextAt(b.text)
	case "image":
		p.Kind = convo.PartImage
		typ, mediaType, data, url := sourceOf(b.source)
		switch typ {
		case "base64":
			p.MediaType, p.Data = mediaType, data
		case "url":
			p.URL = url
		default:
			r.Drop(at + ".source")
			return false
		}
	case "document":
		p.Kind, p.Title = convo.PartDocument, convo.StrAt(b.title)
		typ, mediaType, data, url := sourceOf(b.source)
		switch typ {
		case "base64":
			p.MediaType, p.Data = mediaType, data
		case "url":
			p.URL = url
		case "text":
			p.MediaType, p.Text = mediaType, textOfSource(b.source)
			if p.MediaType == "" {
				p.MediaType = "text/plain"
			}
		default:
			r.Drop(at + ".source")
			return false
		}
		if convo.Kind(b.context) == '"' {
			r.Drop(at + ".context")
		}
	case "tool_use":
		p.Kind, p.ID, p.Name = convo.PartToolCall, convo.StrAt(b.id), convo.StrAt(b.name)
		if convo.Kind(b.input) == '{' {
			p.Args = convo.BytesOf(b.input)
		} else {
			p.Args = []byte("{}")
		}
	case "thinking":
		p.Kind, p.Text, p.Signature = convo.PartThinking, convo.TextAt(b.thinking), convo.StrAt(b.signature)
	case "redacted_thinking":
		p.Kind, p.Encrypted, p.Redacted = convo.PartThinking, convo.StrAt(b.data), true
	}
	return true
}

// sourceOf reads an image's or a document's source.
func sourceOf(raw string) (typ, mediaType, data, url string) {
	if convo.Kind(raw) != '{' {
		return "", "", "", ""
	}
	convo.Pick(raw, nil,
		convo.Field("type", &typ),
		convo.Field("media_type", &mediaType),
		convo.Field("data", &data),
		convo.Field("url", &url))
	return convo.StrAt(typ), convo.StrAt(mediaType), convo.StrAt(data), convo.StrAt(url)
}

// textOfSource is a plain-text document's data as Text.
func textOfSource(raw string) convo.Text {
	var t convo.Text
	convo.FieldsOf(raw, func(k, v string) {
		if k == "data" {
			t = convo.TextAt(v)
		}
	})
	return t
}

// toolResult reads a tool_result block: its content a string or a list of text, image and
// document blocks.
func toolResult(r *convo.Request, b block) convo.Part {
	p := convo.Part{Kind: convo.PartToolResult, ID: convo.StrAt(b.toolUseID), IsError: b.isError == "true", Cache: convo.ObjectBytes(b.cache)}
	switch convo.Kind(b.content) {
	case 0, 'n':
	case '"':
		p.Content = []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(b.content)}}
	case '[':
		if !validBlocks(b.content) {
			r.Drop("messages[].content[].content")
			break
		}
		convo.EachElement(b.content, func(v string) {
			if convo.Kind(v) != '{' {
				return
			}
			var c convo.Part
			if partAt(r, blockOf(v), convo.RoleUser, &c, "messages[].content[].content[]") {
				p.Content = append(p.Content, c)
			}
		})
		if p.Content == nil {
			p.Content = []convo.Part{} // a list with nothing the model holds is not no content
		}
	default:
		r.Drop("messages[].content[].content")
	}
	return p
}
