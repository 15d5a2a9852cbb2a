package responses

import (
	"bytes"
	"slices"
	"strings"

	"switchyard/services/proxy/convo"
)

// AppendRequest writes r as a Responses request for an upstream that speaks only this format
// (OpenAI's codex and pro models, ChatGPT accounts). The request is stateless: store is false and
// reasoning comes back as encrypted content, which the next turn sends again with its reasoning
// items. What the format cannot carry is named with r.Drop. Nothing in t concerns this format
// (max_output_tokens is its only limit, and it is optional).
func AppendRequest(dst []byte, r *convo.Request, t convo.Target) ([]byte, error) {
	o := convo.NewObj(slices.Grow(dst, r.Size()))
	o.Str("model", r.Model)
	// The opening system prompt: its first part is the instructions, the others follow as the
	// first input item, a developer message (what instructions are to the model anyway).
	if len(r.System) > 0 {
		o.Text("instructions", r.System[0].Text)
	}
	o.Key("input")
	w := &inputWriter{b: append(o.B, '['), r: r}
	if len(r.System) > 1 {
		w.content("developer", r.System[1:])
		w.flush()
	}
	for i := range r.Messages {
		w.message(&r.Messages[i])
	}
	o.B = append(w.b, ']')

	reasoning := w.reasoning
	n := 0
	for i := range r.Tools {
		if tool := &r.Tools[i]; tool.Kind == convo.ToolServer && tool.Family != "openai" {
			r.Drop("tools." + tool.Type)
		} else {
			n++
		}
	}
	if n > 0 {
		o.Key("tools")
		o.B, _ = appendTools(o.B, r, false)
		appendToolChoice(o, r.ToolChoice, false)
		if r.ParallelToolCalls != nil {
			o.Bool("parallel_tool_calls", *r.ParallelToolCalls)
		}
	}
	if r.MaxTokens > 0 {
		// OpenAI refuses an output limit below 16 tokens (a client's one-token probe, say).
		o.Int("max_output_tokens", int64(max(r.MaxTokens, 16)))
	}
	// OpenAI's reasoning models refuse sampling parameters outright.
	sampling := !reasoningModel(r.Model)
	if r.Temperature != nil {
		if sampling {
			o.Key("temperature")
			o.B = appendFloat(o.B, *r.Temperature)
		} else {
			r.Drop("temperature")
		}
	}
	if r.TopP != nil {
		if sampling {
			o.Key("top_p")
			o.B = appendFloat(o.B, *r.TopP)
		} else {
			r.Drop("top_p")
		}
	}
	if r.TopK != nil {
		r.Drop("top_k")
	}
	if len(r.Stop) > 0 {
		r.Drop("stop")
	}
	effort := r.ReasoningEffort
	if effort == "" && r.ThinkingBudget > 0 {
		effort = convo.EffortOf(r.ThinkingBudget)
	}
	if effort != "" || r.ReasoningSummary != "" {
		// Asked for reasoning: its summary is what other formats show as thinking.
		reasoning = reasoning || effort != "none"
		rs := o.Open("reasoning")
		if effort != "" {
			rs.Str("effort", effort)
		}
		switch {
		case r.ReasoningSummary != "":
			rs.Str("summary", r.ReasoningSummary)
		case effort != "none":
			rs.Str("summary", "auto")
		}
		o.Close(rs)
	}
	if f := r.Format; f != nil && f.Kind != convo.FormatText {
		text := o.Open("text")
		text.Key("format")
		text.B = appendFormat(text.B, f, false)
		o.Close(text)
	}
	// Nothing is stored upstream: the conversation is sent whole with every turn, reasoning
	// included as encrypted content, which only reasoning models return (asking another model
	// for it is an error).
	o.Bool("store", false)
	include := r.Include
	if reasoning || reasoningModel(r.Model) {
		if !slices.Contains(include, "reasoning.encrypted_content") {
			include = append(include[:len(include):len(include)], "reasoning.encrypted_content")
		}
	}
	if len(include) > 0 {
		o.Strs("include", include)
	}
	if r.PreviousResponseID != "" {
		o.Str("previous_response_id", r.PreviousResponseID)
	}
	if r.Truncation != "" {
		o.Str("truncation", r.Truncation)
	}
	if r.ServiceTier != "" {
		o.Str("service_tier", r.ServiceTier)
	}
	if r.User != "" {
		o.Str("user", r.User)
	}
	if len(r.Metadata) > 0 {
		if stringMap(r.Metadata) {
			o.Raw("metadata", r.Metadata)
		} else {
			r.Drop("metadata")
		}
	}
	if r.Stream {
		o.Bool("stream", true)
	}
	return o.End(), nil
}

// stringMap reports whether raw is an object of at most 16 string values, what OpenAI takes as
// metadata (Anthropic's {"user_id": …} is one).
func stringMap(raw []byte) bool {
	s := convo.View(raw)
	if convo.Kind(s) != '{' || !convo.Document(s, nil) {
		return false
	}
	n, good := 0, true
	convo.FieldsOf(s, func(k, v string) {
		n++
		good = good && convo.Kind(v) == '"' && len(k) <= 64 && len(v) <= 514
	})
	return good && n <= 16
}

// appendTools writes the tools as a list: functions, namespaces of functions, and OpenAI's own
// tools as the client wrote them; Anthropic's server tools have no place here and are dropped.
// echo writes the client's tools back in an answer: the fields they had, nothing dropped. It
// returns how many tools it wrote.
func appendTools(dst []byte, r *convo.Request, echo bool) ([]byte, int) {
	dst = append(dst, '[')
	n := 0
	for i := range r.Tools {
		t := &r.Tools[i]
		if t.Kind == convo.ToolServer && t.Family != "openai" && !echo {
			r.Drop("tools." + t.Type)
			continue
		}
		if n++; n > 1 {
			dst = append(dst, ',')
		}
		dst = appendTool(dst, t, echo)
	}
	return append(dst, ']'), n
}

func appendTool(dst []byte, t *convo.Tool, echo bool) []byte {
	switch t.Kind {
	case convo.ToolServer:
		return appendRaw(dst, t.Raw, echo)
	case convo.ToolNamespace:
		o := convo.NewObj(dst).Str("type", "namespace").Str("name", t.Name)
		if t.Description != "" || !echo { // OpenAI requires one
			o.Str("description", t.Description)
		}
		o.Key("tools")
		o.B = append(o.B, '[')
		for i := range t.Tools {
			if i > 0 {
				o.B = append(o.B, ',')
			}
			o.B = appendTool(o.B, &t.Tools[i], echo)
		}
		o.B = append(o.B, ']')
		return o.End()
	}
	o := convo.NewObj(dst).Str("type", "function").Str("name", t.Name)
	if t.Description != "" {
		o.Str("description", t.Description)
	}
	switch {
	case t.Parameters != nil:
		o.Key("parameters")
		o.B = appendRaw(o.B, t.Parameters, echo)
	case !echo:
		o.Raw("parameters", []byte(`{"type":"object","properties":{}}`))
	}
	switch {
	case t.Strict != nil:
		o.Bool("strict", *t.Strict)
	case !echo:
		// A Responses function is strict unless it says otherwise, and strict mode refuses
		// the schemas other formats' clients write (optional properties, no
		// additionalProperties: false).
		o.Bool("strict", false)
	}
	return o.End()
}

// appendFormat writes a text.format object.
func appendFormat(dst []byte, f *convo.ResponseFormat, echo bool) []byte {
	switch f.Kind {
	case convo.FormatJSONObject:
		return append(dst, `{"type":"json_object"}`...)
	case convo.FormatJSONSchema:
		o := convo.NewObj(dst).Str("type", "json_schema")
		switch {
		case f.Name != "":
			o.Str("name", f.Name)
		case !echo:
			o.Str("name", "response") // required; messages' output_format has none
		}
		if f.Description != "" {
			o.Str("description", f.Description)
		}
		if f.Schema != nil {
			o.Key("schema")
			o.B = appendRaw(o.B, f.Schema, echo)
		} else if !echo {
			o.Raw("schema", []byte(`{"type":"object"}`))
		}
		if f.Strict != nil {
			o.Bool("strict", *f.Strict)
		}
		return o.End()
	}
	return append(dst, `{"type":"text"}`...)
}

// inputWriter writes the model's messages as input items. Texts, images and files of one
// message make one message item; tool calls, tool results and reasoning are items of their own,
// in the order they came.
type inputWriter struct {
	b []byte
	r *convo.Request
	n int // items written

	// The message item being written: its role and the parts so far ("" when none is open).
	role string
	o    *convo.Obj
	np   int
	// reasoning: reasoning items with encrypted content were sent.
	reasoning bool
}

// item starts an item object.
func (w *inputWriter) item() *convo.Obj {
	w.flush()
	if w.n++; w.n > 1 {
		w.b = append(w.b, ',')
	}
	return convo.NewObj(w.b)
}

// flush ends the open message item.
func (w *inputWriter) flush() {
	if w.role == "" {
		return
	}
	w.b = append(w.o.B, ']', '}')
	w.role, w.o = "", nil
}

// part starts a content part of a message item of role (opening the item when needed).
func (w *inputWriter) part(role string) *convo.Obj {
	if w.role != role {
		o := w.item().Str("type", "message").Str("role", role)
		o.Key("content")
		o.B = append(o.B, '[')
		w.role, w.o, w.np = role, o, 0
	}
	if w.np++; w.np > 1 {
		w.o.B = append(w.o.B, ',')
	}
	return convo.NewObj(w.o.B)
}

// endPart ends a content part.
func (w *inputWriter) endPart(p *convo.Obj) { w.o.B = p.End() }

// content writes texts, images and files as parts of a message item of role.
func (w *inputWriter) content(role string, parts []convo.Part) {
	for i := range parts {
		w.contentPart(role, &parts[i])
	}
}

func (w *inputWriter) contentPart(role string, p *convo.Part) {
	textType := "input_text"
	if role == "assistant" {
		textType = "output_text"
	}
	switch p.Kind {
	case convo.PartText:
		w.endPart(w.part(role).Str("type", textType).Text("text", p.Text))
	case convo.PartImage:
		if role == "assistant" {
			w.r.Drop("messages[].content[].type=image")
			return
		}
		o := w.part(role).Str("type", "input_image")
		o.Key("image_url")
		o.B = appendSource(o.B, p)
		if p.Detail != "" {
			o.Str("detail", p.Detail)
		}
		w.endPart(o)
	case convo.PartDocument:
		if p.Data == "" && p.URL == "" { // a plain text document
			w.endPart(w.part(role).Str("type", textType).Text("text", p.Text))
			return
		}
		if role == "assistant" {
			w.r.Drop("messages[].content[].type=document")
			return
		}
		w.endPart(appendFile(w.part(role), p))
	}
}

// appendSource writes an image's URL: its own, or a data URL of its bytes.
func appendSource(dst []byte, p *convo.Part) []byte {
	if p.Data == "" {
		return convo.AppendString(dst, p.URL)
	}
	return appendJoined(dst, "data:", p.MediaType, ";base64,", p.Data)
}

// appendFile writes a document as an input_file part.
func appendFile(o *convo.Obj, p *convo.Part) *convo.Obj {
	o.Str("type", "input_file")
	if p.Data == "" {
		return o.Str("file_url", p.URL)
	}
	name := p.Title
	if name == "" { // required with file_data
		name = "document"
		switch p.MediaType {
		case "application/pdf":
			name += ".pdf"
		case "text/plain":
			name += ".txt"
		}
	}
	o.Str("filename", name)
	o.Key("file_data")
	o.B = appendJoined(o.B, "data:", p.MediaType, ";base64,", p.Data)
	return o
}

// message writes one message of the model.
func (w *inputWriter) message(m *convo.Message) {
	role := "user"
	switch m.Role {
	case convo.RoleAssistant:
		role = "assistant"
	case convo.RoleSystem:
		// A system message in the middle of the conversation: Responses takes developer (and
		// system) messages anywhere in the input.
		role = "developer"
	}
	if m.Name != "" {
		w.r.Drop("messages[].name")
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Kind {
		case convo.PartToolCall:
			w.call(p)
		case convo.PartToolResult:
			w.result(p)
		case convo.PartThinking:
			w.thinking(p)
		default:
			w.contentPart(role, p)
		}
	}
	w.flush()
}

// call writes a function_call item.
func (w *inputWriter) call(p *convo.Part) {
	name, ns := p.Name, p.Namespace
	if ns == "" {
		name, ns = lookup(w.r, name)
	}
	o := w.item().Str("type", "function_call").Str("call_id", p.ID).Str("name", name)
	if ns != "" {
		o.Str("namespace", ns)
	}
	if len(p.Args) == 0 {
		o.Str("arguments", "{}")
	} else {
		o.Str("arguments", convo.View(p.Args))
	}
	w.b = o.End()
}

// result writes a function_call_output item: its text, or a list of parts when it holds images
// or files. An error result says so in its text (the format has no flag for it).
func (w *inputWriter) result(p *convo.Part) {
	o := w.item().Str("type", "function_call_output").Str("call_id", p.ID)
	o.Key("output")
	texts := true
	for i := range p.Content {
		if k := p.Content[i].Kind; k != convo.PartText && !(k == convo.PartDocument && p.Content[i].Data == "" && p.Content[i].URL == "") {
			texts = false
		}
	}
	errPrefix := p.IsError && !(len(p.Content) > 0 && strings.HasPrefix(string(p.Content[0].Text), "Error"))
	if texts {
		o.B = append(o.B, '"')
		if errPrefix {
			o.B = append(o.B, "Error: "...)
		}
		for i := range p.Content {
			if i > 0 {
				o.B = append(o.B, `\n`...)
			}
			o.B = append(o.B, p.Content[i].Text...)
		}
		o.B = append(o.B, '"')
		w.b = o.End()
		return
	}
	o.B = append(o.B, '[')
	n := 0
	sep := func() {
		if n++; n > 1 {
			o.B = append(o.B, ',')
		}
	}
	if errPrefix {
		sep()
		o.B = append(o.B, `{"type":"input_text","text":"Error:"}`...)
	}
	for i := range p.Content {
		c := &p.Content[i]
		switch c.Kind {
		case convo.PartText:
			sep()
			o.B = convo.NewObj(o.B).Str("type", "input_text").Text("text", c.Text).End()
		case convo.PartImage:
			sep()
			img := convo.NewObj(o.B).Str("type", "input_image")
			img.Key("image_url")
			img.B = appendSource(img.B, c)
			if c.Detail != "" {
				img.Str("detail", c.Detail)
			}
			o.B = img.End()
		case convo.PartDocument:
			sep()
			if c.Data == "" && c.URL == "" {
				o.B = convo.NewObj(o.B).Str("type", "input_text").Text("text", c.Text).End()
			} else {
				o.B = appendFile(convo.NewObj(o.B), c).End()
			}
		}
	}
	o.B = append(o.B, ']')
	w.b = o.End()
}

// thinking writes a reasoning item. OpenAI takes back only its own reasoning, as the encrypted
// content it returned: a reasoning item without it names an item stored upstream, and nothing
// is. The thinking a client got from a Responses upstream through another format comes back in
// that format's signature field; an Anthropic signature is not OpenAI's and cannot be sent.
func (w *inputWriter) thinking(p *convo.Part) {
	enc := p.Encrypted
	if enc == "" || p.Redacted {
		if enc == "" {
			enc = p.Signature
		}
		if !strings.HasPrefix(enc, "gAAAA") { // OpenAI's encrypted content is a Fernet token
			enc = ""
		}
	}
	if enc == "" {
		w.r.Drop("messages[].thinking")
		return
	}
	w.reasoning = true
	o := w.item().Str("type", "reasoning")
	if strings.HasPrefix(p.ID, "rs_") {
		o.Str("id", p.ID)
	}
	o.Key("summary")
	if p.Text == "" {
		o.B = append(o.B, "[]"...)
	} else {
		o.B = append(o.B, '[')
		o.B = convo.NewObj(o.B).Str("type", "summary_text").Text("text", p.Text).End()
		o.B = append(o.B, ']')
	}
	w.b = o.Str("encrypted_content", enc).End()
}

// appendRaw writes a raw JSON value; for an echo, which goes into the data line of a stream's
// event, without the line breaks a pretty-printed request had (a line break would end the data
// line).
func appendRaw(dst, raw []byte, echo bool) []byte {
	if !echo || bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return append(dst, raw...)
	}
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case in && c == '\\' && i+1 < len(raw):
			dst = append(dst, c, raw[i+1])
			i++
			continue
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
