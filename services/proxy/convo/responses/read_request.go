package responses

import (
	"strconv"

	"switchyard/services/proxy/convo"
)

// A Responses request is validated in one pass of the scanner and then walked with the
// scanner's walkers, which only look for where each value ends: a coding agent sends its whole
// conversation, its tools and their schemas with every turn, and the texts keep the escaped form
// they had in the client's JSON (convo.Text) all the way to the request written upstream.

// fields are the top-level values of a Responses request as they stand in its JSON ("" when
// absent).
type fields struct {
	model, input, instructions, tools, toolChoice, parallel, maxOut, temperature, topP,
	reasoning, stream, text, user, metadata, store, include, previous, truncation, serviceTier,
	promptCacheKey string
}

// ReadRequest reads a Responses request. A field of the wrong type is an error in translate's
// words; what the model cannot carry is named in Dropped.
func ReadRequest(body []byte) (*convo.Request, error) {
	s := string(body) // the one copy: every text read below is a part of it
	if !convo.Document(s, nil) {
		return nil, errNotObject
	}
	r := &convo.Request{}
	var f fields
	// Of two fields of the wrong kind, the one earlier in this list is named.
	slots := [...]convo.FieldSlot{
		convo.Field("model", &f.model).Want('"', "a string"),
		convo.Field("input", &f.input),
		convo.Field("instructions", &f.instructions).Want('"', "a string"),
		convo.Field("tools", &f.tools).Want('[', "a list"),
		convo.Field("tool_choice", &f.toolChoice),
		convo.Field("parallel_tool_calls", &f.parallel).Want('t', "a boolean"),
		convo.Field("max_output_tokens", &f.maxOut).WantInt(),
		convo.Field("temperature", &f.temperature).Want('0', "a number"),
		convo.Field("top_p", &f.topP).Want('0', "a number"),
		convo.Field("reasoning", &f.reasoning).Want('{', "an object"),
		convo.Field("stream", &f.stream).Want('t', "a boolean"),
		convo.Field("text", &f.text).Want('{', "an object"),
		convo.Field("user", &f.user).Want('"', "a string"),
		convo.Field("metadata", &f.metadata),
		convo.Field("store", &f.store),
		convo.Field("include", &f.include),
		convo.Field("previous_response_id", &f.previous),
		convo.Field("truncation", &f.truncation),
		convo.Field("service_tier", &f.serviceTier),
		// prompt_cache_key has nothing to carry: it only steers a provider's prompt cache, which
		// the gateway's routing already keeps warm.
		convo.Field("prompt_cache_key", &f.promptCacheKey),
	}
	if name, what, bad := convo.PickRequest(r, s, slots[:]); bad {
		return nil, typeError(name, what)
	}
	if convo.Kind(f.maxOut) == '0' {
		r.MaxTokens, _ = strconv.Atoi(f.maxOut)
	}
	if convo.Kind(f.reasoning) == '{' {
		var bad bool
		convo.FieldsOf(f.reasoning, func(k, raw string) {
			switch k {
			case "effort":
				bad = !convo.Is(raw, '"')
				if convo.Kind(raw) == '"' {
					r.ReasoningEffort = convo.StrAt(raw)
				}
			case "summary", "generate_summary":
				if convo.Kind(raw) == '"' {
					r.ReasoningSummary = convo.StrAt(raw)
				}
			}
		})
		if bad {
			return nil, typeError("reasoning.effort", "a string")
		}
	}
	var err error
	if r.Tools, err = readTools(f.tools, r, false); err != nil {
		return nil, err
	}

	r.Model = convo.Str(f.model)
	if convo.Kind(f.instructions) == '"' && f.instructions != `""` {
		r.System = append(r.System, convo.Part{Kind: convo.PartText, Text: convo.TextAt(f.instructions), Name: instructionsName})
	}
	rd := &reader{r: r, leading: true}
	switch convo.Kind(f.input) {
	case '"':
		r.Messages = append(r.Messages, convo.Message{Role: convo.RoleUser,
			Parts: []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(f.input)}}})
	case 0, 'n':
	case '[':
		if !rd.items(f.input) {
			return nil, errInput
		}
	default:
		return nil, errInput
	}

	r.ToolChoice = readToolChoice(f.toolChoice, r)
	r.ParallelToolCalls = convo.Bool(f.parallel)
	r.Temperature, r.TopP = convo.Float(f.temperature), convo.Float(f.topP)
	r.Stream = f.stream == "true"
	if convo.Kind(f.text) == '{' {
		readText(f.text, r)
	}
	r.User = convo.Str(f.user)
	if k := convo.Kind(f.metadata); k != 0 && k != 'n' {
		r.Metadata = []byte(f.metadata)
	}
	r.Store = convo.Bool(f.store)
	if convo.Kind(f.include) == '[' {
		convo.EachElement(f.include, func(v string) {
			if convo.Kind(v) == '"' {
				r.Include = append(r.Include, convo.StrAt(v))
			}
		})
	}
	r.PreviousResponseID = convo.Str(f.previous)
	r.Truncation = convo.Str(f.truncation)
	r.ServiceTier = convo.Str(f.serviceTier)
	return r, nil
}

// readTools reads the tools: functions, namespaces of functions, and the provider's own tools
// (web_search, file_search, custom, …), which are kept whole for a Responses upstream.
func readTools(raw string, r *convo.Request, inNamespace bool) ([]convo.Tool, error) {
	if convo.Kind(raw) != '[' {
		return nil, nil
	}
	var tools []convo.Tool
	var err error
	convo.EachElement(raw, func(tool string) {
		if err != nil {
			return
		}
		switch convo.Kind(tool) {
		case 'n':
			r.Drop("tools[].type=")
			return
		case '{':
		default:
			err = typeError("tools[]", "an object")
			return
		}
		var typ, name, desc, params, strict, members string
		convo.Pick(tool, nil,
			convo.Field("type", &typ),
			convo.Field("name", &name),
			convo.Field("description", &desc),
			convo.Field("parameters", &params),
			convo.Field("strict", &strict),
			convo.Field("tools", &members))
		for _, c := range [][2]string{{typ, "tools[].type"}, {name, "tools[].name"}, {desc, "tools[].description"}} {
			if !convo.Is(c[0], '"') {
				err = typeError(c[1], "a string")
				return
			}
		}
		t := convo.Tool{Name: convo.StrAt(name), Description: convo.StrAt(desc)}
		switch typ := convo.StrAt(typ); typ {
		case "function":
			t.Kind = convo.ToolFunction
			if k := convo.Kind(params); k != 0 && k != 'n' {
				t.Parameters = []byte(params)
			}
			t.Strict = convo.Bool(strict)
		case "namespace":
			if inNamespace {
				r.Drop("tools[].tools[].type=namespace")
				return
			}
			t.Kind = convo.ToolNamespace
			if t.Tools, err = readTools(members, r, true); err != nil {
				return
			}
		case "":
			r.Drop("tools[].type=")
			return
		default:
			t.Kind, t.Type, t.Family, t.Raw = convo.ToolServer, typ, "openai", []byte(tool)
		}
		tools = append(tools, t)
	})
	return tools, err
}

// readToolChoice reads tool_choice: "auto", "none", "required" or a function by name; the
// other choices (allowed_tools, a hosted tool) are dropped.
func readToolChoice(raw string, r *convo.Request) convo.ToolChoice {
	switch convo.Kind(raw) {
	case 0, 'n':
		return convo.ToolChoice{}
	case '"':
		switch convo.StrAt(raw) {
		case "auto":
			return convo.ToolChoice{Mode: convo.ChoiceAuto}
		case "none":
			return convo.ToolChoice{Mode: convo.ChoiceNone}
		case "required":
			return convo.ToolChoice{Mode: convo.ChoiceAny}
		}
	case '{':
		var typ, name string
		convo.Pick(raw, nil, convo.Field("type", &typ), convo.Field("name", &name))
		if convo.Kind(typ) == '"' && convo.StrAt(typ) == "function" && convo.Kind(name) == '"' && name != `""` {
			return convo.ToolChoice{Mode: convo.ChoiceTool, Name: convo.StrAt(name)}
		}
	}
	r.Drop("tool_choice")
	return convo.ToolChoice{}
}

// readText reads text.format (the output format); text.verbosity has no place in the model.
func readText(raw string, r *convo.Request) {
	convo.FieldsOf(raw, func(k, v string) {
		switch k {
		case "format":
			if convo.Kind(v) == '{' {
				r.Format = readFormat(v)
			}
		case "verbosity":
			if convo.Kind(v) != 'n' {
				r.Drop("text.verbosity")
			}
		}
	})
}

// readFormat reads a text.format object; a field of the wrong type leaves no format (as
// translate's decoding did).
func readFormat(raw string) *convo.ResponseFormat {
	var typ, name, schema, strict, desc string
	convo.Pick(raw, nil,
		convo.Field("type", &typ),
		convo.Field("name", &name),
		convo.Field("schema", &schema),
		convo.Field("strict", &strict),
		convo.Field("description", &desc))
	if !convo.Is(typ, '"') || !convo.Is(name, '"') || !convo.Is(strict, 't') || !convo.Is(desc, '"') {
		return nil
	}
	switch convo.StrAt(typ) {
	case "json_object":
		return &convo.ResponseFormat{Kind: convo.FormatJSONObject}
	case "json_schema":
		f := &convo.ResponseFormat{Kind: convo.FormatJSONSchema, Name: convo.StrAt(name), Description: convo.StrAt(desc)}
		if k := convo.Kind(schema); k != 0 && k != 'n' {
			f.Schema = []byte(schema)
		}
		f.Strict = convo.Bool(strict)
		return f
	}
	return nil
}

// reader reads the input items into messages.
type reader struct {
	r *convo.Request
	// leading: no item but system and developer messages yet; those go to Request.System.
	leading bool
}

// items reads the input items; it reports false when the input is not a list of items.
func (rd *reader) items(input string) bool {
	good := true
	convo.EachElement(input, func(it string) {
		switch convo.Kind(it) {
		case '{':
			good = good && rd.item(it)
		case 'n':
			good = good && rd.item("{}")
		default:
			good = false
		}
	})
	return good
}

// last is the last message when it has the role, else nil.
func (rd *reader) last(role convo.Role) *convo.Message {
	if n := len(rd.r.Messages); n > 0 && rd.r.Messages[n-1].Role == role {
		return &rd.r.Messages[n-1]
	}
	return nil
}

// add appends a message and returns it.
func (rd *reader) add(role convo.Role) *convo.Message {
	rd.r.Messages = append(rd.r.Messages, convo.Message{Role: role})
	return &rd.r.Messages[len(rd.r.Messages)-1]
}

// turn is the assistant message an item of the assistant's joins: the one before it (one turn
// of the model is several items: reasoning, a message, function calls), or a new one. A message
// item starts a new turn unless the one before holds only reasoning.
func (rd *reader) turn(message bool) *convo.Message {
	m := rd.last(convo.RoleAssistant)
	if m != nil && message {
		for _, p := range m.Parts {
			if p.Kind != convo.PartThinking {
				m = nil
				break
			}
		}
	}
	if m == nil {
		m = rd.add(convo.RoleAssistant)
	}
	return m
}

// item reads one input item; it reports false when a field has the wrong type.
func (rd *reader) item(it string) bool {
	var typ, role, callID, name, args, content, output, id, namespace, summary, encrypted string
	convo.Pick(it, nil,
		convo.Field("type", &typ),
		convo.Field("role", &role),
		convo.Field("call_id", &callID),
		convo.Field("name", &name),
		convo.Field("arguments", &args),
		convo.Field("content", &content),
		convo.Field("output", &output),
		convo.Field("id", &id),
		convo.Field("namespace", &namespace),
		convo.Field("summary", &summary),
		convo.Field("encrypted_content", &encrypted))
	for _, v := range []string{typ, role, callID, name, args} {
		if !convo.Is(v, '"') {
			return false
		}
	}
	r := rd.r
	t := convo.StrAt(typ)
	system := (t == "" || t == "message") && (convo.StrAt(role) == "system" || convo.StrAt(role) == "developer")
	if !system {
		rd.leading = false
	}
	switch t {
	case "", "message":
		switch convo.StrAt(role) {
		case "assistant":
			parts := rd.parts(content, textParts)
			if len(parts) > 0 {
				m := rd.turn(true)
				m.Parts = append(m.Parts, parts...)
			}
		case "system", "developer":
			parts := rd.parts(content, textParts)
			switch {
			case len(parts) == 0:
			case rd.leading:
				r.System = append(r.System, parts...)
			default:
				rd.add(convo.RoleSystem).Parts = parts
			}
		default:
			if parts := rd.parts(content, userParts); len(parts) > 0 {
				rd.add(convo.RoleUser).Parts = parts
			}
		}
	case "function_call":
		p := convo.Part{Kind: convo.PartToolCall, ID: convo.StrAt(callID), Name: convo.StrAt(name), Args: convo.ArgsObject(args),
			Namespace: convo.Str(namespace)}
		m := rd.turn(false)
		m.Parts = append(m.Parts, p)
	case "function_call_output":
		p := convo.Part{Kind: convo.PartToolResult, ID: convo.StrAt(callID)}
		if convo.Kind(output) == '"' {
			p.Content = []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(output)}}
		} else {
			p.Content = rd.parts(output, outputParts)
		}
		m := rd.last(convo.RoleTool)
		if m == nil {
			m = rd.add(convo.RoleTool)
		}
		m.Parts = append(m.Parts, p)
	case "reasoning":
		p := convo.Part{Kind: convo.PartThinking, Text: reasoningText(summary), ID: convo.Str(id), Encrypted: convo.Str(encrypted)}
		if p.Text == "" {
			p.Text = reasoningText(content)
		}
		m := rd.turn(false)
		m.Parts = append(m.Parts, p)
	default:
		r.Drop("input[].type=" + t)
	}
	return true
}

// reasoningText joins the texts of a reasoning item's summary (or content) parts, a blank line
// apart.
func reasoningText(raw string) convo.Text {
	if convo.Kind(raw) != '[' {
		return ""
	}
	var t convo.Text
	n := 0
	convo.EachElement(raw, func(p string) {
		if convo.Kind(p) != '{' {
			return
		}
		var text string
		convo.FieldsOf(p, func(k, v string) {
			if k == "text" {
				text = v
			}
		})
		if convo.Kind(text) != '"' {
			return
		}
		if n++; n > 1 {
			t += `\n\n`
		}
		t += convo.TextAt(text)
	})
	return t
}

// What a content list may hold where it is read.
type partSet uint8

const (
	// textParts: an assistant's or a system message's texts.
	textParts partSet = iota
	// userParts: a user's texts, images and files.
	userParts
	// outputParts: a function call output's texts, images and files.
	outputParts
)

// contentPart is one part of a content list as it stands in the JSON.
type contentPart struct {
	typ, text, refusal, image, detail, fileID, fileData, fileURL, filename string
}

// parts reads a message's content (a string or a list of parts). A part of the wrong shape
// drops the whole content (encoding/json refused the list, and translate with it).
func (rd *reader) parts(raw string, set partSet) []convo.Part {
	switch convo.Kind(raw) {
	case '"':
		if set == textParts && raw == `""` {
			return nil
		}
		return []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(raw)}}
	case 0, 'n':
		if set == outputParts {
			return []convo.Part{{Kind: convo.PartText}}
		}
		return nil
	case '[':
	default:
		rd.r.Drop("input[].content")
		if set == textParts {
			return nil
		}
		return []convo.Part{{Kind: convo.PartText}}
	}
	var in []contentPart
	ok := true
	convo.EachElement(raw, func(p string) {
		switch convo.Kind(p) {
		case '{':
		case 'n':
			in = append(in, contentPart{})
			return
		default:
			ok = false
			return
		}
		var c contentPart
		convo.Pick(p, nil,
			convo.Field("type", &c.typ),
			convo.Field("text", &c.text),
			convo.Field("refusal", &c.refusal),
			convo.Field("image_url", &c.image),
			convo.Field("detail", &c.detail),
			convo.Field("file_id", &c.fileID),
			convo.Field("file_data", &c.fileData),
			convo.Field("file_url", &c.fileURL),
			convo.Field("filename", &c.filename))
		if !convo.Is(c.typ, '"') || !convo.Is(c.text, '"') || !convo.Is(c.detail, '"') {
			ok = false
			return
		}
		c.typ = convo.StrAt(c.typ)
		in = append(in, c)
	})
	if !ok {
		rd.r.Drop("input[].content")
		if set == textParts {
			return nil
		}
		return []convo.Part{{Kind: convo.PartText}}
	}
	out := make([]convo.Part, 0, len(in))
	for _, c := range in {
		switch {
		case c.typ == "input_text" || c.typ == "text" || set != userParts && c.typ == "output_text":
			if set == textParts && (c.text == "" || c.text == `""` || c.text == "null") {
				continue
			}
			out = append(out, convo.Part{Kind: convo.PartText, Text: convo.TextAt(c.text)})
		case c.typ == "refusal" && set == textParts:
			if t := convo.TextAt(c.refusal); t != "" {
				out = append(out, convo.Part{Kind: convo.PartText, Text: t})
			} else if t := convo.TextAt(c.text); t != "" {
				out = append(out, convo.Part{Kind: convo.PartText, Text: t})
			}
		case c.typ == "input_image" && set != textParts:
			if convo.Kind(c.image) != '"' || c.image == `""` {
				rd.r.Drop("input[].content[].file_id")
				continue
			}
			p := convo.Part{Kind: convo.PartImage, Detail: convo.StrAt(c.detail)}
			u := convo.StrAt(c.image)
			if mt, data, ok := convo.ParseDataURL(u); ok {
				p.MediaType, p.Data = mt, data
			} else {
				p.URL = u
			}
			out = append(out, p)
		case c.typ == "input_file" && set != textParts:
			p := convo.Part{Kind: convo.PartDocument, Title: convo.Str(c.filename)}
			switch {
			case convo.Kind(c.fileData) == '"' && c.fileData != `""`:
				d := convo.StrAt(c.fileData)
				if mt, data, ok := convo.ParseDataURL(d); ok {
					p.MediaType, p.Data = mt, data
				} else {
					p.MediaType, p.Data = "application/pdf", d
				}
			case convo.Kind(c.fileURL) == '"' && c.fileURL != `""`:
				p.URL = convo.StrAt(c.fileURL)
			default:
				rd.r.Drop("input[].content[].file_id")
				continue
			}
			out = append(out, p)
		default:
			rd.r.Drop("input[].content[].type=" + c.typ)
		}
	}
	if len(out) == 0 && set == outputParts {
		out = append(out, convo.Part{Kind: convo.PartText})
	}
	return out
}
