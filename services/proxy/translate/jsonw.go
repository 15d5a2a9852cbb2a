package translate

import (
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// The answer translators write their JSON by hand with these helpers rather than through
// encoding/json: an answer is one pass of appends (no reflection, no map sorting, no second
// validation of embedded documents), which keeps a translated 10 KB answer close to the cost of
// one passed through.

// obj appends a JSON object field by field.
type obj struct {
	b     []byte
	first bool
}

func newObj(dst []byte) *obj { return &obj{b: append(dst, '{'), first: true} }

func (o *obj) key(k string) {
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = appendString(o.b, k)
	o.b = append(o.b, ':')
}

func (o *obj) str(k, v string) *obj { o.key(k); o.b = appendString(o.b, v); return o }

func (o *obj) int(k string, v int64) *obj { o.key(k); o.b = strconv.AppendInt(o.b, v, 10); return o }

// raw writes a value that is already JSON.
func (o *obj) raw(k string, v []byte) *obj { o.key(k); o.b = append(o.b, v...); return o }

// text writes a string given as jtext.
func (o *obj) text(k string, t jtext) *obj {
	o.key(k)
	o.b = append(append(append(o.b, '"'), t...), '"')
	return o
}

// jtext is a string in its JSON form without the quotes: escaped, ready to be written between
// two quotes. Text read from a validated answer is kept this way and written back as it came, so
// a long answer is neither unescaped nor escaped again; several texts join by appending.
type jtext string

// textOf is the text of a value of a validated document: a string's bytes as they stand in the
// document, anything else (a number, say) as its string form, escaped.
func textOf(v gjson.Result) jtext {
	if v.Type == gjson.String && len(v.Raw) >= 2 && v.Raw[0] == '"' {
		return jtext(v.Raw[1 : len(v.Raw)-1]) // a part of the parsed document: no copy
	}
	if !v.Exists() || v.Type == gjson.Null {
		return ""
	}
	return quoteText(v.String())
}

// quoteText is s as jtext.
func quoteText(s string) jtext {
	b := appendString(make([]byte, 0, len(s)+2), s)
	return jtext(b[1 : len(b)-1])
}

// strOrNull writes a string, or null when v is nil.
func (o *obj) strOrNull(k string, v *string) *obj {
	if v == nil {
		return o.raw(k, nullJSON)
	}
	return o.str(k, *v)
}

func (o *obj) end() []byte { return append(o.b, '}') }

// open starts an object as the value of k, written into o's buffer; close(n) ends it. A nested
// object written this way costs no buffer of its own and no copy.
func (o *obj) open(k string) *obj {
	o.key(k)
	return &obj{b: append(o.b, '{'), first: true}
}

// close ends n, opened by open, and continues o after it.
func (o *obj) close(n *obj) { o.b = append(n.b, '}') }

var nullJSON = []byte("null")

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i += size
				start = i
				continue
			}
			if r == '\u2028' || r == '\u2029' {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\u202`...)
				dst = append(dst, "89"[r-'\u2028'])
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigit = "0123456789abcdef"
