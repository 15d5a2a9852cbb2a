package handlers

import (
	"context"
	"io"
	"net/http"

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
func (a *ClaudeAccounts) Start(c echo.Context) error {
	var in struct {
		Provider string `json:"provider"`
		Name     string `json:"name"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil && !isEmptyBody(err) {
			return err
		}
	}
	si, err := a.Svc.Start(in.Provider, in.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, si)
}

// Complete answers POST /api/oauth/claude/complete ({"code": "CODE#STATE" or the callback
// address}): 201 with the new connection, or 200 with the account's existing connection, now
// holding the new tokens. Never a token in the answer.
func (a *ClaudeAccounts) Complete(c echo.Context) error {
	var in struct {
		Code string `json:"code"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conn, created, err := a.Svc.Complete(ctx(c), in.Code)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, conn)
}

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
