package proxy

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/proxy/convo"
	"switchyard/services/resilience"
)

// Stored Responses state in the engine (the table is resilience.StoredPins). A Responses request
// passed through to a Responses upstream may name what an earlier answer stored there: its
// previous_response_id, a conversation, item_reference items, reasoning items by id alone. Only
// the organisation whose key made that state can answer it, so on a provider with several
// connections the one that made it goes first (before a session pin: this is about where data
// is, not a preference); an answer's own response and output item ids are remembered for the
// connection that made them, unless the request said store: false (nothing is kept upstream).
// Whatever the pins do not know (state made with the key directly, a pin evicted), the
// upstream's "not found" fails over to the next connection (resilience.CodeStoredStateMissing),
// and the connection that then answers is remembered for the ids the request named.

// maxStoredRefs bounds the item ids of one request looked up (newest first).
const maxStoredRefs = 16

// storedCall is what a call knows of stored state; zero when the call is none of the above.
type storedCall struct {
	on bool // a Responses request to a Responses upstream of a provider with several connections
	// refs are the ids the request names: previous_response_id, the conversation, then the
	// items, newest first.
	refs []string
	// record: the request lets the upstream store the answer (store is not false).
	record bool
	// keep pins ids to the connection that serves; set when the answer is delivered. What an
	// answer made is kept before the client has it, so the client's next request finds it.
	keep func(ids []string)
	// holder is the connection known to hold what the request names (0: none known), and
	// holderErr its failure in this call, if it failed.
	holder    int64
	holderErr *errs.Error
}

// readStoredRefs reads what a Responses request names of stored state, and whether it lets its
// answer be stored, in one pass over the body's members; the input is walked only when it may
// name items by id (the Codex CLI's requests, store off with the reasoning carried whole, are
// not). The ids are copies: they outlive the body in the pins.
func readStoredRefs(body []byte) (refs []string, record bool) {
	record = true
	var prev, conv, input string
	convo.FieldsOf(strings.TrimLeft(convo.View(body), " \t\r\n"), func(k, v string) {
		switch k {
		case "store":
			record = v != "false"
		case "previous_response_id":
			prev = v
		case "conversation":
			conv = v
		case "input":
			input = v
		}
	})
	refs = appendID(refs, gjson.Parse(prev))
	if c := gjson.Parse(conv); c.IsObject() {
		refs = appendID(refs, c.Get("id"))
	} else {
		refs = appendID(refs, c)
	}
	if !strings.Contains(input, `"item_reference"`) && !(record && strings.Contains(input, `"reasoning"`)) {
		return refs, record
	}
	var items []string
	gjson.Parse(input).ForEach(func(_, it gjson.Result) bool {
		switch typ := it.Get("type").Str; {
		case typ == "item_reference":
		case typ == "reasoning" && !it.Get("encrypted_content").Exists():
			// a reasoning item by its id alone: the upstream looks it up in its store
		default:
			return true
		}
		items = appendID(items, it.Get("id"))
		return true
	})
	slices.Reverse(items)
	if len(items) > maxStoredRefs {
		items = items[:maxStoredRefs]
	}
	return append(refs, items...), record
}

// storedStateField names what a Responses request refers to of state an upstream stored —
// previous_response_id, conversation, an item_reference input item — or is "" when it refers
// to none. An upstream reached through translation keeps no such state: the request is refused
// rather than sent without the turns those name (the Vercel AI SDK, store on by default, sends
// each earlier answer as an item_reference).
func storedStateField(body []byte) string {
	field := ""
	convo.FieldsOf(strings.TrimLeft(convo.View(body), " \t\r\n"), func(k, v string) {
		if field != "" {
			return
		}
		switch k {
		case "previous_response_id", "conversation":
			if v != "null" && v != `""` {
				field = k
			}
		case "input":
			if strings.Contains(v, `"item_reference"`) {
				gjson.Parse(v).ForEach(func(_, it gjson.Result) bool {
					if it.Get("type").Str == "item_reference" {
						field = "input[].type=item_reference"
					}
					return field == ""
				})
			}
		}
	})
	return field
}

// appendID appends a copy of an id, when v is a string that is not empty.
func appendID(dst []string, v gjson.Result) []string {
	if v.Type != gjson.String || v.Str == "" {
		return dst
	}
	return append(dst, strings.Clone(v.Str))
}

// storedIDs appends the response id and the output item ids of a Responses answer (a response
// object) to dst.
func storedIDs(dst []string, resp gjson.Result) []string {
	dst = appendID(dst, resp.Get("id"))
	resp.Get("output").ForEach(func(_, it gjson.Result) bool {
		dst = appendID(dst, it.Get("id"))
		return true
	})
	return dst
}

// observeAnswer keeps what a whole answer stored.
func (s *storedCall) observeAnswer(body []byte) {
	if ids := storedIDs(nil, gjson.ParseBytes(body)); len(ids) > 0 {
		s.keep(ids)
	}
}

// observeEvent keeps what a stream's terminal event (response.completed, response.incomplete)
// says was stored: the data of the event.
func (s *storedCall) observeEvent(data []byte) {
	if ids := storedIDs(nil, gjson.GetBytes(data, "response")); len(ids) > 0 {
		s.keep(ids)
	}
}

// storedFirst reads the call's stored-state references (once) and returns conns with the
// connection known to hold them first.
func (e *Engine) storedFirst(c *call, conns []*catalog.ConnEntry) []*catalog.ConnEntry {
	if e.opt.StoredPins == nil || c.src != FormatResponses || c.dst != FormatResponses || c.countTokens ||
		len(c.t.provider.Conns) < 2 {
		return conns
	}
	if !c.stored.on {
		c.stored.on = true
		c.stored.refs, c.stored.record = readStoredRefs(c.body)
	}
	if len(c.stored.refs) == 0 {
		return conns
	}
	id, ok := e.opt.StoredPins.Connection(c.trace.ClientKeyID, c.t.provider.Name, c.stored.refs)
	if !ok {
		return conns
	}
	i := slices.IndexFunc(conns, func(conn *catalog.ConnEntry) bool { return conn.ID == id })
	if i < 0 {
		return conns // not among them (disabled or deleted since)
	}
	c.stored.holder = id
	if i == 0 {
		return conns
	}
	e.opt.Log.Debug("stored state pins the connection", "provider", c.t.provider.Name, "connection_id", id)
	out := make([]*catalog.ConnEntry, 0, len(conns))
	out = append(out, conns[i])
	out = append(out, conns[:i]...)
	return append(out, conns[i+1:]...)
}

// storedServed is told, before anything of the answer goes to the client, that conn serves the
// call: what the request named is there, and what the answer stores will be (observeAnswer,
// observeEvent).
func (e *Engine) storedServed(c *call, conn *catalog.ConnEntry) {
	if !c.stored.on {
		return
	}
	pins, ns, provider := e.opt.StoredPins, c.trace.ClientKeyID, c.t.provider.Name
	if len(c.stored.refs) > 0 {
		pins.Record(ns, provider, conn.ID, c.stored.refs)
	}
	c.stored.keep = func(ids []string) { pins.Record(ns, provider, conn.ID, ids) }
}

// storedFailed is told that an attempt on conn failed with f.
func (c *call) storedFailed(conn *catalog.ConnEntry, f *failure) {
	if c.stored.holder != 0 && conn.ID == c.stored.holder {
		c.stored.holderErr = f.err
	}
}

// storedHolderAnswer is the client's answer when the call's last failure is another
// connection's "not found" for the stored state the request names, and the connection that
// holds it could not serve: why that one could not (its own failure, or that it rests and until
// when), which passes, rather than "not found", which does not. nil: the last failure stands.
func (e *Engine) storedHolderAnswer(c *call, conns []*catalog.ConnEntry, last *failure) *errs.Error {
	if last == nil || last.outcome.Code != resilience.CodeStoredStateMissing || c.stored.holder == 0 {
		return nil
	}
	if c.stored.holderErr != nil {
		return c.stored.holderErr
	}
	i := slices.IndexFunc(conns, func(conn *catalog.ConnEntry) bool { return conn.ID == c.stored.holder })
	if i < 0 || len(e.excludedNow(c, conns[i:i+1])) == 0 {
		return nil
	}
	return e.exhausted(c, conns[i:i+1], nil)
}
