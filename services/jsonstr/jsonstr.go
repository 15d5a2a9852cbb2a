// Package jsonstr appends Go strings as JSON string literals, written by hand for the hot paths
// that build JSON without encoding/json (the conversation model's writers, the request log's
// columns, the request line): the two flavours are byte for byte what encoding/json and
// log/slog's JSON handler write, which the tests compare.
package jsonstr

import "unicode/utf8"

// Append appends s quoted as log/slog's JSON handler and most JSON writers do: `"` and `\`
// escaped, \n \r \t by name, the other control characters as \u00XX, invalid UTF-8 as U+FFFD, and
// U+2028 and U+2029 escaped (they end a line in JavaScript); nothing else.
func Append(dst []byte, s string) []byte { return appendString(dst, s, false) }

// AppendMarshal appends s exactly as encoding/json.Marshal quotes it: as Append, and also \b and
// \f by name and <, > and & as \u003c, \u003e and \u0026 (HTML-safe).
func AppendMarshal(dst []byte, s string) []byte { return appendString(dst, s, true) }

const hexDigit = "0123456789abcdef"

func appendString(dst []byte, s string, marshal bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && (!marshal || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case marshal && c == '\b':
				dst = append(dst, '\\', 'b')
			case marshal && c == '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigit[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
