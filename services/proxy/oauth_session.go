package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchyard/services/catalog"
	"switchyard/services/resilience"
)

// Claude Code's session ids in passthrough. Claude Code names its session in the
// X-Claude-Code-Session-Id header and inside metadata.user_id (the session_id of its JSON, or the
// _session_ part of the older user_…_account_…_session_… form). The rule:
//
//   - a client session is bound to the first account it is sent to, and that account sees the
//     ids as they came, byte for byte;
//   - any other account that serves the same session (after a failover, or while the first one
//     cools) sees in their place an id derived from its own account and the original id (an
//     HMAC under the instance's key, shaped as a UUID): the same id on every request of that
//     session, and never an id another account saw.
//
// Only those bytes change: the header's value and the id inside metadata.user_id; the rest of
// the body stays as the client sent it. Requests without a session id are left alone.
//
// The bindings are resilience.SessionBinds: at most resilience.MaxSessionBinds of them (the
// least recently used goes first), each dropped resilience.SessionBindTTL after the session's
// last request, persisted in the state store so a session keeps its account across a restart. A
// session whose binding was dropped is bound anew to the account that serves it next.

const (
	// sessionHeader is the header in which Claude Code names its session.
	sessionHeader = "X-Claude-Code-Session-Id"
	// userIDPath is where Claude Code's body carries its user id, session id included.
	userIDPath = "metadata.user_id"
	// bindNamespace namespaces the sessions of the binding table (resilience.NewSession).
	bindNamespace = "claude-code"
)

// sessionIDs keeps a passthrough call's session ids to the account they are bound to: on
// another account it puts the account's derived ids in the header and in metadata.user_id. h
// is the call's own header (changed in place); the body is returned, a new slice when changed.
func (e *Engine) sessionIDs(h http.Header, body []byte, conn *catalog.ConnEntry) []byte {
	header := h.Get(sessionHeader)
	var uid gjson.Result
	session := header
	if session == "" {
		if uid = gjson.GetBytes(body, userIDPath); uid.Type != gjson.String {
			return body
		}
		if session = sessionInUserID(uid.Str); session == "" {
			return body
		}
	}
	account := accountKey(conn)
	if e.opt.SessionBinds.Bind(resilience.NewSession(bindNamespace, session), account) == account {
		return body
	}
	if header != "" {
		h.Set(sessionHeader, derivedSessionID(e.sessionKey, account, header))
		uid = gjson.GetBytes(body, userIDPath)
	}
	if uid.Type != gjson.String {
		return body
	}
	inner := sessionInUserID(uid.Str)
	if inner == "" {
		return body
	}
	return withSessionID(body, uid, inner, derivedSessionID(e.sessionKey, account, inner))
}

// sessionInUserID is the session id inside a Claude Code metadata.user_id: the session_id of its
// JSON form, or what follows _session_ in the older user_…_account_…_session_… form.
func sessionInUserID(uid string) string {
	if strings.HasPrefix(uid, "{") {
		if s := gjson.Get(uid, "session_id"); s.Type == gjson.String {
			return s.Str
		}
		return ""
	}
	if i := strings.LastIndex(uid, "_session_"); i >= 0 {
		return uid[i+len("_session_"):]
	}
	return ""
}

// withSessionID puts repl in place of the session id old inside metadata.user_id (uid) of body.
// When old appears as it is in the value's raw bytes (a UUID always does) only those bytes
// change; otherwise the value is written anew with the id replaced.
func withSessionID(body []byte, uid gjson.Result, old, repl string) []byte {
	end := uid.Index + len(uid.Raw)
	if uid.Index > 0 && end <= len(body) && string(body[uid.Index:end]) == uid.Raw && strings.Contains(uid.Raw, old) {
		raw := strings.ReplaceAll(uid.Raw, old, repl)
		out := make([]byte, 0, len(body)-len(uid.Raw)+len(raw))
		out = append(out, body[:uid.Index]...)
		out = append(out, raw...)
		out = append(out, body[end:]...)
		if sessionInUserID(gjson.GetBytes(out, userIDPath).Str) == repl {
			return out
		}
	}
	v := uid.Str
	if i := strings.LastIndex(v, "_session_"); !strings.HasPrefix(v, "{") && i >= 0 {
		v = v[:i+len("_session_")] + repl
	} else if s, err := sjson.Set(v, "session_id", repl); err == nil {
		v = s
	}
	if out, err := sjson.SetBytes(body, userIDPath, v); err == nil {
		return out
	}
	return body
}

// accountKey names the account behind a connection: its account uuid, else the connection.
func accountKey(conn *catalog.ConnEntry) string {
	if conn.OAuth != nil && conn.OAuth.Account.UUID != "" {
		return conn.OAuth.Account.UUID
	}
	return "connection:" + strconv.FormatInt(conn.ID, 10)
}

// derivedSessionID is the session id account sees in place of a session it is not bound to: a
// UUID (version 4 in form) from an HMAC of the account and the original id under key, so it is
// stable, distinct per account, and cannot be traced back to the original without the key.
func derivedSessionID(key []byte, account, session string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(account))
	m.Write([]byte{0})
	m.Write([]byte(session))
	sum := m.Sum(nil)
	sum[6] = sum[6]&0x0f | 0x40
	sum[8] = sum[8]&0x3f | 0x80
	s := hex.EncodeToString(sum[:16])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// newSessionKey is the key of derived session ids when the engine is given none: random, so the
// ids are stable only as long as the process runs.
func newSessionKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}
