package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/views"
)

// connectionFields are the fields of the connection forms, for placing service errors.
var connectionFields = []string{"provider", "name", "api_key", "priority", "max_concurrent", "enabled"}

// connectionForm reads the connection form. The API key goes into in only, never into the
// form model, so it cannot be rendered back. On create, empty numbers mean the defaults; on
// edit, an empty priority is an error and an empty max_concurrent means unlimited.
func connectionForm(c echo.Context, create bool) (views.ConnectionForm, catalog.ConnectionInput) {
	f := views.ConnectionForm{
		Provider:      strings.TrimSpace(c.FormValue("provider")),
		Name:          strings.TrimSpace(c.FormValue("name")),
		Priority:      strings.TrimSpace(c.FormValue("priority")),
		MaxConcurrent: strings.TrimSpace(c.FormValue("max_concurrent")),
		Enabled:       create || c.FormValue("enabled") == "true",
		Errors:        views.FieldErrors{},
	}
	in := catalog.ConnectionInput{Name: &f.Name}
	if create {
		in.Provider = &f.Provider
	} else {
		in.Enabled = &f.Enabled
	}
	if key := c.FormValue("api_key"); create || key != "" {
		in.APIKey = &key
	}
	switch n, err := strconv.Atoi(f.Priority); {
	case f.Priority == "" && create:
	case f.Priority == "":
		f.Errors["priority"] = i18n.T(ctx(c), "err.required")
	case err != nil:
		f.Errors["priority"] = i18n.T(ctx(c), "err.whole_number")
	default:
		in.Priority = &n
	}
	switch n, err := strconv.Atoi(f.MaxConcurrent); {
	case f.MaxConcurrent == "":
		in.MaxConcurrent = catalog.OptionalInt{Set: !create}
	case err != nil:
		f.Errors["max_concurrent"] = i18n.T(ctx(c), "err.whole_number")
	default:
		in.MaxConcurrent = catalog.OptionalInt{Set: true, Value: &n}
	}
	return f, in
}

// CreateConnection answers POST /connections: a new API-key connection.
func (d *Dashboard) CreateConnection(c echo.Context) error {
	f, in := connectionForm(c, true)
	if len(f.Errors) == 0 {
		conn, err := d.Catalog.CreateConnection(ctx(c), in, nil)
		if err == nil {
			d.Sessions.addFlash(c, "success", i18n.T(ctx(c), "connections.created", conn.Name, conn.Provider))
			return seeOther(c, "/providers#conn-"+strconv.FormatInt(conn.ID, 10))
		}
		fields, form, ok := formErrors(ctx(c), err, connectionFields...)
		if !ok {
			return err
		}
		f.Errors, f.Error = fields, form
	}
	m, err := d.providersModel(c)
	if err != nil {
		return err
	}
	m.ConnectionForm = f
	return Render(c, http.StatusUnprocessableEntity, views.ProvidersPage(m))
}

// EditConnectionPage answers GET /connections/:id/edit.
func (d *Dashboard) EditConnectionPage(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	conn, err := d.Catalog.GetConnection(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	f := views.ConnectionForm{Provider: conn.Provider, Name: conn.Name, Priority: strconv.Itoa(conn.Priority), Enabled: conn.Enabled}
	if conn.MaxConcurrent != nil {
		f.MaxConcurrent = strconv.Itoa(*conn.MaxConcurrent)
	}
	return Render(c, http.StatusOK, views.ConnectionEditPage(d.connectionEditModel(c, conn, f)))
}

func (d *Dashboard) connectionEditModel(c echo.Context, conn catalog.Connection, f views.ConnectionForm) views.ConnectionEditModel {
	path := "/connections/" + c.Param("id") + "/edit"
	return views.ConnectionEditModel{
		Shell: d.shell(c, "providers", i18n.T(ctx(c), "connections.edit_title", conn.Provider, conn.Name), path),
		ID:    conn.ID, Provider: conn.Provider, Name: conn.Name, Form: f}
}

// UpdateConnection answers POST /connections/:id/edit; an empty API key keeps the stored one.
func (d *Dashboard) UpdateConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	old, err := d.Catalog.GetConnection(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	f, in := connectionForm(c, false)
	if len(f.Errors) == 0 {
		conn, err := d.Catalog.UpdateConnection(ctx(c), id, in, nil)
		if err == nil {
			d.Sessions.addFlash(c, "success", i18n.T(ctx(c), "connections.updated", conn.Name))
			return seeOther(c, "/providers#conn-"+strconv.FormatInt(conn.ID, 10))
		}
		fields, form, ok := formErrors(ctx(c), err, connectionFields...)
		if !ok {
			return err
		}
		f.Errors, f.Error = fields, form
	}
	return Render(c, http.StatusUnprocessableEntity, views.ConnectionEditPage(d.connectionEditModel(c, old, f)))
}

// DeleteConnection answers POST /connections/:id/delete.
func (d *Dashboard) DeleteConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	conn, err := d.Catalog.GetConnection(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	if err := d.Catalog.DeleteConnection(ctx(c), id); err != nil {
		return d.missing(c, err, "/providers")
	}
	d.Sessions.addFlash(c, "success", i18n.T(ctx(c), "connections.deleted", conn.Name))
	return seeOther(c, "/providers")
}

// TestConnection answers POST /connections/:id/test: a real upstream call. htmx gets the
// result fragment; a plain form gets it as a flash message on the page it came from.
func (d *Dashboard) TestConnection(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	res, err := d.Tester.TestConnection(ctx(c), id)
	var m views.TestResultModel
	switch {
	case err == nil && res.OK:
		m = views.TestResultModel{OK: true, Text: i18n.T(ctx(c), "connections.test_ok", res.Models, res.LatencyMS)}
	case err == nil:
		m = views.TestResultModel{Text: i18n.T(ctx(c), "connections.test_failed", redact(d.Catalog.Registry(), res.Message, id))}
	default:
		_, form, ok := formErrors(ctx(c), err)
		if !ok {
			return err
		}
		m = views.TestResultModel{Text: form}
	}
	if isHTMX(c) {
		return Render(c, http.StatusOK, views.TestResult(m))
	}
	kind := "error"
	if m.OK {
		kind = "success"
	}
	d.Sessions.addFlash(c, kind, m.Text)
	return c.Redirect(http.StatusSeeOther, "/providers#conn-"+strconv.FormatInt(id, 10))
}
