// Package tokencount estimates the input tokens of an Anthropic messages request without asking
// an upstream, for providers that have no count_tokens endpoint of their own. It counts every
// text the request carries with a real BPE tokenizer (OpenAI's o200k_base or cl100k_base, whose
// vocabularies are compiled into the binary: nothing is downloaded, and a vocabulary is loaded
// the first time it is needed, not at start) and adds documented fixed estimates for what is not
// text. The result is an estimate: the target model's own tokenizer and the provider's framing of
// messages and tools differ.
package tokencount

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer/codec"
)

// Encoding is the name of a tokenizer vocabulary.
type Encoding string

// The encodings a count can use.
const (
	// O200kBase is the encoding of gpt-4o, gpt-4.1, gpt-5 and the o-series, and the default for
	// every model whose encoding is not obvious from its name.
	O200kBase Encoding = "o200k_base"
	// Cl100kBase is the encoding of gpt-4 (before gpt-4o) and gpt-3.5.
	Cl100kBase Encoding = "cl100k_base"
)

// The fixed estimates for what is not counted as text.
const (
	// ImageTokens is what one image is counted as, whatever its size: Anthropic's documented
	// ceiling for an image at its default size (about 1.15 megapixels / 750 pixels per token).
	// Larger than an OpenAI model charges for most images, so a context budget built on it errs
	// on the safe side.
	ImageTokens = 1600
	// DocumentTokens is what a document is counted as when its text is not in the request (a
	// base64 PDF, a URL or a file id): about one page at Anthropic's documented 1,500–3,000
	// tokens per PDF page. A plain-text document, or one given as content blocks, is counted as
	// its text.
	DocumentTokens = 3000
	// MessageOverhead is added for every message and for the system prompt (role and
	// separators, as OpenAI counts chat messages).
	MessageOverhead = 3
	// ReplyOverhead is added once per request (the start of the assistant's reply).
	ReplyOverhead = 3
	// ExactBytes is how much text of one request is tokenized; text beyond it (past any context
	// window today) is estimated at the tokens per byte the counted text had, so one request
	// cannot hold a core for seconds.
	ExactBytes = 1 << 20
)

// ErrNoMessages is returned for a request without a messages array.
var ErrNoMessages = errors.New("the request has no messages array")

// Counter counts tokens. Its vocabularies are loaded once, on first use; it is safe for
// concurrent use.
type Counter struct {
	o200k, cl100k func() *codec.Codec
	// exactBytes is ExactBytes (smaller in tests).
	exactBytes int
}

// New returns a Counter; no vocabulary is loaded yet.
//
// The codecs are built from the tokenizer's codec package rather than through its Get, which
// names every encoding it knows and so links all their vocabularies into the binary; only these
// two are linked in.
func New() *Counter {
	return &Counter{o200k: sync.OnceValue(codec.NewO200kBase), cl100k: sync.OnceValue(codec.NewCl100kBase), exactBytes: ExactBytes}
}

// EncodingFor picks the encoding for a model id (the upstream's own, possibly with a vendor
// prefix such as "openai/gpt-4" or a fine-tune's "ft:gpt-3.5-turbo:…"): cl100k_base for gpt-4
// before gpt-4o and for gpt-3.5, o200k_base for everything else.
func EncodingFor(model string) Encoding {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	m = strings.TrimPrefix(m, "ft:")
	switch {
	case strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"):
		return Cl100kBase
	case m == "gpt-4", strings.HasPrefix(m, "gpt-4-"), strings.HasPrefix(m, "gpt-4:"):
		return Cl100kBase // gpt-4, gpt-4-turbo, gpt-4-32k, gpt-4-0613…; not gpt-4o, gpt-4.1, gpt-4.5
	case strings.HasPrefix(m, "text-embedding-ada-002"), strings.HasPrefix(m, "text-embedding-3-"):
		return Cl100kBase
	}
	return O200kBase
}

// Messages counts the input tokens of an Anthropic messages request body (valid JSON, as the
// gateway checked it) for a model: the system prompt, every message's text, tool_use inputs,
// tool results, thinking text, plain-text documents and the tool definitions (name, description
// and input schema as JSON), plus the fixed estimates above. It answers ErrNoMessages for a
// request without a messages array and ctx's error once ctx ends.
func (c *Counter) Messages(ctx context.Context, body []byte, model string) (int, Encoding, error) {
	enc := EncodingFor(model)
	load := c.o200k
	if enc == Cl100kBase {
		load = c.cl100k
	}
	doc := gjson.ParseBytes(body)
	msgs := doc.Get("messages")
	if !msgs.IsArray() {
		return 0, enc, ErrNoMessages
	}
	w := &walker{ctx: ctx, codec: load(), budget: c.exactBytes}
	if sys := doc.Get("system"); sys.Exists() && sys.Type != gjson.Null {
		w.n += MessageOverhead
		w.content(sys)
	}
	msgs.ForEach(func(_, m gjson.Result) bool {
		w.n += MessageOverhead
		w.content(m.Get("content"))
		return w.err == nil
	})
	doc.Get("tools").ForEach(func(_, t gjson.Result) bool {
		w.text(t.Get("name").String())
		w.text(t.Get("description").String())
		if s := t.Get("input_schema"); s.Exists() {
			w.json(s)
		}
		return w.err == nil
	})
	if w.err != nil {
		return 0, enc, w.err
	}
	return w.n + ReplyOverhead, enc, nil
}

// walker adds up one request's tokens.
type walker struct {
	ctx   context.Context
	codec *codec.Codec
	n     int
	err   error
	// budget is the text still tokenized exactly; counted and tokens are what was, for
	// estimating the rest.
	budget          int
	counted, tokens int
	buf             bytes.Buffer
}

// content counts a message's (or the system prompt's, or a tool result's) content: a string or
// a list of content blocks.
func (w *walker) content(c gjson.Result) {
	switch {
	case c.Type == gjson.String:
		w.text(c.String())
	case c.IsArray():
		c.ForEach(func(_, b gjson.Result) bool {
			w.block(b)
			return w.err == nil
		})
	case c.IsObject():
		w.block(c)
	}
}

// block counts one content block by its type.
func (w *walker) block(b gjson.Result) {
	switch b.Get("type").String() {
	case "text":
		w.text(b.Get("text").String())
	case "image":
		w.n += ImageTokens
	case "document":
		src := b.Get("source")
		switch src.Get("type").String() {
		case "text":
			w.text(src.Get("data").String())
		case "content":
			w.content(src.Get("content"))
		default:
			w.n += DocumentTokens
		}
		w.text(b.Get("title").String())
		w.text(b.Get("context").String())
	case "tool_use", "server_tool_use", "mcp_tool_use":
		w.text(b.Get("name").String())
		w.json(b.Get("input"))
	case "tool_result", "mcp_tool_result":
		w.content(b.Get("content"))
	case "thinking":
		w.text(b.Get("thinking").String())
	case "redacted_thinking":
		// Encrypted: its size says nothing about its tokens, and providers other than
		// Anthropic do not read it.
	case "search_result":
		w.text(b.Get("title").String())
		w.text(b.Get("source").String())
		w.content(b.Get("content"))
	default:
		w.strings(b)
	}
}

// opaque are fields of content blocks that are identifiers, encodings or encrypted data rather
// than text a model reads.
var opaque = map[string]bool{"type": true, "id": true, "tool_use_id": true, "signature": true, "data": true,
	"encrypted_content": true, "encrypted_index": true, "media_type": true, "cache_control": true, "citations": true,
	"file_id": true}

// strings counts the text of a block of a type not known here: every string value that is not
// an identifier or encoded data.
func (w *walker) strings(v gjson.Result) {
	v.ForEach(func(k, x gjson.Result) bool {
		if k.Type == gjson.String && opaque[k.String()] {
			return true
		}
		switch {
		case x.Type == gjson.String:
			w.text(x.String())
		case x.IsObject(), x.IsArray():
			w.strings(x)
		}
		return w.err == nil
	})
}

// json counts a JSON value (tool input, input schema) as its compact text.
func (w *walker) json(v gjson.Result) {
	if !v.Exists() {
		return
	}
	w.buf.Reset()
	if err := json.Compact(&w.buf, []byte(v.Raw)); err != nil {
		w.text(v.Raw)
		return
	}
	w.text(w.buf.String())
}

// text counts a text: exactly while the request's budget lasts, then at the rate seen so far.
func (w *walker) text(s string) {
	if w.err != nil || s == "" {
		return
	}
	exact := s
	if len(s) > w.budget {
		cut := w.budget
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		exact = s[:cut]
	}
	if exact != "" {
		n, err := w.count(exact)
		if err != nil {
			w.err = err
			return
		}
		w.n += n
		w.budget -= len(exact)
		w.counted += len(exact)
		w.tokens += n
	}
	if rest := len(s) - len(exact); rest > 0 {
		w.n += extrapolate(rest, w.counted, w.tokens)
	}
}

// extrapolate estimates the tokens of rest bytes at the rate tokens/counted, or four bytes a
// token when nothing was counted.
func extrapolate(rest, counted, tokens int) int {
	if counted == 0 || tokens == 0 {
		return (rest + 3) / 4
	}
	return int((int64(rest)*int64(tokens) + int64(counted) - 1) / int64(counted))
}

// count tokenizes s in pieces of at most chunkBytes, checking ctx between them.
func (w *walker) count(s string) (int, error) {
	total := 0
	for i := 0; len(s) > 0; i++ {
		if i%64 == 63 {
			if err := w.ctx.Err(); err != nil {
				return 0, err
			}
		}
		k := cut(s)
		n, err := w.codec.Count(s[:k])
		if err != nil {
			return 0, err
		}
		total += n
		s = s[k:]
	}
	return total, nil
}

// chunkBytes bounds the text given to the tokenizer at once. Its pre-tokenizing expression
// backtracks: on a long run of mixed whitespace (" \n \n …") one call takes time that grows with
// the square of the run's length (100 KB took 5 s in one piece, 150 ms in pieces of 1 KB, 60 ms
// in pieces of 256 bytes; BenchmarkCount100KBWhitespace). Ordinary text costs the same either way.
const chunkBytes = 256

// cut returns where the first piece of s ends: all of s when it is short, else a place within
// the last half of chunkBytes where the tokenizer's pre-tokenizer splits anyway, so ordinary
// text counts exactly as in one piece: before a space that ends a word (between two non-space
// characters), or between an ASCII letter or digit and ASCII punctuation other than an
// apostrophe (which may start a contraction). Without one (a long run of whitespace, or of
// letters), at a character boundary; a cut there may add a token.
func cut(s string) int {
	if len(s) <= chunkBytes {
		return len(s)
	}
	for i := min(chunkBytes, len(s)-2); i > chunkBytes/2; i-- {
		prev, c, next := s[i-1], s[i], s[i+1]
		if c == ' ' && !isSpace(prev) && !isSpace(next) {
			return i
		}
		if isAlnum(prev) && isPunct(c) {
			return i
		}
	}
	// Back off to a character start; text that is not UTF-8 (no start within one character's
	// length) is cut at chunkBytes, so a piece is never empty.
	for i := chunkBytes; i > chunkBytes-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return chunkBytes
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func isPunct(b byte) bool { return b > ' ' && b < 0x7f && b != '\'' && !isAlnum(b) }
