package traffic

import (
	"bytes"
	"database/sql"
	"strings"
	"unicode/utf8"

	"switchyard/services/redact"
)

// CaptureMargin is how many bytes beyond the kept size the edge captures: a secret that starts
// before the cut is still whole when the runner redacts it.
const CaptureMargin = 4 << 10

// Capture is the start of a request's body and of its answer as the edge saw them, taken only
// when the log keeps bodies. The runner cuts, redacts and truncates it before it is written; the
// request path only copies bytes.
type Capture struct {
	// Request is the first bytes the handler read of the client's body; nil when it read none.
	Request []byte
	// RequestSize is how many bytes the handler read in all.
	RequestSize int64
	// Response is the first bytes written to the client (a stream's first events).
	Response []byte
	// ResponseSize is how many bytes were written in all.
	ResponseSize int64
}

// maxPendingBodies bounds the captured body bytes waiting for the runner (64 MiB): at 256 KiB
// per body and thousands of entries in the buffer they could otherwise take gigabytes.
const maxPendingBodies = 64 << 20

// size is how many captured bytes c holds; 0 for nil.
func (c *Capture) size() int64 {
	if c == nil {
		return 0
	}
	return int64(cap(c.Request) + cap(c.Response))
}

// Body is a body as the request log keeps it.
type Body struct {
	// Text is the redacted body, at most the configured size.
	Text string
	// Stored is false when the log kept no body (bodies off, or none was read).
	Stored bool
	// Truncated says the body was longer than Text.
	Truncated bool
}

// clip turns the captured start of a body (raw, of a body size bytes long) into what the log
// keeps: at most limit bytes, cut on a UTF-8 boundary, with every secret clean removes gone.
// A capture that stopped before the body's end loses its last, possibly partial, token first:
// a key cut in half would no longer look like a key, and half a key must not be kept either.
func clip(raw []byte, size int64, limit int, clean func(string) string) Body {
	cut := size > int64(len(raw))
	if cut {
		raw = raw[:bytes.LastIndexAny(raw, tokenEnds)+1]
	}
	text := clean(strings.ToValidUTF8(string(raw), "\uFFFD"))
	b := Body{Stored: true, Truncated: cut}
	if len(text) > limit {
		end := limit
		for end > 0 && !utf8.RuneStart(text[end]) {
			end--
		}
		text, b.Truncated = text[:end], true
	}
	b.Text = text
	return b
}

// tokenEnds are the bytes no credential contains: JSON's punctuation and white space.
const tokenEnds = " \t\r\n\"\\,:{}[]"

// cleanBody removes secrets from a body: what redact removes (through the service's Redact,
// which knows the connections' credentials) and the values of fields that name secrets.
func (s *Service) cleanBody(text string) string {
	return redact.Fields(s.opt.Redact(text))
}

// bodyColumns are a captured entry's bodies as the request log stores them.
func (s *Service) bodyColumns(c *Capture) (req, resp Body) {
	if c == nil || s.opt.BodyBytes <= 0 {
		return Body{}, Body{}
	}
	if c.Request != nil {
		req = clip(c.Request, c.RequestSize, s.opt.BodyBytes, s.cleanBody)
	}
	return req, clip(c.Response, c.ResponseSize, s.opt.BodyBytes, s.cleanBody)
}

func nullText(b Body) sql.NullString { return sql.NullString{String: b.Text, Valid: b.Stored} }

func bodyOf(text sql.NullString, truncated bool) Body {
	return Body{Text: text.String, Stored: text.Valid, Truncated: truncated}
}
