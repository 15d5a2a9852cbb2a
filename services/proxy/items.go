package proxy

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchyard/services/errs"
	"switchyard/services/proxy/convo"
)

// Answer items (the table is resilience.AnswerItems). A Responses client answered through
// translation — its provider speaks chat completions or messages, which keep nothing — is
// answered with output items the gateway wrote. Unless the request said store: false, those
// items are kept under the client key, and a later request that names one by id (an
// item_reference: the Vercel AI SDK sends each earlier answer so when store is on, its default)
// has it put back in its place before the request is translated. Such answers' ids are the
// gateway's own (convo.Request.IDSuffix), since upstreams may repeat theirs or send none. An id
// the gateway does not hold is the client's 400, never a request sent without the turn it
// names.

// itemMark is how an input that names items by id shows itself.
var itemMark = []byte(`"item_reference"`)

// keepsItems reports whether the answer to a call is kept: a Responses client answered through
// translation, whose request did not say store: false.
func (e *Engine) keepsItems(c *call) bool {
	return e.opt.AnswerItems != nil && c.src == FormatResponses && c.dst != FormatResponses && !c.countTokens &&
		c.req != nil && (c.req.Store == nil || *c.req.Store)
}

// resolveItems puts the items a translated Responses request names by item_reference in their
// places, from what the gateway kept of its earlier answers to the client key. A body without
// references is returned as it is.
func (e *Engine) resolveItems(body []byte, clientKeyID int64) ([]byte, *errs.Error) {
	if e.opt.AnswerItems == nil || !bytes.Contains(body, itemMark) {
		return body, nil
	}
	input := gjson.GetBytes(body, "input")
	if !input.IsArray() || !strings.Contains(input.Raw, string(itemMark)) {
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

// itemKeeper returns what keeps the items of a translated Responses stream, handed each
// finished item as the stream completes.
func (e *Engine) itemKeeper(c *call) func(id string, item []byte) {
	key := c.trace.ClientKeyID
	return func(id string, item []byte) { e.opt.AnswerItems.Keep(key, id, convo.View(item)) }
}
