package handlers

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/oauth"
	"switchyard/views"
)

// AccountSignInPages is what the dashboard's ChatGPT/Codex and Copilot cards need of the sign-in
// service (oauth.Service): the sign-ins the admin API runs too, the ChatGPT sign-in kept under its
// state and a device sign-in still waiting, to show either again from the server's copy.
type AccountSignInPages interface {
	CodexSignIn
	CopilotSignIn
	// PendingOf is a started paste-back sign-in of a kind still waiting for its code, by its
	// state.
	PendingOf(kind, state string) (oauth.SignIn, bool)
	// Flow is a device sign-in of kind that owner started and that still waits.
	Flow(kind, id, owner string) (oauth.DeviceFlow, bool)
}

// accountFields are the fields of the account cards' forms, for placing service errors.
var accountFields = []string{"provider", "name", "code"}

// deviceAddress names the setting whose scheme and host decide whether a kind's http
// verification address may be a link: ChatGPT's page is a setting itself; GitHub names its page
// in its answer, so its device code address (a test's fake, or GitHub) decides.
func deviceAddress(kind string) string {
	if kind == catalog.TypeCodex {
		return "codex.device_verification_url"
	}
	return "copilot.device_code_url"
}

// accountCard is the first step of a kind's "Add … account" card; ?provider= preselects one of
// the kind's providers (a provider's empty state links here).
func (d *Dashboard) accountCard(c echo.Context, kind string) views.AccountCard {
	f := views.AccountCard{Kind: kind, Providers: d.providersOfType(kind)}
	if p := c.QueryParam("provider"); slices.Contains(f.Providers, p) {
		f.Provider = p
	}
	if kind == catalog.TypeCodex {
		f.RedirectURI = d.oauthText("codex.redirect_uri")
		f.HTTPLinks = httpLinks(d.oauthText("codex.authorize_url"))
	}
	return f
}

// signInForm is an account card as a form posted it: the provider, a new account's name, and
// the connection a row's "Sign in again" named.
func (d *Dashboard) signInForm(c echo.Context, kind string) views.AccountCard {
	f := d.accountCard(c, kind)
	f.Provider, f.Name = strings.TrimSpace(c.FormValue("provider")), strings.TrimSpace(c.FormValue("name"))
	f.Again = d.againName(c, kind)
	return f
}

// againName is the name of the connection a row's "Sign in again" sent (again=<id>), when it is
// an account of kind; "" otherwise. It only tells the card what the sign-in will update: the
// account is matched by its id when the sign-in ends, whatever the form said.
func (d *Dashboard) againName(c echo.Context, kind string) string {
	id, err := strconv.ParseInt(strings.TrimSpace(c.FormValue("again")), 10, 64)
	if err != nil {
		return ""
	}
	conn, ok := d.Catalog.Registry().Connection(id)
	if !ok || conn.AuthType != catalog.AuthOAuth || conn.ProviderType != kind {
		return ""
	}
	return conn.Name
}

// renderAccountCard answers an account card's form that needs the page again: the providers page
// with the card as given.
func (d *Dashboard) renderAccountCard(c echo.Context, status int, f views.AccountCard) error {
	return d.renderProviders(c, status, func(m *views.ProvidersModel) {
		if f.Kind == catalog.TypeCodex {
			m.Codex = f
		} else {
			m.Copilot = f
		}
	})
}

// refuseAccount shows a refused sign-in on its card (422), or returns an internal error.
func (d *Dashboard) refuseAccount(c echo.Context, f views.AccountCard, err error) error {
	fields, form, ok := formErrors(ctx(c), err, accountFields...)
	if !ok {
		return err
	}
	f.Errors, f.Error = fields, form
	return d.renderAccountCard(c, http.StatusUnprocessableEntity, f)
}

// accountAdded ends a sign-in: the account's row, with a message that says whether it is new or
// signed in again (htmx gets HX-Redirect, so the page loads anew).
func (d *Dashboard) accountAdded(c echo.Context, kind string, conn catalog.Connection, created bool) error {
	var key string
	switch {
	case kind == catalog.TypeCodex && created:
		key = "codex.added"
	case kind == catalog.TypeCodex:
		key = "codex.updated"
	case created:
		key = "copilot.added"
	default:
		key = "copilot.updated"
	}
	d.flash(c, "success", i18n.T(ctx(c), key, conn.Name, conn.Provider))
	return seeOther(c, connAnchor(conn.ID))
}

// codeAbove moves the code field's message above the card, for a card back at its first step
// (which has no code field), and returns the card's message.
func codeAbove(fields views.FieldErrors, form string) string {
	if msg, ok := fields["code"]; ok {
		delete(fields, "code")
		return strings.TrimPrefix(form+"; "+msg, "; ")
	}
	return form
}

// pastedRefusal reads a refused paste-back code: the field messages and the form's, and the
// sign-in kept on the server under the form's state while it still waits, whose address the
// card shows again (never one the form sent). A sign-in that is over (used or expired) starts
// again at the first step, with the code's message above the form. ok is false for an error
// that is no refusal.
func pastedRefusal(c echo.Context, err error, pending func(state string) (oauth.SignIn, bool),
	known ...string) (fields views.FieldErrors, form string, si oauth.SignIn, ok bool) {
	if fields, form, ok = formErrors(ctx(c), err, known...); !ok {
		return nil, "", oauth.SignIn{}, false
	}
	si, waiting := pending(strings.TrimSpace(c.FormValue("state")))
	if !waiting {
		form = codeAbove(fields, form)
	}
	return fields, form, si, true
}

// StartCodexSignIn answers POST /oauth/codex/start: the card's paste-back step, the address to
// sign in at with ChatGPT and the field for the address the browser ends on.
func (d *Dashboard) StartCodexSignIn(c echo.Context) error {
	f := d.signInForm(c, catalog.TypeCodex)
	si, err := d.Accounts.StartCodex(f.Provider, f.Name)
	if err != nil {
		return d.refuseAccount(c, f, err)
	}
	f.AuthURL, f.State = si.AuthURL, si.State
	return d.renderAccountCard(c, http.StatusOK, f)
}

// CompleteCodexSignIn answers POST /oauth/codex/complete with the pasted callback address (or
// CODE#STATE): the account's connection is added, or updated when it is there already. When that
// fails the card asks again, showing the address to sign in at from the sign-in kept on the
// server under the form's state (never an address the form sent); a sign-in that is over starts
// again at the first step.
func (d *Dashboard) CompleteCodexSignIn(c echo.Context) error {
	conn, created, err := d.Accounts.CompleteCodex(ctx(c), c.FormValue("code"))
	if err != nil {
		pending := func(state string) (oauth.SignIn, bool) { return d.Accounts.PendingOf(catalog.TypeCodex, state) }
		fields, form, si, ok := pastedRefusal(c, err, pending, accountFields...)
		if !ok {
			return err
		}
		f := d.accountCard(c, catalog.TypeCodex)
		f.AuthURL, f.State, f.Errors, f.Error = si.AuthURL, si.State, fields, form
		return d.renderAccountCard(c, http.StatusUnprocessableEntity, f)
	}
	return d.accountAdded(c, catalog.TypeCodex, conn, created)
}

// StartCodexDevice answers POST /oauth/codex/device: the card shows the code to enter at
// ChatGPT's device page and polls until the sign-in is approved.
func (d *Dashboard) StartCodexDevice(c echo.Context) error {
	return d.startDevice(c, catalog.TypeCodex, d.Accounts.StartCodexDevice)
}

// PollCodexDevice answers POST /oauth/codex/device/poll (the card's status region).
func (d *Dashboard) PollCodexDevice(c echo.Context) error {
	return d.pollDevice(c, catalog.TypeCodex, d.Accounts.PollCodexDevice)
}

// StartCopilotDevice answers POST /oauth/copilot/device, like StartCodexDevice with GitHub.
func (d *Dashboard) StartCopilotDevice(c echo.Context) error {
	return d.startDevice(c, catalog.TypeCopilot, d.Accounts.StartCopilotDevice)
}

// PollCopilotDevice answers POST /oauth/copilot/device/poll.
func (d *Dashboard) PollCopilotDevice(c echo.Context) error {
	return d.pollDevice(c, catalog.TypeCopilot, d.Accounts.PollCopilotDevice)
}

// startDevice starts a device sign-in bound to the operator's session and shows its code.
func (d *Dashboard) startDevice(c echo.Context, kind string,
	start func(ctx context.Context, provider, name, owner string) (oauth.DeviceFlow, error)) error {
	f := d.signInForm(c, kind)
	flow, err := start(ctx(c), f.Provider, f.Name, operatorOf(c))
	if err != nil {
		return d.refuseAccount(c, f, err)
	}
	f.Device = d.deviceCode(kind, flow, f.Provider, f.Name)
	return d.renderAccountCard(c, http.StatusOK, f)
}

// pollDevice is one poll of the card's device sign-in. htmx gets the status region back while
// the sign-in waits (polling on at the interval the sign-in service asks for), the region with
// why it ended and "Start again" when it ended without an account (422: the polling stops), and
// a redirect to the account's row once it is added. A plain form gets the whole page: the code
// again from the sign-in kept on the server, the first step with the message, or the redirect.
func (d *Dashboard) pollDevice(c echo.Context, kind string,
	poll func(ctx context.Context, flow, owner string) (oauth.DevicePoll, error)) error {
	id := strings.TrimSpace(c.FormValue("flow"))
	st := views.DeviceStatus{Kind: kind, Provider: strings.TrimSpace(c.FormValue("provider")), Name: strings.TrimSpace(c.FormValue("name"))}
	res, err := poll(ctx(c), id, operatorOf(c))
	switch {
	case err != nil:
		_, form, ok := formErrors(ctx(c), err)
		if !ok {
			return err
		}
		if isHTMX(c) {
			st.Error = form
			return Render(c, http.StatusUnprocessableEntity, views.DeviceStatusRegion(st))
		}
		f := d.signInForm(c, kind)
		f.Error = form
		return d.renderAccountCard(c, http.StatusUnprocessableEntity, f)
	case res.Pending && isHTMX(c):
		st.Flow, st.IntervalS = id, int64((res.Interval+time.Second-1)/time.Second)
		return Render(c, http.StatusOK, views.DeviceStatusRegion(st))
	case res.Pending:
		f := d.signInForm(c, kind)
		flow, ok := d.Accounts.Flow(kind, id, operatorOf(c))
		if !ok { // ended between the poll and now
			f.Error = i18n.T(ctx(c), "oauth.flow_unknown")
			return d.renderAccountCard(c, http.StatusUnprocessableEntity, f)
		}
		f.Device = d.deviceCode(kind, flow, f.Provider, f.Name)
		return d.renderAccountCard(c, http.StatusOK, f)
	}
	return d.accountAdded(c, kind, res.Conn, res.Created)
}

// deviceCode is a started device sign-in as its card shows it.
func (d *Dashboard) deviceCode(kind string, flow oauth.DeviceFlow, provider, name string) *views.DeviceCode {
	now := time.Now()
	if d.Ops != nil {
		now = d.Ops.Now()
	}
	return &views.DeviceCode{UserCode: flow.UserCode, VerificationURL: flow.VerificationURL,
		HTTPLinks: httpLinkTo(d.oauthText(deviceAddress(kind)), flow.VerificationURL), ExpiresAt: flow.ExpiresAt,
		ExpiresInMS: max(flow.ExpiresAt.Sub(now).Milliseconds(), 0),
		Status:      views.DeviceStatus{Kind: kind, Flow: flow.Flow, IntervalS: flow.Interval, Provider: provider, Name: name}}
}
