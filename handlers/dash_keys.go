package handlers

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/clientkeys"
	"switchyard/services/errs"
	"switchyard/views"
)

// keysModel lists every client key.
func (d *Dashboard) keysModel(c echo.Context) (views.KeysModel, error) {
	list, err := d.Keys.List(ctx(c))
	if err != nil {
		return views.KeysModel{}, err
	}
	m := views.KeysModel{Shell: d.shell(c, "keys", i18n.T(ctx(c), "keys.title"), "/keys"), Connections: d.keyConnections()}
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
			LastUsedAt: at(k.LastUsedAt), RevokedAt: at(k.RevokedAt), Requests: u.Requests, InTokens: u.In, OutTokens: u.Out,
			AllowedModels: k.AllowedModels, Lease: slices.Contains(k.Scopes, clientkeys.ScopeLeaseExclusive),
			LeaseConns: len(k.AllowedConnections)})
	}
	return m, nil
}

// keyConnections are the connections a key may be allowed to lease, by provider (in name order)
// and within one by priority: read from the routing registry, not the database.
func (d *Dashboard) keyConnections() []views.KeyConnGroup {
	reg := d.Catalog.Registry()
	var out []views.KeyConnGroup
	for _, p := range reg.Providers() {
		g := views.KeyConnGroup{Provider: p.Name}
		for _, c := range reg.ConnectionsOf(p.ID) {
			g.Conns = append(g.Conns, views.KeyConnOption{ID: c.ID, Name: c.Name, Disabled: !c.Enabled})
		}
		if len(g.Conns) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// KeysPage answers GET /keys.
func (d *Dashboard) KeysPage(c echo.Context) error {
	m, err := d.keysModel(c)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.KeysPage(m))
}

// keyForm reads the key form: the name, the model patterns (one per line or separated by
// commas), the lease scope and the ticked connections. A connection value that is no id is an
// error of its field.
func keyForm(c echo.Context) (views.KeyForm, clientkeys.Input, views.FieldErrors) {
	f := views.KeyForm{Name: strings.TrimSpace(c.FormValue("name")), AllowedModels: c.FormValue("allowed_models"),
		Lease: c.FormValue("lease_exclusive") == "true", Connections: map[int64]bool{}}
	in := clientkeys.Input{Name: &f.Name}
	patterns := splitPatterns(f.AllowedModels)
	in.AllowedModels = &patterns
	scopes := []string{}
	if f.Lease {
		scopes = append(scopes, clientkeys.ScopeLeaseExclusive)
	}
	in.Scopes = &scopes
	conns := []int64{}
	bad := views.FieldErrors{}
	form, _ := c.FormParams()
	for _, v := range form["allowed_connections"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			bad["allowed_connections"] = i18n.T(ctx(c), "keys.err.no_connection", v)
			continue
		}
		f.Connections[id] = true
		conns = append(conns, id)
	}
	in.AllowedConnections = &conns
	return f, in, bad
}

// splitPatterns reads the patterns field: one pattern per line, or several separated by commas;
// blank entries are dropped.
func splitPatterns(text string) []string {
	out := []string{}
	for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if p := strings.TrimSpace(line); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// patternsText is how the patterns field shows stored patterns: one per line.
func patternsText(list []string) string { return strings.Join(list, "\n") }

// keyFormErrors turns a refused key into the form's messages: each pattern's message under the
// patterns field, naming the pattern; each connection's under the connections.
func keyFormErrors(ctx context.Context, err error, patterns []string) (views.FieldErrors, string, bool) {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code == errs.Internal {
		return nil, "", false
	}
	fields := views.FieldErrors{}
	add := func(field, msg string) {
		if prev := fields[field]; prev != "" {
			msg = prev + " " + msg
		}
		fields[field] = msg
	}
	var rest []string
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		msg := Text(ctx, e.Fields[k])
		field, index, _ := strings.Cut(strings.TrimSuffix(k, "]"), "[")
		switch field {
		case "name", "allowed_connections", "scopes":
			add(field, msg)
		case "allowed_models":
			if i, err := strconv.Atoi(index); err == nil && i >= 0 && i < len(patterns) && !strings.Contains(msg, patterns[i]) {
				msg = "“" + patterns[i] + "”: " + msg
			}
			add(field, msg)
		default:
			rest = append(rest, k+": "+msg)
		}
	}
	if len(e.Fields) == 0 {
		rest = append(rest, Text(ctx, e.Msg))
	}
	return fields, strings.Join(rest, "; "), true
}

// CreateKey answers POST /keys. The new key is in this answer only: it is never put in a URL,
// a cookie or a flash message, and the page is not cached.
func (d *Dashboard) CreateKey(c echo.Context) error {
	form, in, bad := keyForm(c)
	status := http.StatusOK
	var created clientkeys.Created
	var err error
	if len(bad) == 0 {
		created, err = d.Keys.Create(ctx(c), in)
	}
	if err != nil || len(bad) > 0 {
		if err != nil {
			fields, msg, ok := keyFormErrors(ctx(c), err, *in.AllowedModels)
			if !ok {
				return err
			}
			maps.Copy(bad, fields)
			form.Error = msg
		}
		form.Errors, status = bad, http.StatusUnprocessableEntity
	} else {
		form = views.KeyForm{}
	}
	m, lerr := d.keysModel(c)
	if lerr != nil {
		return lerr
	}
	m.Form = form
	if status == http.StatusOK {
		m.Created = &views.CreatedKey{Name: created.Name, Secret: created.Secret}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, status, views.KeysPage(m))
}

// EditKeyPage answers GET /keys/:id/edit.
func (d *Dashboard) EditKeyPage(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/keys")
	}
	k, err := d.Keys.Get(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/keys")
	}
	if k.RevokedAt != nil {
		return d.gone(c, "/keys")
	}
	f := views.KeyForm{Name: k.Name, AllowedModels: patternsText(k.AllowedModels),
		Lease: slices.Contains(k.Scopes, clientkeys.ScopeLeaseExclusive), Connections: map[int64]bool{}}
	for _, id := range k.AllowedConnections {
		f.Connections[id] = true
	}
	return Render(c, http.StatusOK, views.KeyEditPage(d.keyEditModel(c, k, f)))
}

func (d *Dashboard) keyEditModel(c echo.Context, k clientkeys.Key, f views.KeyForm) views.KeyEditModel {
	return views.KeyEditModel{Shell: d.shell(c, "keys", i18n.T(ctx(c), "keys.edit_title", k.Name), "/keys/"+c.Param("id")+"/edit"),
		ID: k.ID, Prefix: k.Prefix, Form: f, Connections: d.keyConnections()}
}

// UpdateKey answers POST /keys/:id/edit: saved → back to the list; refused → the page again with
// each field's message (422).
func (d *Dashboard) UpdateKey(c echo.Context) error {
	id, err := PathID(c)
	if err != nil {
		return d.gone(c, "/keys")
	}
	k, err := d.Keys.Get(ctx(c), id)
	if err != nil {
		return d.missing(c, err, "/keys")
	}
	form, in, bad := keyForm(c)
	if len(bad) == 0 {
		saved, uerr := d.Keys.Update(ctx(c), id, in)
		if uerr == nil {
			d.flash(c, "success", i18n.T(ctx(c), "keys.updated_flash", saved.Name))
			return seeOther(c, "/keys#key-"+strconv.FormatInt(id, 10))
		}
		if errs.CodeOf(uerr) == errs.NotFound || errs.CodeOf(uerr) == errs.Conflict {
			return d.gone(c, "/keys")
		}
		fields, msg, ok := keyFormErrors(ctx(c), uerr, *in.AllowedModels)
		if !ok {
			return uerr
		}
		maps.Copy(bad, fields)
		form.Error = msg
	}
	form.Errors = bad
	return Render(c, http.StatusUnprocessableEntity, views.KeyEditPage(d.keyEditModel(c, k, form)))
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
