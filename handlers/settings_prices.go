package handlers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
	"switchyard/services/spend"
	"switchyard/views"
)

// pricesCardID is the card of the prices document (services/spend, PATCH /api/settings/prices).
const pricesCardID = "prices"

// newPricePrefix names the inputs of the card's empty row.
const newPricePrefix = "models[new]"

// priceFields are the price inputs of a row, in order.
var priceFields = []string{"input_per_mtok", "output_per_mtok", "cache_write_per_mtok", "cache_read_per_mtok"}

// commonTimeZones are offered in the time zone input; any IANA zone is accepted.
var commonTimeZones = []string{"UTC", "Europe/London", "Europe/Berlin", "Europe/Paris", "Europe/Zurich", "Europe/Vienna",
	"Europe/Amsterdam", "Europe/Madrid", "Europe/Stockholm", "Europe/Warsaw", "America/New_York", "America/Chicago",
	"America/Denver", "America/Los_Angeles", "America/Sao_Paulo", "Asia/Tokyo", "Asia/Shanghai", "Asia/Singapore",
	"Asia/Kolkata", "Asia/Dubai", "Australia/Sydney", "Pacific/Auckland"}

// aboutDateRE finds the day the built-in prices were collected in their about text.
var aboutDateRE = regexp.MustCompile(`\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b`)

// priceNumberRE accepts what a person types for a price: digits with an optional fraction
// after a point or a comma.
var priceNumberRE = regexp.MustCompile(`^[0-9]+([.,][0-9]+)?$`)

// pricesCard edits the prices document: the time zone of budget days, the global budget
// webhook and its secret, and the operator's prices as rows (inputs models[2].pattern,
// models[2].input_per_mtok, …, and the saved key the row shows), each with a remove button, plus
// an empty row that is added when filled in. Saving sends every row: a shown price whose row is
// gone or renamed is removed. "Look up" and "rotate" save nothing.
type pricesCard struct{}

func (pricesCard) page(s *Settings, c echo.Context, saved bool) (templ.Component, error) {
	if s.Prices == nil {
		return templ.NopComponent, nil
	}
	m := pricesModel(s.Prices)
	m.Meta.Saved = saved
	return views.PricesCard(m), nil
}

// pricesModel draws the card from the saved document.
func pricesModel(svc *spend.PriceService) views.PricesCardModel {
	doc := svc.Snapshot()
	m := pricesFrame(svc)
	m.TimeZone, m.WebhookURL = doc.TimeZone, doc.BudgetWebhookURL
	m.TimeZoneSource, m.WebhookURLSource = pricesSource(doc.TimeZone != spend.DefaultTimeZone), pricesSource(doc.BudgetWebhookURL != "")
	for i, key := range slices.Sorted(maps.Keys(doc.Models)) {
		p := doc.Models[key]
		m.Rows = append(m.Rows, views.PriceRow{Prefix: fmt.Sprintf("models[%d]", i), Key: key, Pattern: key,
			Input: priceText(p.InputPerMTok), Output: priceText(p.OutputPerMTok),
			CacheWrite: optionalPrice(p.CacheWritePerMTok), CacheRead: optionalPrice(p.CacheReadPerMTok)})
	}
	return m
}

// pricesFrame is the card without the document's values.
func pricesFrame(svc *spend.PriceService) views.PricesCardModel {
	b := svc.BuiltIn()
	return views.PricesCardModel{Meta: views.CardMeta{ID: pricesCardID}, TimeZones: commonTimeZones,
		SecretSet: svc.Snapshot().BudgetWebhookSecretSet, NewRow: views.PriceRow{Prefix: newPricePrefix},
		BuiltInModels: b.Len(), BuiltInDate: aboutDateRE.FindString(b.About())}
}

// pricesSource is the badge of a field of the prices document: a value other than the default
// was saved.
func pricesSource(saved bool) string {
	if saved {
		return "persisted"
	}
	return "default"
}

func priceText(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// optionalPrice shows a cache price: 0 (the input price) as an empty field.
func optionalPrice(v float64) string {
	if v == 0 {
		return ""
	}
	return priceText(v)
}

// readPrice reads a typed price; an empty field is 0 unless required.
func readPrice(text string, required bool) (float64, *errs.Msg) {
	text = strings.TrimSpace(text)
	if text == "" {
		if required {
			m := errs.M("err.required")
			return 0, &m
		}
		return 0, nil
	}
	if !priceNumberRE.MatchString(text) {
		m := errs.M("err.number")
		return 0, &m
	}
	f, err := strconv.ParseFloat(strings.Replace(text, ",", ".", 1), 64)
	if err != nil {
		m := errs.M("err.number")
		return 0, &m
	}
	return f, nil
}

// priceRowKeyRE reads a row input's name: models[2].input_per_mtok.
var priceRowKeyRE = regexp.MustCompile(`^models\[([0-9]+)\]\.pattern$`)

// postedPriceRows lists the row indices present in the form, in order.
func postedPriceRows(form url.Values) []int {
	var idx []int
	for k := range form {
		if m := priceRowKeyRE.FindStringSubmatch(k); m != nil {
			n, _ := strconv.Atoi(m[1])
			idx = append(idx, n)
		}
	}
	slices.Sort(idx)
	return idx
}

// readPriceRow reads one row as the form holds it; problems are the row's own (by field).
func readPriceRow(ctx context.Context, form url.Values, prefix string) (views.PriceRow, spend.ModelPrice) {
	get := func(f string) string { return strings.TrimSpace(form.Get(prefix + "." + f)) }
	r := views.PriceRow{Prefix: prefix, Key: form.Get(prefix + ".key"), Pattern: get("pattern"), Input: get("input_per_mtok"), Output: get("output_per_mtok"),
		CacheWrite: get("cache_write_per_mtok"), CacheRead: get("cache_read_per_mtok"), Errors: views.FieldErrors{}}
	var p spend.ModelPrice
	for i, dst := range []*float64{&p.InputPerMTok, &p.OutputPerMTok, &p.CacheWritePerMTok, &p.CacheReadPerMTok} {
		text := []string{r.Input, r.Output, r.CacheWrite, r.CacheRead}[i]
		v, m := readPrice(text, i < 2)
		if m != nil {
			r.Errors[priceFields[i]] = Text(ctx, *m)
			continue
		}
		*dst = v
	}
	if r.Pattern == "" {
		r.Errors["pattern"] = Text(ctx, errs.M("prices.err.key_empty"))
	}
	return r, p
}

func (pricesCard) save(s *Settings, c echo.Context) error {
	if s.Prices == nil {
		return errs.New(errs.NotFound, "err.not_found")
	}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	cx := ctx(c)
	m := pricesFrame(s.Prices)
	action, deleted := form.Get("action"), form.Get("delete")
	m.TimeZone, m.WebhookURL = strings.TrimSpace(form.Get("time_zone")), strings.TrimSpace(form.Get("budget_webhook_url"))
	doc := s.Prices.Snapshot()
	m.TimeZoneSource, m.WebhookURLSource = pricesSource(doc.TimeZone != spend.DefaultTimeZone), pricesSource(doc.BudgetWebhookURL != "")
	m.LookupQuery = strings.TrimSpace(form.Get("lookup_model"))

	// The rows as posted, byKey the row of each price of the patch, shown the prices the page
	// showed (a price saved meanwhile elsewhere is not the page's to remove).
	var rows []*views.PriceRow
	shown := map[string]bool{}
	byKey := map[string]*views.PriceRow{}
	prices := map[string]*spend.ModelPrice{}
	rowErrors := false
	take := func(r views.PriceRow, p spend.ModelPrice) *views.PriceRow {
		row := &r
		if _, dup := byKey[r.Pattern]; dup && r.Pattern != "" {
			r.Errors["pattern"] = Text(cx, errs.M("prices.err.duplicate", r.Pattern))
		}
		if len(r.Errors) > 0 {
			rowErrors = true
		} else {
			byKey[r.Pattern] = row
			prices[r.Pattern] = &p
		}
		return row
	}
	for _, i := range postedPriceRows(form) {
		prefix := fmt.Sprintf("models[%d]", i)
		if k := form.Get(prefix + ".key"); k != "" {
			shown[k] = true
		}
		if prefix == deleted {
			continue
		}
		r, p := readPriceRow(cx, form, prefix)
		rows = append(rows, take(r, p))
	}
	newRow, newPrice := readPriceRow(cx, form, newPricePrefix)
	newFilled := newRow.Pattern+newRow.Input+newRow.Output+newRow.CacheWrite+newRow.CacheRead != ""
	m.NewRow = views.PriceRow{Prefix: newPricePrefix}
	if action == "add" || newFilled {
		m.NewRow = *take(newRow, newPrice)
	}
	render := func(status int) error {
		for _, r := range rows {
			m.Rows = append(m.Rows, *r)
		}
		return s.renderCustom(c, status, pricesCardID, views.PricesCard(m))
	}
	// "Look up" and "rotate" keep what was typed and judge none of it.
	unjudged := func() {
		for _, r := range rows {
			r.Errors = nil
		}
		m.NewRow.Errors = nil
	}

	switch action {
	case "lookup":
		unjudged()
		m.Lookup = s.lookupPrice(cx, m.LookupQuery)
		return render(http.StatusOK)
	case "rotate", "rotate-cancel":
		unjudged()
		m.ConfirmRotate = action == "rotate"
		return render(http.StatusOK)
	case "rotate-confirm":
		unjudged()
		secret, err := s.Prices.RotateWebhookSecret(cx)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store") // the secret is shown once
		m.NewSecret, m.SecretSet = secret, true
		return render(http.StatusOK)
	}

	// Save: a price the page showed that has no row any more (removed, or renamed) is removed.
	patch := spend.PricesPatch{Models: prices, TimeZone: &m.TimeZone, BudgetWebhookURL: &m.WebhookURL}
	for key := range shown {
		if _, kept := prices[key]; !kept {
			patch.Models[key] = nil
		}
	}
	if !rowErrors {
		if _, err = s.Prices.Save(cx, patch); err == nil {
			return renderSaved(c, pricesCardID, "", func() (templ.Component, error) { return pricesCard{}.page(s, c, true) })
		}
	} else {
		err = s.Prices.Check(patch) // every problem at once: the rows' and the document's
	}
	var e *errs.Error
	if err != nil && (!errors.As(err, &e) || e.Code != errs.Invalid) {
		return err
	}
	if e != nil {
		placePriceErrors(cx, e, byKey, &m)
	}
	m.Meta.Failed = true
	return render(http.StatusUnprocessableEntity)
}

// placePriceErrors puts each message of a refused save at the field it names: the time zone,
// the webhook, a row's pattern or price, or the top of the card.
func placePriceErrors(ctx context.Context, e *errs.Error, byKey map[string]*views.PriceRow, m *views.PricesCardModel) {
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		msg := Text(ctx, e.Fields[k])
		switch {
		case k == "time_zone":
			m.TimeZoneError = msg
			continue
		case k == "budget_webhook_url":
			m.WebhookURLError = msg
			continue
		case k == "models":
			m.ModelsError = msg
			continue
		case strings.HasPrefix(k, "models."):
			key, field := strings.TrimPrefix(k, "models."), "pattern"
			for _, f := range priceFields {
				if strings.HasSuffix(key, "."+f) {
					if r := byKey[strings.TrimSuffix(key, "."+f)]; r != nil {
						key, field = strings.TrimSuffix(key, "."+f), f
					}
					break
				}
			}
			if r := byKey[key]; r != nil {
				if r.Errors == nil {
					r.Errors = views.FieldErrors{}
				}
				if _, taken := r.Errors[field]; !taken {
					r.Errors[field] = msg
				}
				continue
			}
		}
		m.Meta.Errors = append(m.Meta.Errors, k+": "+msg)
	}
	if len(e.Fields) == 0 {
		m.Meta.Errors = append(m.Meta.Errors, Text(ctx, e.Msg))
	}
}

// lookupPrice answers "look up a price" for provider/model with the saved prices, as the
// gateway would bill a request that provider delivered.
func (s *Settings) lookupPrice(ctx context.Context, query string) *views.PriceLookup {
	provider, model, ok := strings.Cut(query, "/")
	if !ok || provider == "" || model == "" {
		return &views.PriceLookup{Error: Text(ctx, errs.M("prices.lookup.shape"))}
	}
	typ, known := "", false
	if s.Providers != nil {
		if list, err := s.Providers.ListProviders(ctx); err == nil {
			for _, p := range list {
				if p.Name == provider {
					typ, known = p.Type, true
				}
			}
		}
	}
	p, src, found := s.Prices.Lookup(provider, typ, model)
	return &views.PriceLookup{Found: found, Kind: src.Kind.String(), Name: src.Name, UnknownProvider: !known,
		Input: p.InputPerMTok, Output: p.OutputPerMTok, CacheWrite: p.CacheWritePerMTok, CacheRead: p.CacheReadPerMTok,
		InputAbove200k: p.InputAbove200kPerMTok, OutputAbove200k: p.OutputAbove200kPerMTok}
}
