package convo

import (
	"iter"
	"strconv"
)

// An answer is a stream of events, whole answers included: an answer reader emits the same
// events a stream reader of its format emits for the same answer, and an answer writer collects
// them into one body. The order is:
//
//	Start
//	(BlockStart (Delta)* (Signature)? BlockStop)*   blocks do not interleave, except tool
//	                                               calls, which may (chat's parallel calls)
//	Usage*                                         anywhere after Start, cumulative: the last
//	                                               value of each count holds
//	Stop                                           the stop reason
//	End                                            the upstream's terminal event was seen
//
// An Error event may come at any point and ends the answer (no End follows).

// EventKind is what an event says.
type EventKind uint8

// The event kinds.
const (
	// EvStart: the answer begins; ID and Model as the upstream named them (either may be "").
	EvStart EventKind = iota
	// EvBlockStart opens block Index of kind Block; a tool call carries ID, Name and Namespace.
	EvBlockStart
	// EvDelta appends Text to block Index: text, thinking text, or a fragment of a tool call's
	// JSON arguments (as Text: the fragment's characters in JSON string form).
	EvDelta
	// EvSignature sets block Index's thinking signature (Text, plain) or encrypted content.
	EvSignature
	// EvBlockStop closes block Index.
	EvBlockStop
	// EvUsage reports token counts (Usage; a zero count with its Has bit unset is unknown).
	EvUsage
	// EvStop is the stop reason (Stop, and StopSequence when a stop sequence matched).
	EvStop
	// EvEnd: the upstream's terminal event was seen; nothing follows.
	EvEnd
	// EvError: the upstream reported an error (Err); nothing follows.
	EvError
)

// BlockKind is what an answer block holds.
type BlockKind uint8

// The block kinds.
const (
	BlockText BlockKind = iota
	BlockThinking
	// BlockRedactedThinking carries only encrypted content (EvSignature).
	BlockRedactedThinking
	BlockToolCall
)

// StopReason is why the model stopped, in one enum for every format.
type StopReason uint8

// The stop reasons.
const (
	StopUnset StopReason = iota
	StopEnd
	StopMaxTokens
	StopToolUse
	StopSequence
	StopContentFilter
	StopRefusal
	// StopPause: the provider paused a long turn (Anthropic's pause_turn).
	StopPause
)

// Usage is an answer's token counts. Input counts every prompt token, cached ones included;
// CacheRead and CacheWrite are the parts of it read from and written to the prompt cache.
// Reasoning is the part of Output spent on reasoning.
type Usage struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
	Has                                             UsageFields
}

// UsageFields says which counts of a Usage are known.
type UsageFields uint8

// The usage fields.
const (
	HasInput UsageFields = 1 << iota
	HasOutput
	HasCacheRead
	HasCacheWrite
	HasReasoning
)

// Merge takes the counts u knows into m: the later report of a count wins.
func (m *Usage) Merge(u Usage) {
	if u.Has&HasInput != 0 {
		m.Input = u.Input
	}
	if u.Has&HasOutput != 0 {
		m.Output = u.Output
	}
	if u.Has&HasCacheRead != 0 {
		m.CacheRead = u.CacheRead
	}
	if u.Has&HasCacheWrite != 0 {
		m.CacheWrite = u.CacheWrite
	}
	if u.Has&HasReasoning != 0 {
		m.Reasoning = u.Reasoning
	}
	m.Has |= u.Has
}

// Error is an error the upstream reported in its answer or stream.
type Error struct {
	// Type is the error's kind in OpenAI's words ("invalid_request_error", "rate_limit_error",
	// "server_error", …); writers of other formats map it (see ErrorType helpers in the formats).
	Type string
	// Code is the upstream's code, when it gave one.
	Code    string
	Message string
	// Param is OpenAI's param, when given.
	Param string
	// Incomplete: the answer was cut short (Responses' response.incomplete); Reason says why
	// ("max_output_tokens", "content_filter").
	Incomplete bool
	Reason     string
}

// OpenAIErrorType is an Anthropic error type in OpenAI's words, as the gateway has always mapped
// them (the types OpenAI's SDKs know); ok is false for a type that is not one of these.
func OpenAIErrorType(anthropic string) (t string, ok bool) {
	switch anthropic {
	case "invalid_request_error", "authentication_error", "permission_error", "rate_limit_error":
		return anthropic, true
	case "not_found_error", "request_too_large":
		return "invalid_request_error", true
	case "api_error", "overloaded_error", "billing_error":
		return "server_error", true
	}
	return "", false
}

// Event is one event of an answer. Its strings may point into the reader's input, valid until
// the reader's next call: a writer may keep the ids and names of EvStart and EvBlockStart (a
// stream relay that reuses its input buffer copies those), and copies a Text it keeps.
type Event struct {
	Kind  EventKind
	Index int
	Block BlockKind

	ID, Model string
	Name      string
	Namespace string

	Text Text

	Usage        Usage
	Stop         StopReason
	StopSequence string

	Err *Error
}

// AnswerInfo is what the events of a whole answer say besides its blocks, as an answer writer
// collects them: the upstream's id and model, the usage, the stop reason.
type AnswerInfo struct {
	ID, Model    string
	Usage        Usage
	Stop         StopReason
	StopSequence string
}

// Take takes in a Start, Usage or Stop event, and reports whether e was one.
func (a *AnswerInfo) Take(e *Event) bool {
	switch e.Kind {
	case EvStart:
		a.ID, a.Model = e.ID, e.Model
	case EvUsage:
		a.Usage.Merge(e.Usage)
	case EvStop:
		a.Stop, a.StopSequence = e.Stop, e.StopSequence
	default:
		return false
	}
	return true
}

// Rest goes through the events of a whole answer in order: a takes in its start, usage and stop
// events, and the writer gets the others (blocks, deltas, signatures, errors, the end).
func (a *AnswerInfo) Rest(evs []Event) iter.Seq[*Event] {
	return func(yield func(*Event) bool) {
		for i := range evs {
			if e := &evs[i]; !a.Take(e) && !yield(e) {
				return
			}
		}
	}
}

// CallID names a tool call the upstream gave no id, the same way in a whole answer and in a
// stream: call_<base>_<n>, base the answer's id without its prefix and n the call's number
// (chat's) or its block's index (Responses').
func CallID(base string, n int) string { return "call_" + base + "_" + strconv.Itoa(n) }

// StreamReader reads one upstream format's stream: each SSE event yields zero or more model
// events, appended to evs.
type StreamReader interface {
	Read(evs []Event, sse []byte) []Event
}

// StreamWriter writes model events as a client format's SSE events.
type StreamWriter interface {
	// Write appends the client's bytes for one event to dst.
	Write(dst []byte, e *Event) []byte
	// Abort ends a stream the gateway cuts short with the format's error event (code and
	// message are the gateway's).
	Abort(dst []byte, code, msg string) []byte
}
