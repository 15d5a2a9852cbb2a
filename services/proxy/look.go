package proxy

import (
	"strings"

	"switchyard/services/proxy/convo"
)

// eventLook is what a relay needs to know of one upstream stream event, read in one look: the
// watchdog's kind and useful bytes, whether it is the upstream's last event or its own error
// event, whether it carries an error object (and is scrubbed of the credential before it is
// relayed), and whether it may carry a usage object. It runs on every event of every stream, so
// it is one look rather than a scan per question: for the named formats (messages, Responses)
// the event's name answers for the events streams are made of; an event the look does not know
// is scanned for an error object and read for usage, as every event used to be.
type eventLook struct {
	kind   eventKind
	useful int
	// terminal: the upstream's last event; errorEv: its own error event; failed and cut: a
	// Responses stream's response.failed and response.incomplete.
	terminal, errorEv, failed, cut bool
	scrub                          bool // carries an error object
	usage                          bool // may carry a usage object
	start                          bool // an Anthropic stream's message_start
	// data is the event's data (named formats).
	data []byte
}

// lookEvent reads an upstream event of format f.
func lookEvent(f Format, ev []byte) eventLook {
	switch f {
	case FormatChat:
		return lookChat(ev)
	case FormatMessages:
		return lookMessages(ev)
	}
	return lookResponses(ev)
}

// lookChat: chat completions events are unnamed, so each is scanned for what it may be.
func lookChat(ev []byte) eventLook {
	l := eventLook{terminal: hasDone(ev), scrub: errorEvent(ev), usage: true}
	l.kind, l.useful = classifyChat(ev)
	l.errorEv = l.scrub && isChatError(ev)
	return l
}

// lookMessages: Anthropic names every event; only message_start and message_delta carry usage.
func lookMessages(ev []byte) eventLook {
	name, data := eventName(ev)
	l := eventLook{data: data}
	switch name {
	case "content_block_delta", "content_block_start":
		l.kind, l.useful = classifyMessages(name, data)
	case "content_block_stop", "ping":
	case "message_start":
		l.usage, l.start = true, true
	case "message_delta":
		l.usage = true
	case "message_stop":
		l.terminal = true
	case "error":
		l.errorEv, l.scrub = true, true
	default:
		l.scrub, l.usage = errorEvent(ev), true
	}
	return l
}

// lookResponses: a Responses stream's usage comes in its terminal events' response object;
// deltas carry text or arguments and nothing else.
func lookResponses(ev []byte) eventLook {
	name, data := eventName(ev)
	l := eventLook{data: data}
	l.kind, l.useful = classifyResponses(name, data)
	switch name {
	case "response.completed":
		l.terminal, l.usage = true, true
	case "response.incomplete":
		l.terminal, l.cut, l.usage = true, true, true
	case "response.failed":
		l.terminal, l.failed, l.usage, l.scrub = true, true, true, true
	case "error":
		l.errorEv, l.scrub = true, true
	default:
		if !strings.HasSuffix(name, ".delta") {
			l.scrub, l.usage = errorEvent(ev), true
		}
	}
	return l
}

// eventName is an event's name and data; an event that names none is named by its data's type.
func eventName(ev []byte) (string, []byte) {
	name, data := convo.ParseEvent(ev)
	if name == "" {
		name = jsonAt(data, "type").String()
	}
	return name, data
}
