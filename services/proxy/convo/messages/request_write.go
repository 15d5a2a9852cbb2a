package messages

import (
	"slices"
	"strconv"
	"strings"

	"switchyard/services/proxy/convo"
)

// minThinkingBudget is the smallest thinking budget Anthropic accepts.
const minThinkingBudget = 1024

// thinkingBudget maps a reasoning effort (a chat or Responses client's) to a thinking budget.
func thinkingBudget(effort string) (int, bool) {
	switch effort {
	case "minimal":
		return 1024, true
	case "low":
		return 2048, true
	case "medium":
		return 8192, true
	case "high":
		return 24576, true
	}
	return 0, false
}

// AppendRequest writes r as an Anthropic messages request. Anthropic wants alternating turns:
// consecutive messages of the same side merge into one turn, tool results first in a user turn.
// What Anthropic cannot take is dropped and named with r.Drop.
func AppendRequest(dst []byte, r *convo.Request, t convo.Target) ([]byte, error) {
	out := convo.NewObj(slices.Grow(dst, r.Size()))
	out.Str("model", r.Model)
	out.Key("messages")
	w := turns{b: append(out.B, '['), r: r}
	for i := range r.Messages {
		w.message(&r.Messages[i])
	}
	w.end()
	out.B = append(w.b, ']')
	appendSystem(out, r)

	clientMax := r.MaxTokens > 0
	maxTokens := r.MaxTokens
	if !clientMax {
		if maxTokens = t.DefaultMaxTokens; maxTokens <= 0 {
			maxTokens = convo.DefaultMaxTokens
		}
	}
	temperature, topP := r.Temperature, r.TopP
	if temperature != nil && *temperature > 1 {
		one := 1.0 // Anthropic's range is 0–1
		temperature = &one
	}
	// Thinking as the client asked for it in Anthropic's terms, or from a reasoning effort.
	var budget int
	var effort string
	adaptive := r.ThinkingAdaptive
	switch {
	case adaptive:
		effort = anthropicEffort(r.ReasoningEffort)
	case r.ThinkingBudget > 0:
		budget, effort = r.ThinkingBudget, anthropicEffort(r.ReasoningEffort)
	default:
		var ok bool
		if budget, ok = thinkingBudget(r.ReasoningEffort); ok {
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
			if temperature != nil {
				temperature = nil
				r.Drop("temperature")
			}
			if topP != nil {
				topP = nil
				r.Drop("top_p")
			}
		} else if r.ReasoningEffort != "" && r.ReasoningEffort != "none" {
			r.Drop("reasoning_effort")
		}
	}
	out.Int("max_tokens", int64(maxTokens))
	if temperature != nil {
		out.Key("temperature")
		out.B = appendFloat(out.B, *temperature)
	}
	if topP != nil {
		out.Key("top_p")
		out.B = appendFloat(out.B, *topP)
	}
	if r.TopK != nil {
		out.Int("top_k", int64(*r.TopK))
	}
	if len(r.Stop) > 0 {
		out.Strs("stop_sequences", r.Stop)
	}
	if r.Stream {
		out.Bool("stream", true)
	}
	tools := appendTools(out, r)
	appendToolChoice(out, r, tools)
	switch {
	case adaptive:
		out.Raw("thinking", []byte(`{"type":"adaptive"}`))
	case budget > 0:
		out.Close(out.Open("thinking").Str("type", "enabled").Int("budget_tokens", int64(budget)))
	}
	appendOutputConfig(out, r, effort)
	appendMetadata(out, r)
	if r.PreviousResponseID != "" {
		r.Drop("previous_response_id") // Anthropic keeps no conversations: the history is lost
	}
	if r.ServiceTier != "" {
		r.Drop("service_tier")
	}
	return out.End(), nil
}

// anthropicEffort is a reasoning effort in output_config's words ("" for none).
func anthropicEffort(e string) string {
	switch e {
	case "minimal":
		return "low"
	case "low", "medium", "high":
		return e
	}
	return ""
}

// appendFloat writes a number as JSON does.
func appendFloat(dst []byte, f float64) []byte {
	if a := f; a != 0 && (a < 1e-6 && a > -1e-6 || a >= 1e21 || a <= -1e21) {
		return strconv.AppendFloat(dst, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// appendSystem writes the system prompt as text blocks with their cache marks.
func appendSystem(out *convo.Obj, r *convo.Request) {
	n := 0
	for i := range r.System {
		p := &r.System[i]
		if p.Kind != convo.PartText {
			r.Drop("system[].type")
			continue
		}
		if p.Text == "" { // Anthropic refuses empty text blocks
			continue
		}
		out.Elem("system", &n)
		out.B = appendText(out.B, p.Text, p.Cache)
	}
	if n > 0 {
		out.B = append(out.B, ']')
	}
}

// appendText writes a text block.
func appendText(dst []byte, text convo.Text, cache []byte) []byte {
	o := convo.NewObj(dst).Str("type", "text").Text("text", text)
	if cache != nil {
		o.Raw("cache_control", cache)
	}
	return o.End()
}

// side is which side of the conversation a turn is on.
type side uint8

const (
	sideNone side = iota
	sideUser
	sideAssistant
)

// turns writes the messages list: each model message's blocks go into the open turn when it is
// on the same side, else a new turn begins.
type turns struct {
	b []byte
	r *convo.Request

	side    side
	n       int // turns written
	blocks  int // blocks in the open turn
	content int // where the open turn's first block begins
	results int // where the open turn's tool results end
	others  bool
	scratch []byte
}

// open makes sure a turn of side s is the open one.
func (w *turns) open(s side) {
	if w.side == s {
		return
	}
	w.end()
	if w.n++; w.n > 1 {
		w.b = append(w.b, ',')
	}
	role := "user"
	if s == sideAssistant {
		role = "assistant"
	}
	w.b = append(w.b, `{"role":"`...)
	w.b = append(w.b, role...)
	w.b = append(w.b, `","content":[`...)
	w.side, w.blocks, w.content, w.results, w.others = s, 0, len(w.b), len(w.b), false
}

// end closes the open turn.
func (w *turns) end() {
	if w.side != sideNone {
		w.b = append(w.b, ']', '}')
		w.side = sideNone
	}
}

// sep starts a block in the open turn.
func (w *turns) sep() {
	if w.blocks++; w.blocks > 1 {
		w.b = append(w.b, ',')
	}
}

// other writes a block that is not a tool result into a turn of side s.
func (w *turns) other(s side, write func(dst []byte) []byte) {
	w.open(s)
	w.sep()
	w.b = write(w.b)
	w.others = true
}

// result writes a tool result into the user turn, after the results already in it and before
// anything else (Anthropic wants them first).
func (w *turns) result(write func(dst []byte) []byte) {
	w.open(sideUser)
	if !w.others {
		w.sep()
		w.b = write(w.b)
		w.results = len(w.b)
		return
	}
	// A user block came first (a system message written as user text, say): the result goes
	// in front of it.
	first := w.results == w.content
	w.scratch = w.scratch[:0]
	if !first {
		w.scratch = append(w.scratch, ',')
	}
	w.scratch = write(w.scratch)
	n := len(w.scratch) // w.results stays at the end of the last result, before any comma
	if first {
		w.scratch = append(w.scratch, ',')
	}
	w.b = slices.Insert(w.b, w.results, w.scratch...)
	w.results += n
	w.blocks++
}

// message writes one model message.
func (w *turns) message(m *convo.Message) {
	if m.Name != "" {
		w.r.Drop("messages[].name")
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		switch m.Role {
		case convo.RoleUser:
			w.userPart(p)
		case convo.RoleTool:
			if p.Kind == convo.PartToolResult {
				w.result(func(dst []byte) []byte { return appendToolResult(dst, p, w.r) })
			} else {
				w.userPart(p)
			}
		case convo.RoleAssistant:
			w.assistantPart(p)
		case convo.RoleSystem:
			w.systemPart(p)
		}
	}
}

// userPart writes a part of a user turn: text, an image, a document.
func (w *turns) userPart(p *convo.Part) {
	switch p.Kind {
	case convo.PartText:
		if p.Text != "" { // Anthropic refuses empty text blocks
			w.other(sideUser, func(dst []byte) []byte { return appendText(dst, p.Text, p.Cache) })
		}
	case convo.PartImage, convo.PartDocument:
		if b, ok := appendMedia(nil, p, w.r, "messages[].content[]"); ok {
			w.other(sideUser, func(dst []byte) []byte { return append(dst, b...) })
		}
	case convo.PartToolResult:
		w.result(func(dst []byte) []byte { return appendToolResult(dst, p, w.r) })
	default:
		w.r.Drop("messages[].content[].type=" + p.Kind.Word())
	}
}

// assistantPart writes a part of an assistant turn: text, a tool call, thinking.
func (w *turns) assistantPart(p *convo.Part) {
	switch p.Kind {
	case convo.PartText:
		if p.Text != "" {
			w.other(sideAssistant, func(dst []byte) []byte { return appendText(dst, p.Text, p.Cache) })
		}
	case convo.PartToolCall:
		w.other(sideAssistant, func(dst []byte) []byte {
			o := convo.NewObj(dst).Str("type", "tool_use")
			if p.ID != "" {
				o.Str("id", p.ID)
			}
			if name := convo.FlatName(p.Namespace, p.Name); name != "" {
				o.Str("name", name)
			}
			args := p.Args
			if len(args) == 0 || args[0] != '{' {
				args = []byte("{}")
			}
			o.Raw("input", args)
			if p.Cache != nil {
				o.Raw("cache_control", p.Cache)
			}
			return o.End()
		})
	case convo.PartThinking:
		// Anthropic takes back only its own thinking: signed, or redacted. Reasoning another
		// provider encrypted, or reasoning text without a signature, would be refused. Thinking a
		// client got from Anthropic through the Responses format comes back as a reasoning item
		// whose encrypted content is the signature (OpenAI's own is a Fernet token, "gAAAA…").
		sig := p.Signature
		if sig == "" && !p.Redacted && p.Text != "" && !strings.HasPrefix(p.Encrypted, "gAAAA") {
			sig = p.Encrypted
		}
		switch {
		case p.Redacted && p.Encrypted != "":
			w.other(sideAssistant, func(dst []byte) []byte {
				return convo.NewObj(dst).Str("type", "redacted_thinking").Str("data", p.Encrypted).End()
			})
		case !p.Redacted && sig != "":
			w.other(sideAssistant, func(dst []byte) []byte {
				return convo.NewObj(dst).Str("type", "thinking").Text("thinking", p.Text).Str("signature", sig).End()
			})
		default:
			w.r.Drop("messages[].content[].type=thinking")
		}
	default:
		w.r.Drop("messages[].content[].type=" + p.Kind.Word())
	}
}

// systemPart writes a part of a system message in the middle of the conversation.
//
// Anthropic's own form, a {"role":"system"} message (the mid-conversation-system beta Claude
// Code uses), is taken only by the newest models, and only when the client names the beta in
// its anthropic-beta header, which this writer does not see: older models, Bedrock and Vertex,
// and the Anthropic-compatible servers answer 400. So the message goes as the one form every
// Anthropic upstream accepts, a text block of the user turn, wrapped in <system-reminder> tags:
// the form Claude Code itself falls back to when the beta is refused, which Claude models are
// trained to read as instructions from the system rather than words of the user.
func (w *turns) systemPart(p *convo.Part) {
	if p.Kind != convo.PartText {
		w.r.Drop("messages[].content[].type=" + p.Kind.Word())
		return
	}
	if p.Text == "" {
		return
	}
	text := convo.Text("<system-reminder>\\n") + p.Text + convo.Text("\\n</system-reminder>")
	w.other(sideUser, func(dst []byte) []byte { return appendText(dst, text, p.Cache) })
}

// appendMedia writes an image or a document block; false when its source cannot be sent (a URL
// that is neither http(s) nor a base64 data URL), which is named at path.
func appendMedia(dst []byte, p *convo.Part, r *convo.Request, path string) ([]byte, bool) {
	typ := "image"
	if p.Kind == convo.PartDocument {
		typ = "document"
	}
	o := convo.NewObj(dst).Str("type", typ)
	src := o.Open("source")
	switch {
	case p.Kind == convo.PartDocument && p.Data == "" && p.URL == "":
		mt := p.MediaType
		if mt == "" {
			mt = "text/plain"
		}
		src.Str("type", "text").Str("media_type", mt).Text("data", p.Text)
	case p.Data != "":
		src.Str("type", "base64").Str("media_type", p.MediaType).Str("data", p.Data)
	default:
		if mt, data, ok := convo.ParseDataURL(p.URL); ok {
			src.Str("type", "base64").Str("media_type", mt).Str("data", data)
		} else if strings.HasPrefix(p.URL, "http://") || strings.HasPrefix(p.URL, "https://") {
			src.Str("type", "url").Str("url", p.URL)
		} else {
			if p.Kind == convo.PartImage {
				r.Drop(path + ".image_url")
			} else {
				r.Drop(path + ".source")
			}
			return dst, false
		}
	}
	o.Close(src)
	if p.Title != "" && p.Kind == convo.PartDocument {
		o.Str("title", p.Title)
	}
	if p.Cache != nil {
		o.Raw("cache_control", p.Cache)
	}
	return o.End(), true
}

// appendToolResult writes a tool_result block: its content a string when it is one plain text,
// else blocks.
func appendToolResult(dst []byte, p *convo.Part, r *convo.Request) []byte {
	o := convo.NewObj(dst).Str("type", "tool_result")
	if p.ID != "" {
		o.Str("tool_use_id", p.ID)
	}
	switch {
	case p.Content == nil:
	case len(p.Content) == 1 && p.Content[0].Kind == convo.PartText && p.Content[0].Cache == nil:
		o.Text("content", p.Content[0].Text)
	default:
		o.Key("content")
		o.B = append(o.B, '[')
		n := 0
		for i := range p.Content {
			c := &p.Content[i]
			start := len(o.B)
			if n > 0 {
				o.B = append(o.B, ',')
			}
			switch c.Kind {
			case convo.PartText:
				if c.Text == "" {
					o.B = o.B[:start]
					continue
				}
				o.B = appendText(o.B, c.Text, c.Cache)
			case convo.PartImage, convo.PartDocument:
				var ok bool
				if o.B, ok = appendMedia(o.B, c, r, "messages[].content[].content[]"); !ok {
					o.B = o.B[:start]
					continue
				}
			default:
				o.B = o.B[:start]
				r.Drop("messages[].content[].content[].type=" + c.Kind.Word())
				continue
			}
			n++
		}
		if n == 0 && len(p.Content) > 0 {
			o.B = append(o.B[:len(o.B)-1], `""`...) // nothing left to send: an empty result
		} else {
			o.B = append(o.B, ']')
		}
	}
	if p.IsError {
		o.Bool("is_error", true)
	}
	if p.Cache != nil {
		o.Raw("cache_control", p.Cache)
	}
	return o.End()
}

// appendTools writes the tools Anthropic can take: functions (a namespace's flattened), and
// Anthropic's own server tools as the client wrote them; others' server tools are dropped. It
// returns how many it wrote.
func appendTools(out *convo.Obj, r *convo.Request) int {
	n := 0
	var fn func(t *convo.Tool, ns string)
	fn = func(t *convo.Tool, ns string) {
		switch t.Kind {
		case convo.ToolNamespace:
			for i := range t.Tools {
				fn(&t.Tools[i], t.Name)
			}
			return
		case convo.ToolServer:
			if t.Family != "anthropic" || len(t.Raw) == 0 {
				r.Drop("tools." + t.Type)
				return
			}
		}
		out.Elem("tools", &n)
		if t.Kind == convo.ToolServer {
			out.B = append(out.B, t.Raw...)
			return
		}
		o := convo.NewObj(out.B).Str("name", convo.FlatName(ns, t.Name))
		if t.Description != "" {
			o.Str("description", t.Description)
		}
		if len(t.Parameters) > 0 {
			o.Raw("input_schema", t.Parameters)
		} else {
			o.Raw("input_schema", []byte(`{"type":"object","properties":{}}`))
		}
		if t.Strict != nil && *t.Strict {
			// Anthropic's strict tools need a model with structured outputs, and OpenAI's SDKs
			// mark every function strict: sent along, they would turn requests the older
			// models and compatible servers answer today into 400s.
			r.Drop("tools[].strict")
		}
		if t.Cache != nil {
			o.Raw("cache_control", t.Cache)
		}
		out.B = o.End()
	}
	for i := range r.Tools {
		fn(&r.Tools[i], "")
	}
	if n > 0 {
		out.B = append(out.B, ']')
	}
	return n
}

// appendToolChoice writes tool_choice; parallel_tool_calls: false becomes
// disable_parallel_tool_use (on auto when the client chose nothing).
func appendToolChoice(out *convo.Obj, r *convo.Request, tools int) {
	mode := r.ToolChoice.Mode
	disable := r.ParallelToolCalls != nil && !*r.ParallelToolCalls && tools > 0
	if disable && mode == convo.ChoiceUnset {
		mode = convo.ChoiceAuto
	}
	var typ string
	switch mode {
	case convo.ChoiceUnset:
		return
	case convo.ChoiceAuto:
		typ = "auto"
	case convo.ChoiceNone:
		typ = "none"
	case convo.ChoiceAny:
		typ = "any"
	case convo.ChoiceTool:
		typ = "tool"
	}
	tc := out.Open("tool_choice").Str("type", typ)
	if mode == convo.ChoiceTool && r.ToolChoice.Name != "" {
		tc.Str("name", r.ToolChoice.Name)
	}
	if mode != convo.ChoiceNone {
		switch {
		case disable:
			tc.Bool("disable_parallel_tool_use", true)
		case r.ParallelToolCalls != nil && *r.ParallelToolCalls && r.ToolChoice.Mode != convo.ChoiceUnset:
			tc.Bool("disable_parallel_tool_use", false)
		}
	}
	out.Close(tc)
}

// appendOutputConfig writes output_config: the effort of Anthropic-style thinking, and a JSON
// schema the answer must follow (Anthropic's structured outputs; it has no plain JSON mode).
func appendOutputConfig(out *convo.Obj, r *convo.Request, effort string) {
	schema := r.Format != nil && r.Format.Kind == convo.FormatJSONSchema && len(r.Format.Schema) > 0
	if r.Format != nil && r.Format.Kind == convo.FormatJSONObject {
		r.Drop("response_format")
	}
	if effort == "" && !schema {
		return
	}
	oc := out.Open("output_config")
	if effort != "" {
		oc.Str("effort", effort)
	}
	if schema {
		oc.Close(oc.Open("format").Str("type", "json_schema").Raw("schema", r.Format.Schema))
	}
	out.Close(oc)
}

// appendMetadata writes metadata: Anthropic takes a user_id and nothing else.
func appendMetadata(out *convo.Obj, r *convo.Request) {
	if len(r.Metadata) > 0 && r.Metadata[0] == '{' {
		other := false
		convo.FieldsOf(convo.View(r.Metadata), func(k, _ string) { other = other || k != "user_id" })
		if other {
			r.Drop("metadata")
		}
	}
	if r.User != "" {
		out.Close(out.Open("metadata").Str("user_id", r.User))
	}
}
