package convo

import (
	"errors"
	"strings"
	"unsafe"
)

// A one-pass reader of upstream answers. gjson, used for small documents elsewhere, validates a
// document in one pass and then walks it again for every level it descends (and once more to read
// a value): a 10 KB answer text is scanned four times before it is copied. The answer
// translators read with this reader instead, which validates every byte of the document exactly
// once while it descends, skips what it does not need and hands back values as slices of the
// document, so the long text costs one scan (eight bytes at a time) and one copy.
//
// Its grammar is JSON's (RFC 8259) as gjson.Valid checks it: strings without raw control
// characters and with valid escapes, numbers in JSON's form, the three literals, nesting at most
// maxScanDepth deep. Like gjson and encoding/json it does not check that strings are valid UTF-8.

const maxScanDepth = 10000

// view is b read as a string without a copy, for the answer readers: a 10 KB answer is read in
// about 3 µs, and copying it first into a string of its own would add a third of that and as
// many bytes again for the collector. It is safe because the readers only read, the caller does
// not change b during the call, and nothing read is kept past it: what an answer keeps is copied
// into the translated answer.
func View(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Byte masks for the eight-at-a-time string scan.
const (
	lsb8 = 0x0101010101010101
	msb8 = 0x8080808080808080
)

// special8 is non-zero when one of the eight bytes of x (little-endian) is a quote, a backslash or
// a control character. It may flag a byte above the first true hit, never miss one: a flagged
// word is looked at byte by byte.
func special8(x uint64) uint64 {
	q := x ^ ('"' * lsb8)  // zero bytes where x has a quote
	b := x ^ ('\\' * lsb8) // zero bytes where x has a backslash
	return ((x-0x20*lsb8)&^x | (q-lsb8)&^q | (b-lsb8)&^b) & msb8
}

// le64 is the first eight bytes of s as a little-endian word (one load).
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// stringEnd returns the index just past the string that starts at s[i] (a quote), or -1 when it
// is not a valid JSON string.
func stringEnd(s string, i int) int {
	i++
	for {
		// Eight bytes a step; a text that runs on without a special byte for 32 goes on 32 a
		// step (short strings and texts dense with escapes never pay for the long check).
		for clean := 0; i+8 <= len(s); {
			if special8(le64(s[i:])) != 0 {
				break
			}
			i += 8
			if clean++; clean == 4 {
				for i+32 <= len(s) {
					w := s[i : i+32]
					if special8(le64(w))|special8(le64(w[8:]))|special8(le64(w[16:]))|special8(le64(w[24:])) != 0 {
						break
					}
					i += 32
				}
			}
		}
		// At most eight bytes one by one, then back to words.
		for n := 0; n < 8; n++ {
			if i >= len(s) {
				return -1
			}
			switch c := s[i]; {
			case c == '"':
				return i + 1
			case c == '\\':
				if i+1 >= len(s) {
					return -1
				}
				switch s[i+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					i += 2
				case 'u':
					if i+6 > len(s) || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
						return -1
					}
					i += 6
				default:
					return -1
				}
			case c < 0x20:
				return -1
			default:
				i++
			}
		}
	}
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// numberEnd returns the index just past the number that starts at s[i], or -1.
func numberEnd(s string, i int) int {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && isDigit(s[i]):
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return -1
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return -1
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i
}

// valueEnd validates the value that starts at s[i] (no whitespace before it) and returns the
// index just past it, or -1. depth is the nesting of the value.
func valueEnd(s string, i, depth int) int {
	if i >= len(s) {
		return -1
	}
	switch c := s[i]; {
	case c == '"':
		return stringEnd(s, i)
	case c == '{':
		return members(s, i, depth, nil)
	case c == '[':
		return elements(s, i, depth, nil)
	case c == '-' || isDigit(c):
		return numberEnd(s, i)
	case c == 't':
		return literalEnd(s, i, "true")
	case c == 'f':
		return literalEnd(s, i, "false")
	case c == 'n':
		return literalEnd(s, i, "null")
	}
	return -1
}

func literalEnd(s string, i int, lit string) int {
	if len(s)-i >= len(lit) && s[i:i+len(lit)] == lit {
		return i + len(lit)
	}
	return -1
}

// members validates the object that starts at s[i] ('{') and returns the index just past it, or
// -1. For each member it calls f (when not nil) with the key's text and the index of the value; f reads the value and returns the index
// just past it (or -1), usually through valueEnd. depth is the nesting of the object.
func members(s string, i, depth int, f func(key string, v int) int) int {
	if depth > maxScanDepth {
		return -1
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return -1
		}
		k := stringEnd(s, i)
		if k < 0 {
			return -1
		}
		key := s[i+1 : k-1]
		if strings.IndexByte(key, '\\') >= 0 {
			key = StrAt(s[i:k]) // an escaped key is matched by its text
		}
		i = skipSpace(s, k)
		if i >= len(s) || s[i] != ':' {
			return -1
		}
		i = skipSpace(s, i+1)
		if i >= len(s) {
			return -1
		}
		if f != nil { // f may look at s[i]: there is a byte
			i = f(key, i)
		} else {
			i = valueEnd(s, i, depth+1)
		}
		if i < 0 {
			return -1
		}
		var end bool
		if i, end = afterValue(s, i, '}'); end {
			return i
		}
		i = skipSpace(s, i)
	}
}

// afterValue reads what follows a member or an element that ends at i (not -1): past a comma
// the walk goes on; past close, or at -1 when anything else stands there, it ends.
func afterValue(s string, i int, close byte) (next int, end bool) {
	i = skipSpace(s, i)
	if i < len(s) {
		if s[i] == ',' {
			return i + 1, false
		}
		if s[i] == close {
			return i + 1, true
		}
	}
	return -1, true
}

// elements is members for an array: f gets the index of each element.
func elements(s string, i, depth int, f func(v int) int) int {
	if depth > maxScanDepth {
		return -1
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return i + 1
	}
	for {
		if i >= len(s) {
			return -1
		}
		if f != nil { // f may look at s[i]: there is a byte
			i = f(i)
		} else {
			i = valueEnd(s, i, depth+1)
		}
		if i < 0 {
			return -1
		}
		var end bool
		if i, end = afterValue(s, i, ']'); end {
			return i
		}
		i = skipSpace(s, i)
	}
}

// document validates a whole document whose root is an object, calling f for its members as
// members does; it reports whether the document is valid.
func Document(s string, f func(key string, v int) int) bool {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	end := members(s, i, 1, f)
	return end >= 0 && skipSpace(s, end) == len(s)
}

// Members validates a whole document whose root is an object, as Document does, calling f with
// each top-level member's key and value text in the same pass; it reports whether the document
// is valid (f may have been called for members before an error further on).
func Members(s string, f func(key, value string)) bool {
	return Document(s, func(key string, v int) int {
		e := valueEnd(s, v, 2)
		if e >= 0 {
			f(key, s[v:e])
		}
		return e
	})
}

// ValidObject reports whether b is one JSON document whose root is an object: what json.Valid
// and a look at the first byte tell, in one pass several times faster on long texts.
func ValidObject(b []byte) bool { return Document(string(b), nil) }

// The walkers below read values the scanner has already validated (parts of a document that
// passed document, members or elements): they only find where each value ends, with a
// byte search for quotes inside strings, so a nested value is not validated once per level.

// skipString returns the index just past the valid string that starts at s[i].
func skipString(s string, i int) int {
	for j := i + 1; ; {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return len(s)
		}
		q := j + k
		n := 0 // backslashes right before the quote: an odd count escapes it
		for b := q - 1; b > i && s[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipValue returns the index just past the valid value that starts at s[i].
func SkipValue(s string, i int) int {
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = skipString(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(s)
	}
	for i < len(s) {
		switch s[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// fieldsOf calls f with each key of a valid object and its value as it stands.
func FieldsOf(raw string, f func(k, v string)) {
	i := skipSpace(raw, 1)
	for i < len(raw) && raw[i] == '"' {
		k := skipString(raw, i)
		key := raw[i+1 : k-1]
		if strings.IndexByte(key, '\\') >= 0 {
			key = StrAt(raw[i:k])
		}
		v := skipSpace(raw, skipSpace(raw, k)+1) // past the colon
		e := SkipValue(raw, v)
		f(key, raw[v:e])
		i = skipSpace(raw, e)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
}

// A FieldSlot is one field of an object that Pick reads: its name, where its value goes and,
// for a request's field, the kind it must have.
type FieldSlot struct {
	name    string
	to      *string
	kind    byte   // 0: any
	integer bool   // a number must be an integer an int holds
	what    string // the words for kind in an error: "a string", "a list"
}

// Field is the slot for the field name, whose value goes to *to.
func Field(name string, to *string) FieldSlot { return FieldSlot{name: name, to: to} }

// Want is the slot wanting its value to be of kind k (absent and null are every kind's); what
// is the words for k that an error uses.
func (f FieldSlot) Want(k byte, what string) FieldSlot {
	f.kind, f.what = k, what
	return f
}

// WantInt is the slot wanting an integer: a value of another kind is refused as Want refuses
// it, and a number with a fraction, an exponent or beyond an int after every kind is checked.
func (f FieldSlot) WantInt() FieldSlot {
	f.kind, f.what, f.integer = '0', "an integer", true
	return f
}

// BadKind is the first of fields, in their order, whose picked value has another kind than its
// slot wants, else the first whose number is not the integer its slot wants: its name and the
// words for what it must be.
func BadKind(fields []FieldSlot) (name, what string, bad bool) {
	for _, f := range fields {
		if f.kind != 0 && !Is(*f.to, f.kind) {
			return f.name, f.what, true
		}
	}
	for _, f := range fields {
		if f.integer && NotInt(*f.to) {
			return f.name, f.what, true
		}
	}
	return "", "", false
}

// PickRequest reads the top-level fields of a request (s, a validated object) into their
// slots, names every field without one in r.Dropped, and says which field, if any, BadKind
// refuses.
func PickRequest(r *Request, s string, slots []FieldSlot) (name, what string, bad bool) {
	Pick(s, func(k, _ string) { r.Drop(k) }, slots...)
	return BadKind(slots)
}

// Pick reads an object's fields by name: each field's value as it stands goes where its Field
// says (the last one where a name stands twice), and every other field goes to rest when rest
// is not nil. What a reader does with the values comes after, in one place, rather than spread
// over the cases of a switch on the key.
func Pick(raw string, rest func(k, v string), fields ...FieldSlot) {
	FieldsOf(raw, func(k, v string) {
		if !Put(fields, k, v) && rest != nil {
			rest(k, v)
		}
	})
}

// Put sets the slot named k to v, and reports whether fields has one: Pick for a reader that
// looks at every field as well.
func Put(fields []FieldSlot, k, v string) bool {
	for _, f := range fields {
		if f.name == k {
			*f.to = v
			return true
		}
	}
	return false
}

// eachElement calls f with each element of a valid array as it stands.
func EachElement(raw string, f func(v string)) {
	i := skipSpace(raw, 1)
	for i < len(raw) && raw[i] != ']' {
		e := SkipValue(raw, i)
		f(raw[i:e])
		i = skipSpace(raw, e)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
}

// ErrNotObject is what EachObject returns for a list element that is neither an object nor null.
var ErrNotObject = errors.New("a list element is not an object")

// EachObject calls f with each element of a valid list that is an object or null (a reader takes
// a null for an object without fields), until f returns an error. An element of another kind ends
// the walk with ErrNotObject, for the caller to say in its format's words.
func EachObject(raw string, f func(obj string) error) error {
	var err error
	EachElement(raw, func(v string) {
		if err != nil {
			return
		}
		if k := Kind(v); k != '{' && k != 'n' {
			err = ErrNotObject
			return
		}
		err = f(v)
	})
	return err
}
