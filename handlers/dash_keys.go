package handlers

import (
	"context"
	"errors"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/clientkeys"
	"switchyard/services/errs"
	"switchyard/services/spend"
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
	use, err := d.keyUse(c, list)
	if err != nil {
		return views.KeysModel{}, err
	}
	for _, k := range list {
		u := usage[k.ID]
		row := views.KeyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: time.UnixMilli(k.CreatedAt),
			LastUsedAt: at(k.LastUsedAt), RevokedAt: at(k.RevokedAt), Requests: u.Requests, InTokens: u.In, OutTokens: u.Out,
			AllowedModels: k.AllowedModels, Lease: slices.Contains(k.Scopes, clientkeys.ScopeLeaseExclusive),
			LeaseConns: len(k.AllowedConnections)}
		if k.RevokedAt == nil {
			row.Limits = limitBars(k.Limits, use(k), d.Limits != nil)
			if p, err := url.Parse(k.WebhookURL); err == nil && k.WebhookURL != "" {
				row.WebhookHost = p.Host
			}
		}
		m.Keys = append(m.Keys, row)
	}
	return m, nil
}

// KeyLimits is the per-key limiter as the keys page reads it (spend.Limiter): a key's use
// against its limits now.
type KeyLimits interface {
	Use(keyID int64, l spend.Limits) spend.KeyUse
}

// keyUse returns each key's use against its limits: the limiter's when there is one; else the
// day's and the month's spend (UTC) from the usage buckets, and no per-minute or parallel use.
func (d *Dashboard) keyUse(c echo.Context, keys []clientkeys.Key) (func(clientkeys.Key) spend.KeyUse, error) {
	if d.Limits != nil {
		return func(k clientkeys.Key) spend.KeyUse { return d.Limits.Use(k.ID, k.Limits) }, nil
	}
	var day, month map[int64]float64
	if slices.ContainsFunc(keys, func(k clientkeys.Key) bool { return k.DailyUSD > 0 || k.MonthlyUSD > 0 }) {
		now := d.Ops.Now().UTC()
		var err error
		if day, err = d.Traffic.KeySpendSince(ctx(c), time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC), true); err != nil {
			return nil, err
		}
		if month, err = d.Traffic.KeySpendSince(ctx(c), time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC), true); err != nil {
			return nil, err
		}
	}
	return func(k clientkeys.Key) spend.KeyUse {
		return spend.KeyUse{Limits: k.Limits, DaySpend: day[k.ID], MonthSpend: month[k.ID]}
	}, nil
}

// limitBars are a key's limits with its use against each; live says whether the per-minute
// and parallel use was measured (the budgets' spend always is).
func limitBars(l spend.Limits, u spend.KeyUse, live bool) []views.LimitBar {
	var out []views.LimitBar
	add := func(kind string, used, limit float64, known bool) {
		if limit > 0 {
			out = append(out, views.LimitBar{Kind: kind, Used: used, Limit: limit, Known: known})
		}
	}
	add("rpm", float64(u.Requests), float64(l.RPM), live)
	add("tpm", float64(u.Tokens), float64(l.TPM), live)
	add("daily", u.DaySpend, l.DailyUSD, true)
	add("monthly", u.MonthSpend, l.MonthlyUSD, true)
	add("parallel", float64(u.Parallel), float64(l.MaxParallel), live)
	return out
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
	limitForm(c, &f, &in, bad)
	return f, in, bad
}

// limitForm reads the limit fields: an empty field is no limit (0), a number is read in the
// page's language (a German "1.000,50" as an English "1,000.50"); one that does not read is
// its field's error. The ranges are the service's to check.
func limitForm(c echo.Context, f *views.KeyForm, in *clientkeys.Input, bad views.FieldErrors) {
	cx := ctx(c)
	val := func(name string) string { return strings.TrimSpace(c.FormValue(name)) }
	f.RPM, f.TPM, f.MaxParallel = val("rpm_limit"), val("tpm_limit"), val("max_parallel")
	f.DailyUSD, f.MonthlyUSD, f.WebhookURL = val("daily_budget_usd"), val("monthly_budget_usd"), val("budget_webhook_url")
	lang := i18n.FromContext(cx)
	count := func(field, text string) *int64 {
		n, ok := parseCount(lang, text)
		if !ok {
			bad[field] = i18n.T(cx, "keys.err.whole_number")
		}
		return &n
	}
	money := func(field, text string) *float64 {
		v, ok := parseAmount(lang, text)
		if !ok {
			bad[field] = i18n.T(cx, "keys.err.amount")
		}
		return &v
	}
	in.LimitsInput = spend.LimitsInput{RPM: count("rpm_limit", f.RPM), TPM: count("tpm_limit", f.TPM),
		DailyUSD: money("daily_budget_usd", f.DailyUSD), MonthlyUSD: money("monthly_budget_usd", f.MonthlyUSD),
		MaxParallel: count("max_parallel", f.MaxParallel), WebhookURL: &f.WebhookURL}
}

// limitFields shows stored limits in the form: empty for none, amounts with the page's decimal
// mark.
func limitFields(cx context.Context, f *views.KeyForm, l spend.Limits) {
	count := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	money := func(v float64) string {
		if v == 0 {
			return ""
		}
		return strings.Replace(strconv.FormatFloat(v, 'f', -1, 64), ".", i18n.T(cx, "format.decimal"), 1)
	}
	f.RPM, f.TPM, f.MaxParallel = count(l.RPM), count(l.TPM), count(l.MaxParallel)
	f.DailyUSD, f.MonthlyUSD, f.WebhookURL = money(l.DailyUSD), money(l.MonthlyUSD), l.WebhookURL
}

// numberMarks are a language's decimal mark and thousands separator.
func numberMarks(l i18n.Lang) (dec, thousands string) {
	return i18n.TL(l, "format.decimal"), i18n.TL(l, "format.thousands")
}

// plainNumber turns a number typed in a language into Go's syntax: thousands separators go
// (only between groups of three digits), the decimal mark becomes a dot. A lone separator that
// does not group thousands is taken for the other habit's decimal mark ("5.50" on a German
// page is 5.5). "" for an empty text.
func plainNumber(l i18n.Lang, text string) string {
	t := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\u00a0' || r == '\u202f' || r == '_' {
			return -1
		}
		return r
	}, text)
	dec, thou := numberMarks(l)
	if thou != "" && strings.Contains(t, thou) {
		if strings.Contains(t, dec) || groupsThousands(t, thou) {
			t = strings.ReplaceAll(t, thou, "")
		} else {
			dec = thou // the other habit: "5.50" where "," is the mark
		}
	}
	return strings.Replace(t, dec, ".", 1)
}

// groupsThousands reports whether sep splits t's whole part into groups of three digits after
// a first group of one to three ("1.000", "12.500.000").
func groupsThousands(t, sep string) bool {
	parts := strings.Split(t, sep)
	if len(parts) < 2 || len(parts[0]) < 1 || len(parts[0]) > 3 {
		return false
	}
	for _, p := range parts[1:] {
		if len(p) != 3 {
			return false
		}
	}
	return true
}

// parseCount reads a whole number typed in a language; "" is 0.
func parseCount(l i18n.Lang, text string) (int64, bool) {
	t := plainNumber(l, text)
	if t == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(t, 10, 64)
	return n, err == nil
}

// parseAmount reads an amount typed in a language; "" is 0.
func parseAmount(l i18n.Lang, text string) (float64, bool) {
	t := plainNumber(l, text)
	if t == "" {
		return 0, true
	}
	v, err := strconv.ParseFloat(t, 64)
	return v, err == nil && !math.IsInf(v, 0) && !math.IsNaN(v)
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
		case "name", "allowed_connections", "scopes", "rpm_limit", "tpm_limit", "daily_budget_usd", "monthly_budget_usd",
			"max_parallel", "budget_webhook_url":
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
	k, _, ok, err := itemAt(c, d.Sessions, "/keys", d.Keys.Get)
	if !ok {
		return err
	}
	if k.RevokedAt != nil {
		return d.gone(c, "/keys")
	}
	f := views.KeyForm{Name: k.Name, AllowedModels: patternsText(k.AllowedModels),
		Lease: slices.Contains(k.Scopes, clientkeys.ScopeLeaseExclusive), Connections: map[int64]bool{}}
	for _, id := range k.AllowedConnections {
		f.Connections[id] = true
	}
	limitFields(ctx(c), &f, k.Limits)
	return Render(c, http.StatusOK, views.KeyEditPage(d.keyEditModel(c, k, f)))
}

func (d *Dashboard) keyEditModel(c echo.Context, k clientkeys.Key, f views.KeyForm) views.KeyEditModel {
	return views.KeyEditModel{Shell: d.shell(c, "keys", i18n.T(ctx(c), "keys.edit_title", k.Name), "/keys/"+c.Param("id")+"/edit"),
		ID: k.ID, Prefix: k.Prefix, Form: f, Connections: d.keyConnections()}
}

// UpdateKey answers POST /keys/:id/edit: saved → back to the list; refused → the page again with
// each field's message (422).
func (d *Dashboard) UpdateKey(c echo.Context) error {
	k, id, ok, err := itemAt(c, d.Sessions, "/keys", d.Keys.Get)
	if !ok {
		return err
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
