package proxy

import (
	"context"
	"net/http"

	"switchyard/services/catalog"
)

// Calls on ChatGPT/Codex accounts (provider type codex).

// codexOutgoing is outgoing for a ChatGPT account.
func (e *Engine) codexOutgoing(ctx context.Context, c *call, conn *catalog.ConnEntry) (body []byte, h http.Header, base string, nores *attemptResult) {
	token, err := e.opt.Accounts.Token(ctx, conn)
	if err != nil {
		return nil, nil, "", noToken(ctx, conn)
	}
	c.claude.token = token
	h = c.header.Clone()
	h.Set("Authorization", "Bearer "+token)
	return c.body, h, "", nil
}

// attemptCodex is attemptOn for a ChatGPT account.
func (e *Engine) attemptCodex(ctx context.Context, cancel context.CancelFunc, c *call, conn *catalog.ConnEntry) attemptResult {
	return e.attempt(ctx, cancel, c, conn)
}
