package convo

import (
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// What every format's reader asks of a raw value the scanner handed out (FieldsOf, EachElement):
// its kind, whether it has the type a field wants, and its value, read without a copy.

// Kind names a raw value's JSON type by its first byte: '"', '0' (a number), 't' (a boolean),
// 'n', '{', '[', or 0 when the value is absent.
func Kind(raw string) byte {
	switch {
	case raw == "":
		return 0
	case raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9':
		return '0'
	case raw[0] == 'f':
		return 't'
	}
	return raw[0]
}

// Is reports whether raw is absent, null or of one of the kinds: what encoding/json accepts for
// a field of that type, and what every format lets a request field be.
func Is(raw string, kinds ...byte) bool {
	k := Kind(raw)
	return k == 0 || k == 'n' || slices.Contains(kinds, k)
}

// IsInt reports whether a number is written as an integer (no fraction, no exponent).
func IsInt(raw string) bool { return Kind(raw) == '0' && !strings.ContainsAny(raw, ".eE") }

// BytesOf is a part of a request's one copy of its body as a byte slice, without a copy of its
// own: the raw values a request keeps (schemas, arguments, tool inputs, cache marks) are only
// ever appended to another buffer, never written to, and the string they alias lives as long as
// the request.
func BytesOf(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// ObjectBytes is an object value as BytesOf gives it, and nil for a value of any other kind:
// what a reader keeps of a field that only an object fills (a schema, a cache mark, metadata).
func ObjectBytes(raw string) []byte {
	if Kind(raw) != '{' {
		return nil
	}
	return BytesOf(raw)
}

// ArgsObject is a function call's arguments string (OpenAI's "arguments") as the JSON object it
// holds, and {} for anything else: the model's tool calls carry objects. Like BytesOf it is no
// copy of its own, and read-only.
func ArgsObject(raw string) []byte {
	if Kind(raw) == '"' {
		if a := StrAt(raw); Document(a, nil) {
			return BytesOf(a)
		}
	}
	return EmptyObject
}

// Bool is a JSON boolean's value, nil when raw is none.
func Bool(raw string) *bool {
	if Kind(raw) != 't' {
		return nil
	}
	b := raw == "true"
	return &b
}

// Float is a JSON number's value, nil when raw is none.
func Float(raw string) *float64 {
	if Kind(raw) != '0' {
		return nil
	}
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return nil
	}
	return &v
}

// ParseDataURL splits "data:image/png;base64,AAAA" into its media type and payload; ok is false
// for anything but a base64 data URL with a media type.
func ParseDataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mt, enc, _ := strings.Cut(meta, ";")
	if enc != "base64" || mt == "" {
		return "", "", false
	}
	return mt, payload, true
}

// EffortOf maps an Anthropic thinking budget to OpenAI's reasoning effort.
func EffortOf(budget int) string {
	switch {
	case budget < 4096:
		return "low"
	case budget < 16384:
		return "medium"
	}
	return "high"
}

// NotInt reports whether raw is a number that is not an integer an int holds (what a field
// that must be an integer refuses; absent, null and other kinds are not its business).
func NotInt(raw string) bool {
	if Kind(raw) != '0' {
		return false
	}
	_, err := strconv.Atoi(raw)
	return err != nil || !IsInt(raw)
}
