package resilience

import (
	"encoding/json"
	"strconv"
	"strings"
)

// extractScanLimit bounds how far into a body ExtractError looks for a top-level "error" key.
// Hidden errors are small objects; a success body larger than this is not scanned further.
const extractScanLimit = 64 << 10

// extracted is an error object found in a response body.
type extracted struct {
	msg, code, typ string
	status         int
}

// ExtractError finds an error object in a response body, for errors hidden in an HTTP 200
// ("masked" errors, as OpenRouter sends them) and for reading code and type from real error
// answers. It understands
//
//	{"error":{"message":"…","type":"…","code":"…"}}            OpenAI
//	{"type":"error","error":{"type":"…","message":"…"}}        Anthropic
//	{"error":{"code":429,"message":"…","status":"RESOURCE_EXHAUSTED"}}  Google
//	{"error":"text"}
//	{"object":"error","message":"…","type":"…","code":400}     vLLM
//
// and the same as the first element of a JSON array. embeddedStatus comes from a numeric
// error.status, error.code, status or code field in 400–599, else 0 (the caller then uses
// 502). A string status such as "RESOURCE_EXHAUSTED" is reported as typ when there is no type.
//
// Only the first 64 KiB are looked at, top-level keys are skipped without decoding, and nothing
// is allocated unless an error key is found, so a large success body costs one pass over its
// start.
func ExtractError(body []byte) (msg, code, typ string, embeddedStatus int, ok bool) {
	ex, ok := extractError(body)
	return ex.msg, ex.code, ex.typ, ex.status, ok
}

type byteSeq interface{ ~string | ~[]byte }

type jsonSpan struct{ start, end int }

func (s jsonSpan) found() bool { return s.end > s.start }

// topLevel holds the spans of the top-level keys that matter for error detection.
type topLevel struct {
	err, typ, object, message, code, status jsonSpan
}

func extractError[T byteSeq](body T) (extracted, bool) {
	b := body
	if len(b) > extractScanLimit {
		b = b[:extractScanLimit]
	}
	i := skipWS(b, 0)
	if i+2 < len(b) && b[i] == 0xEF && b[i+1] == 0xBB && b[i+2] == 0xBF { // UTF-8 BOM
		i = skipWS(b, i+3)
	}
	if i < len(b) && b[i] == '[' {
		i = skipWS(b, i+1)
	}
	if i >= len(b) || b[i] != '{' {
		return extracted{}, false
	}
	top := scanTopLevel(b, i)

	var ex extracted
	found := false
	if top.err.found() {
		v := b[top.err.start:top.err.end]
		switch v[0] {
		case '"':
			ex.msg = jsonString([]byte(v))
			found = ex.msg != ""
		case '{':
			ex, found = decodeErrorObject([]byte(v))
		}
	}
	if !found && (keyEquals(b, top.object, `"error"`) || keyEquals(b, top.typ, `"error"`)) && top.message.found() {
		ex.msg = rawText([]byte(b[top.message.start:top.message.end]))
		if top.typ.found() && !keyEquals(b, top.typ, `"error"`) {
			ex.typ = jsonString([]byte(b[top.typ.start:top.typ.end]))
		}
		found = ex.msg != ""
	}
	if !found {
		return extracted{}, false
	}
	if ex.status == 0 && top.status.found() {
		ex.status = httpStatusOf([]byte(b[top.status.start:top.status.end]))
	}
	if ex.status == 0 && top.code.found() {
		raw := []byte(b[top.code.start:top.code.end])
		ex.status = httpStatusOf(raw)
		if ex.status == 0 && ex.code == "" {
			ex.code = rawText(raw)
		}
	}
	return ex, true
}

// scanTopLevel walks the keys of the object starting at b[i] without decoding values. It stops
// quietly at malformed or truncated input and returns what it found up to there.
func scanTopLevel[T byteSeq](b T, i int) topLevel {
	var top topLevel
	i++ // '{'
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return top
		}
		keyEnd, ok := scanString(b, i)
		if !ok {
			return top
		}
		key := jsonSpan{i, keyEnd}
		i = skipWS(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return top
		}
		i = skipWS(b, i+1)
		valEnd, ok := skipValue(b, i)
		if !ok {
			return top
		}
		val := jsonSpan{i, valEnd}
		switch {
		case keyEquals(b, key, `"error"`):
			top.err = val
		case keyEquals(b, key, `"type"`):
			top.typ = val
		case keyEquals(b, key, `"object"`):
			top.object = val
		case keyEquals(b, key, `"message"`):
			top.message = val
		case keyEquals(b, key, `"code"`):
			top.code = val
		case keyEquals(b, key, `"status"`):
			top.status = val
		}
		i = skipWS(b, valEnd)
		if i >= len(b) || b[i] != ',' {
			return top
		}
		i++
	}
}

func keyEquals[T byteSeq](b T, s jsonSpan, want string) bool {
	if s.end-s.start != len(want) {
		return false
	}
	for k := 0; k < len(want); k++ {
		if b[s.start+k] != want[k] {
			return false
		}
	}
	return true
}

func skipWS[T byteSeq](b T, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index just past the string literal that starts at b[i] == '"'.
func scanString[T byteSeq](b T, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index just past the JSON value that starts at b[i].
func skipValue[T byteSeq](b T, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := scanString(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' &&
		b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j, j > i
}

// decodeErrorObject reads the error object itself; only called once an error key was found.
func decodeErrorObject(raw []byte) (extracted, bool) {
	var obj struct {
		Message  json.RawMessage `json:"message"`
		Type     json.RawMessage `json:"type"`
		Code     json.RawMessage `json:"code"`
		Status   json.RawMessage `json:"status"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return extracted{}, false
	}
	var ex extracted
	ex.msg = rawText(obj.Message)
	// OpenRouter wraps the provider's own error text in metadata.raw.
	var meta struct {
		Raw json.RawMessage `json:"raw"`
	}
	if len(obj.Metadata) > 0 && json.Unmarshal(obj.Metadata, &meta) == nil {
		if extra := rawText(meta.Raw); extra != "" {
			if ex.msg != "" {
				ex.msg += ": "
			}
			ex.msg += extra
		}
	}
	ex.typ = jsonString(obj.Type)
	if ex.status = httpStatusOf(obj.Status); ex.status == 0 && ex.typ == "" {
		if s := jsonString(obj.Status); s != "" && !allASCIIDigits(s) {
			ex.typ = s
		}
	}
	if st := httpStatusOf(obj.Code); st != 0 {
		if ex.status == 0 {
			ex.status = st
		}
	} else {
		ex.code = rawText(obj.Code)
	}
	return ex, ex.msg != "" || ex.typ != "" || ex.code != "" || ex.status != 0
}

// jsonString decodes a JSON string literal; anything else gives "".
func jsonString(raw []byte) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

// rawText is a string literal decoded, or any other non-null JSON value as written.
func rawText(raw []byte) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		return jsonString(raw)
	}
	return strings.TrimSpace(string(raw))
}

// httpStatusOf reads an error status written as a number or a numeric string; only 400–599
// counts, so a Cloudflare "1010" or a 200 is not a status.
func httpStatusOf(raw []byte) int {
	s := strings.TrimSpace(string(raw))
	if len(s) >= 2 && s[0] == '"' {
		s = jsonString(raw)
	}
	if !allASCIIDigits(s) || len(s) != 3 {
		return 0
	}
	n, _ := strconv.Atoi(s)
	if n < 400 || n > 599 {
		return 0
	}
	return n
}

func allASCIIDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
