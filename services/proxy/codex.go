package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"switchyard/services/catalog"
	"switchyard/services/proxy/convo"
	"switchyard/services/resilience"
)

// Calls on ChatGPT/Codex accounts (provider type codex). The Codex backend
// (codex.api_base_url, https://chatgpt.com/backend-api/codex) serves one endpoint, /responses,
// and takes requests the way the Codex CLI sends them:
//
//   - Authorization: Bearer with the account's access token, chatgpt-account-id with its
//     ChatGPT account, OpenAI-Beta: responses=experimental, originator: codex_cli_rs, and the
//     client's session in session_id (the session's first account sees it as it came, any other
//     account an id derived from its own, as for Claude Code's sessions in oauth_session.go);
//   - a Responses body with stream true, store false and instructions (a string, "" when the
//     client gave none); the parameters it refuses with 400 ("Unsupported parameter") are left
//     out and named in the request's dropped fields.
//
// It answers with a stream only, so a client that asked for no stream gets the stream read whole
// and written as one answer in its own format (codexAnswer). Every answer, errors included,
// carries the account's 5-hour and weekly usage in x-codex-* headers, which are stored
// (resilience.ParseCodexUsage); its usage wall is a 429 usage_limit_reached with the window's
// reset, on which the window is stored full and the connection rests exactly until that reset
// (classified as a used-up usage window, resilience.Outcome.UntilReset).

// codexBindNamespace namespaces Codex sessions in the session binding table.
const codexBindNamespace = "codex"

// codexOriginator is what the Codex CLI names itself as in its originator header.
const codexOriginator = "codex_cli_rs"

// codexRefused are the Responses request fields the Codex backend refuses. It sets the output
// limit and the sampling itself (the Codex CLI sends none of these) and keeps nothing
// (truncation, context_management and prompt_cache_retention are about stored state).
var codexRefused = []string{
	"max_output_tokens", "max_completion_tokens", "max_tokens", "temperature", "top_p", "truncation",
	"user", "context_management", "prompt_cache_retention", "safety_identifier", "stream_options",
}

// codexAccount reports whether conn is a ChatGPT account the engine serves.
func (e *Engine) codexAccount(conn *catalog.ConnEntry) bool {
	return e.subscription(conn) && conn.ProviderType == catalog.TypeCodex
}

// codexOutgoing is outgoing for a ChatGPT account.
func (e *Engine) codexOutgoing(ctx context.Context, c *call, conn *catalog.ConnEntry) (body []byte, h http.Header, base string, nores *attemptResult) {
	if !c.stream && c.req == nil {
		// The answer is written from the stream in the client's format, which echoes its request:
		// read it now, before anything is sent.
		r, err := codecs[c.src].readRequest(c.claude.raw)
		if err != nil {
			bad := errInvalid("invalid_request", "proxy.body_translate", err.Error())
			return nil, nil, "", &attemptResult{status: http.StatusBadRequest, err: bad}
		}
		c.req = r
	}
	token, err := e.opt.Accounts.Token(ctx, conn)
	if err != nil {
		return nil, nil, "", noToken(ctx, conn)
	}
	c.claude.token = token
	// Made the backend's once per call; later attempts find nothing left to change.
	var dropped []string
	c.body, dropped = codexBody(c.body)
	for _, name := range dropped {
		if !slices.Contains(c.trace.Dropped, name) {
			c.trace.Dropped = append(c.trace.Dropped, name)
		}
		e.opt.Observer.Dropped(c.t.provider.Name, name)
	}
	h = c.header.Clone()
	h.Set("Authorization", "Bearer "+token)
	if conn.OAuth != nil && conn.OAuth.Account.UUID != "" {
		h.Set("Chatgpt-Account-Id", conn.OAuth.Account.UUID)
	}
	h.Set("OpenAI-Beta", "responses=experimental")
	h.Set("Originator", codexOriginator)
	h.Set("Accept", "text/event-stream")
	h.Set("Content-Type", "application/json")
	if s := e.codexSession(c, conn); s != "" {
		h.Set("Session_id", s)
	}
	base = c.t.provider.BaseURL
	if base == "" {
		base = e.opt.OAuthSettings.Snapshot().Codex().APIBaseURL
	}
	return c.body, h, strings.TrimRight(base, "/"), nil
}

// codexSession is the session id the account sees: the client's (the Codex CLI's session_id,
// else X-Session-Id) on the account the session is bound to, an id derived from the account's
// own on any other. "" when the client named no session.
func (e *Engine) codexSession(c *call, conn *catalog.ConnEntry) string {
	s := strings.TrimSpace(c.claude.client.Get("Session_id"))
	if s == "" {
		s = strings.TrimSpace(c.claude.client.Get(SessionIDHeader))
	}
	if s == "" || len(s) > 256 {
		return ""
	}
	account := accountKey(conn)
	if e.opt.SessionBinds.Bind(resilience.NewSession(codexBindNamespace, s), account) == account {
		return s
	}
	return derivedSessionID(e.sessionKey, account, s)
}

// codexBody is a Responses body as the Codex backend takes it: stream true, store false,
// instructions a string, input a list, without the fields it refuses (named in dropped). A body
// that is so already (the Codex CLI's own) is returned as it is; any other is written anew in
// one pass, its members copied as they came.
func codexBody(body []byte) (out []byte, dropped []string) {
	doc := gjson.ParseBytes(body)
	if !doc.IsObject() {
		return body, nil // not a request the backend could take either way: it says why
	}
	stream, store, instructions, change := false, false, false, false
	doc.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "stream":
			stream = v.Type == gjson.True
		case "store":
			store = v.Type == gjson.False
		case "instructions":
			instructions = v.Type != gjson.Null
		case "input":
			change = change || v.Type == gjson.String
		default:
			change = change || slices.Contains(codexRefused, k.Str)
		}
		return true
	})
	if !change && stream && store && instructions {
		return body, nil
	}
	out = make([]byte, 0, len(body)+64)
	out = append(out, '{')
	doc.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "stream", k.Str == "store":
			return true
		case k.Str == "instructions" && v.Type == gjson.Null:
			return true
		case slices.Contains(codexRefused, k.Str):
			if !slices.Contains(dropped, k.Str) {
				dropped = append(dropped, k.Str)
			}
			return true
		}
		out = append(out, k.Raw...)
		out = append(out, ':')
		if k.Str == "input" && v.Type == gjson.String {
			// The backend takes the conversation as a list: a plain prompt is the user's message.
			out = append(out, `[{"type":"message","role":"user","content":[{"type":"input_text","text":`...)
			out = append(out, v.Raw...)
			out = append(out, `}]}]`...)
		} else {
			out = append(out, v.Raw...)
		}
		out = append(out, ',')
		return true
	})
	if !instructions {
		out = append(out, `"instructions":"",`...)
	}
	out = append(out, `"stream":true,"store":false}`...)
	return out, dropped
}

// attemptCodex is attemptOn for a ChatGPT account: the call, once more with a refreshed token
// after a 401, and the account's usage read from every answer.
func (e *Engine) attemptCodex(ctx context.Context, cancel context.CancelFunc, c *call, conn *catalog.ConnEntry) attemptResult {
	res := e.attempt(ctx, cancel, c, conn)
	e.codexUsage(c, conn, &res)
	if e.renewed(c, conn, res, func() error {
		_, err := e.opt.Accounts.TokenRejected(ctx, conn, c.claude.token)
		return err
	}) {
		res = e.attempt(ctx, cancel, c, conn)
		e.codexUsage(c, conn, &res)
	}
	return res
}

// renewed reports whether an account's attempt that the upstream refused with 401 is made once
// more: renew got the account a new token. The refused call then ends as a step of the request's
// chain, and the next is a retry on the same connection.
func (e *Engine) renewed(c *call, conn *catalog.ConnEntry, res attemptResult, renew func() error) bool {
	if res.status != http.StatusUnauthorized || res.noToken || res.redirect || renew() != nil {
		return false
	}
	e.opt.Log.Info("upstream refused the account's token; trying once more with a new one",
		"provider", c.t.provider.Name, "connection_id", conn.ID)
	e.endStep(c, res, "token_rejected")
	c.trace.attempt(conn, "retry", e.opt.Clock.Now())
	return true
}

// codexUsage stores the usage windows an answer reported of its account; on the usage wall the
// window that was hit is stored full until the reset the answer announces, so the account is
// left out (atWall) and combos see it without headroom until then.
func (e *Engine) codexUsage(c *call, conn *catalog.ConnEntry, res *attemptResult) {
	if e.opt.Usage == nil || res.header == nil {
		return
	}
	now := e.opt.Clock.Now()
	five, seven := resilience.ParseCodexUsage(res.header, now)
	if res.err != nil && len(res.errBody) > 0 {
		if l, ok := resilience.ParseCodexLimit(res.errBody, now); ok {
			five, seven = l.Full(five, seven, now)
			e.opt.Log.Info("chatgpt account reached its usage limit", "provider", c.t.provider.Name, "connection_id", conn.ID,
				"limit", l.Type, "plan", l.Plan, "resets_at", l.ResetsAt)
		}
	}
	e.opt.Usage.Observed(conn.ID, five, seven)
}

// codexAnswer reads the backend's stream whole for a client that asked for no stream, and writes
// it as one answer in the client's format, with the usage the stream reported. Nothing reached
// the client yet, so an error event, a stream cut short or anything but a stream is a failed
// attempt like any other: classified, and another connection or target may serve the request.
func (e *Engine) codexAnswer(c *call, conn *catalog.ConnEntry, resp *http.Response) attemptResult {
	p := c.t.provider
	b, buf, failed, ok := e.readAnswer(p.Name, resp)
	if !ok {
		return failed
	}
	// The events' texts, and the error bodies below, point into b: its buffer goes back to the
	// pool only once the answer was written in the client's format (a copy), else it is left
	// to the collector.
	if !isEventStream(resp.Header) {
		if _, _, _, embedded, ok := resilience.ExtractError(b); ok {
			return hiddenError(p.Name, resp.Header, embedded, e.scrubBytes(b, c, conn))
		}
		return protocolFailure(p.Name, resp.Header, e.scrubBytes(b, c, conn), "proxy.protocol_not_stream")
	}
	evs := eventBufs.Get().(*[]convo.Event)
	defer func() {
		clear(*evs)
		*evs = (*evs)[:0]
		eventBufs.Put(evs)
	}()
	// The events' texts point into b, which stays as it is until the answer is written.
	r := codecs[FormatResponses].streamReader()
	var u convo.Usage
	ended := false
	for rest := b; len(rest) > 0 && !ended; {
		var ev []byte
		ev, rest = nextEvent(rest)
		if containsMark(ev, errorWord) {
			if msg, embedded, ok := streamError(ev); ok {
				return hiddenError(p.Name, resp.Header, embedded, []byte(e.scrub(msg, c, conn)))
			}
		}
		n := len(*evs)
		*evs = r.Read(*evs, ev)
		for i := n; i < len(*evs); i++ {
			switch x := &(*evs)[i]; x.Kind {
			case convo.EvError:
				return hiddenError(p.Name, resp.Header, 0, e.scrubBytes(codexErrorBody(ev, x.Err), c, conn))
			case convo.EvUsage:
				u.Merge(x.Usage)
			case convo.EvEnd:
				ended = true
			}
		}
	}
	if !ended {
		return transportFailure(p.Name, io.ErrUnexpectedEOF) // cut before its terminal event
	}
	var seen usageSeen
	seen.take(u)
	obuf := answerBufs.Get().(*[]byte)
	out, err := codecs[c.src].appendAnswer((*obuf)[:0], c.req, *evs, c.start.Unix())
	if err != nil {
		releaseAnswer(obuf)
		return protocolFailure(p.Name, resp.Header, nil, "proxy.protocol_not_json")
	}
	*obuf = out
	clear(*evs) // they point into b, which goes back now
	*evs = (*evs)[:0]
	releaseAnswer(buf)
	return attemptResult{resp: resp, body: out, pooled: obuf, status: resp.StatusCode, header: resp.Header, translated: true, usage: seen}
}

// nextEvent splits the first SSE event (through its blank line) off b.
func nextEvent(b []byte) (ev, rest []byte) {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		j := i + 1
		if j < len(b) && b[j] == '\r' {
			j++
		}
		if j < len(b) && b[j] == '\n' {
			return b[:j+1], b[j+1:]
		}
	}
	return b, nil
}

// codexErrorBody is an error the stream reported (response.failed) as the error object the
// classifier and the client's message read: the event's own object, with every field it has (a
// usage wall's reset included), else what the stream reader made of it.
func codexErrorBody(ev []byte, e *convo.Error) []byte {
	_, data := convo.ParseEvent(ev)
	for _, path := range []string{"response.error", "error"} {
		if v := gjson.GetBytes(data, path); v.IsObject() {
			return append(append([]byte(`{"error":`), v.Raw...), '}')
		}
	}
	type object struct {
		Type    string `json:"type,omitempty"`
		Code    string `json:"code,omitempty"`
		Message string `json:"message"`
	}
	var o object
	if e != nil {
		o = object{Type: e.Type, Code: e.Code, Message: e.Message}
	}
	b, _ := json.Marshal(struct {
		Error object `json:"error"`
	}{o})
	return b
}
