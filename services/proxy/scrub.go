package proxy

import (
	"regexp"
	"strings"

	"switchyard/services/catalog"
)

// keyShaped matches what looks like a provider credential in free text: OpenAI-style sk-… (and
// Anthropic's sk-ant-…), Google's AIza…, Groq's gsk_…, xAI's xai-…, and bearer tokens.
var keyShaped = regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_\-]{12,}|AIza[0-9A-Za-z_\-]{30,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,})|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*`)

// scrub removes secrets from text that came from an upstream (an error body may echo the key it
// was sent): the connection's own credential wherever it appears, and anything shaped like a
// provider key. It runs where upstream text enters the engine, so no client answer, log line,
// state view or request log ever holds the secret.
func scrub(text string, conn *catalog.ConnEntry) string {
	if text == "" {
		return text
	}
	if conn != nil {
		if secret := conn.APIKey.Reveal(); len(secret) >= 4 {
			text = strings.ReplaceAll(text, secret, "[redacted]")
		}
	}
	if strings.Contains(text, "sk-") || strings.Contains(text, "AIza") || strings.Contains(text, "gsk_") ||
		strings.Contains(text, "xai-") || strings.Contains(strings.ToLower(text), "bearer") {
		text = keyShaped.ReplaceAllString(text, "[redacted]")
	}
	return text
}

// scrubBytes is scrub for a body.
func scrubBytes(b []byte, conn *catalog.ConnEntry) []byte {
	s := scrub(string(b), conn)
	if len(s) == len(b) && s == string(b) {
		return b
	}
	return []byte(s)
}
