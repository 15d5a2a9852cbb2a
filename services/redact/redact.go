// Package redact is the one redaction helper of the gateway. Every text that enters from outside
// (an upstream's error body or stream event, a token endpoint's message, a request or answer body
// kept in the request log) passes through it before a client answer, a log line, a state view or
// a stored row can hold it: the credentials named by the caller are removed wherever they appear,
// and so is anything shaped like a provider key or one of the gateway's own client keys.
package redact

import (
	"bytes"
	"regexp"
	"strings"
)

// Mark stands where a secret was.
const Mark = "[redacted]"

// minSecret is the shortest credential removed by value: shorter ones would blank out ordinary
// words.
const minSecret = 4

// keyShaped matches what looks like a credential in free text: OpenAI-style sk-… (Anthropic's
// sk-ant-…, the gateway's own client keys sk-sy-…), Google's AIza…, Groq's gsk_…, xAI's xai-…,
// and bearer tokens.
var keyShaped = regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_\-]{12,}|AIza[0-9A-Za-z_\-]{30,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,})|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*`)

// String removes secrets from text: each of the given credentials wherever it appears (empty and
// very short ones are skipped), and anything shaped like a key. The pattern runs only when a
// cheap substring check finds a key's prefix, so text without one costs a few scans.
func String(text string, secrets ...string) string {
	if text == "" {
		return text
	}
	for _, s := range secrets {
		if len(s) >= minSecret && strings.Contains(text, s) {
			text = strings.ReplaceAll(text, s, Mark)
		}
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
		bytes.Contains(b, []byte("xai-")) || containsFold(b, "bearer")
	for _, s := range secrets {
		if len(s) >= minSecret && bytes.Contains(b, []byte(s)) {
			hit = true
			break
		}
	}
	if !hit {
		return b
	}
	return []byte(String(string(b), secrets...))
}

// mayBeKeyShaped is the cheap check before the pattern: a key's prefix or the word bearer.
func mayBeKeyShaped(text string) bool {
	return strings.Contains(text, "sk-") || strings.Contains(text, "AIza") || strings.Contains(text, "gsk_") ||
		strings.Contains(text, "xai-") || containsFold(text, "bearer")
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
