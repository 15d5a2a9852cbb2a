package handlers

import (
	"context"
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

// CodexStart answers POST /api/oauth/codex/start: the address to sign in at (authorization code
// with PKCE) and the state the pasted callback address must carry.
func (a *AccountSignIns) CodexStart(c echo.Context) error {
	in, err := bindTarget(c)
	if err != nil {
		return err
	}
	si, err := a.Codex.StartCodex(in.Provider, in.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, si)
}

// CodexComplete answers POST /api/oauth/codex/complete ({"code": the callback address the
// browser was sent to, or CODE#STATE}): 201 with the new connection, or 200 with the account's
// existing one, now holding the new tokens.
func (a *AccountSignIns) CodexComplete(c echo.Context) error {
	var in struct {
		Code string `json:"code"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conn, created, err := a.Codex.CompleteCodex(ctx(c), in.Code)
	if err != nil {
		return err
	}
	return c.JSON(createdStatus(created), conn)
}

// CodexDevice answers POST /api/oauth/codex/device: the code to enter, where, and the flow id to
// poll with.
func (a *AccountSignIns) CodexDevice(c echo.Context) error {
	in, err := bindTarget(c)
	if err != nil {
		return err
	}
	f, err := a.Codex.StartCodexDevice(ctx(c), in.Provider, in.Name, operatorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, f)
}

// CodexDevicePoll answers POST /api/oauth/codex/device/poll ({"flow": ID}).
func (a *AccountSignIns) CodexDevicePoll(c echo.Context) error {
	return devicePoll(c, a.Codex.PollCodexDevice)
}

// CopilotDevice answers POST /api/oauth/copilot/device, like CodexDevice.
func (a *AccountSignIns) CopilotDevice(c echo.Context) error {
	in, err := bindTarget(c)
	if err != nil {
		return err
	}
	f, err := a.Copilot.StartCopilotDevice(ctx(c), in.Provider, in.Name, operatorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, f)
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
