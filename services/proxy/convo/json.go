package convo

import (
	"strconv"
	"strings"
	"switchyard/services/jsonstr"

	"github.com/tidwall/gjson"
)

// Writers write their JSON by hand with these helpers rather than through
// encoding/json: an answer is one pass of appends (no reflection, no map sorting, no second
// validation of embedded documents), which keeps a translated 10 KB answer close to the cost of
// one passed through.

// Obj appends a JSON object field by field; B is the buffer written so far.
type Obj struct {
	B     []byte
	first bool
}

func NewObj(dst []byte) *Obj { return &Obj{B: append(dst, '{'), first: true} }

func (o *Obj) Key(k string) {
	if !o.first {
		o.B = append(o.B, ',')
	}
	o.first = false
	o.B = AppendString(o.B, k)
	o.B = append(o.B, ':')
}

func (o *Obj) Str(k, v string) *Obj { o.Key(k); o.B = AppendString(o.B, v); return o }

func (o *Obj) Int(k string, v int64) *Obj { o.Key(k); o.B = strconv.AppendInt(o.B, v, 10); return o }

// Bool writes true or false.
func (o *Obj) Bool(k string, v bool) *Obj { o.Key(k); o.B = strconv.AppendBool(o.B, v); return o }

// raw writes a value that is already JSON.
func (o *Obj) Raw(k string, v []byte) *Obj { o.Key(k); o.B = append(o.B, v...); return o }

// text writes a string given as Text.
func (o *Obj) Text(k string, t Text) *Obj {
	o.Key(k)
	o.B = append(append(append(o.B, '"'), t...), '"')
	return o
}

// Text is a string in its JSON form without the quotes: escaped, ready to be written between
// two quotes. Text read from a validated answer is kept this way and written back as it came, so
// a long answer is neither unescaped nor escaped again; several texts join by appending.
type Text string

// textOf is the text of a value of a validated document: a string's bytes as they stand in the
// document, anything else (a number, say) as its string form, escaped.
func TextOf(v gjson.Result) Text {
	if v.Type == gjson.String && len(v.Raw) >= 2 && v.Raw[0] == '"' {
		return Text(v.Raw[1 : len(v.Raw)-1]) // a part of the parsed document: no copy
	}
	if !v.Exists() || v.Type == gjson.Null {
		return ""
	}
	return QuoteText(v.String())
}

// quoteText is s as Text.
func QuoteText(s string) Text {
	b := AppendString(make([]byte, 0, len(s)+2), s)
	return Text(b[1 : len(b)-1])
}

// strOrNull writes a string, or null when v is nil.
func (o *Obj) StrOrNull(k string, v *string) *Obj {
	if v == nil {
		return o.Raw(k, Null)
	}
	return o.Str(k, *v)
}

func (o *Obj) End() []byte { return append(o.B, '}') }

// Elem starts the next element of the list that is k's value, for a list written only when it
// has an element: k and the bracket before the first, a comma before the others. n counts the
// elements started; the writer closes the list when n is not 0.
func (o *Obj) Elem(k string, n *int) {
	if *n++; *n == 1 {
		o.Key(k)
		o.B = append(o.B, '[')
	} else {
		o.B = append(o.B, ',')
	}
}

// open starts an object as the value of k, written into o's buffer; close(n) ends it. A nested
// object written this way costs no buffer of its own and no copy.
func (o *Obj) Open(k string) *Obj {
	o.Key(k)
	return &Obj{B: append(o.B, '{'), first: true}
}

// close ends n, opened by open, and continues o after it.
func (o *Obj) Close(n *Obj) { o.B = append(n.B, '}') }

var Null = []byte("null")

// EmptyObject is {}, what a call without arguments takes. Read-only.
var EmptyObject = []byte("{}")

// AppendString appends s as a JSON string.
func AppendString(dst []byte, s string) []byte { return jsonstr.Append(dst, s) }

// StrAt is the string form of a value read by the scanner (as gjson's String gives it): a
// string's text, a number's digits, "" for null.
func StrAt(raw string) string {
	if len(raw) >= 2 && raw[0] == '"' && strings.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	return gjson.Parse(raw).String()
}

// Str is a string value's text, and "" for a value of any other kind (where StrAt would give a
// number's digits): what a reader keeps of a field that only a string fills.
func Str(raw string) string {
	if Kind(raw) != '"' {
		return ""
	}
	return StrAt(raw)
}

// TextAt is TextOf for a value read by the scanner: a string's text as it stands in the document.
func TextAt(raw string) Text {
	if len(raw) >= 2 && raw[0] == '"' {
		return Text(raw[1 : len(raw)-1])
	}
	if raw == "" || raw == "null" {
		return ""
	}
	return QuoteText(gjson.Parse(raw).String())
}

// String is the text unescaped.
func (t Text) String() string {
	if strings.IndexByte(string(t), '\\') < 0 {
		return string(t)
	}
	return gjson.Parse(`"` + string(t) + `"`).String()
}

// JSON is the text as a JSON string, quotes included.
func (t Text) JSON() []byte {
	b := make([]byte, 0, len(t)+2)
	return append(append(append(b, '"'), t...), '"')
}

// Len is the length of the text in UTF-8 bytes, counted without unescaping (an escape counts as
// the one byte or rune it stands for, approximately: \uXXXX counts as one).
func (t Text) Len() int {
	n := 0
	for i := 0; i < len(t); i++ {
		if t[i] == '\\' && i+1 < len(t) {
			if t[i+1] == 'u' {
				i += 5
			} else {
				i++
			}
		}
		n++
	}
	return n
}

// StrElseNull writes a string, or null when v is empty (the fields OpenAI and Anthropic write
// as null when they have nothing to say).
func (o *Obj) StrElseNull(k, v string) *Obj {
	if v == "" {
		return o.Raw(k, Null)
	}
	return o.Str(k, v)
}

// Strs writes a list of strings.
func (o *Obj) Strs(k string, list []string) *Obj {
	o.Key(k)
	o.B = append(o.B, '[')
	for i, s := range list {
		if i > 0 {
			o.B = append(o.B, ',')
		}
		o.B = AppendString(o.B, s)
	}
	o.B = append(o.B, ']')
	return o
}
