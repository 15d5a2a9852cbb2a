package handlers

import (
	"context"
	"io"

	"github.com/labstack/echo/v4"

	"switchyard/services/catalog"
	"switchyard/services/oauth"
)

// ClaudeSignIn runs the Claude sign-in (oauth.Service).
type ClaudeSignIn interface {
	Start(provider, name string) (oauth.SignIn, error)
	Complete(ctx context.Context, pasted string) (catalog.Connection, bool, error)
	// Pending is a started sign-in still waiting for its code, by its state.
	Pending(state string) (oauth.SignIn, bool)
}

// ClaudeAccounts serves the Claude sign-in of the admin API.
type ClaudeAccounts struct {
	Svc ClaudeSignIn
}

// Start answers POST /api/oauth/claude/start ({"provider": NAME, "name": NAME}, both optional:
// provider anthropic, and a new account's connection named claude-1, claude-2, …): the address to
// sign in at and the state the pasted code must carry.
func (a *ClaudeAccounts) Start(c echo.Context) error { return pasteStart(c, a.Svc.Start) }

// Complete answers POST /api/oauth/claude/complete ({"code": "CODE#STATE" or the callback
// address}): 201 with the new connection, or 200 with the account's existing connection, now
// holding the new tokens. Never a token in the answer.
func (a *ClaudeAccounts) Complete(c echo.Context) error { return pasteComplete(c, a.Svc.Complete) }

// isEmptyBody reports whether a bind failed only because the body was empty.
func isEmptyBody(err error) bool {
	for e := err; e != nil; {
		if e == io.EOF {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}
