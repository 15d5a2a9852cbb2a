// Package convo is the one conversation model every wire format is read into and written from:
// a request (system, messages of typed parts, tools, sampling, output format) and an answer as a
// stream of events. Each wire format (package chat, messages, responses below this one) has one
// reader and one writer for requests, whole answers and stream events; no format knows another.
// A translation is a reader of one format feeding a writer of another.
//
// Same-format traffic never comes here: it is passed through byte-exact.
//
// Texts are kept as Text, a string in its JSON form: read from a validated document and written
// into another as they stand, so a long conversation is neither unescaped nor escaped again.
// Raw JSON values (tool arguments and schemas, metadata, cache-control marks) are kept as they
// were read.
package convo

// Role is who speaks a message.
type Role uint8

// The roles.
const (
	RoleUser Role = iota
	RoleAssistant
	// RoleSystem is a system (or developer) message in the middle of the conversation; the
	// opening system prompt is Request.System.
	RoleSystem
	// RoleTool carries tool results (chat's role "tool"; messages and Responses put them in user
	// turns or items, which readers turn into parts of kind PartToolResult).
	RoleTool
)

// PartKind is what a part of a message is.
type PartKind uint8

// The part kinds.
const (
	PartText PartKind = iota
	// PartImage: URL, or MediaType + Data (base64).
	PartImage
	// PartDocument: a PDF or text document (URL, or MediaType + Data, or Text for plain text),
	// with an optional Title.
	PartDocument
	// PartToolCall: the assistant calls tool Name with Args (raw JSON object), call ID.
	PartToolCall
	// PartToolResult: the result of call ID, Content parts (text, images), IsError.
	PartToolResult
	// PartThinking: reasoning Text with its Signature (Anthropic) or Encrypted content
	// (Responses reasoning items); a redacted thinking block has only Encrypted (Redacted set).
	PartThinking
)

// Word is the part kind in the words the formats name a dropped part with (Anthropic's block
// types): text, image, document, tool_use, tool_result, thinking.
func (k PartKind) Word() string {
	switch k {
	case PartText:
		return "text"
	case PartImage:
		return "image"
	case PartDocument:
		return "document"
	case PartToolCall:
		return "tool_use"
	case PartToolResult:
		return "tool_result"
	}
	return "thinking"
}

// Part is one typed piece of a message. Which fields are set depends on Kind.
type Part struct {
	Kind PartKind
	Text Text

	// Images and documents.
	URL, MediaType, Data, Detail, Title string

	// Tool calls and results.
	ID, Name string
	// Namespace is the tool group a call's tool belongs to (Responses namespace tools).
	Namespace string
	Args      []byte // a JSON object
	Content   []Part
	IsError   bool

	// Thinking.
	Signature string
	Encrypted string
	Redacted  bool

	// Cache is the part's cache-control mark as raw JSON ({"type":"ephemeral"}), nil when none.
	Cache []byte
}

// Message is one turn of the conversation.
type Message struct {
	Role  Role
	Parts []Part
	// Name is chat's optional participant name.
	Name string
}

// ToolKind is what a tool is.
type ToolKind uint8

// The tool kinds.
const (
	ToolFunction ToolKind = iota
	// ToolNamespace is a group of functions under one name (Tools); writers for formats without
	// groups flatten it (see FlatName) and readers of the answer map calls back.
	ToolNamespace
	// ToolServer is a tool the provider runs itself (web search, code execution, computer use,
	// Anthropic's text editor and bash): kept opaque as Raw with its Type; only a writer of the
	// same family can send it, others drop it by name.
	ToolServer
)

// Tool is a tool the model may call.
type Tool struct {
	Kind        ToolKind
	Name        string
	Description string
	// Parameters is the JSON schema of a function's arguments (raw JSON object).
	Parameters []byte
	Strict     *bool
	// Tools are a namespace's functions.
	Tools []Tool
	// Type and Raw are a server tool's type ("web_search", "web_search_20250305", …) and its
	// whole definition as the source format wrote it; Family is the format family that can
	// send it ("openai" or "anthropic").
	Type, Family string
	Raw          []byte
	Cache        []byte
}

// FlatName is the function name a namespace's tool goes by in a format without namespaces.
// The separator cannot appear in Responses namespace names, so the mapping back is unambiguous.
func FlatName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "__" + name
}

// ChoiceMode is how the model may use tools.
type ChoiceMode uint8

// The tool choice modes.
const (
	ChoiceUnset ChoiceMode = iota
	ChoiceAuto
	ChoiceNone
	// ChoiceAny: some tool must be called (chat's "required", messages' "any").
	ChoiceAny
	// ChoiceTool: the tool Name must be called.
	ChoiceTool
)

// ToolChoice is the request's tool choice.
type ToolChoice struct {
	Mode ChoiceMode
	Name string
}

// FormatKind is the kind of output the request asks for.
type FormatKind uint8

// The output format kinds.
const (
	FormatText FormatKind = iota
	FormatJSONObject
	FormatJSONSchema
)

// ResponseFormat is the output format the request asks for (chat's response_format, Responses'
// text.format, messages' output_format).
type ResponseFormat struct {
	Kind   FormatKind
	Name   string
	Schema []byte // raw JSON schema
	Strict *bool
	// Description is the schema's description.
	Description string
}

// Request is one request in the model.
type Request struct {
	Model string
	// System is the opening system prompt (chat's leading system/developer messages, messages'
	// system, Responses' instructions), as parts of kind PartText.
	System   []Part
	Messages []Message

	Tools      []Tool
	ToolChoice ToolChoice
	// ParallelToolCalls: nil unset; false asks for at most one call per turn.
	ParallelToolCalls *bool

	// MaxTokens is the output limit, 0 when unset.
	MaxTokens   int
	Temperature *float64
	TopP        *float64
	TopK        *int
	Stop        []string

	Format *ResponseFormat

	// ReasoningEffort is "minimal", "low", "medium", "high" or "" (unset); ThinkingBudget is
	// Anthropic's budget_tokens (0 unset); ReasoningSummary is Responses' reasoning.summary.
	ReasoningEffort  string
	ThinkingBudget   int
	ReasoningSummary string
	// ThinkingAdaptive is Anthropic's thinking {"type":"adaptive"} (what Claude Code sends): the
	// model decides how long to think, guided by ReasoningEffort (output_config.effort). Writers
	// of other formats go by ReasoningEffort alone.
	ThinkingAdaptive bool

	User string
	// Metadata is the request's metadata object as raw JSON (Anthropic's user_id lives in it).
	Metadata []byte

	Stream bool
	// IncludeUsage: a chat client asked for the usage chunk (stream_options.include_usage).
	IncludeUsage bool

	// Responses' own fields, echoed in its answers: store, previous_response_id, truncation,
	// service_tier, include.
	Store              *bool
	PreviousResponseID string
	Truncation         string
	ServiceTier        string
	Include            []string

	// IDSuffix, when set, makes the ids of a Responses answer written for the request its own:
	// it ends the response id and every output item's id, which otherwise derive from the
	// upstream's ids (some upstreams repeat theirs, or send none). The gateway sets it when it
	// keeps the answer's items for later references by id.
	IDSuffix string

	// Dropped names the fields readers and writers could not carry.
	Dropped []string
}

// Drop names a field that was not carried over (once).
func (r *Request) Drop(name string) {
	for _, n := range r.Dropped {
		if n == name {
			return
		}
	}
	r.Dropped = append(r.Dropped, name)
}

// Target says what the upstream accepts beyond its wire format.
type Target struct {
	// MaxCompletionTokens sends max_completion_tokens instead of max_tokens (OpenAI's own API,
	// whose reasoning models refuse max_tokens).
	MaxCompletionTokens bool
	// DefaultMaxTokens is max_tokens for Anthropic when the client gave none (Anthropic requires
	// it). 0 means 4096.
	DefaultMaxTokens int
}

// DefaultMaxTokens is the output limit sent to formats that require one when the client gave
// none.
const DefaultMaxTokens = 4096

// Size is about the size of r written in any format, a little more rather than less, so that a
// writer fills one buffer without growing it: the texts, data and raw values it carries (a
// call's arguments a quarter more, for a format that writes them as an escaped string) and room
// for the JSON around them.
func (r *Request) Size() int {
	n := 512 + len(r.Model)
	for i := range r.System {
		n += len(r.System[i].Text) + 64
	}
	for i := range r.Messages {
		for j := range r.Messages[i].Parts {
			p := &r.Messages[i].Parts[j]
			n += len(p.Text) + len(p.Args)*5/4 + len(p.Data) + len(p.URL) + len(p.ID) + len(p.Name) +
				len(p.Signature) + len(p.Encrypted) + 96
			for k := range p.Content {
				c := &p.Content[k]
				n += len(c.Text) + len(c.Data) + len(c.URL) + 64
			}
		}
		n += 32
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		n += len(t.Name) + len(t.Description) + len(t.Parameters) + len(t.Raw) + 96
		for j := range t.Tools {
			m := &t.Tools[j]
			n += len(t.Name) + len(m.Name) + len(m.Description) + len(m.Parameters) + len(m.Raw) + 96
		}
	}
	return n
}
