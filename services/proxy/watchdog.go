package proxy

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"switchyard/services/settings"
)

// A stream is watched by phase once its response headers arrived (the connect and first-byte
// timeouts bound what comes before): readiness until the first content event, idle between
// content events, an optional throughput judgement over a sliding window, and a total bound.
// Content is assistant text, reasoning and tool calls; heartbeats, pings, metadata and
// usage-only events are not progress. The policy (watch) is pure and runs on given times; one
// clock timer per stream (watchdog) re-arms at the policy's next deadline and, when one passes,
// cancels the attempt's context so the blocked body read returns.

// Abort kinds: what ended a stream that the gateway ended itself.
const (
	abortReadiness  = "stream_readiness_timeout"
	abortIdle       = "stream_idle_timeout"
	abortThroughput = "stream_throughput_too_low"
	abortTotal      = "stream_total_timeout"
)

// eventKind is what one upstream stream event carries, for the watchdogs.
type eventKind uint8

const (
	evMeta      eventKind = iota // heartbeat, ping, metadata, usage, an empty delta: no progress
	evText                       // assistant text: useful bytes
	evReasoning                  // thinking or reasoning (its signature included)
	evTool                       // a tool call's start or argument bytes
)

// watchConfig is the stream timeouts of one request, from the settings snapshot.
type watchConfig struct {
	readiness time.Duration // headers to the first content event
	idle      time.Duration // between content events
	total     time.Duration // headers to the end; 0 = no bound
	tp        settings.ThroughputWatchdog
}

// readinessFor is the readiness timeout for a request: the setting, grown toward the adaptive
// maximum for large requests (linearly from 32 KiB to 512 KiB of body) and at the maximum for
// requests that ask for reasoning, which think before their first content event.
func readinessFor(s settings.Streams, bodyLen int, reasoning bool) time.Duration {
	base, top := ms(s.ReadinessTimeoutMS), ms(s.ReadinessMaxTimeoutMS)
	if top <= base {
		return base
	}
	const small, large = 32 << 10, 512 << 10
	switch {
	case reasoning || bodyLen >= large:
		return top
	case bodyLen <= small:
		return base
	}
	return base + (top-base)*time.Duration(bodyLen-small)/time.Duration(large-small)
}

// buckets per throughput window: the window slides in steps of window/tpBuckets.
const tpBuckets = 16

// watch is the watchdogs' policy for one stream attempt. Not safe for concurrent use; watchdog
// guards it.
type watch struct {
	cfg     watchConfig
	start   time.Time // response headers arrived
	last    time.Time // the last content event
	content bool      // a content event arrived
	// throughput: judgeFrom is the earliest judgement (warm-up plus one full window, pushed on
	// by every tool or reasoning event); bytes[i] are the useful bytes of the step that began
	// at stepAt(i).
	judgeFrom time.Time
	step      time.Duration
	bytes     [tpBuckets]int64
	head      int       // bucket of headAt
	headAt    time.Time // start of the newest bucket
}

func newWatch(cfg watchConfig, now time.Time) *watch {
	w := &watch{cfg: cfg, start: now}
	if cfg.tp.Enabled {
		window := ms(cfg.tp.WindowMS)
		w.step = max(window/tpBuckets, time.Millisecond)
		w.judgeFrom = now.Add(ms(cfg.tp.WarmupMS) + window)
		w.headAt = now
	}
	return w
}

// observe notes one event at now.
func (w *watch) observe(now time.Time, k eventKind, useful int) {
	if k == evMeta {
		return
	}
	w.content, w.last = true, now
	if !w.cfg.tp.Enabled {
		return
	}
	switch k {
	case evText:
		w.advance(now)
		w.bytes[w.head] += int64(useful)
	case evReasoning, evTool:
		// Judgement pauses while tools or reasoning flow, and resumes one full window after.
		if from := now.Add(ms(w.cfg.tp.WindowMS)); from.After(w.judgeFrom) {
			w.judgeFrom = from
		}
	}
}

// advance moves the newest bucket up to now, emptying the buckets that slid out.
func (w *watch) advance(now time.Time) {
	n := int(now.Sub(w.headAt) / w.step)
	if n <= 0 {
		return
	}
	if n >= tpBuckets {
		w.bytes = [tpBuckets]int64{}
		w.head = 0
		w.headAt = w.headAt.Add(time.Duration(n) * w.step)
		return
	}
	for range n {
		w.head = (w.head + 1) % tpBuckets
		w.bytes[w.head] = 0
	}
	w.headAt = w.headAt.Add(time.Duration(n) * w.step)
}

// windowBytes is the useful bytes of the last full window before now.
func (w *watch) windowBytes(now time.Time) int64 {
	w.advance(now)
	var sum int64
	for _, b := range w.bytes {
		sum += b
	}
	return sum
}

// check is the verdict at now: the abort kind when a watchdog fires, else "" and when to look
// again (zero: never).
func (w *watch) check(now time.Time) (abort string, next time.Time) {
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if w.cfg.total > 0 {
		end := w.start.Add(w.cfg.total)
		if !now.Before(end) {
			return abortTotal, time.Time{}
		}
		soonest(end)
	}
	if !w.content {
		end := w.start.Add(w.cfg.readiness)
		if !now.Before(end) {
			return abortReadiness, time.Time{}
		}
		soonest(end)
		if !w.cfg.tp.Enabled {
			return "", next
		}
	} else if w.cfg.idle > 0 {
		end := w.last.Add(w.cfg.idle)
		if !now.Before(end) {
			return abortIdle, time.Time{}
		}
		soonest(end)
	}
	if w.cfg.tp.Enabled {
		if now.Before(w.judgeFrom) {
			soonest(w.judgeFrom)
			return "", next
		}
		got := w.windowBytes(now)
		if got < w.cfg.tp.MinUsefulBytes || got*1000 < w.cfg.tp.MinUsefulBytesPerSecond*w.cfg.tp.WindowMS {
			return abortThroughput, time.Time{}
		}
		soonest(now.Add(w.step))
	}
	return "", next
}

// watchdog runs a watch on a clock: it fires at the watch's next deadline and, when a watchdog
// fires, records the kind and calls abort (which cancels the attempt's context). Stop ends it;
// observe is the per-event cost: a lock and the clock's time.
type watchdog struct {
	format  Format // the upstream's, whose events it classifies
	mu      sync.Mutex
	w       *watch
	clock   clockwork.Clock
	timer   clockwork.Timer
	abort   func()
	fired   string
	stopped bool
}

func startWatchdog(clock clockwork.Clock, f Format, cfg watchConfig, abort func()) *watchdog {
	d := &watchdog{format: f, w: newWatch(cfg, clock.Now()), clock: clock, abort: abort}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, next := d.w.check(d.w.start); !next.IsZero() {
		d.timer = clock.AfterFunc(next.Sub(d.w.start), d.tick)
	}
	return d
}

func (d *watchdog) tick() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	now := d.clock.Now()
	kind, next := d.w.check(now)
	if kind != "" {
		d.fired, d.stopped = kind, true
		d.mu.Unlock()
		d.abort()
		return
	}
	if !next.IsZero() {
		d.timer.Reset(max(next.Sub(now), time.Millisecond))
	}
	d.mu.Unlock()
}

// observe notes an upstream event.
func (d *watchdog) observe(k eventKind, useful int) {
	if k == evMeta || d == nil {
		return
	}
	now := d.clock.Now()
	d.mu.Lock()
	d.w.observe(now, k, useful)
	d.mu.Unlock()
}

// stop ends the watch; it reports the abort kind when a watchdog had fired ("" when none).
func (d *watchdog) stop() string {
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
	return d.fired
}

// firedKind is the abort kind when a watchdog fired ("" when none).
func (d *watchdog) firedKind() string {
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

// The watchdog's classification of an event (lookEvent asks): it looks for markers rather than
// parsing, since it runs on every event of every stream.
var (
	markContent    = []byte(`"content":"`)
	markReasoning1 = []byte(`"reasoning_content":"`)
	markReasoning2 = []byte(`"reasoning":"`)
	markToolCalls  = []byte(`"tool_calls":[`)
	markText       = []byte(`"text":"`)
	markDelta      = []byte(`"delta":"`)
	markThinking   = []byte(`"thinking`)
	markSignature  = []byte(`"signature_delta"`)
	markJSONDelta  = []byte(`"input_json_delta"`)
	markToolUse    = []byte(`"type":"tool_use"`)
	markServerTool = []byte(`"type":"server_tool_use"`)
	markTextDelta  = []byte(`"text_delta"`)
	markRedacted   = []byte(`"redacted_thinking"`)
)

// classifyChat: a chunk's delta carries text (content), reasoning (reasoning_content or
// reasoning, as OpenAI-compatible servers name it) or tool calls; anything else (the role
// chunk, finish_reason, usage, [DONE], comments) is metadata.
func classifyChat(ev []byte) (eventKind, int) {
	if n := textAfter(ev, markContent); n > 0 {
		return evText, n
	}
	if containsMark(ev, markToolCalls) {
		return evTool, 0
	}
	if containsMark(ev, markReasoning1) || containsMark(ev, markReasoning2) {
		return evReasoning, 0
	}
	return evMeta, 0
}

// classifyMessages: content_block_delta events carry text, thinking (or its signature) or a
// tool call's input; a content_block_start opens a tool call or a thinking block.
func classifyMessages(name string, data []byte) (eventKind, int) {
	switch name {
	case "content_block_delta":
		if containsMark(data, markTextDelta) {
			if n := textAfter(data, markText); n > 0 {
				return evText, n
			}
			return evMeta, 0
		}
		if containsMark(data, markJSONDelta) {
			return evTool, 0
		}
		if containsMark(data, markThinking) || containsMark(data, markSignature) {
			return evReasoning, 0
		}
	case "content_block_start":
		if containsMark(data, markToolUse) || containsMark(data, markServerTool) {
			return evTool, 0
		}
		if containsMark(data, markThinking) || containsMark(data, markRedacted) {
			return evReasoning, 0
		}
	}
	return evMeta, 0
}

// classifyResponses: output text deltas are text, reasoning (summary) deltas reasoning, and
// function call items and their argument deltas tool calls. The event's name tells.
func classifyResponses(name string, data []byte) (eventKind, int) {
	switch {
	case name == "response.output_text.delta":
		if n := textAfter(data, markDelta); n > 0 {
			return evText, n
		}
	case strings.HasPrefix(name, "response.reasoning"):
		return evReasoning, 0
	case name == "response.function_call_arguments.delta", name == "response.custom_tool_call_input.delta",
		name == "response.output_item.added" && bytes.Contains(data, []byte(`call"`)):
		return evTool, 0
	}
	return evMeta, 0
}

// textAfter is the UTF-8 length of the JSON string that begins right after mark in ev (0 without
// mark).
func textAfter(ev, mark []byte) int {
	if i := indexMark(ev, mark); i >= 0 {
		return jsonStringLen(ev[i+len(mark):])
	}
	return 0
}

// indexMark is bytes.Index for the short marks the per-event checks look for. bytes.Index hunts
// for a pattern's first byte and moves to its vector search only after many false hits: in a
// JSON event of a few hundred bytes, where a quote or a common letter comes every few bytes, it
// hardly gets there. A short text is searched in windows of 64 bytes, which bytes.Index runs
// through the vector search at once; a long one is searched by indexAnchored.
func indexMark(b, mark []byte) int {
	const window = 64 // bytes.Index's brute-force vector search takes texts up to this size
	if len(mark) > window/2 {
		return bytes.Index(b, mark)
	}
	if len(b) > 1024 {
		return indexAnchored(b, mark)
	}
	step := window - len(mark) + 1
	for from := 0; from < len(b); from += step {
		end := min(from+window, len(b))
		if i := bytes.Index(b[from:end], mark); i >= 0 {
			return from + i
		}
		if end == len(b) {
			break
		}
	}
	return -1
}

// containsMark is bytes.Contains for the marks of the per-event checks (see indexMark).
// indexAnchored is bytes.Index for a long text that is mostly prose between a few quotes: a whole
// answer, where the marks looked for (a quoted name) sit in its short JSON frame and the text
// between is long. bytes.IndexByte jumps from one of the mark's first byte to the next at
// memchr speed; bytes.Index, after the false hits of a JSON document's dense start, compares at
// every position of the rest instead (10 KB: about 1.9 µs against 0.4). A text where the first
// byte keeps coming (beyond the 64 false hits a document's start may bring, more than once in 32
// bytes on average) is left to bytes.Index from there.
func indexAnchored(b, mark []byte) int {
	c, fails := mark[0], 0
	for from := 0; from < len(b); {
		i := bytes.IndexByte(b[from:], c)
		if i < 0 {
			return -1
		}
		from += i
		if bytes.HasPrefix(b[from:], mark) {
			return from
		}
		from++
		if fails++; fails > 64+from>>5 {
			if j := bytes.Index(b[from:], mark); j >= 0 {
				return from + j
			}
			return -1
		}
	}
	return -1
}

func containsMark(b, mark []byte) bool { return indexMark(b, mark) >= 0 }

// jsonStringLen is the UTF-8 length of the JSON string whose text begins at b (after its opening
// quote), escapes decoded; it stops at the closing quote or the end of b.
func jsonStringLen(b []byte) int {
	n := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			return n
		case '\\':
			if i+1 >= len(b) {
				return n
			}
			i++
			if b[i] != 'u' {
				n++
				continue
			}
			if i+4 >= len(b) {
				return n
			}
			r := rune(hexVal(b[i+1])<<12 | hexVal(b[i+2])<<8 | hexVal(b[i+3])<<4 | hexVal(b[i+4]))
			i += 4
			switch {
			case r >= 0xD800 && r < 0xDC00: // a surrogate pair: one character of four bytes
				n += 4
				if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					i += 6
				}
			default:
				n += utf8.RuneLen(r)
			}
		default:
			n++
		}
	}
	return n
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return 0
}

// text is the message of the error event that ends a stream a watchdog aborted.
func (d *watchdog) text(kind string) string {
	cfg := d.w.cfg
	switch kind {
	case abortReadiness:
		return "the upstream sent no content within " + cfg.readiness.String()
	case abortIdle:
		return "the upstream stream stalled: no content for " + cfg.idle.String()
	case abortThroughput:
		return "the upstream stream delivered fewer than " + strconv.FormatInt(cfg.tp.MinUsefulBytesPerSecond, 10) +
			" useful bytes per second over " + ms(cfg.tp.WindowMS).String()
	case abortTotal:
		return "the upstream stream ran longer than " + cfg.total.String()
	}
	return incompleteText
}
