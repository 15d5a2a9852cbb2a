package proxy

import (
	"bytes"
	"context"
	"net/http"

	"github.com/tidwall/gjson"

	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/services/proxy/convo"
	"switchyard/services/settings"
)

// Calls on GitHub Copilot accounts (provider type copilot). Copilot is called with the account's
// short-lived Copilot token (services/oauth exchanges and holds it) at the API address that
// token names, and looks for the Copilot Chat extension's headers. It speaks chat completions
// (the provider's upstream format may be set to responses). The client's own headers beyond
// Accept never reach it: the call's headers are the gateway's (upstreamHeader) plus these.

// defaultCopilotAPI is where Copilot calls go when the token answer named no address.
const defaultCopilotAPI = "https://api.githubcopilot.com"

// copilotOutgoing is outgoing for a Copilot account.
func (e *Engine) copilotOutgoing(ctx context.Context, c *call, conn *catalog.ConnEntry) (body []byte, h http.Header, base string, nores *attemptResult) {
	if e.opt.Copilot == nil || e.opt.OAuthSettings == nil {
		return nil, nil, "", copilotNoToken(ctx, conn)
	}
	token, base, err := e.opt.Copilot.CopilotToken(ctx, conn)
	if err != nil {
		return nil, nil, "", copilotNoToken(ctx, conn)
	}
	c.claude.token = token
	h = c.header.Clone()
	copilotHeaders(h, token, e.opt.OAuthSettings.Snapshot().Copilot())
	h.Set("X-Initiator", initiator(c.body, c.dst))
	if hasImages(c.body, c.dst) {
		h.Set("Copilot-Vision-Request", "true")
	}
	if base == "" {
		base = defaultCopilotAPI
	}
	return c.body, h, base, nil
}

// copilotNoToken is the attempt that could not be made for want of a Copilot token: the account's
// GitHub token is dead, it has no Copilot, or the exchange failed (ctx ended: the client left).
func copilotNoToken(ctx context.Context, conn *catalog.ConnEntry) *attemptResult {
	if ctx.Err() != nil {
		return &attemptResult{transport: true, err: clientGone()}
	}
	return &attemptResult{noToken: true, err: fail(errs.Unavailable, "oauth_token_unavailable", "proxy.copilot_token", conn.Label)}
}

// copilotHeaders puts the Copilot token and the Copilot Chat extension's identity on a call.
func copilotHeaders(h http.Header, token string, cfg settings.CopilotOAuth) {
	h.Set("Authorization", "Bearer "+token)
	h.Set("Editor-Version", cfg.EditorVersion)
	h.Set("Editor-Plugin-Version", settings.CopilotPluginVersion)
	h.Set("Copilot-Integration-Id", cfg.IntegrationID)
	h.Set("User-Agent", settings.CopilotUserAgent)
	h.Set("Openai-Intent", "conversation-panel")
	h.Set("X-GitHub-Api-Version", settings.GitHubAPIVersion)
}

// initiator is X-Initiator: "agent" when the request follows up on a tool's result (the agent
// loop continues on its own), "user" when a person wrote the last message. Copilot counts
// premium requests by it. The body is read through a view (gjson.GetBytes would copy the whole
// conversation); nothing read outlives the call.
func initiator(body []byte, f Format) string {
	if f == FormatResponses {
		items := gjson.Get(convo.View(body), "input").Array() // a plain string input is the user's
		if n := len(items); n > 0 {
			if t := items[n-1].Get("type").String(); t == "function_call_output" || t == "custom_tool_call_output" {
				return "agent"
			}
		}
		return "user"
	}
	items := gjson.Get(convo.View(body), "messages").Array()
	if n := len(items); n > 0 && items[n-1].Get("role").String() == "tool" {
		return "agent"
	}
	return "user"
}

var (
	imageURLKey   = []byte(`"image_url"`)
	inputImageKey = []byte(`"input_image"`)
)

// hasImages reports whether the request carries an image part (Copilot wants
// Copilot-Vision-Request then). The substring check spares the parse for text-only requests.
func hasImages(body []byte, f Format) bool {
	key, list, image := imageURLKey, "messages", "image_url"
	if f == FormatResponses {
		key, list, image = inputImageKey, "input", "input_image"
	}
	if !bytes.Contains(body, key) {
		return false
	}
	for _, m := range gjson.Get(convo.View(body), list).Array() {
		for _, part := range m.Get("content").Array() {
			if part.Get("type").String() == image {
				return true
			}
		}
	}
	return false
}

// attemptCopilot is attemptOn for a Copilot account: after a 401 the token is exchanged once
// more (unless another request already did) and the call made once again.
func (e *Engine) attemptCopilot(ctx context.Context, cancel context.CancelFunc, c *call, conn *catalog.ConnEntry) attemptResult {
	res := e.attempt(ctx, cancel, c, conn)
	if e.opt.Copilot != nil && e.renewed(c, conn, res, func() error {
		_, _, err := e.opt.Copilot.CopilotRejected(ctx, conn, c.claude.token)
		return err
	}) {
		res = e.attempt(ctx, cancel, c, conn)
	}
	return res
}
