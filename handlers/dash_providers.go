package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/catalog"
	"switchyard/services/errs"
	"switchyard/views"
)

// providerFields are the fields of the provider forms, for placing service errors.
var providerFields = []string{"name", "type", "base_url"}

// providersModel lists every provider with its connections; the forms start empty.
func (d *Dashboard) providersModel(c echo.Context) (views.ProvidersModel, error) {
	provs, err := d.Catalog.ListProviders(ctx(c))
	if err != nil {
		return views.ProvidersModel{}, err
	}
	conns, err := d.Catalog.ListConnections(ctx(c))
	if err != nil {
		return views.ProvidersModel{}, err
	}
	reg := d.Catalog.Registry()
	byProvider := map[int64][]views.ConnectionRow{}
	for _, cn := range conns {
		row := views.ConnectionRow{ID: cn.ID, Name: cn.Name, AuthType: cn.AuthType, Priority: cn.Priority,
			MaxConcurrent: cn.MaxConcurrent, Enabled: cn.Enabled}
		if e, ok := reg.Connection(cn.ID); ok && e.Broken != "" {
			row.Broken = true
		}
		byProvider[cn.ProviderID] = append(byProvider[cn.ProviderID], row)
	}
	m := views.ProvidersModel{
		Shell:          d.shell(c, "providers", i18n.T(ctx(c), "providers.title"), "/providers"),
		Types:          catalog.ProviderTypes,
		ProviderForm:   views.ProviderForm{Type: catalog.TypeOpenAICompatible},
		ConnectionForm: views.ConnectionForm{Enabled: true},
	}
	for _, p := range provs {
		m.Providers = append(m.Providers, views.ProviderRow{ID: p.ID, Name: p.Name, Type: p.Type, BaseURL: p.BaseURL,
			Discovery: d.discovery(p.Name), Connections: byProvider[p.ID]})
	}
	return m, nil
}

// ProvidersPage answers GET /providers; ?provider=<name> preselects the add-connection form.
func (d *Dashboard) ProvidersPage(c echo.Context) error {
	m, err := d.providersModel(c)
	if err != nil {
		return err
	}
	m.ConnectionForm.Provider = c.QueryParam("provider")
	return Render(c, http.StatusOK, views.ProvidersPage(m))
}

// CreateProvider answers POST /providers.
func (d *Dashboard) CreateProvider(c echo.Context) error {
	f := views.ProviderForm{Name: strings.TrimSpace(c.FormValue("name")), Type: c.FormValue("type"),
		BaseURL: strings.TrimSpace(c.FormValue("base_url"))}
	p, err := d.Catalog.CreateProvider(ctx(c), catalog.ProviderInput{Name: &f.Name, Type: &f.Type, BaseURL: &f.BaseURL}, nil)
	if err != nil {
		fields, form, ok := formErrors(ctx(c), err, providerFields...)
		if !ok {
			return err
		}
		m, err := d.providersModel(c)
		if err != nil {
			return err
		}
		f.Errors, f.Error = fields, form
		m.ProviderForm = f
		return Render(c, http.StatusUnprocessableEntity, views.ProvidersPage(m))
	}
	d.Sessions.addFlash(c, "success", i18n.T(ctx(c), "providers.created", p.Name))
	return seeOther(c, "/providers#provider-"+p.Name)
}

// EditProviderPage answers GET /providers/:id/edit.
func (d *Dashboard) EditProviderPage(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	p, err := d.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	return Render(c, http.StatusOK, views.ProviderEditPage(d.providerEditModel(c, p,
		views.ProviderForm{Type: p.Type, BaseURL: p.BaseURL})))
}

func (d *Dashboard) providerEditModel(c echo.Context, p catalog.Provider, f views.ProviderForm) views.ProviderEditModel {
	path := "/providers/" + c.Param("id") + "/edit"
	return views.ProviderEditModel{Shell: d.shell(c, "providers", i18n.T(ctx(c), "providers.edit_title", p.Name), path),
		ID: p.ID, Name: p.Name, Types: catalog.ProviderTypes, Form: f}
}

// UpdateProvider answers POST /providers/:id/edit: type and base URL.
func (d *Dashboard) UpdateProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	old, err := d.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	f := views.ProviderForm{Type: c.FormValue("type"), BaseURL: strings.TrimSpace(c.FormValue("base_url"))}
	p, err := d.Catalog.UpdateProvider(ctx(c), id, catalog.ProviderInput{Type: &f.Type, BaseURL: &f.BaseURL}, nil)
	if err != nil {
		fields, form, ok := formErrors(ctx(c), err, providerFields...)
		if !ok {
			return err
		}
		f.Errors, f.Error = fields, form
		return Render(c, http.StatusUnprocessableEntity, views.ProviderEditPage(d.providerEditModel(c, old, f)))
	}
	d.Sessions.addFlash(c, "success", i18n.T(ctx(c), "providers.updated", p.Name))
	return seeOther(c, "/providers#provider-"+p.Name)
}

// DeleteProvider answers POST /providers/:id/delete; its connections go with it.
func (d *Dashboard) DeleteProvider(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/providers")
	}
	p, err := d.Catalog.GetProvider(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/providers")
	}
	if err := d.Catalog.DeleteProvider(ctx(c), id); err != nil {
		return d.missing(c, err, "/providers")
	}
	d.Sessions.addFlash(c, "success", i18n.T(ctx(c), "providers.deleted", p.Name))
	return seeOther(c, "/providers")
}

// missing answers a not-found error with gone and returns any other error.
func (d *Dashboard) missing(c echo.Context, err error, back string) error {
	if errs.CodeOf(err) == errs.NotFound {
		return d.gone(c, back)
	}
	return err
}

// gone answers an action on something that no longer exists: back to the list with a message.
func (d *Dashboard) gone(c echo.Context, back string) error {
	d.Sessions.addFlash(c, "error", i18n.T(ctx(c), "err.not_found"))
	return seeOther(c, back)
}
