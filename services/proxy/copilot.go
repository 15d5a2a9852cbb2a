package proxy

import (
	"context"
	"net/http"

	"switchyard/services/catalog"
)

// Calls on GitHub Copilot accounts (provider type copilot).

// copilotOutgoing is outgoing for a Copilot account.
func (e *Engine) copilotOutgoing(ctx context.Context, c *call, conn *catalog.ConnEntry) (body []byte, h http.Header, base string, nores *attemptResult) {
	if e.opt.Copilot == nil {
		return nil, nil, "", noToken(ctx, conn)
	}
	token, base, err := e.opt.Copilot.CopilotToken(ctx, conn)
	if err != nil {
		return nil, nil, "", noToken(ctx, conn)
	}
	c.claude.token = token
	h = c.header.Clone()
	h.Set("Authorization", "Bearer "+token)
	return c.body, h, base, nil
}

// attemptCopilot is attemptOn for a Copilot account.
func (e *Engine) attemptCopilot(ctx context.Context, cancel context.CancelFunc, c *call, conn *catalog.ConnEntry) attemptResult {
	return e.attempt(ctx, cancel, c, conn)
}
