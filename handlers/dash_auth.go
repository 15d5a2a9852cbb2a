package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/views"
)

// LangCookie remembers the language chosen in the dashboard.
const LangCookie = "switchyard_lang"

// LoginPage answers GET /login.
func (d *Dashboard) LoginPage(c echo.Context) error {
	if d.Sessions.IsAdmin(c) {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return Render(c, http.StatusOK, views.LoginPage(views.LoginModel{Next: safeNext(c.QueryParam("next"))}))
}

// maxLoginBody bounds the login form: a password and the page to go back to.
const maxLoginBody = 8 << 10

// Login answers POST /login: checks the password, rate-limited per client address. The throttle
// comes first, before any of the body is read, so a client past its budget costs nothing but its
// headers; the form is read within maxLoginBody (413 beyond). The page to go back to comes from
// the form, or from the query string when the form is not read.
func (d *Dashboard) Login(c echo.Context) error {
	r := c.Request()
	if !d.Auth.AllowLogin(c.RealIP()) {
		c.Response().Header().Set("Retry-After", "12")
		c.Response().Header().Set(echo.HeaderConnection, "close") // the body stays unread
		return Render(c, http.StatusTooManyRequests, views.LoginPage(views.LoginModel{Next: safeNext(c.QueryParam("next")), ErrorKey: "login.too_many"}))
	}
	if r.ContentLength > maxLoginBody {
		return BodyError(&http.MaxBytesError{Limit: maxLoginBody})
	}
	r.Body = http.MaxBytesReader(c.Response().Writer, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		return BodyError(err)
	}
	next := safeNext(c.FormValue("next"))
	if !d.Auth.CheckPassword(c.FormValue("password")) {
		return Render(c, http.StatusUnauthorized, views.LoginPage(views.LoginModel{Next: next, ErrorKey: "login.wrong_password"}))
	}
	if err := d.Sessions.Login(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// Logout answers POST /logout.
func (d *Dashboard) Logout(c echo.Context) error {
	if err := d.Sessions.Logout(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}

// LogoutEverywhere answers POST /logout-everywhere: ends every dashboard session (a lost laptop,
// a shared browser), this one too.
func (d *Dashboard) LogoutEverywhere(c echo.Context) error {
	if _, err := d.Sessions.LogoutEverywhere(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}

// SetLang answers GET /lang/:code: remembers the language and goes back.
func (d *Dashboard) SetLang(c echo.Context) error {
	l, ok := i18n.Parse(c.Param("code"))
	if !ok {
		return c.String(http.StatusNotFound, "unknown language")
	}
	c.SetCookie(&http.Cookie{Name: LangCookie, Value: string(l), Path: "/", MaxAge: 365 * 24 * 3600,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.Scheme() == "https", Expires: time.Now().AddDate(1, 0, 0)})
	return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
}

// safeNext keeps redirects on this site: only absolute paths, never //host or schemes.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}
