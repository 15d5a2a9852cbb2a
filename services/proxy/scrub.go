package proxy

import (
	"net/http"

	"switchyard/services/catalog"
	"switchyard/services/redact"
)

// Secrets of an upstream call are removed where upstream text enters the engine (an error body or
// event may echo the credential it was sent), so no client answer, log line, state view or
// request log ever holds one. The removal itself is services/redact; this file names what to
// remove.

// secrets lists what an attempt on conn must never let out: the connection's key and, for an
// OAuth connection, the tokens the registry holds, the token the attempt carried and the
// account's live access and refresh tokens (a refresh may have rotated them since the registry
// was built), and the account's e-mail address, which only operators see. It is called on the
// paths that scrub, never for a clean answer.
func (e *Engine) secrets(c *call, conn *catalog.ConnEntry) []string {
	if conn == nil {
		return nil
	}
	out := []string{conn.APIKey.Reveal()}
	if conn.OAuth != nil {
		out = append(out, conn.OAuth.AccessToken.Reveal(), conn.OAuth.RefreshToken.Reveal(), conn.OAuth.Account.Email)
	}
	if e.subscription(conn) {
		if c != nil {
			out = append(out, c.claude.token)
		}
		out = append(out, e.opt.Accounts.Secrets(conn.ID)...)
	}
	return out
}

// scrub removes the attempt's secrets and anything key-shaped from upstream text.
func (e *Engine) scrub(text string, c *call, conn *catalog.ConnEntry) string {
	return redact.String(text, e.secrets(c, conn)...)
}

// scrubBytes is scrub for a body; it returns b itself when nothing was removed.
func (e *Engine) scrubBytes(b []byte, c *call, conn *catalog.ConnEntry) []byte {
	return redact.Bytes(b, e.secrets(c, conn)...)
}

// scrubLocation is the target of a redirect the upstream answered, as the log, the attempt chain
// and the client may see it: resolved, without user info or query values, without secrets.
func (e *Engine) scrubLocation(req *http.Request, resp *http.Response, c *call, conn *catalog.ConnEntry) string {
	return redact.Redirect(req.URL, resp.Header.Get("Location"), e.secrets(c, conn)...)
}

var (
	eventError      = []byte("event: error")
	eventErrorShort = []byte("event:error")
)

// errorEvent is the cheap check a relayed stream event passes before it is scrubbed: an error
// object ("error" as a key or a type) or an SSE error event. Deltas carry neither, so they pay
// a few substring scans and no pattern.
func errorEvent(ev []byte) bool {
	// Most events have no "error" at all: one scan tells, before the three exact ones.
	return containsMark(ev, errorWord) &&
		(containsMark(ev, errorKey) || containsMark(ev, eventError) || containsMark(ev, eventErrorShort))
}
