package proxy

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchyard/services/errs"
	"switchyard/services/proxy/convo"
	"switchyard/services/resilience"
)

// Answer items (the table is resilience.AnswerItems). A Responses client answered through
// translation — its provider speaks chat completions or messages, which keep nothing — is
// answered with output items the gateway wrote. Unless the request said store: false, the
// gateway keeps them under the client key, and with them, for a request that begins a
// conversation or continues one by previous_response_id, the answer itself: the request's own
// input and references to its output items, and the response it continued. A later request
// that names an item by id (an item_reference: the Vercel AI SDK sends each earlier answer so
// when store is on, its default) has it put back in its place, and one that names a response by
// previous_response_id (the official SDKs' way to continue) has that response's conversation,
// followed back to its start, put before its input, before the request is translated. Such
// answers' ids are the gateway's own (convo.Request.IDSuffix), since upstreams may repeat
// theirs or send none. An id the gateway does not hold is the client's 400, never a request
// sent without the turns it names.

// itemMark is how an input that names items by id shows itself.
var itemMark = []byte(`"item_reference"`)

// keepsItems reports whether the answer to a call is kept: a Responses client answered through
// translation, whose request did not say store: false.
func (e *Engine) keepsItems(c *call) bool {
	return e.opt.AnswerItems != nil && c.src == FormatResponses && c.dst != FormatResponses && !c.countTokens &&
		c.req != nil && (c.req.Store == nil || *c.req.Store)
}

// keptTurn is what a translated Responses request continues and brings of its own, for the
// record of its answer.
type keptTurn struct {
	prev string // the request's previous_response_id ("": none)
	// input is the request's own input items, comma-separated, when its answer is recorded for
	// a later previous_response_id (it begins a conversation or continues one by id); nil when
	// it is not (a client that sends the whole conversation each time would have it kept again
	// with each turn).
	input []byte
}

// expandStored resolves what a translated Responses request names of the gateway's own answers:
// the conversation of its previous_response_id goes before its input (and the field goes), and
// each item_reference is replaced by its item. It also reads what the request's own answer
// will be recorded with, and names the field of stored state that cannot be resolved here at
// all (a conversation; without the table, also the others): the request is refused. A body
// that names none of it is returned as it is.
func (e *Engine) expandStored(body []byte, clientKeyID int64) ([]byte, keptTurn, string, *errs.Error) {
	var t keptTurn
	if e.opt.AnswerItems == nil {
		return body, t, storedStateField(body), nil
	}
	var prev, input string
	store, conversation := true, false
	convo.FieldsOf(strings.TrimLeft(convo.View(body), " \t\r\n"), func(k, v string) {
		switch k {
		case "previous_response_id":
			prev = v
		case "input":
			input = v
		case "store":
			store = v != "false"
		case "conversation":
			conversation = v != "null" && v != `""`
		}
	})
	if conversation {
		return body, t, "conversation", nil
	}
	if p := gjson.Parse(prev); p.Type == gjson.String {
		t.prev = strings.Clone(p.Str)
	}
	// The request's own items are read when the answer is recorded or a conversation goes
	// before them: most translated requests (store: false, or the whole conversation sent) need
	// neither.
	record := store && (t.prev != "" || beginsConversation(input))
	var own string
	if record || t.prev != "" {
		own = ownItems(input)
	}
	if record {
		t.input = []byte(own)
	}
	if t.prev != "" {
		chain, err := e.responseChain(clientKeyID, t.prev)
		if err != nil {
			return nil, t, "", err
		}
		if own != "" {
			chain = append(append(chain, ','), own...)
		}
		chain = append(chain, ']')
		b, jerr := sjson.SetRawBytes(body, "input", chain)
		if jerr == nil {
			b, jerr = sjson.DeleteBytes(b, "previous_response_id")
		}
		if jerr != nil {
			return nil, t, "", errInvalid("invalid_json", "proxy.body_rewrite", jerr.Error())
		}
		body = b
	} else if indexMark(convo.BytesOf(input), itemMark) < 0 {
		return body, t, "", nil // nothing to resolve (the input holds no item reference)
	}
	body, err := e.resolveItems(body, clientKeyID)
	return body, t, "", err
}

// ownItems is a request's input as items, comma-separated: a text input is one user message.
func ownItems(input string) string {
	switch in := gjson.Parse(input); {
	case in.Type == gjson.String:
		return `{"role":"user","content":` + in.Raw + `}`
	case in.IsArray():
		var b strings.Builder
		in.ForEach(func(_, it gjson.Result) bool {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(it.Raw)
			return true
		})
		return b.String()
	}
	return ""
}

// beginsConversation reports whether an input holds nothing of earlier answers: a text, or
// messages of the user, the system or the developer only.
func beginsConversation(input string) bool {
	in := gjson.Parse(input)
	if !in.IsArray() {
		return true
	}
	begins := true
	in.ForEach(func(_, it gjson.Result) bool {
		typ, role := it.Get("type").Str, it.Get("role").Str
		begins = (typ == "" || typ == "message") && (role == "user" || role == "system" || role == "developer")
		return begins
	})
	return begins
}

// responseChain is the conversation of a response the gateway recorded: the items of the
// responses it continued, back to the one that began it, then its own (its request's input and
// its output items by reference), comma-separated after an opening bracket.
func (e *Engine) responseChain(clientKeyID int64, id string) ([]byte, *errs.Error) {
	var turns []string // newest first; each turn's items as a JSON array
	// A record's previous response is older than it, so the walk ends.
	for id != "" {
		rec := e.opt.AnswerItems.Lookup(clientKeyID, id)
		if rec == nil {
			return nil, errInvalid("previous_response_not_found", "proxy.response_not_held", id)
		}
		r := gjson.GetMany(convo.View(rec), "previous", "items")
		if items := r[1].Raw; len(items) >= 2 {
			turns = append(turns, items)
		}
		id = r[0].Str
	}
	out := []byte{'['}
	for _, items := range slices.Backward(turns) {
		if inner := strings.TrimSpace(items[1 : len(items)-1]); inner != "" {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, inner...)
		}
	}
	return out, nil
}

// resolveItems puts the items a translated Responses request names by item_reference in their
// places, from what the gateway kept of its earlier answers to the client key. A body without
// references is returned as it is.
func (e *Engine) resolveItems(body []byte, clientKeyID int64) ([]byte, *errs.Error) {
	input := gjson.GetBytes(body, "input")
	if !input.IsArray() || indexMark(convo.BytesOf(input.Raw), itemMark) < 0 {
		return body, nil
	}
	out := make([]byte, 0, len(input.Raw)+1024)
	out = append(out, '[')
	var failed *errs.Error
	n := 0
	input.ForEach(func(_, it gjson.Result) bool {
		raw := it.Raw
		if it.Get("type").Str == "item_reference" {
			id := it.Get("id").Str
			item := e.opt.AnswerItems.Lookup(clientKeyID, id)
			if item == nil {
				failed = errInvalid("item_not_found", "proxy.item_not_held", id)
				return false
			}
			raw = convo.View(item)
		}
		if n++; n > 1 {
			out = append(out, ',')
		}
		out = append(out, raw...)
		return true
	})
	if failed != nil {
		return nil, failed
	}
	out = append(out, ']')
	resolved, err := sjson.SetRawBytes(body, "input", out)
	if err != nil {
		return nil, errInvalid("invalid_json", "proxy.body_rewrite", err.Error())
	}
	return resolved, nil
}

// newIDSuffix is the IDSuffix of an answer whose items are kept: random, so that neither
// another answer of this process nor one of another replica or an earlier run has its ids.
func newIDSuffix() string { return strconv.FormatUint(rand.Uint64(), 36) }

// answerKeeper keeps what a translated Responses answer made: handed each output item as the
// answer completes, then the answer's own id (with a nil item), under which it records the
// answer when its turn is recorded.
type answerKeeper struct {
	items *resilience.AnswerItems
	key   int64
	turn  keptTurn
	refs  []byte // the output items as references, comma-separated
}

func (e *Engine) newAnswerKeeper(c *call, turn keptTurn) *answerKeeper {
	return &answerKeeper{items: e.opt.AnswerItems, key: c.trace.ClientKeyID, turn: turn}
}

func (k *answerKeeper) keep(id string, item []byte) {
	if item != nil {
		k.items.Keep(k.key, id, convo.View(item))
		if k.turn.input != nil {
			if len(k.refs) > 0 {
				k.refs = append(k.refs, ',')
			}
			k.refs = convo.NewObj(k.refs).Str("type", "item_reference").Str("id", id).End()
		}
		return
	}
	if k.turn.input == nil {
		return
	}
	rec := convo.NewObj(nil).Str("previous", k.turn.prev)
	rec.Key("items")
	rec.B = append(rec.B, '[')
	rec.B = append(rec.B, k.turn.input...)
	if len(k.turn.input) > 0 && len(k.refs) > 0 {
		rec.B = append(rec.B, ',')
	}
	rec.B = append(append(rec.B, k.refs...), ']')
	k.items.Keep(k.key, id, convo.View(rec.End()))
}
