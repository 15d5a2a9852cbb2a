package proxy

import (
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchyard/services/catalog"
	"switchyard/services/proxy/convo"
	"switchyard/services/resilience"
)

// A client sends the model's earlier reasoning back with the conversation: Anthropic thinking
// blocks with their signatures, Responses reasoning items with their encrypted content. The
// upstream verifies what comes back, and refuses the whole request with 400 when it cannot: the
// reasoning came from another model (a combo that moved on to another target), from an account
// of another organisation (a provider's connections are several accounts), or was changed on
// the way. The client sends the same history with every later request, so the conversation
// would stay refused. The gateway leaves the replayed reasoning out and asks again, on the same
// connection, at once: first without that of earlier turns (the upstream's own reasoning of the
// current turn stays), then, refused once more, without any; the model goes on without what was
// left out (as it does when a client leaves it out), the conversation goes on. What was left
// out is remembered for the connection and model (resilience.ReplayMemory), and the
// conversation's later requests go to that connection without it at once (dropUnreadable)
// instead of being refused once each. The drop is named in the request log (DroppedReplay) and
// counted in metrics, the refused call is a step of the attempt chain (reason
// reasoning_replay_rejected), and a refusal of anything else is the client's answer as before.

// DroppedReplay is the request log's name for replayed reasoning the upstream refused.
const DroppedReplay = "replayed_reasoning"

// replayRefusal is the attempt chain's reason for a call refused for its replayed reasoning.
const replayRefusal = "reasoning_replay_rejected"

// retryWithoutReplay reports whether a failed attempt is made once more with less of the
// replayed reasoning: the upstream refused it (replayRejected) and the request carried some.
// The first refusal leaves out the reasoning of earlier turns (when there is any), a second all
// of it; the call's body is then the body without it, for this attempt and the call's later
// ones.
func (e *Engine) retryWithoutReplay(c *call, conn *catalog.ConnEntry, res attemptResult) bool {
	if res.status != http.StatusBadRequest || c.replayDropped == dropAll || !replayRejected(c.dst, res.errBody) {
		return false
	}
	var body []byte
	var seals []string
	for seals == nil && c.replayDropped < dropAll {
		c.replayDropped++
		body, seals = withoutReplay(c.dst, c.body, c.replayDropped)
	}
	if seals == nil {
		return false
	}
	if e.opt.Replays != nil {
		e.opt.Replays.Record(conn.ID, c.t.model, seals)
	}
	e.leaveOutReplay(c, body)
	e.opt.Log.Info("upstream refused the replayed reasoning; trying once more without it",
		"provider", c.t.provider.Name, "connection_id", conn.ID, "dropped", replayDropWord[c.replayDropped])
	e.endStep(c, res, replayRefusal)
	c.trace.attempt(conn, "retry", e.opt.Clock.Now())
	return true
}

// dropUnreadable leaves out of the call's body, before it goes to conn, the replayed reasoning
// conn refused before (resilience.ReplayMemory): a conversation that moved to it is not refused
// once more with each of its later requests.
func (e *Engine) dropUnreadable(c *call, conn *catalog.ConnEntry) {
	m := e.opt.Replays
	if m == nil || c.dst != FormatResponses && c.dst != FormatMessages || !m.Holds(conn.ID) {
		return
	}
	body, seals := dropReplayed(c.dst, c.body, func(_ bool, seal string) bool { return m.Unreadable(conn.ID, c.t.model, seal) })
	if seals == nil {
		return
	}
	e.leaveOutReplay(c, body)
	e.opt.Log.Info("leaving out replayed reasoning the connection refused before",
		"provider", c.t.provider.Name, "connection_id", conn.ID, "items", len(seals))
}

// leaveOutReplay makes body, the call's body without some replayed reasoning, the body of this
// attempt and the call's later ones, and names and counts the drop.
func (e *Engine) leaveOutReplay(c *call, body []byte) {
	c.body = body
	// A Claude account sends the client's own bytes when they name the upstream's model
	// (claudeOutgoing): those are the body now.
	c.claude.raw = body
	if !slices.Contains(c.trace.Dropped, DroppedReplay) {
		c.trace.Dropped = append(c.trace.Dropped, DroppedReplay)
	}
	e.opt.Observer.Dropped(c.t.provider.Name, DroppedReplay)
}

// replayDropWord names what a retry left out, for the log.
var replayDropWord = [...]string{dropEarlierTurns: "earlier_turns", dropAll: "all"}

// replayRejected reports whether an upstream's 400 refuses the reasoning a request sent back:
// OpenAI's invalid_encrypted_content ("The encrypted content … could not be verified."), or
// Anthropic's refusal of a thinking block's signature ("Invalid `signature` in `thinking`
// block", a block that "cannot be modified"). Chat completions carry no signed reasoning.
func replayRejected(f Format, body []byte) bool {
	msg, code, _, _, ok := resilience.ExtractError(body)
	if !ok {
		return false
	}
	m := strings.ToLower(strings.ReplaceAll(msg, "`", ""))
	switch f {
	case FormatResponses:
		return code == "invalid_encrypted_content" ||
			strings.Contains(m, "encrypted content") && (strings.Contains(m, "could not be verified") || strings.Contains(m, "could not be decrypted"))
	case FormatMessages:
		return strings.Contains(m, "signature in thinking block") ||
			strings.Contains(m, "thinking.signature") && strings.Contains(m, "field required") ||
			(strings.Contains(m, "thinking block") || strings.Contains(m, "redacted_thinking")) &&
				(strings.Contains(m, "invalid signature") || strings.Contains(m, "cannot be modified"))
	}
	return false
}

// replayDrop is how much of the replayed reasoning a retry leaves out.
type replayDrop uint8

const (
	// dropEarlierTurns leaves out the reasoning of the turns before the user's last message and
	// keeps the current turn's (the tool calls since the user last spoke): that is the reasoning
	// the work in progress rests on (some models read no other), while a conversation that moved
	// to another account or model carries the old upstream's reasoning in its earlier turns, so
	// the upstream now serving keeps its own.
	dropEarlierTurns replayDrop = iota + 1
	// dropAll leaves out all of it (the current turn's was refused too).
	dropAll
)

// withoutReplay is body, a request in format f, without the reasoning it sends back, all of it
// or that of earlier turns (what), and the seals of what it left out (nil: there was none to
// drop). The body it was given is not changed.
func withoutReplay(f Format, body []byte, what replayDrop) (out []byte, seals []string) {
	return dropReplayed(f, body, func(earlier bool, _ string) bool { return what == dropAll || earlier })
}

// dropReplayed is body, a request in format f, without the replayed reasoning drop picks: a
// Responses request's reasoning items, an Anthropic request's thinking and redacted_thinking
// blocks of assistant messages (a message that holds nothing else keeps them: a message cannot
// be empty). drop is told whether the reasoning belongs to an earlier turn (before the user's
// last words) and its seal: the encrypted content, the signature, a redacted block's data ("" =
// none). seals are those of what was dropped, one per item (nil: nothing was). The body it
// was given is not changed.
func dropReplayed(f Format, body []byte, drop func(earlier bool, seal string) bool) (out []byte, seals []string) {
	var paths []string // deepest last: deleted from the end, so no index moves under another
	switch f {
	case FormatResponses:
		// The body is read through a view (GetBytes would copy the conversation): the seals
		// kept are copied out of it.
		input := gjson.Get(convo.View(body), "input")
		turn := int64(-1) // the user's last message: reasoning after it is the current turn's
		input.ForEach(func(k, v gjson.Result) bool {
			if v.Get("role").String() == "user" && (!v.Get("type").Exists() || v.Get("type").String() == "message") {
				turn = k.Int()
			}
			return true
		})
		input.ForEach(func(k, v gjson.Result) bool {
			if v.Get("type").String() != "reasoning" {
				return true
			}
			if seal := v.Get("encrypted_content").String(); drop(k.Int() < turn, seal) {
				paths, seals = append(paths, "input."+k.String()), append(seals, strings.Clone(seal))
			}
			return true
		})
	case FormatMessages:
		messages := gjson.Get(convo.View(body), "messages")
		turn := int64(-1)
		messages.ForEach(func(i, m gjson.Result) bool {
			if m.Get("role").String() == "user" && userSpoke(m.Get("content")) {
				turn = i.Int()
			}
			return true
		})
		messages.ForEach(func(i, m gjson.Result) bool {
			content := m.Get("content")
			if m.Get("role").String() != "assistant" || !content.IsArray() {
				return true
			}
			var blocks, sealed []string
			n := 0
			content.ForEach(func(j, b gjson.Result) bool {
				n++
				var seal string
				switch b.Get("type").String() {
				case "thinking":
					seal = b.Get("signature").String()
				case "redacted_thinking":
					seal = b.Get("data").String()
				default:
					return true
				}
				if drop(i.Int() < turn, seal) {
					blocks, sealed = append(blocks, "messages."+i.String()+".content."+j.String()), append(sealed, strings.Clone(seal))
				}
				return true
			})
			if len(blocks) < n {
				paths, seals = append(paths, blocks...), append(seals, sealed...)
			}
			return true
		})
	}
	if len(paths) == 0 {
		return body, nil
	}
	out = body
	for _, p := range slices.Backward(paths) {
		var err error
		if out, err = sjson.DeleteBytes(out, p); err != nil {
			return body, nil
		}
	}
	return out, seals
}

// userSpoke reports whether a user message's content is the user's own words: text, or any
// block but tool results (a message of tool results goes on the turn).
func userSpoke(content gjson.Result) bool {
	if !content.IsArray() {
		return true
	}
	spoke := false
	content.ForEach(func(_, b gjson.Result) bool {
		spoke = b.Get("type").String() != "tool_result"
		return !spoke
	})
	return spoke
}
