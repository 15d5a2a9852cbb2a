package traffic

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The request log's JSON columns are written by hand for the shapes every request has (no
// attempts or skips at all, or a few attempts): encoding/json's reflection cost more than the
// rest of a row. The bytes are exactly json.Marshal's (rowjson_test.go compares them); the
// combo route, rare and with a time in it, still goes through json.Marshal.

// chainJSON is json.Marshal of the attempts, "[]" for none.
func chainJSON(chain []Attempt) string {
	if len(chain) == 0 {
		return "[]"
	}
	b := make([]byte, 0, 96*len(chain))
	b = append(b, '[')
	for i := range chain {
		a := &chain[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"connection_id":`...)
		b = strconv.AppendInt(b, a.ConnectionID, 10)
		b = append(b, `,"connection":`...)
		b = appendJSONString(b, a.Connection)
		b = append(b, `,"kind":`...)
		b = appendJSONString(b, a.Kind)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(a.Status), 10)
		if a.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendJSONString(b, a.Reason)
		}
		b = append(b, `,"duration":`...)
		b = strconv.AppendInt(b, int64(a.Duration), 10)
		if a.Detail != "" {
			b = append(b, `,"detail":`...)
			b = appendJSONString(b, a.Detail)
		}
		if a.Target != "" {
			b = append(b, `,"target":`...)
			b = appendJSONString(b, a.Target)
		}
		b = append(b, '}')
	}
	return string(append(b, ']'))
}

// skippedJSON is json.Marshal of the skipped connections, "[]" for none.
func skippedJSON(skipped []Skip) string {
	if len(skipped) == 0 {
		return "[]"
	}
	b := make([]byte, 0, 96*len(skipped))
	b = append(b, '[')
	for i := range skipped {
		x := &skipped[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"connection":`...)
		b = appendJSONString(b, x.Connection)
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, x.Reason)
		if x.Detail != "" {
			b = append(b, `,"detail":`...)
			b = appendJSONString(b, x.Detail)
		}
		if x.Target != "" {
			b = append(b, `,"target":`...)
			b = appendJSONString(b, x.Target)
		}
		b = append(b, `,"seconds_left":`...)
		b = strconv.AppendInt(b, x.SecondsLeft, 10)
		b = append(b, '}')
	}
	return string(append(b, ']'))
}

// routeJSON is json.Marshal of the combo route, "[]" for none.
func routeJSON(route []RouteStep) string {
	if len(route) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(route)
	return string(b)
}

// appendJSONString appends s as encoding/json writes a string: quoted, with HTML's <, > and &
// escaped, the short escapes for \b \f \n \r \t, invalid UTF-8 as U+FFFD and U+2028 and U+2029
// escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
