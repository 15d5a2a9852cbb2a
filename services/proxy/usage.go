package proxy

import (
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
	// Forward searches (vectorised) from one hit to the next, not bytes.LastIndex, which goes
	// byte by byte (Rabin-Karp) from the end: a document has one usage, two at most.
	i := indexMark(doc, usageKey)
	if i < 0 {
		return -1
	}
	for {
		j := indexMark(doc[i+len(usageKey):], usageKey)
		if j < 0 {
			break
		}
		i += len(usageKey) + j
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
// object is parsed, not the document, in one pass over its members (the first of a repeated
// name counts).
func (s *usageSeen) observe(doc []byte) {
	i := usageAt(doc)
	if i < 0 {
		return
	}
	u := gjson.Parse(convo.View(doc[i:])) // read at once: no copy of the rest of doc
	if !u.IsObject() {
		return
	}
	var f [usageFields]gjson.Result
	u.ForEach(func(k, v gjson.Result) bool {
		if n := usageField(k.Str); n >= 0 && !f[n].Exists() {
			f[n] = v
		}
		return true
	})
	set := func(bit uint8, dst *int64, v gjson.Result) {
		if v.Exists() {
			*dst = v.Int()
			s.has |= bit
		}
	}
	switch {
	case f[uPromptTokens].Exists(): // chat completions
		set(hasInTotal, &s.inTotal, f[uPromptTokens])
		set(hasOut, &s.out, f[uCompletionTokens])
		set(hasCacheRead, &s.cacheRead, f[uPromptDetails].Get("cached_tokens"))
		set(hasReasoning, &s.reasoning, f[uCompletionDetails].Get("reasoning_tokens"))
	case f[uInputDetails].Exists() || f[uOutputDetails].Exists() || f[uTotalTokens].Exists():
		// Responses: input_tokens counts the cached ones too.
		set(hasInTotal, &s.inTotal, f[uInputTokens])
		set(hasOut, &s.out, f[uOutputTokens])
		set(hasCacheRead, &s.cacheRead, f[uInputDetails].Get("cached_tokens"))
		set(hasReasoning, &s.reasoning, f[uOutputDetails].Get("reasoning_tokens"))
	default:
		// Anthropic messages: input_tokens are the uncached ones, cache reads and writes apart.
		if v := f[uInputTokens]; v.Exists() {
			set(hasUncached, &s.uncached, v)
			s.has &^= hasInTotal
		}
		set(hasCacheRead, &s.cacheRead, f[uCacheRead])
		set(hasCacheWrite, &s.cacheWrite, f[uCacheCreation])
		set(hasOut, &s.out, f[uOutputTokens])
	}
}

// The members of a usage object observe reads, in every format.
const (
	uPromptTokens = iota
	uCompletionTokens
	uPromptDetails
	uCompletionDetails
	uInputTokens
	uOutputTokens
	uInputDetails
	uOutputDetails
	uTotalTokens
	uCacheRead
	uCacheCreation
	usageFields
)

// usageField is the index of a usage member observe reads; -1 for any other.
func usageField(name string) int {
	switch name {
	case "prompt_tokens":
		return uPromptTokens
	case "completion_tokens":
		return uCompletionTokens
	case "prompt_tokens_details":
		return uPromptDetails
	case "completion_tokens_details":
		return uCompletionDetails
	case "input_tokens":
		return uInputTokens
	case "output_tokens":
		return uOutputTokens
	case "input_tokens_details":
		return uInputDetails
	case "output_tokens_details":
		return uOutputDetails
	case "total_tokens":
		return uTotalTokens
	case "cache_read_input_tokens":
		return uCacheRead
	case "cache_creation_input_tokens":
		return uCacheCreation
	}
	return -1
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
