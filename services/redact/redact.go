// Package redact is the one redaction helper of the gateway. Every text that enters from outside
// (an upstream's error body or stream event, a token endpoint's message, a request or answer body
// kept in the request log) passes through it before a client answer, a log line, a state view or
// a stored row can hold it: the credentials named by the caller are removed wherever they appear,
// and so is anything shaped like a provider key or one of the gateway's own client keys.
package redact

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Mark stands where a secret was.
const Mark = "[redacted]"

// minSecret is the shortest credential removed wherever it appears. A shorter one (an upstream
// may take any key, "abc" included) is removed only where it stands as a whole token: inside a
// word it would blank out ordinary text.
const minSecret = 4

// keyShaped matches what looks like a credential in free text: OpenAI-style sk-… (Anthropic's
// sk-ant-…, the gateway's own client keys sk-sy-…), also when an upstream echoes it partly
// masked (OpenAI's "Incorrect API key provided: sk-abc*****wxyz"), Google's AIza…, Groq's gsk_…,
// xAI's xai-…, the gateway's session lease owner tokens swl_…, and bearer tokens.
var keyShaped = regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-*]*|sk-[A-Za-z0-9_\-]{12,}|AIza[0-9A-Za-z_\-]{30,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,}|swl_[A-Za-z0-9_\-]{20,})|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*`)

// maskRun is the run of asterisks with which upstreams mask the key they echo.
const maskRun = "***"

// String removes secrets from text: each of the given credentials wherever it appears (one
// shorter than minSecret only as a whole token), an upstream's partly masked echo of one (its
// first and last characters around asterisks, as a whole token), and anything shaped like a
// key. The pattern runs only when a cheap substring check finds a key's prefix, so text without
// one costs a few scans.
func String(text string, secrets ...string) string {
	if text == "" {
		return text
	}
	masked := strings.Contains(text, maskRun)
	for _, s := range secrets {
		switch {
		case s == "":
		case len(s) >= minSecret:
			if strings.Contains(text, s) {
				text = strings.ReplaceAll(text, s, Mark)
			}
		default:
			text = replaceTokens(text, s)
		}
	}
	if masked {
		text = replaceMasked(text, secrets)
	}
	if mayBeKeyShaped(text) {
		text = keyShaped.ReplaceAllString(text, Mark)
	}
	return text
}

// Bytes is String for a body; it returns b itself when nothing was removed.
func Bytes(b []byte, secrets ...string) []byte {
	if len(b) == 0 {
		return b
	}
	hit := bytes.Contains(b, []byte("sk-")) || bytes.Contains(b, []byte("AIza")) || bytes.Contains(b, []byte("gsk_")) ||
		bytes.Contains(b, []byte("xai-")) || bytes.Contains(b, []byte("swl_")) || containsFold(b, "bearer") || bytes.Contains(b, []byte(maskRun))
	for _, s := range secrets {
		if s != "" && bytes.Contains(b, []byte(s)) {
			hit = true
			break
		}
	}
	if !hit {
		return b
	}
	in := string(b)
	if out := String(in, secrets...); out != in {
		return []byte(out)
	}
	return b
}

// wordByte reports whether c can be part of a word or a key: ASCII letters and digits, '-', '_'
// and the bytes of non-ASCII characters. Anything else (space, punctuation, quotes) ends a token.
func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c >= 0x80
}

// replaceTokens replaces s where it stands as a whole token: no word byte right before or after.
func replaceTokens(text, s string) string {
	var out []byte
	last := 0
	for from := 0; from+len(s) <= len(text); {
		j := strings.Index(text[from:], s)
		if j < 0 {
			break
		}
		j += from
		end := j + len(s)
		if (j == 0 || !wordByte(text[j-1])) && (end == len(text) || !wordByte(text[end])) {
			out = append(append(out, text[last:j]...), Mark...)
			last, from = end, end
			continue
		}
		from = j + 1
	}
	if out == nil {
		return text
	}
	return string(append(out, text[last:]...))
}

// maskByte reports whether c can be part of a masked echo: a word byte, '.', or the mask's '*'.
func maskByte(c byte) bool { return wordByte(c) || c == '.' || c == '*' }

// replaceMasked replaces every token with a run of asterisks whose visible ends could be the
// first and last characters of one of the secrets (what an upstream shows of a key it refuses);
// a mask that shows nothing of a key stays.
func replaceMasked(text string, secrets []string) string {
	var out []byte
	last := 0
	for i := 0; i < len(text); {
		if !maskByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && maskByte(text[j]) {
			j++
		}
		end := j
		for end > i && text[end-1] == '.' { // a full stop after the token is the sentence's
			end--
		}
		if tok := text[i:end]; strings.Contains(tok, maskRun) && echoes(tok, secrets) {
			out = append(append(out, text[last:i]...), Mark...)
			last = end
		}
		i = j
	}
	if out == nil {
		return text
	}
	return string(append(out, text[last:]...))
}

// echoes reports whether a masked token shows the start and the end of one of the secrets around
// its asterisks.
func echoes(tok string, secrets []string) bool {
	first, lastStar := strings.IndexByte(tok, '*'), strings.LastIndexByte(tok, '*')
	head, tail := tok[:first], tok[lastStar+1:]
	if head == "" && tail == "" {
		return false
	}
	for _, s := range secrets {
		if s != "" && len(head)+len(tail) < len(s) && strings.HasPrefix(s, head) && strings.HasSuffix(s, tail) {
			return true
		}
	}
	return false
}

// mayBeKeyShaped is the cheap check before the pattern: a key's prefix or the word bearer.
func mayBeKeyShaped(text string) bool {
	return strings.Contains(text, "sk-") || strings.Contains(text, "AIza") || strings.Contains(text, "gsk_") ||
		strings.Contains(text, "xai-") || strings.Contains(text, "swl_") || containsFold(text, "bearer")
}

// containsFold reports whether text holds word (lower-case ASCII letters) in any case, without
// the copy strings.ToLower makes.
func containsFold[T string | []byte](text T, word string) bool {
	for i := 0; i+len(word) <= len(text); i++ {
		if text[i]|0x20 != word[0] {
			continue
		}
		j := 1
		for j < len(word) && text[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			return true
		}
	}
	return false
}

// secretField matches a JSON member whose name says it holds a secret, with its string value
// (or the rest of the text when the value is cut off). Names are compared without case, dashes
// and underscores: api_key, apiKey and x-api-key are one name.
var secretField = regexp.MustCompile(`(?i)("[^"\\]*(?:api[_-]?key|authorization|access[_-]?token|refresh[_-]?token|password|secret)[^"\\]*"\s*:\s*)"(?:[^"\\]|\\.)*(?:"|\\?$)`)

// Fields replaces the values of JSON members that name secrets (api_key, authorization,
// access_token, refresh_token, password, secret, and names containing them such as x-api-key or
// client_secret) with Mark. It works on text that is not whole JSON, such as a body cut short or
// a stream of events; a value cut off at the end is removed to the end.
func Fields(text string) string {
	return secretField.ReplaceAllString(text, `$1"`+Mark+`"`)
}

// Redirect is a redirect's target as a log line or an attempt chain may show it: resolved
// against the address that answered (from; nil = as it came), without user info, with the values
// of its query and its fragment replaced by Mark (an address can carry a token or a code there),
// scrubbed like String and cut to a readable length. An address that cannot be read is Mark.
func Redirect(from *url.URL, location string, secrets ...string) string {
	location = strings.TrimSpace(location)
	if location == "" {
		return ""
	}
	u, err := url.Parse(location)
	if err == nil && from != nil {
		u = from.ResolveReference(u)
	}
	if err != nil || u.Opaque != "" {
		return Mark
	}
	u.User = nil
	query, fragment := u.RawQuery, u.Fragment != "" || u.RawFragment != ""
	u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = "", "", "", false
	out := Clip(u.String(), 240, secrets...)
	if query != "" {
		parts := strings.Split(query, "&")
		if len(parts) > 8 {
			parts = append(parts[:8], "…")
		}
		for i, p := range parts {
			switch name, _, ok := strings.Cut(p, "="); {
			case p == "…":
			case ok:
				parts[i] = Clip(name, 40, secrets...) + "=" + Mark
			default:
				parts[i] = Mark // a bare value
			}
		}
		out += "?" + strings.Join(parts, "&")
	}
	if fragment {
		out += "#" + Mark
	}
	return out
}

// Clip is String(s, secrets...) shortened to at most n bytes on a character boundary, a cut
// marked with "…" (after the n bytes): for upstream text that goes into messages and logs.
func Clip(s string, n int, secrets ...string) string {
	s = String(s, secrets...)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
