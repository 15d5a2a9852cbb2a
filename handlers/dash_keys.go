package handlers

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/clientkeys"
	"switchyard/views"
)

// keysModel lists every client key.
func (d *Dashboard) keysModel(c echo.Context) (views.KeysModel, error) {
	list, err := d.Keys.List(ctx(c))
	if err != nil {
		return views.KeysModel{}, err
	}
	m := views.KeysModel{Shell: d.shell(c, "keys", i18n.T(ctx(c), "keys.title"), "/keys")}
	at := func(ms *int64) *time.Time {
		if ms == nil {
			return nil
		}
		t := time.UnixMilli(*ms)
		return &t
	}
	now := d.Ops.Now().Local()
	usage := d.Traffic.KeyUsage(time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location()))
	for _, k := range list {
		u := usage[k.ID]
		m.Keys = append(m.Keys, views.KeyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: time.UnixMilli(k.CreatedAt),
			LastUsedAt: at(k.LastUsedAt), RevokedAt: at(k.RevokedAt), Requests: u.Requests, InTokens: u.In, OutTokens: u.Out})
	}
	return m, nil
}

// KeysPage answers GET /keys.
func (d *Dashboard) KeysPage(c echo.Context) error {
	m, err := d.keysModel(c)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.KeysPage(m))
}

// CreateKey answers POST /keys. The new key is in this answer only: it is never put in a URL,
// a cookie or a flash message, and the page is not cached.
func (d *Dashboard) CreateKey(c echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	created, err := d.Keys.Create(ctx(c), clientkeys.Input{Name: &name})
	status := http.StatusOK
	var form views.KeyForm
	if err != nil {
		fields, msg, ok := formErrors(ctx(c), err, "name")
		if !ok {
			return err
		}
		if msg != "" {
			fields["name"] = msg
		}
		form, status = views.KeyForm{Name: name, Errors: fields}, http.StatusUnprocessableEntity
	}
	m, lerr := d.keysModel(c)
	if lerr != nil {
		return lerr
	}
	m.Form = form
	if err == nil {
		m.Created = &views.CreatedKey{Name: created.Name, Secret: created.Secret}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, status, views.KeysPage(m))
}

// RevokeKey answers POST /keys/:id/revoke.
func (d *Dashboard) RevokeKey(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/keys")
	}
	if err := d.Keys.Revoke(ctx(c), id); err != nil {
		return d.missing(c, err, "/keys")
	}
	d.flash(c, "success", i18n.T(ctx(c), "keys.revoked_flash"))
	return seeOther(c, "/keys")
}
