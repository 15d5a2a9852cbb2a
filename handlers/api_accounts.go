package handlers

import (
	"context"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services/catalog"
	"switchyard/services/oauth"
)

// CodexSignIn runs the ChatGPT/Codex sign-ins (oauth.Service).
type CodexSignIn interface {
	StartCodex(provider, name string) (oauth.SignIn, error)
	CompleteCodex(ctx context.Context, pasted string) (catalog.Connection, bool, error)
	StartCodexDevice(ctx context.Context, provider, name, owner string) (oauth.DeviceFlow, error)
	PollCodexDevice(ctx context.Context, flow, owner string) (oauth.DevicePoll, error)
}

// CopilotSignIn runs the GitHub Copilot device sign-in (oauth.Service).
type CopilotSignIn interface {
	StartCopilotDevice(ctx context.Context, provider, name, owner string) (oauth.DeviceFlow, error)
	PollCopilotDevice(ctx context.Context, flow, owner string) (oauth.DevicePoll, error)
}

// ClaudeSignIn runs the Claude sign-in (oauth.Service).
type ClaudeSignIn interface {
	Start(provider, name string) (oauth.SignIn, error)
	Complete(ctx context.Context, pasted string) (catalog.Connection, bool, error)
	// Pending is a started sign-in still waiting for its code, by its state.
	Pending(state string) (oauth.SignIn, bool)
}

// AccountSignIns serves the admin API's sign-ins of ChatGPT/Codex and Copilot accounts.
type AccountSignIns struct {
	Codex   CodexSignIn
	Copilot CopilotSignIn
}

// signInTarget is the optional body of a start: the provider (default: the one named like the
// kind) and the connection name of a new account (default chatgpt-N / copilot-N).
type signInTarget struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

func bindTarget(c echo.Context) (signInTarget, error) {
	var in signInTarget
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil && !isEmptyBody(err) {
			return in, err
		}
	}
	return in, nil
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

// pasteStart starts a paste-back sign-in for the optional target: its address and state (200).
func pasteStart(c echo.Context, start func(provider, name string) (oauth.SignIn, error)) error {
	in, err := bindTarget(c)
	if err != nil {
		return err
	}
	si, err := start(in.Provider, in.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, si)
}

// pasteComplete completes a paste-back sign-in with {"code": …}: 201 with the new connection, or
// 200 with the account's existing one, now holding the new tokens. Never a token in the answer.
func pasteComplete(c echo.Context, complete func(ctx context.Context, pasted string) (catalog.Connection, bool, error)) error {
	var in struct {
		Code string `json:"code"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conn, created, err := complete(ctx(c), in.Code)
	if err != nil {
		return err
	}
	return c.JSON(createdStatus(created), conn)
}

// deviceStart starts a device sign-in for the optional target, bound to the operator who asks:
// the code to enter, where, and the flow id to poll with (200).
func deviceStart(c echo.Context, start func(ctx context.Context, provider, name, owner string) (oauth.DeviceFlow, error)) error {
	in, err := bindTarget(c)
	if err != nil {
		return err
	}
	f, err := start(ctx(c), in.Provider, in.Name, operatorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, f)
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

// CodexStart answers POST /api/oauth/codex/start: the address to sign in at (authorization code
// with PKCE) and the state the pasted callback address must carry.
func (a *AccountSignIns) CodexStart(c echo.Context) error { return pasteStart(c, a.Codex.StartCodex) }

// CodexComplete answers POST /api/oauth/codex/complete ({"code": the callback address the
// browser was sent to, or CODE#STATE}): 201 with the new connection, or 200 with the account's
// existing one, now holding the new tokens.
func (a *AccountSignIns) CodexComplete(c echo.Context) error {
	return pasteComplete(c, a.Codex.CompleteCodex)
}

// CodexDevice answers POST /api/oauth/codex/device: the code to enter, where, and the flow id to
// poll with.
func (a *AccountSignIns) CodexDevice(c echo.Context) error {
	return deviceStart(c, a.Codex.StartCodexDevice)
}

// CodexDevicePoll answers POST /api/oauth/codex/device/poll ({"flow": ID}).
func (a *AccountSignIns) CodexDevicePoll(c echo.Context) error {
	return devicePoll(c, a.Codex.PollCodexDevice)
}

// CopilotDevice answers POST /api/oauth/copilot/device, like CodexDevice.
func (a *AccountSignIns) CopilotDevice(c echo.Context) error {
	return deviceStart(c, a.Copilot.StartCopilotDevice)
}

// CopilotDevicePoll answers POST /api/oauth/copilot/device/poll ({"flow": ID}).
func (a *AccountSignIns) CopilotDevicePoll(c echo.Context) error {
	return devicePoll(c, a.Copilot.PollCopilotDevice)
}

// devicePoll is one poll of a device sign-in: 202 {"status":"pending","interval":S} while it
// waits, 201 with the new connection (200 with an account's existing one) once approved, 404 for
// a flow id that is unknown, foreign, used or expired.
func devicePoll(c echo.Context, poll func(ctx context.Context, flow, owner string) (oauth.DevicePoll, error)) error {
	var in struct {
		Flow string `json:"flow"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	res, err := poll(ctx(c), in.Flow, operatorOf(c))
	if err != nil {
		return err
	}
	if res.Pending {
		secs := int64((res.Interval + 999_999_999) / 1_000_000_000)
		return c.JSON(http.StatusAccepted, map[string]any{"status": "pending", "interval": secs})
	}
	return c.JSON(createdStatus(res.Created), res.Conn)
}

func createdStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}
