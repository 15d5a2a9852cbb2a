package handlers

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/views"
)

// claudeFields are the fields of the Claude account forms, for placing service errors.
var claudeFields = []string{"provider", "code", "name", "setup_token"}

// providersOfType lists the providers an account of a kind can be added to: those of its type
// (anthropic for Claude, codex, copilot).
func (d *Dashboard) providersOfType(kind string) []string {
	var out []string
	for _, p := range d.Catalog.Registry().Providers() {
		if p.Type == kind {
			out = append(out, p.Name)
		}
	}
	return out
}

// renderClaude answers a Claude account form that needs the page again: the providers page
// with the Claude card as given (422 when something was refused).
func (d *Dashboard) renderClaude(c echo.Context, status int, f views.ClaudeForm) error {
	f.HTTPLinks = httpLinks(d.oauthText("claude.authorize_url"))
	return d.renderProviders(c, status, func(m *views.ProvidersModel) { m.Claude = f })
}

// httpLinks reports whether an http sign-in address may be a link: only when the configured
// address it comes from is http itself (a test, an air-gapped install), so a real gateway links
// to https alone.
func httpLinks(configured string) bool {
	u, err := url.Parse(configured)
	return err == nil && strings.EqualFold(u.Scheme, "http")
}

// httpLinkTo reports whether shown, an http address an upstream named (a device sign-in's page),
// may be a link: only when the configured address the sign-in talks to is http and shown is on
// its host and port, so a test's fake may link to itself but never to another http address.
func httpLinkTo(configured, shown string) bool {
	c, err := url.Parse(configured)
	if err != nil || !httpLinks(configured) {
		return false
	}
	s, err := url.Parse(shown)
	return err == nil && s.Host != "" && strings.EqualFold(s.Host, c.Host)
}

// oauthText is the text OAuth client setting at path in force ("" without the settings).
func (d *Dashboard) oauthText(path string) string {
	if d.Settings == nil || d.Settings.OAuth == nil {
		return ""
	}
	s, _ := d.Settings.OAuth.Snapshot().Value(path).(string)
	return s
}

// StartClaudeSignIn answers POST /oauth/claude/start: the providers page with the sign-in's
// second step, the address to sign in at and the field for the code Claude shows.
func (d *Dashboard) StartClaudeSignIn(c echo.Context) error {
	f := views.ClaudeForm{Provider: strings.TrimSpace(c.FormValue("provider")), SignInName: strings.TrimSpace(c.FormValue("name")),
		Again: d.againName(c, catalog.TypeAnthropic)}
	si, err := d.Claude.Start(f.Provider, f.SignInName)
	if err != nil {
		fields, form, ok := formErrors(ctx(c), err, claudeFields...)
		if !ok {
			return err
		}
		if msg, ok := fields["name"]; ok { // the sign-in's name field, not the setup token form's
			fields["signin_name"] = msg
			delete(fields, "name")
		}
		f.Errors, f.Error = fields, form
		return d.renderClaude(c, http.StatusUnprocessableEntity, f)
	}
	f.AuthURL, f.State = si.AuthURL, si.State
	return d.renderClaude(c, http.StatusOK, f)
}

// CompleteClaudeSignIn answers POST /oauth/claude/complete with the pasted CODE#STATE (or the
// callback address): the account's connection is added, or updated when it is there already.
// When that fails the card asks again, showing the address to sign in at from the sign-in kept
// on the server under the form's state (never an address the form sent); a sign-in that is over
// (used or expired) starts again at the first step.
func (d *Dashboard) CompleteClaudeSignIn(c echo.Context) error {
	conn, created, err := d.Claude.Complete(ctx(c), c.FormValue("code"))
	if err != nil {
		fields, form, si, ok := pastedRefusal(c, err, d.Claude.Pending, claudeFields...)
		if !ok {
			return err
		}
		f := views.ClaudeForm{AuthURL: si.AuthURL, State: si.State, Errors: fields, Error: form}
		return d.renderClaude(c, http.StatusUnprocessableEntity, f)
	}
	key := "claude.added"
	if !created {
		key = "claude.updated"
	}
	d.flash(c, "success", i18n.T(ctx(c), key, conn.Name, conn.Provider))
	return seeOther(c, connAnchor(conn.ID))
}

// AddClaudeSetupToken answers POST /oauth/claude/setup-token: a Claude account from a pasted
// long-lived setup token (claude setup-token), never refreshed.
func (d *Dashboard) AddClaudeSetupToken(c echo.Context) error {
	f := views.ClaudeForm{Provider: strings.TrimSpace(c.FormValue("provider")), Name: strings.TrimSpace(c.FormValue("name"))}
	if f.Provider == "" {
		f.Provider = catalog.TypeAnthropic
	}
	token, oauth := c.FormValue("setup_token"), catalog.AuthOAuth
	conn, err := d.Catalog.CreateConnection(ctx(c), catalog.ConnectionInput{Provider: &f.Provider, Name: &f.Name, AuthType: &oauth,
		SetupToken: &token}, d.ValidateConnectionOverrides)
	if err != nil {
		fields, form, ok := formErrors(ctx(c), err, claudeFields...)
		if !ok {
			return err
		}
		f.Errors, f.Error, f.SetupOpen = fields, form, true
		return d.renderClaude(c, http.StatusUnprocessableEntity, f)
	}
	d.flash(c, "success", i18n.T(ctx(c), "claude.added", conn.Name, conn.Provider))
	return seeOther(c, connAnchor(conn.ID))
}
