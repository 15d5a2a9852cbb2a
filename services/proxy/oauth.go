package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// Calls with Claude subscription tokens (OAuth connections). Anthropic expects them to look like
// Claude Code's: Authorization: Bearer (no x-api-key), anthropic-beta with claude-code-20250219
// and oauth-2025-04-20, and for other clients Claude Code's identity. Two modes, per request:
//
//   - passthrough, when the client is Claude Code itself (User-Agent claude-cli/…) on the
//     messages surface: its headers and body go upstream byte for byte, only the credential is
//     swapped, the betas are added when missing and context-1m-* is dropped on a plan without
//     the 1M context. Rewriting Claude Code's body would break its own exchanges with
//     Anthropic. Its session ids reach only the account its session is bound to; other
//     accounts see ids of their own (oauth_session.go).
//   - identity, for every other client (other SDKs, translated chat completions): the system
//     prompt starts with Claude Code's identity line, the User-Agent is Claude Code's (version
//     from the settings) with x-app: cli, and metadata.user_id is the account's own, stable
//     one — never the client's, so one client's session ids never reach another account.

// TokenSource gives an OAuth connection its current bearer token, and names the account's live
// tokens so that upstream text can be scrubbed of them.
type TokenSource interface {
	Token(ctx context.Context, conn *catalog.ConnEntry) (string, error)
	// Secrets are the account's live access and refresh tokens (nil for other connections).
	Secrets(connID int64) []string
}

// Accounts is what the engine needs of Claude subscription accounts (services/oauth).
type Accounts interface {
	TokenSource
	// TokenRejected is told that the upstream answered 401 to token; it returns the token to try
	// once more with (refreshed, or newer than the rejected one).
	TokenRejected(ctx context.Context, conn *catalog.ConnEntry, rejected string) (string, error)
	// PollSoon asks for the account's usage to be read now; it never blocks.
	PollSoon(connID int64)
	// LimitReset checks and claims the weekly reset of the session limit.
	LimitReset(ctx context.Context, conn *catalog.ConnEntry) resilience.ResetOutcome
}

// OAuthSettingsSource gives the current OAuth client settings.
type OAuthSettingsSource interface {
	Snapshot() *settings.OAuthSnapshot
}

// ClaudeIdentity is the line Anthropic expects first in the system prompt of a subscription
// token's request (Opus and Sonnet refuse others).
const ClaudeIdentity = "You are Claude Code, Anthropic's official CLI for Claude."

// claudeCall is what a request needs for calls on Claude subscription accounts.
type claudeCall struct {
	raw    []byte      // the client's body as it came
	client http.Header // the client's headers as they came
	slow   bool        // the next attempt carries anthropic-usage-limit: slow
	token  string      // the bearer token the last attempt carried
}

// subscription reports whether a connection is a Claude subscription account the engine can
// serve.
func (e *Engine) subscription(conn *catalog.ConnEntry) bool {
	return conn.AuthType == catalog.AuthOAuth && e.opt.Accounts != nil && e.opt.OAuthSettings != nil
}

// claudeAccount reports whether conn is a Claude subscription account (the lane, the limit
// reset, Claude Code's identity): an account on a provider that is not codex or copilot.
func (e *Engine) claudeAccount(conn *catalog.ConnEntry) bool {
	return e.subscription(conn) && !catalog.AccountsOnly(conn.ProviderType)
}

// CopilotTokens gives a GitHub Copilot account its short-lived Copilot token and the API base
// address that token names.
type CopilotTokens interface {
	CopilotToken(ctx context.Context, conn *catalog.ConnEntry) (token, apiBase string, err error)
	// CopilotRejected is told that Copilot answered 401 to rejected; it returns the token to try
	// once more with.
	CopilotRejected(ctx context.Context, conn *catalog.ConnEntry, rejected string) (token, apiBase string, err error)
}

// outgoing is the body, headers and base address ("" = the provider's) of one upstream call on
// conn. For an OAuth connection the token comes from the account holder (waiting, at most, for
// its refresh in flight); when none can be had the attempt ends without a call (nores).
func (e *Engine) outgoing(ctx context.Context, c *call, conn *catalog.ConnEntry) (body []byte, h http.Header, base string, nores *attemptResult) {
	switch {
	case !e.subscription(conn):
		return c.body, withAuth(c.header, c.t.provider, conn), "", nil
	case conn.ProviderType == catalog.TypeCodex:
		return e.codexOutgoing(ctx, c, conn)
	case conn.ProviderType == catalog.TypeCopilot:
		return e.copilotOutgoing(ctx, c, conn)
	}
	body, h, nores = e.claudeOutgoing(ctx, c, conn)
	return body, h, "", nores
}

// noToken is the attempt that could not be made for want of an account's token (ctx ended: the
// client left).
func noToken(ctx context.Context, conn *catalog.ConnEntry) *attemptResult {
	if ctx.Err() != nil {
		return &attemptResult{transport: true, err: clientGone()}
	}
	return &attemptResult{noToken: true, err: fail(errs.Unavailable, "oauth_token_unavailable", "proxy.oauth_token", conn.Label)}
}

// claudeOutgoing is outgoing for a Claude subscription account.
func (e *Engine) claudeOutgoing(ctx context.Context, c *call, conn *catalog.ConnEntry) (body []byte, h http.Header, nores *attemptResult) {
	token, err := e.opt.Accounts.Token(ctx, conn)
	if err != nil {
		return nil, nil, noToken(ctx, conn)
	}
	c.claude.token = token
	cfg := e.opt.OAuthSettings.Snapshot().Claude()
	if claudeCodeClient(c) {
		body, h = c.body, passthroughHeader(c.claude.client)
		if gjson.GetBytes(c.claude.raw, "model").String() == c.t.model {
			body = c.claude.raw // nothing to change: the client's bytes as they came
		}
		if lacksLongContext(conn) {
			dropBetas(h, "context-1m-")
		}
		addMissingBetas(h, cfg.Betas)
		body = e.sessionIDs(h, body, conn)
	} else {
		body = identityBody(c.body, conn, !c.countTokens)
		h = c.header.Clone()
		h.Set("User-Agent", "claude-cli/"+cfg.CLIVersion+" (external, cli)")
		h.Set("x-app", "cli")
		h.Set("anthropic-beta", mergeBetas(cfg.Betas, h.Values("anthropic-beta"), !lacksLongContext(conn)))
	}
	h.Del("x-api-key")
	h.Set("Authorization", "Bearer "+token)
	if h.Get("anthropic-version") == "" {
		h.Set("anthropic-version", anthropicVersion)
	}
	if c.claude.slow {
		h.Set("anthropic-usage-limit", "slow")
	}
	return body, h, nil
}

// claudeCodeClient reports whether the request is Claude Code's own on the messages surface.
func claudeCodeClient(c *call) bool {
	return c.src == FormatMessages && c.dst == FormatMessages && strings.HasPrefix(c.claude.client.Get("User-Agent"), "claude-cli/")
}

// notForwarded are the client headers a passthrough call never carries: the client's
// credentials, hop-by-hop and transport headers, and the gateway's own session headers.
var notForwarded = map[string]bool{
	"Authorization": true, "X-Api-Key": true, "Host": true, "Content-Length": true, "Connection": true,
	"Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authorization": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Accept-Encoding": true, "Cookie": true, "Forwarded": true,
	"X-Real-Ip": true, "X-Session-Id": true, "X-Request-Id": true,
}

// passthroughHeader is the client's headers as they came, less what must not be forwarded.
func passthroughHeader(in http.Header) http.Header {
	h := make(http.Header, len(in))
	for k, v := range in {
		ck := http.CanonicalHeaderKey(k)
		if notForwarded[ck] || strings.HasPrefix(ck, "X-Switchyard-") || strings.HasPrefix(ck, "X-Forwarded-") {
			continue
		}
		if ck == "Idempotency-Key" && !ValidIdempotencyKey(in.Get(k)) {
			continue
		}
		h[ck] = append([]string(nil), v...)
	}
	return h
}

// mergeBetas is the anthropic-beta value of an identity call: ours, then the client's own, each
// once, without context-1m-* unless the account's plan has the 1M context.
func mergeBetas(ours []string, client []string, long bool) string {
	var out []string
	seen := map[string]bool{}
	add := func(b string) {
		b = strings.TrimSpace(b)
		if b == "" || seen[b] || !long && strings.HasPrefix(b, "context-1m-") {
			return
		}
		seen[b] = true
		out = append(out, b)
	}
	for _, b := range ours {
		add(b)
	}
	for _, v := range client {
		for b := range strings.SplitSeq(v, ",") {
			add(b)
		}
	}
	return strings.Join(out, ",")
}

// addMissingBetas adds to the client's anthropic-beta the betas of ours it lacks, at its end,
// and leaves it exactly as it came when it has them all.
func addMissingBetas(h http.Header, ours []string) {
	have := map[string]bool{}
	vals := h.Values("anthropic-beta")
	for _, v := range vals {
		for b := range strings.SplitSeq(v, ",") {
			have[strings.TrimSpace(b)] = true
		}
	}
	var missing []string
	for _, b := range ours {
		if !have[b] {
			missing = append(missing, b)
		}
	}
	switch {
	case len(missing) == 0:
	case len(vals) == 0:
		h.Set("anthropic-beta", strings.Join(missing, ","))
	default:
		vals = append([]string(nil), vals...)
		vals[len(vals)-1] += "," + strings.Join(missing, ",")
		h["Anthropic-Beta"] = vals
	}
}

// dropBetas removes from anthropic-beta the betas that start with prefix; a value without any
// stays exactly as it came, and the header goes when nothing is left.
func dropBetas(h http.Header, prefix string) {
	vals := h.Values("anthropic-beta")
	var out []string
	changed := false
	for _, v := range vals {
		if !strings.Contains(v, prefix) {
			out = append(out, v)
			continue
		}
		changed = true
		var keep []string
		for b := range strings.SplitSeq(v, ",") {
			if !strings.HasPrefix(strings.TrimSpace(b), prefix) {
				keep = append(keep, b)
			}
		}
		if v := strings.TrimSpace(strings.Join(keep, ",")); v != "" {
			out = append(out, v)
		}
	}
	switch {
	case !changed:
	case len(out) == 0:
		h.Del("anthropic-beta")
	default:
		h["Anthropic-Beta"] = out
	}
}

// longContext reports whether the account's plan has the 1M context window (Max, Team and
// Enterprise); a request with the context-1m beta fails with 400 on the others. It is false for
// setup tokens and accounts of unknown plan, which lacksLongContext tells apart.
func longContext(conn *catalog.ConnEntry) bool {
	if conn.OAuth == nil {
		return false
	}
	plan := strings.ToLower(conn.OAuth.Account.Plan)
	return strings.Contains(plan, "max") || strings.Contains(plan, "team") || strings.Contains(plan, "enterprise")
}

// lacksLongContext reports whether the account's plan is known and has no 1M context window.
// Both modes drop the context-1m beta only then: with a setup token or an unknown plan, the
// client's own choice stands (a Max user on a setup token keeps the 1M window).
func lacksLongContext(conn *catalog.ConnEntry) bool {
	return conn.OAuth != nil && conn.OAuth.Account.Plan != "" && !longContext(conn)
}

// identityBody puts Claude Code's identity on a messages body: the identity line as the system
// prompt's first block and, with metadata, the account's own metadata.user_id in place of the
// client's metadata.
func identityBody(body []byte, conn *catalog.ConnEntry, metadata bool) []byte {
	type textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	idBlock := textBlock{Type: "text", Text: ClaudeIdentity}
	var system []any
	switch sys := gjson.GetBytes(body, "system"); {
	case !sys.Exists() || sys.Type == gjson.Null:
		system = []any{idBlock}
	case sys.Type == gjson.String:
		system = []any{idBlock}
		if sys.String() != ClaudeIdentity && sys.String() != "" {
			system = append(system, textBlock{Type: "text", Text: sys.String()})
		}
	case sys.IsArray():
		if first := sys.Get("0"); first.Get("type").String() == "text" && first.Get("text").String() == ClaudeIdentity {
			system = nil // already first
		} else {
			system = []any{idBlock}
			for _, b := range sys.Array() {
				system = append(system, json.RawMessage(b.Raw))
			}
		}
	}
	out := body
	if system != nil {
		raw, _ := json.Marshal(system)
		if b, err := sjson.SetRawBytes(out, "system", raw); err == nil {
			out = b
		}
	}
	if metadata {
		raw, _ := json.Marshal(map[string]string{"user_id": accountUserID(conn)})
		if b, err := sjson.SetRawBytes(out, "metadata", raw); err == nil {
			out = b
		}
	}
	return out
}

// accountUserID is the account's stable metadata.user_id, shaped like Claude Code's (a JSON
// string of device, account and session ids), derived from the account alone.
func accountUserID(conn *catalog.ConnEntry) string {
	seed := fmt.Sprintf("connection:%d", conn.ID)
	account := ""
	if conn.OAuth != nil && conn.OAuth.Account.UUID != "" {
		seed, account = "account:"+conn.OAuth.Account.UUID, conn.OAuth.Account.UUID
	}
	device := sha256.Sum256([]byte("switchyard device " + seed))
	session := sha256.Sum256([]byte("switchyard session " + seed))
	s := hex.EncodeToString(session[:16])
	id, _ := json.Marshal(map[string]string{"device_id": hex.EncodeToString(device[:]), "account_uuid": account,
		"session_id": s[0:8] + "-" + s[8:12] + "-4" + s[13:16] + "-a" + s[17:20] + "-" + s[20:32]})
	return string(id)
}

// authorize puts a connection's credential on a request to the upstream's account-less
// endpoints (the model list): an API key as setAuth does, an OAuth token as Bearer with the
// OAuth beta. It returns the token it put on ("" for an API key).
func authorize(ctx context.Context, h http.Header, p *catalog.ProviderEntry, c *catalog.ConnEntry, tokens TokenSource) (string, error) {
	if c.AuthType != catalog.AuthOAuth || tokens == nil {
		setAuth(h, p, c)
		return "", nil
	}
	token, err := tokens.Token(ctx, c)
	if err != nil {
		return "", err
	}
	h.Set("Authorization", "Bearer "+token)
	h.Set("anthropic-beta", "oauth-2025-04-20")
	if h.Get("anthropic-version") == "" {
		h.Set("anthropic-version", anthropicVersion)
	}
	return token, nil
}

// fetchSecrets lists what a model list call on c must never let out: the connection's key, the
// registry's tokens of an OAuth connection, the token the call carried and, when the token
// source holds the account, its live tokens.
func fetchSecrets(c *catalog.ConnEntry, token string, tokens TokenSource) []string {
	out := []string{c.APIKey.Reveal(), token}
	if c.OAuth != nil {
		out = append(out, c.OAuth.AccessToken.Reveal(), c.OAuth.RefreshToken.Reveal())
	}
	if tokens != nil && c.AuthType == catalog.AuthOAuth {
		out = append(out, tokens.Secrets(c.ID)...)
	}
	return out
}

// tokenFailure is an attempt that could not be made for want of a token: the request moves to
// the next connection; the connection is not cooled (the token holder keeps its own account of
// refresh failures and expires the account when its refresh token is dead).
func tokenFailure(res attemptResult) failure {
	return failure{err: res.err, outcome: resilience.Outcome{Reason: resilience.ReasonAuthError, Scope: resilience.ScopeNone,
		Failover: true, Message: res.err.Msg.String()}}
}
