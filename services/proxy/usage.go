package proxy

import (
	"bytes"
	"switchyard/services/proxy/convo"

	"github.com/tidwall/gjson"

	"switchyard/services/spend"
)

// usageSeen collects the token counts of an upstream answer from its usage objects, in the
// upstream's own format (what it billed, before any translation drops a field). Each count is
// taken from the latest object that has it: an Anthropic stream reports input and cache
// tokens at its start and output at its end, some upstreams repeat the usage on every event.
type usageSeen struct {
	uncached, cacheRead, cacheWrite, out, reasoning int64
	// inTotal is a prompt total that includes the cache reads (OpenAI's formats).
	inTotal int64
	has     uint8
}

const (
	hasUncached uint8 = 1 << iota
	hasInTotal
	hasCacheRead
	hasCacheWrite
	hasOut
	hasReasoning
)

var usageKey = []byte(`"usage":`)

// usageAt is where the last usage object of a document starts; -1 when it has none (or its
// last usage is null).
func usageAt(doc []byte) int {
	// bytes.Index scans with vector instructions, LastIndex byte by byte: most events have no
	// usage, and Index tells so at a fraction of the cost.
	if !containsMark(doc, usageKey) {
		return -1
	}
	i := bytes.LastIndex(doc, usageKey)
	if i < 0 {
		return -1
	}
	for j := i + len(usageKey); j < len(doc); j++ {
		switch doc[j] {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return j
		}
		return -1
	}
	return -1
}

// observe reads the last usage object of a document or event, when it has one. Only that
// object is parsed, not the document.
func (s *usageSeen) observe(doc []byte) {
	i := usageAt(doc)
	if i < 0 {
		return
	}
	u := gjson.Parse(convo.View(doc[i:])) // read at once: no copy of the rest of doc
	if !u.IsObject() {
		return
	}
	set := func(bit uint8, dst *int64, v gjson.Result) {
		if v.Exists() {
			*dst = v.Int()
			s.has |= bit
		}
	}
	if v := u.Get("prompt_tokens"); v.Exists() { // chat completions
		set(hasInTotal, &s.inTotal, v)
		set(hasOut, &s.out, u.Get("completion_tokens"))
		set(hasCacheRead, &s.cacheRead, u.Get("prompt_tokens_details.cached_tokens"))
		set(hasReasoning, &s.reasoning, u.Get("completion_tokens_details.reasoning_tokens"))
		return
	}
	if u.Get("input_tokens_details").Exists() || u.Get("output_tokens_details").Exists() || u.Get("total_tokens").Exists() {
		// Responses: input_tokens counts the cached ones too.
		set(hasInTotal, &s.inTotal, u.Get("input_tokens"))
		set(hasOut, &s.out, u.Get("output_tokens"))
		set(hasCacheRead, &s.cacheRead, u.Get("input_tokens_details.cached_tokens"))
		set(hasReasoning, &s.reasoning, u.Get("output_tokens_details.reasoning_tokens"))
		return
	}
	// Anthropic messages: input_tokens are the uncached ones, cache reads and writes apart.
	if v := u.Get("input_tokens"); v.Exists() {
		set(hasUncached, &s.uncached, v)
		s.has &^= hasInTotal
	}
	set(hasCacheRead, &s.cacheRead, u.Get("cache_read_input_tokens"))
	set(hasCacheWrite, &s.cacheWrite, u.Get("cache_creation_input_tokens"))
	set(hasOut, &s.out, u.Get("output_tokens"))
}

// take sets what a translating reader read (Input counts every prompt token).
func (s *usageSeen) take(u convo.Usage) {
	if u.Has == 0 {
		return
	}
	*s = usageSeen{inTotal: u.Input - u.CacheWrite, out: u.Output, cacheRead: u.CacheRead, cacheWrite: u.CacheWrite,
		reasoning: u.Reasoning, has: hasInTotal | hasOut | hasCacheRead | hasCacheWrite | hasReasoning}
}

// any reports whether a usage object was seen.
func (s *usageSeen) any() bool { return s.has != 0 }

// usage is what was seen, in the gateway's terms (Input counts every prompt token).
func (s *usageSeen) usage() spend.Usage {
	u := spend.Usage{Output: s.out, CacheRead: s.cacheRead, CacheWrite: s.cacheWrite, Reasoning: s.reasoning}
	if s.has&hasInTotal != 0 {
		u.Input = s.inTotal + s.cacheWrite
		if u.CacheRead > s.inTotal {
			u.CacheRead = s.inTotal
		}
	} else {
		u.Input = s.uncached + s.cacheRead + s.cacheWrite
	}
	if u.Reasoning > u.Output {
		u.Reasoning = u.Output
	}
	return u
}

// usageOnlyChunk reports whether a chat completions event is the usage chunk that
// stream_options.include_usage adds at the end (no choices, a usage object).
func usageOnlyChunk(ev []byte) bool {
	i := usageAt(ev)
	if i < 0 {
		return false
	}
	_, data := convo.ParseEvent(ev)
	ch := gjson.GetBytes(data, "choices")
	return ch.IsArray() && len(ch.Array()) == 0
}
