package chat

import (
	"strconv"
	"strings"

	"switchyard/services/proxy/convo"
)

// A chat completions request is validated in one pass of the scanner and then walked once: every
// text and raw value the model keeps is a part of the request's one copy of its body, in the form
// it had there (texts stay escaped). Fields of the wrong JSON type are refused with the words the
// gateway has always used; fields the model has no place for are named in Dropped.

// reqFields are the top-level values of a chat request as they stand in its JSON ("" when
// absent).
type reqFields struct {
	model, messages, maxTokens, maxCompletionTokens, temperature, topP, stop, stream, streamOptions,
	tools, toolChoice, parallel, effort, user, format, metadata, serviceTier, store string
}

// ReadRequest reads a chat completions request. The request keeps parts of its own copy of body,
// so body may change afterwards; the raw values it holds (schemas, arguments) are read-only.
func ReadRequest(body []byte) (*convo.Request, error) {
	s := string(body) // the one copy: every value read below is a part of it
	if !convo.Document(s, nil) {
		return nil, errNotObject
	}
	r := &convo.Request{}
	var f reqFields
	// Of two fields of the wrong kind, the one earlier in this list is named.
	slots := [...]convo.FieldSlot{
		convo.Field("model", &f.model).Want('"', "a string"),
		convo.Field("messages", &f.messages).Want('[', "a list"),
		convo.Field("max_tokens", &f.maxTokens).WantInt(),
		convo.Field("max_completion_tokens", &f.maxCompletionTokens).WantInt(),
		convo.Field("temperature", &f.temperature).Want('0', "a number"),
		convo.Field("top_p", &f.topP).Want('0', "a number"),
		convo.Field("stop", &f.stop),
		convo.Field("stream", &f.stream).Want('t', "a boolean"),
		convo.Field("stream_options", &f.streamOptions).Want('{', "an object"),
		convo.Field("tools", &f.tools).Want('[', "a list"),
		convo.Field("tool_choice", &f.toolChoice),
		convo.Field("parallel_tool_calls", &f.parallel).Want('t', "a boolean"),
		convo.Field("reasoning_effort", &f.effort).Want('"', "a string"),
		convo.Field("user", &f.user).Want('"', "a string"),
		convo.Field("response_format", &f.format).Want('{', "an object"),
		convo.Field("metadata", &f.metadata).Want('{', "an object"),
		convo.Field("service_tier", &f.serviceTier).Want('"', "a string"),
		convo.Field("store", &f.store).Want('t', "a boolean"),
	}
	if name, what, bad := convo.PickRequest(r, s, slots[:]); bad {
		return nil, notChat(name, what)
	}
	if convo.Kind(f.streamOptions) == '{' {
		bad := false
		convo.FieldsOf(f.streamOptions, func(k, v string) {
			if k == "include_usage" {
				bad = bad || !convo.Is(v, 't')
				r.IncludeUsage = v == "true"
			}
		})
		if bad {
			return nil, notChat("stream_options.include_usage", "a boolean")
		}
	}

	r.Model = convo.StrAt(f.model)
	switch {
	case convo.Kind(f.maxCompletionTokens) == '0':
		r.MaxTokens, _ = strconv.Atoi(f.maxCompletionTokens)
	case convo.Kind(f.maxTokens) == '0':
		r.MaxTokens, _ = strconv.Atoi(f.maxTokens)
	}
	r.Temperature, r.TopP = convo.Float(f.temperature), convo.Float(f.topP)
	readStop(r, f.stop)
	r.Stream = f.stream == "true"
	r.ReasoningEffort = convo.Str(f.effort)
	r.User = convo.Str(f.user)
	r.Metadata = convo.ObjectBytes(f.metadata)
	r.ServiceTier = convo.Str(f.serviceTier)
	r.Store = convo.Bool(f.store)
	r.ParallelToolCalls = convo.Bool(f.parallel)
	if err := readTools(r, f.tools); err != nil {
		return nil, err
	}
	readToolChoice(r, f.toolChoice)
	readFormat(r, f.format)
	if convo.Kind(f.messages) == '[' {
		if err := readMessages(r, f.messages); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// readStop reads stop: a string or a list of strings (a null in the list is skipped); anything
// else is dropped.
func readStop(r *convo.Request, raw string) {
	switch convo.Kind(raw) {
	case 0, 'n':
	case '"':
		r.Stop = []string{convo.StrAt(raw)}
	case '[':
		good := true
		convo.EachElement(raw, func(v string) {
			switch convo.Kind(v) {
			case '"':
				r.Stop = append(r.Stop, convo.StrAt(v))
			case 'n':
			default:
				good = false
			}
		})
		if !good {
			r.Stop = nil
			r.Drop("stop")
		}
	default:
		r.Drop("stop")
	}
}

// readTools reads the function tools; other tools (custom tools) are dropped by their type.
func readTools(r *convo.Request, raw string) error {
	if convo.Kind(raw) != '[' {
		return nil
	}
	err := convo.EachObject(raw, func(tool string) error {
		var typ, fn, name, desc, params, strict string
		if convo.Kind(tool) == '{' {
			convo.Pick(tool, nil, convo.Field("type", &typ), convo.Field("function", &fn))
		}
		if !convo.Is(typ, '"') {
			return notChat("tools[].type", "a string")
		}
		if !convo.Is(fn, '{') {
			return notChat("tools[].function", "an object")
		}
		if convo.Kind(fn) == '{' {
			convo.Pick(fn, nil,
				convo.Field("name", &name),
				convo.Field("description", &desc),
				convo.Field("parameters", &params),
				convo.Field("strict", &strict))
		}
		for _, c := range [2][2]string{{name, "tools[].function.name"}, {desc, "tools[].function.description"}} {
			if !convo.Is(c[0], '"') {
				return notChat(c[1], "a string")
			}
		}
		if t := convo.StrAt(typ); t != "" && t != "function" {
			r.Drop("tools[].type=" + t)
			return nil
		}
		t := convo.Tool{Kind: convo.ToolFunction, Name: convo.StrAt(name), Description: convo.StrAt(desc)}
		if k := convo.Kind(params); k != 0 && k != 'n' {
			t.Parameters = convo.BytesOf(params)
		}
		t.Strict = convo.Bool(strict)
		r.Tools = append(r.Tools, t)
		return nil
	})
	if err == convo.ErrNotObject {
		err = notChat("tools[]", "objects")
	}
	return err
}

// readToolChoice reads "none", "auto", "required" and {"type":"function","function":{"name"}};
// anything else is dropped.
func readToolChoice(r *convo.Request, raw string) {
	switch convo.Kind(raw) {
	case 0, 'n':
		return
	case '"':
		switch convo.StrAt(raw) {
		case "auto":
			r.ToolChoice.Mode = convo.ChoiceAuto
		case "none":
			r.ToolChoice.Mode = convo.ChoiceNone
		case "required":
			r.ToolChoice.Mode = convo.ChoiceAny
		default:
			r.Drop("tool_choice")
		}
		return
	case '{':
		var name string
		convo.FieldsOf(raw, func(k, v string) {
			if k == "function" && convo.Kind(v) == '{' {
				convo.FieldsOf(v, func(k, v string) {
					if k == "name" && convo.Kind(v) == '"' {
						name = convo.StrAt(v)
					}
				})
			}
		})
		if name != "" {
			r.ToolChoice = convo.ToolChoice{Mode: convo.ChoiceTool, Name: name}
			return
		}
	}
	r.Drop("tool_choice")
}

// readFormat reads response_format: text, json_object, or json_schema with its name,
// description, schema and strict flag.
func readFormat(r *convo.Request, raw string) {
	if convo.Kind(raw) != '{' {
		return
	}
	var typ, js string
	convo.Pick(raw, nil, convo.Field("type", &typ), convo.Field("json_schema", &js))
	switch convo.StrAt(typ) {
	case "text":
		r.Format = &convo.ResponseFormat{Kind: convo.FormatText}
	case "json_object":
		r.Format = &convo.ResponseFormat{Kind: convo.FormatJSONObject}
	case "json_schema":
		if convo.Kind(js) != '{' {
			r.Drop("response_format")
			return
		}
		f := &convo.ResponseFormat{Kind: convo.FormatJSONSchema}
		convo.FieldsOf(js, func(k, v string) {
			switch k {
			case "name":
				if convo.Kind(v) == '"' {
					f.Name = convo.StrAt(v)
				}
			case "description":
				if convo.Kind(v) == '"' {
					f.Description = convo.StrAt(v)
				}
			case "schema":
				if k := convo.Kind(v); k != 0 && k != 'n' {
					f.Schema = convo.BytesOf(v)
				}
			case "strict":
				if convo.Kind(v) == 't' {
					b := v == "true"
					f.Strict = &b
				}
			}
		})
		r.Format = f
	default:
		r.Drop("response_format")
	}
}

// msgFields are the fields of one message as they stand in its JSON.
type msgFields struct {
	role, content, toolCalls, toolCallID, reasoningContent, reasoning, name string
}

// readMessages reads the messages. Leading system and developer messages are the system prompt;
// one after the conversation began stays in place as a system message. Consecutive tool messages
// are one tool message of several results (the answers to parallel calls).
func readMessages(r *convo.Request, raw string) error {
	var err error
	i := -1
	convo.EachElement(raw, func(m string) {
		i++
		if err != nil {
			return
		}
		if convo.Kind(m) != '{' && convo.Kind(m) != 'n' {
			err = notChat("messages[]", "objects")
			return
		}
		var f msgFields
		if convo.Kind(m) == '{' {
			convo.Pick(m, nil,
				convo.Field("role", &f.role),
				convo.Field("content", &f.content),
				convo.Field("tool_calls", &f.toolCalls),
				convo.Field("tool_call_id", &f.toolCallID),
				convo.Field("reasoning_content", &f.reasoningContent),
				convo.Field("reasoning", &f.reasoning),
				convo.Field("name", &f.name))
		}
		for _, c := range [4][2]string{{f.role, "role"}, {f.toolCallID, "tool_call_id"}, {f.reasoningContent, "reasoning_content"}, {f.name, "name"}} {
			if !convo.Is(c[0], '"') {
				err = notChat("messages[]."+c[1], "a string")
				return
			}
		}
		var calls []convo.Part
		calls, err = readToolCalls(f.toolCalls)
		if err != nil {
			return
		}
		name := convo.StrAt(f.name)
		switch role := convo.StrAt(f.role); role {
		case "system", "developer":
			parts := texts(r, f.content)
			if len(r.Messages) == 0 {
				r.System = append(r.System, parts...)
			} else if len(parts) > 0 {
				r.Messages = append(r.Messages, convo.Message{Role: convo.RoleSystem, Parts: parts, Name: name})
			}
		case "user":
			if parts := userParts(r, f.content); len(parts) > 0 {
				r.Messages = append(r.Messages, convo.Message{Role: convo.RoleUser, Parts: parts, Name: name})
			}
		case "assistant":
			var parts []convo.Part
			reasoning := f.reasoningContent // reasoning_content wins when it is given at all
			if convo.Kind(reasoning) != '"' {
				reasoning = f.reasoning
			}
			if convo.Kind(reasoning) == '"' && reasoning != `""` {
				parts = append(parts, convo.Part{Kind: convo.PartThinking, Text: convo.TextAt(reasoning)})
			}
			parts = append(parts, texts(r, f.content)...)
			parts = append(parts, calls...)
			if len(parts) > 0 {
				r.Messages = append(r.Messages, convo.Message{Role: convo.RoleAssistant, Parts: parts, Name: name})
			}
		case "tool", "function":
			res := convo.Part{Kind: convo.PartToolResult, ID: convo.StrAt(f.toolCallID)}
			if convo.Kind(f.content) == '"' {
				if f.content != `""` {
					res.Content = []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(f.content)}}
				}
			} else {
				res.Content = texts(r, f.content)
			}
			if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == convo.RoleTool {
				r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, res)
			} else {
				r.Messages = append(r.Messages, convo.Message{Role: convo.RoleTool, Parts: []convo.Part{res}})
			}
		default:
			r.Drop("messages[" + strconv.Itoa(i) + "].role=" + role)
		}
	})
	return err
}

// readToolCalls reads an assistant message's tool calls; the arguments, a JSON text in a string,
// become the call's Args ({} when they are not a JSON object).
func readToolCalls(raw string) ([]convo.Part, error) {
	switch convo.Kind(raw) {
	case 0, 'n':
		return nil, nil
	case '[':
	default:
		return nil, notChat("messages[].tool_calls", "a list")
	}
	var out []convo.Part
	err := convo.EachObject(raw, func(tc string) error {
		var index, id, typ, fn, name, args string
		if convo.Kind(tc) == '{' {
			convo.Pick(tc, nil,
				convo.Field("index", &index),
				convo.Field("id", &id),
				convo.Field("type", &typ),
				convo.Field("function", &fn))
		}
		if !convo.Is(fn, '{') {
			return notChat("messages[].tool_calls[].function", "an object")
		}
		if convo.Kind(fn) == '{' {
			convo.Pick(fn, nil, convo.Field("name", &name), convo.Field("arguments", &args))
		}
		for _, c := range [4]string{id, typ, name, args} {
			if !convo.Is(c, '"') {
				return notChat("messages[].tool_calls[]", "strings where strings belong")
			}
		}
		if !convo.Is(index, '0') || convo.Kind(index) == '0' && !convo.IsInt(index) {
			return notChat("messages[].tool_calls[].index", "an integer")
		}
		out = append(out, convo.Part{Kind: convo.PartToolCall, ID: convo.StrAt(id), Name: convo.StrAt(name),
			Args: convo.ArgsObject(args)})
		return nil
	})
	if err == convo.ErrNotObject {
		err = notChat("messages[].tool_calls[]", "objects")
	}
	return out, err
}

// part is one part of a content list, its fields as they stand in the JSON.
type part struct {
	typ                        string // unescaped
	text, image, file, refusal string
	cache                      string
}

// contentParts reads a content list (raw is a list). A null part reads as a part without a type;
// ok is false when a part is not an object or a field has the wrong type (the whole content is
// dropped then).
func contentParts(raw string) (parts []part, ok bool) {
	ok = true
	convo.EachElement(raw, func(p string) {
		switch convo.Kind(p) {
		case '{':
		case 'n':
			parts = append(parts, part{})
			return
		default:
			ok = false
			return
		}
		var typ string
		var c part
		convo.Pick(p, nil,
			convo.Field("type", &typ),
			convo.Field("text", &c.text),
			convo.Field("image_url", &c.image),
			convo.Field("file", &c.file),
			convo.Field("cache_control", &c.cache))
		if !convo.Is(typ, '"') || !convo.Is(c.text, '"') || !convo.Is(c.image, '{') {
			ok = false
			return
		}
		if convo.Kind(c.image) == '{' {
			convo.FieldsOf(c.image, func(k, v string) {
				if (k == "url" || k == "detail") && !convo.Is(v, '"') {
					ok = false
				}
			})
		}
		c.typ = convo.StrAt(typ)
		parts = append(parts, c)
	})
	return parts, ok
}

// textPart is a text part of the model, with its cache mark.
func textPart(text, cache string) convo.Part {
	return convo.Part{Kind: convo.PartText, Text: convo.TextAt(text), Cache: convo.ObjectBytes(cache)}
}

// content reads what every message's content starts with: a string is one text part (whole), a
// list is its parts to read (list true); anything else, and a list that is not one of parts, is
// dropped, and an empty content is nothing.
func content(r *convo.Request, raw string) (whole []convo.Part, parts []part, list bool) {
	switch convo.Kind(raw) {
	case 0, 'n':
		return nil, nil, false
	case '"':
		if raw == `""` {
			return nil, nil, false
		}
		return []convo.Part{{Kind: convo.PartText, Text: convo.TextAt(raw)}}, nil, false
	case '[':
	default:
		r.Drop("messages[].content")
		return nil, nil, false
	}
	parts, ok := contentParts(raw)
	if !ok {
		r.Drop("messages[].content")
		return nil, nil, false
	}
	return nil, parts, true
}

// texts reads a content that is a string or a list of text parts (a system, assistant or tool
// message's); other parts are dropped by their type, empty texts skipped.
func texts(r *convo.Request, raw string) []convo.Part {
	whole, parts, list := content(r, raw)
	if !list {
		return whole
	}
	var out []convo.Part
	for _, p := range parts {
		switch {
		case p.typ != "text":
			r.Drop("messages[].content[].type=" + p.typ)
		case convo.Kind(p.text) == '"' && p.text != `""`:
			out = append(out, textPart(p.text, p.cache))
		}
	}
	return out
}

// userParts reads a user message's content: texts, images (a data URL becomes its media type and
// base64 data; http and https URLs stay URLs) and files (PDFs as base64 data URLs).
func userParts(r *convo.Request, raw string) []convo.Part {
	whole, in, list := content(r, raw)
	if !list {
		return whole
	}
	out := make([]convo.Part, 0, len(in))
	for _, p := range in {
		switch p.typ {
		case "text":
			if convo.Kind(p.text) == '"' && p.text != `""` {
				out = append(out, textPart(p.text, p.cache))
			}
		case "image_url":
			if convo.Kind(p.image) != '{' {
				continue // no image_url object: nothing to show
			}
			var rawURL, detail string
			convo.Pick(p.image, nil, convo.Field("url", &rawURL), convo.Field("detail", &detail))
			url := convo.StrAt(rawURL)
			img := convo.Part{Kind: convo.PartImage, Detail: convo.StrAt(detail), Cache: convo.ObjectBytes(p.cache)}
			if mt, data, ok := convo.ParseDataURL(url); ok {
				img.MediaType, img.Data = mt, data
			} else if strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://") {
				img.URL = url
			} else {
				r.Drop("messages[].content[].image_url")
				continue
			}
			out = append(out, img)
		case "file":
			if d, ok := filePart(r, p.file); ok {
				out = append(out, d)
			}
		default:
			r.Drop("messages[].content[].type=" + p.typ)
		}
	}
	return out
}

// filePart reads a file part: {"file":{"file_data":"data:application/pdf;base64,…","filename":…}}.
// A file_id names a file stored at OpenAI, which no other provider can read: it is dropped.
func filePart(r *convo.Request, raw string) (convo.Part, bool) {
	var data, filename, fileID string
	if convo.Kind(raw) == '{' {
		convo.FieldsOf(raw, func(k, v string) {
			if convo.Kind(v) != '"' {
				return
			}
			switch k {
			case "file_data":
				data = convo.StrAt(v)
			case "filename":
				filename = convo.StrAt(v)
			case "file_id":
				fileID = convo.StrAt(v)
			}
		})
	}
	if mt, b64, ok := convo.ParseDataURL(data); ok {
		return convo.Part{Kind: convo.PartDocument, MediaType: mt, Data: b64, Title: filename}, true
	}
	if fileID != "" {
		r.Drop("messages[].content[].file.file_id")
	} else {
		r.Drop("messages[].content[].file")
	}
	return convo.Part{}, false
}
