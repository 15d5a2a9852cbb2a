package chat

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"switchyard/services/proxy/convo"
)

// A chat completions request is written front to back into one buffer: texts as the model keeps
// them (escaped), raw values (schemas) as they stand. What chat completions cannot carry is named
// in r.Dropped: thinking blocks (OpenAI-compatible servers take no reasoning back, and some refuse
// it), server tools of other providers, a top_k.

// emptySchema is the parameters of a function that declares none.
var emptySchema = []byte(`{"type":"object","properties":{}}`)

// AppendRequest writes r as a chat completions request for an upstream described by t. A
// streamed request always asks for the usage chunk (stream_options.include_usage), so the
// gateway can count what the answer cost whatever the client asked. What chat completions
// cannot carry is added to r.Dropped (once a name): one request is written by one goroutine at a
// time.
func AppendRequest(dst []byte, r *convo.Request, t convo.Target) ([]byte, error) {
	o := convo.NewObj(slices.Grow(dst, r.Size()))
	o.Str("model", r.Model)
	o.Key("messages")
	w := &msgWriter{b: append(o.B, '['), r: r}
	w.system(r.System, `\n\n`)
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Role {
		case convo.RoleSystem:
			w.system(m.Parts, `\n`)
		case convo.RoleUser:
			w.user(m.Parts, m.Name)
		case convo.RoleAssistant:
			w.assistant(m)
		case convo.RoleTool:
			w.tool(m.Parts)
		}
	}
	o.B = append(w.b, ']')

	if r.MaxTokens > 0 {
		if t.MaxCompletionTokens {
			o.Int("max_completion_tokens", int64(r.MaxTokens))
		} else {
			o.Int("max_tokens", int64(r.MaxTokens))
		}
	}
	appendFloat(o, "temperature", r.Temperature)
	appendFloat(o, "top_p", r.TopP)
	if r.TopK != nil {
		r.Drop("top_k") // OpenAI has none
	}
	if len(r.Stop) > 0 {
		o.Strs("stop", r.Stop)
	}
	if r.Stream {
		o.Bool("stream", true).Raw("stream_options", []byte(`{"include_usage":true}`))
	}
	appendTools(o, r)
	switch {
	case r.ReasoningEffort != "" && r.ReasoningEffort != "none":
		o.Str("reasoning_effort", r.ReasoningEffort)
	case r.ReasoningEffort == "" && r.ThinkingBudget > 0:
		o.Str("reasoning_effort", convo.EffortOf(r.ThinkingBudget))
	}
	if user := userOf(r); user != "" {
		o.Str("user", user)
	}
	appendFormat(o, r.Format)
	switch r.ServiceTier {
	case "":
	case "auto", "default", "flex", "scale", "priority":
		o.Str("service_tier", r.ServiceTier)
	default:
		r.Drop("service_tier") // another provider's tier (Anthropic's standard_only)
	}
	// Chat completions are stateless: a Responses conversation kept at OpenAI cannot follow.
	if r.PreviousResponseID != "" {
		r.Drop("previous_response_id")
	}
	return o.End(), nil
}

// appendFloat writes a number that is set and one JSON can say.
func appendFloat(o *convo.Obj, k string, v *float64) {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return
	}
	o.Key(k)
	o.B = strconv.AppendFloat(o.B, *v, 'g', -1, 64)
}

// userOf is the end user the request names: its user, or the user_id of Anthropic's metadata.
// Other metadata has no place in a chat request (OpenAI takes metadata only for stored
// completions, and other servers refuse it).
func userOf(r *convo.Request) string {
	user := r.User
	if len(r.Metadata) > 0 && r.Metadata[0] == '{' {
		convo.FieldsOf(convo.View(r.Metadata), func(k, v string) {
			if k == "user_id" && convo.Kind(v) == '"' {
				if user == "" {
					user = convo.StrAt(v)
				}
				return
			}
			r.Drop("metadata")
		})
	}
	return user
}

// appendTools writes the function tools (a namespace's functions under their flat names), and
// the tool choice and parallel_tool_calls, which chat completions refuse without tools. Server
// tools have no twin here and are dropped by their type.
func appendTools(o *convo.Obj, r *convo.Request) {
	n := 0
	fn := func(t *convo.Tool, namespace string) {
		o.Elem("tools", &n)
		tool := convo.NewObj(o.B).Str("type", "function")
		f := tool.Open("function").Str("name", convo.FlatName(namespace, t.Name))
		if t.Description != "" {
			f.Str("description", t.Description)
		}
		if len(t.Parameters) > 0 {
			f.Raw("parameters", t.Parameters)
		} else {
			f.Raw("parameters", emptySchema)
		}
		if t.Strict != nil {
			f.Bool("strict", *t.Strict)
		}
		tool.Close(f)
		o.B = tool.End()
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		switch t.Kind {
		case convo.ToolFunction:
			fn(t, "")
		case convo.ToolNamespace:
			for j := range t.Tools {
				fn(&t.Tools[j], t.Name)
			}
		default:
			r.Drop("tools." + t.Type)
		}
	}
	if n == 0 {
		return
	}
	o.B = append(o.B, ']')
	switch c := r.ToolChoice; c.Mode {
	case convo.ChoiceAuto:
		o.Str("tool_choice", "auto")
	case convo.ChoiceNone:
		o.Str("tool_choice", "none")
	case convo.ChoiceAny:
		o.Str("tool_choice", "required")
	case convo.ChoiceTool:
		if !hasFunction(r.Tools, c.Name) {
			r.Drop("tool_choice") // a tool that was dropped: the upstream would refuse the request
			break
		}
		tc := o.Open("tool_choice").Str("type", "function")
		tc.Close(tc.Open("function").Str("name", c.Name))
		o.Close(tc)
	}
	if r.ParallelToolCalls != nil {
		o.Bool("parallel_tool_calls", *r.ParallelToolCalls)
	}
}

// hasFunction reports whether a function named name (flat for a namespace's) is among the tools.
func hasFunction(tools []convo.Tool, name string) bool {
	for i := range tools {
		switch t := &tools[i]; t.Kind {
		case convo.ToolFunction:
			if t.Name == name {
				return true
			}
		case convo.ToolNamespace:
			for _, m := range t.Tools {
				if name == m.Name || name == convo.FlatName(t.Name, m.Name) {
					return true
				}
			}
		}
	}
	return false
}

// appendFormat writes response_format: a JSON object, or a JSON schema (chat completions require
// its name: a schema without one is named "response").
func appendFormat(o *convo.Obj, f *convo.ResponseFormat) {
	if f == nil {
		return
	}
	switch f.Kind {
	case convo.FormatJSONObject:
		o.Raw("response_format", []byte(`{"type":"json_object"}`))
	case convo.FormatJSONSchema:
		rf := o.Open("response_format").Str("type", "json_schema")
		js := rf.Open("json_schema")
		name := f.Name
		if name == "" {
			name = "response"
		}
		js.Str("name", name)
		if f.Description != "" {
			js.Str("description", f.Description)
		}
		if len(f.Schema) > 0 {
			js.Raw("schema", f.Schema)
		}
		if f.Strict != nil {
			js.Bool("strict", *f.Strict)
		}
		rf.Close(js)
		o.Close(rf)
	}
}

// msgWriter writes the messages list.
type msgWriter struct {
	b []byte
	r *convo.Request
	n int // messages written
}

// start begins a message object with its role.
func (w *msgWriter) start(role string) *convo.Obj {
	if w.n++; w.n > 1 {
		w.b = append(w.b, ',')
	}
	return convo.NewObj(w.b).Str("role", role)
}

func (w *msgWriter) done(o *convo.Obj) { w.b = o.End() }

// partName names a part kind in what is dropped: a redacted thinking block by its own type.
func partName(p *convo.Part) string {
	if p.Kind == convo.PartThinking && p.Redacted {
		return "redacted_thinking"
	}
	return p.Kind.Word()
}

// joinTexts writes the texts of the text parts, sep (JSON text) between them, into an open JSON
// string; other parts are dropped under the name prefix+their kind. n counts the texts written.
func (w *msgWriter) joinTexts(dst []byte, parts []convo.Part, sep convo.Text, prefix string) (out []byte, n int) {
	for i := range parts {
		p := &parts[i]
		if p.Kind != convo.PartText {
			w.r.Drop(prefix + partName(p))
			continue
		}
		if p.Text == "" {
			continue
		}
		if n++; n > 1 {
			dst = append(dst, sep...)
		}
		dst = append(dst, p.Text...)
	}
	return dst, n
}

// system writes a system message: the opening prompt's parts ("\n\n" apart, as Anthropic's
// system blocks read) or a system message in the middle of the conversation, in place (chat
// completions accept system messages anywhere).
func (w *msgWriter) system(parts []convo.Part, sep convo.Text) {
	if len(parts) == 0 {
		return
	}
	mark := len(w.b)
	n := w.n
	o := w.start("system")
	o.Key("content")
	var texts int
	o.B, texts = w.joinTexts(append(o.B, '"'), parts, sep, "system[].type=")
	if texts == 0 { // no text: no message
		w.b, w.n = w.b[:mark], n
		return
	}
	o.B = append(o.B, '"')
	w.done(o)
}

// user writes a user message: a string when it is one text, else a list of text, image and file
// parts.
func (w *msgWriter) user(parts []convo.Part, name string) {
	texts, others := 0, 0
	for i := range parts {
		switch parts[i].Kind {
		case convo.PartText:
			if parts[i].Text != "" {
				texts++
			}
		case convo.PartImage, convo.PartDocument:
			others++
		default:
			w.r.Drop("messages[].content[].type=" + partName(&parts[i]))
		}
	}
	if texts+others == 0 {
		return
	}
	o := w.start("user")
	o.Key("content")
	if others == 0 && texts == 1 {
		for i := range parts {
			if parts[i].Kind == convo.PartText && parts[i].Text != "" {
				o.B = append(append(append(o.B, '"'), parts[i].Text...), '"')
			}
		}
	} else {
		o.B = append(o.B, '[')
		n := 0
		for i := range parts {
			p := &parts[i]
			mark := len(o.B)
			if n > 0 {
				o.B = append(o.B, ',')
			}
			var ok bool
			o.B, ok = w.contentPart(o.B, p)
			if !ok {
				o.B = o.B[:mark]
				continue
			}
			n++
		}
		if n == 0 { // every image or file was one chat cannot take
			o.B = append(o.B[:len(o.B)-1], `""`...)
		} else {
			o.B = append(o.B, ']')
		}
	}
	if name != "" {
		o.Str("name", name)
	}
	w.done(o)
}

// contentPart writes one part of a user content list; ok is false when the part has no chat
// form.
func (w *msgWriter) contentPart(dst []byte, p *convo.Part) ([]byte, bool) {
	switch p.Kind {
	case convo.PartText:
		if p.Text == "" {
			return dst, false
		}
		return convo.NewObj(dst).Str("type", "text").Text("text", p.Text).End(), true
	case convo.PartImage:
		o := convo.NewObj(dst).Str("type", "image_url")
		img := o.Open("image_url")
		img.Key("url")
		switch {
		case p.Data != "":
			img.B = appendDataURL(img.B, p.MediaType, p.Data)
		case p.URL != "":
			img.B = convo.AppendString(img.B, p.URL)
		default:
			w.r.Drop("messages[].content[].image")
			return dst, false
		}
		if p.Detail != "" {
			img.Str("detail", p.Detail)
		}
		o.Close(img)
		return o.End(), true
	case convo.PartDocument:
		switch {
		case p.Data != "":
			o := convo.NewObj(dst).Str("type", "file")
			f := o.Open("file")
			name := p.Title
			if name == "" {
				name = "document"
			}
			f.Str("filename", name)
			f.Key("file_data")
			f.B = appendDataURL(f.B, p.MediaType, p.Data)
			o.Close(f)
			return o.End(), true
		case p.Text != "":
			return convo.NewObj(dst).Str("type", "text").Text("text", p.Text).End(), true
		}
		w.r.Drop("messages[].content[].document.url") // chat completions take files as data only
	}
	return dst, false
}

// appendDataURL writes "data:<media type>;base64,<data>" as a JSON string.
func appendDataURL(dst []byte, mediaType, data string) []byte {
	dst = append(dst, `"data:`...)
	dst = appendInner(dst, mediaType)
	dst = append(dst, ";base64,"...)
	dst = appendInner(dst, data)
	return append(dst, '"')
}

// appendInner writes s escaped for a JSON string, without the quotes (base64 needs no escape:
// the fast path copies it).
func appendInner(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q := convo.AppendString(nil, s)
			return append(dst, q[1:len(q)-1]...)
		}
	}
	return append(dst, s...)
}

// assistant writes an assistant message: its texts joined, its tool calls (a namespace's under
// their flat name). Thinking is not sent back: chat completions have no field for it in requests.
func (w *msgWriter) assistant(m *convo.Message) {
	o := w.start("assistant")
	calls, texts := 0, 0
	for i := range m.Parts {
		switch p := &m.Parts[i]; p.Kind {
		case convo.PartToolCall:
			calls++
		case convo.PartText:
			if p.Text != "" {
				texts++
			}
		default:
			w.r.Drop("messages[].content[].type=" + partName(p))
		}
	}
	if texts > 0 || calls == 0 {
		o.Key("content")
		o.B = append(o.B, '"')
		for i := range m.Parts {
			if p := &m.Parts[i]; p.Kind == convo.PartText {
				o.B = append(o.B, p.Text...)
			}
		}
		o.B = append(o.B, '"')
	}
	if calls > 0 {
		o.Key("tool_calls")
		o.B = append(o.B, '[')
		n := 0
		for i := range m.Parts {
			p := &m.Parts[i]
			if p.Kind != convo.PartToolCall {
				continue
			}
			if n++; n > 1 {
				o.B = append(o.B, ',')
			}
			c := convo.NewObj(o.B)
			if p.ID != "" {
				c.Str("id", p.ID)
			}
			c.Str("type", "function")
			fn := c.Open("function")
			if name := convo.FlatName(p.Namespace, p.Name); name != "" {
				fn.Str("name", name)
			}
			args := p.Args
			if len(args) == 0 {
				args = convo.EmptyObject
			}
			fn.Key("arguments")
			fn.B = convo.AppendString(fn.B, convo.View(args))
			c.Close(fn)
			o.B = c.End()
		}
		o.B = append(o.B, ']')
	}
	if m.Name != "" {
		o.Str("name", m.Name)
	}
	w.done(o)
}

// tool writes each tool result as a tool message (chat answers parallel calls with one message
// each); the result's texts are joined by newlines, an error result says so at its start. Parts
// that are no results follow as a user message.
func (w *msgWriter) tool(parts []convo.Part) {
	rest := 0
	for i := range parts {
		p := &parts[i]
		if p.Kind != convo.PartToolResult {
			rest++
			continue
		}
		o := w.start("tool")
		o.Key("content")
		o.B = append(o.B, '"')
		if p.IsError && !startsWithError(p.Content) {
			o.B = append(o.B, "Error: "...)
		}
		o.B, _ = w.joinTexts(o.B, p.Content, `\n`, "messages[].content[].content[].type=")
		o.B = append(o.B, '"')
		if p.ID != "" {
			o.Str("tool_call_id", p.ID)
		}
		w.done(o)
	}
	if rest > 0 {
		others := make([]convo.Part, 0, rest)
		for _, p := range parts {
			if p.Kind != convo.PartToolResult {
				others = append(others, p)
			}
		}
		w.user(others, "")
	}
}

// startsWithError reports whether a tool result's text says it is an error already.
func startsWithError(content []convo.Part) bool {
	for _, p := range content {
		if p.Kind == convo.PartText && p.Text != "" {
			return strings.HasPrefix(string(p.Text), "Error")
		}
	}
	return false
}
