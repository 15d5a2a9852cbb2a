package spend

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "time/tzdata" // budget days and months run in any IANA zone, also where the system has no zoneinfo

	"switchyard/services/errs"
	"switchyard/services/names"
)

// PricesKey is the key_value key of the operator's prices document.
const PricesKey = "settings.prices"

// webhookSecretKey holds the budget webhook signing secret, sealed with the secret box; it is
// kept apart from the document so no revision of the document and no GET ever carries it.
const webhookSecretKey = "settings.prices.budget_webhook_secret"

// webhookSecretAAD binds the sealed secret to its purpose.
var webhookSecretAAD = []byte("prices:budget_webhook_secret")

// Bounds of the prices document.
const (
	// MaxPriceEntries is how many prices (provider/model or pattern) the document holds.
	MaxPriceEntries = 500
	// MaxPriceKeyLen bounds a key, in bytes.
	MaxPriceKeyLen = 200
	// MaxPricePerMTok is the highest price, USD per million tokens.
	MaxPricePerMTok = 100_000
	// DefaultTimeZone is where budget days and months run unless the operator says otherwise.
	DefaultTimeZone = "UTC"
)

// providerNameRE is a provider's name (services/catalog keeps the same rule).
var providerNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ModelPrice is an operator's price for a provider/model or a pattern, in USD per million
// tokens. A cache price of 0 bills those tokens at the input price.
type ModelPrice struct {
	InputPerMTok      float64 `json:"input_per_mtok"`
	OutputPerMTok     float64 `json:"output_per_mtok"`
	CacheWritePerMTok float64 `json:"cache_write_per_mtok"`
	CacheReadPerMTok  float64 `json:"cache_read_per_mtok"`
}

// Price is the price the table bills with.
func (m ModelPrice) Price() Price {
	return Price{InputPerMTok: m.InputPerMTok, OutputPerMTok: m.OutputPerMTok, CacheWritePerMTok: m.CacheWritePerMTok,
		CacheReadPerMTok: m.CacheReadPerMTok}
}

// PricesDoc is the prices settings document (GET/PATCH /api/settings/prices). A snapshot is
// shared: never modify it or its map.
type PricesDoc struct {
	// Models are the operator's prices by "provider/model" or by a pattern over it; they come
	// before the built-in table.
	Models map[string]ModelPrice `json:"models"`
	// TimeZone is the IANA zone in which budget days and months run. Default UTC.
	TimeZone string `json:"time_zone"`
	// BudgetWebhookURL receives budget warnings of every key that has no webhook of its own
	// ("" = none).
	BudgetWebhookURL string `json:"budget_webhook_url"`
	// BudgetWebhookSecretSet says that the webhook signing secret exists; the secret itself is
	// shown only when it is rotated.
	BudgetWebhookSecretSet bool `json:"budget_webhook_secret_set"`
}

// PricesView is the document as GET /api/settings/prices shows it, with what the built-in
// table holds.
type PricesView struct {
	PricesDoc
	// BuiltInModels is the number of models the built-in table prices.
	BuiltInModels int `json:"built_in_models"`
	// About says where the built-in prices come from.
	About string `json:"about"`
}

// PricesPatch changes the document: every price given is set (nil removes it), the other
// fields replace theirs when not nil.
type PricesPatch struct {
	Models           map[string]*ModelPrice
	TimeZone         *string
	BudgetWebhookURL *string
}

// PriceStore is the key/value persistence the prices need (db.KV).
type PriceStore interface {
	GetValue(ctx context.Context, key string) (value string, ok bool, err error)
	PutValue(ctx context.Context, key, value string) error
	SaveRevision(ctx context.Context, key, value string) (revision int64, err error)
}

// SecretBox seals the webhook secret at rest (*secrets.Box).
type SecretBox interface {
	Seal(plaintext, aad []byte) []byte
	Open(sealed, aad []byte) ([]byte, error)
}

// PriceService owns the prices document: it validates and saves changes and publishes, after
// each save, an immutable snapshot (the document, the price table built from it, the time zone
// and the webhook secret) that the request path reads without a lock.
type PriceService struct {
	store   PriceStore
	box     SecretBox
	builtIn *BuiltIn

	state atomic.Pointer[priceState]

	mu    sync.Mutex // serialises saves, rotations and reloads
	hooks []func()   // guarded by mu
	// committed are the OnCommitted functions; madeSecret records that NewPriceService saved a
	// webhook secret. Both guarded by mu.
	committed  []func(topic string)
	madeSecret bool
}

// priceState is one published snapshot.
type priceState struct {
	doc    *PricesDoc
	table  *Table
	loc    *time.Location
	secret string
	// sealed is the webhook secret as stored, so a reload tells a rotation without opening it.
	sealed string
}

// savedPrices is the document as key_value keeps it.
type savedPrices struct {
	Models           map[string]ModelPrice `json:"models"`
	TimeZone         string                `json:"time_zone,omitempty"`
	BudgetWebhookURL string                `json:"budget_webhook_url,omitempty"`
}

// NewPriceService reads the built-in table and the saved document, and makes the webhook
// signing secret the first time (or anew, with a warning, when the saved one cannot be opened
// with this instance's secret key). Saved values that no longer validate are dropped and
// reported in the warnings, never fatal.
func NewPriceService(ctx context.Context, store PriceStore, box SecretBox) (*PriceService, []string, error) {
	b, err := LoadBuiltIn()
	if err != nil {
		return nil, nil, err
	}
	s := &PriceService{store: store, box: box, builtIn: b}
	var warnings []string
	doc := &PricesDoc{Models: map[string]ModelPrice{}, TimeZone: DefaultTimeZone}
	raw, ok, err := store.GetValue(ctx, PricesKey)
	if err != nil {
		return nil, nil, fmt.Errorf("prices: load: %w", err)
	}
	if ok {
		warnings = append(warnings, loadSaved(raw, doc)...)
	}
	secret, sealed, made, w, err := s.loadSecret(ctx)
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, w...)
	s.madeSecret = made
	doc.BudgetWebhookSecretSet = secret != ""
	st, err := s.build(doc, secret)
	if err != nil {
		return nil, nil, err
	}
	st.sealed = sealed
	s.state.Store(st)
	return s, warnings, nil
}

// loadSaved fills doc from the saved document, keeping only what still validates.
func loadSaved(raw string, doc *PricesDoc) []string {
	var sv savedPrices
	if err := json.Unmarshal([]byte(raw), &sv); err != nil {
		return []string{fmt.Sprintf("%s: saved prices ignored: %v", PricesKey, err)}
	}
	var warnings []string
	for _, key := range slicesSortedKeys(sv.Models) {
		p := sv.Models[key]
		problems := map[string]errs.Msg{}
		if m, bad := CheckPriceKey(key); bad {
			problems["models."+key] = m
		}
		checkModelPrice("models."+key, p, problems)
		if len(problems) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: saved price ignored: %v", PricesKey, errs.Fields(problems)))
			continue
		}
		if len(doc.Models) >= MaxPriceEntries {
			warnings = append(warnings, fmt.Sprintf("%s: saved price ignored: %s: more than %d prices", PricesKey, key, MaxPriceEntries))
			continue
		}
		doc.Models[key] = p
	}
	if sv.TimeZone != "" {
		if m, bad := checkTimeZone(sv.TimeZone); bad {
			warnings = append(warnings, fmt.Sprintf("%s: saved time_zone %q ignored: %s", PricesKey, sv.TimeZone, m))
		} else {
			doc.TimeZone = sv.TimeZone
		}
	}
	if sv.BudgetWebhookURL != "" {
		if !ValidWebhookURL(sv.BudgetWebhookURL) {
			warnings = append(warnings, fmt.Sprintf("%s: saved budget_webhook_url ignored: not an http(s) address", PricesKey))
		} else {
			doc.BudgetWebhookURL = sv.BudgetWebhookURL
		}
	}
	return warnings
}

// loadSecret opens the saved webhook secret, or makes and saves one (made); sealed is the
// secret as stored.
func (s *PriceService) loadSecret(ctx context.Context) (secret, sealed string, made bool, warnings []string, err error) {
	raw, ok, err := s.store.GetValue(ctx, webhookSecretKey)
	if err != nil {
		return "", "", false, nil, fmt.Errorf("prices: load webhook secret: %w", err)
	}
	if ok {
		if secret, err = s.openSecret(raw); err == nil {
			return secret, raw, false, nil, nil
		}
		warnings = append(warnings, fmt.Sprintf("%s: the budget webhook secret cannot be opened (%v); a new one was made: rotate it on the Prices card to read it", PricesKey, err))
	}
	secret, sealed, err = s.saveNewSecret(ctx)
	if err != nil {
		return "", "", false, nil, err
	}
	return secret, sealed, true, warnings, nil
}

// openSecret opens the webhook secret as stored.
func (s *PriceService) openSecret(raw string) (string, error) {
	sealed, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return "", err
	}
	plain, err := s.box.Open(sealed, webhookSecretAAD)
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// saveNewSecret makes a webhook secret and saves it sealed; it returns the secret and its
// stored form.
func (s *PriceService) saveNewSecret(ctx context.Context) (secret, sealed string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("prices: webhook secret: %w", err)
	}
	secret = "whsec_" + hex.EncodeToString(b)
	sealed = base64.StdEncoding.EncodeToString(s.box.Seal([]byte(secret), webhookSecretAAD))
	if err := s.store.PutValue(ctx, webhookSecretKey, sealed); err != nil {
		return "", "", fmt.Errorf("prices: save webhook secret: %w", err)
	}
	return secret, sealed, nil
}

// build makes the snapshot of a valid document.
func (s *PriceService) build(doc *PricesDoc, secret string) (*priceState, error) {
	overrides := make(map[string]Price, len(doc.Models))
	for k, m := range doc.Models {
		overrides[k] = m.Price()
	}
	t, err := NewTable(s.builtIn, overrides)
	if err != nil {
		return nil, err
	}
	loc, err := time.LoadLocation(doc.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("prices: time zone %q: %w", doc.TimeZone, err)
	}
	return &priceState{doc: doc, table: t, loc: loc, secret: secret}, nil
}

// Snapshot is the current document; lock-free. It is shared: do not modify it.
func (s *PriceService) Snapshot() *PricesDoc { return s.state.Load().doc }

// Table is the current price table; lock-free.
func (s *PriceService) Table() *Table { return s.state.Load().table }

// Lookup prices a delivered request with the current table (see Table.Lookup).
func (s *PriceService) Lookup(provider, providerType, model string) (Price, Source, bool) {
	return s.state.Load().table.Lookup(provider, providerType, model)
}

// Location is the time zone budget days and months run in; lock-free.
func (s *PriceService) Location() *time.Location { return s.state.Load().loc }

// Webhook is the global budget webhook ("" = none) and the secret every budget webhook is
// signed with; lock-free.
func (s *PriceService) Webhook() (url, secret string) {
	st := s.state.Load()
	return st.doc.BudgetWebhookURL, st.secret
}

// BuiltIn is the built-in price table.
func (s *PriceService) BuiltIn() *BuiltIn { return s.builtIn }

// OnChange adds a function called after every save that changed the document (a new time zone,
// prices or webhook), once the new snapshot is in place, and after a Reload (or a save) that
// found a document another replica saved. It runs on the saving (or reloading) goroutine and
// must not save prices itself. A rotated webhook secret is no change of the document.
func (s *PriceService) OnChange(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = append(s.hooks, fn)
}

// View is the document as GET /api/settings/prices shows it.
func (s *PriceService) View() PricesView {
	return PricesView{PricesDoc: *s.Snapshot(), BuiltInModels: s.builtIn.Len(), About: s.builtIn.About()}
}

// Save validates a patch, saves it and swaps the snapshot, so the next request is billed with
// it. Any invalid field → errs.Fields keyed by its path (models.<key>.input_per_mtok,
// time_zone, …) and nothing saved.
func (s *PriceService) Save(ctx context.Context, p PricesPatch) (PricesView, error) {
	changed, saved, err := s.save(ctx, p)
	s.after(changed, saved)
	if err != nil {
		return PricesView{}, err
	}
	return s.View(), nil
}

// save is Save under the lock. It reports whether the document changed (by this save, or by
// another replica's that it read first) and whether this save committed.
func (s *PriceService) save(ctx context.Context, p PricesPatch) (changed, saved bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Another replica may have saved since this one last read the store: the patch applies over
	// what it saved, never over an older document that would undo it.
	if changed, err = s.refreshDoc(ctx); err != nil {
		return false, false, errs.Wrap(err, errs.Internal, "err.internal")
	}
	cur := s.state.Load()
	next, fields := merge(cur.doc, p)
	if len(fields) > 0 {
		return changed, false, errs.Fields(fields)
	}
	if sameDoc(next, cur.doc) {
		return changed, false, nil
	}
	st, err := s.build(next, cur.secret)
	if err == nil {
		var raw []byte
		raw, err = json.Marshal(savedPrices{Models: next.Models, TimeZone: next.TimeZone, BudgetWebhookURL: next.BudgetWebhookURL})
		if err == nil {
			_, err = s.store.SaveRevision(ctx, PricesKey, string(raw))
		}
	}
	if err != nil {
		return changed, false, errs.Wrap(err, errs.Internal, "err.internal")
	}
	st.sealed = cur.sealed
	s.state.Store(st)
	return true, true, nil
}

// sameDoc reports whether two documents hold the same prices, time zone and webhook.
func sameDoc(a, b *PricesDoc) bool {
	return maps.Equal(a.Models, b.Models) && a.TimeZone == b.TimeZone && a.BudgetWebhookURL == b.BudgetWebhookURL
}

// after runs, with the lock released, the OnChange functions when the document changed and
// the OnCommitted functions when a write committed.
func (s *PriceService) after(changed, committed bool) {
	if !changed && !committed {
		return
	}
	s.mu.Lock()
	hooks, fns := slices.Clone(s.hooks), slices.Clone(s.committed)
	s.mu.Unlock()
	if changed {
		for _, fn := range hooks {
			fn()
		}
	}
	if committed {
		for _, fn := range fns {
			fn(Topic)
		}
	}
}

// Check validates a patch against the current document without saving it: the errors Save
// would return, or nil.
func (s *PriceService) Check(p PricesPatch) error {
	if _, fields := merge(s.Snapshot(), p); len(fields) > 0 {
		return errs.Fields(fields)
	}
	return nil
}

// merge applies a patch to a copy of doc and says what is invalid, by field path.
func merge(doc *PricesDoc, p PricesPatch) (*PricesDoc, map[string]errs.Msg) {
	next := &PricesDoc{Models: maps.Clone(doc.Models), TimeZone: doc.TimeZone, BudgetWebhookURL: doc.BudgetWebhookURL,
		BudgetWebhookSecretSet: doc.BudgetWebhookSecretSet}
	fields := map[string]errs.Msg{}
	for _, key := range slicesSortedKeys(p.Models) {
		mp := p.Models[key]
		if mp == nil {
			delete(next.Models, key)
			continue
		}
		if m, bad := CheckPriceKey(key); bad {
			fields["models."+key] = m
			continue
		}
		checkModelPrice("models."+key, *mp, fields)
		next.Models[key] = *mp
	}
	if len(next.Models) > MaxPriceEntries {
		fields["models"] = errs.M("prices.err.too_many", MaxPriceEntries)
	}
	if p.TimeZone != nil {
		if m, bad := checkTimeZone(*p.TimeZone); bad {
			fields["time_zone"] = m
		} else {
			next.TimeZone = *p.TimeZone
		}
	}
	if p.BudgetWebhookURL != nil {
		if u := *p.BudgetWebhookURL; u != "" && !ValidWebhookURL(u) {
			fields["budget_webhook_url"] = errs.M("keys.err.webhook_url")
		} else {
			next.BudgetWebhookURL = u
		}
	}
	return next, fields
}

// Patch applies PATCH /api/settings/prices: a JSON object whose "models" are merged into the
// saved ones (null removes one) and whose other fields replace theirs. The read-only fields of
// GET (budget_webhook_secret_set, built_in_models, about) are ignored, so a document read can
// be sent back; any other field is refused.
func (s *PriceService) Patch(ctx context.Context, raw []byte) (PricesView, error) {
	p, fields := ParsePricesPatch(raw)
	if len(fields) > 0 {
		return PricesView{}, errs.Fields(fields)
	}
	return s.Save(ctx, p)
}

// RotateWebhookSecret makes a new webhook signing secret, saves it and returns it: the only
// time it is shown. Webhooks sent from now on are signed with it.
func (s *PriceService) RotateWebhookSecret(ctx context.Context) (string, error) {
	secret, err := s.rotate(ctx)
	if err != nil {
		return "", err
	}
	s.after(false, true)
	return secret, nil
}

// rotate is RotateWebhookSecret under the lock.
func (s *PriceService) rotate(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	secret, sealed, err := s.saveNewSecret(ctx)
	if err != nil {
		return "", errs.Wrap(err, errs.Internal, "err.internal")
	}
	s.useSecret(secret, sealed)
	return secret, nil
}

// useSecret publishes the current snapshot with another webhook secret; s.mu is held.
func (s *PriceService) useSecret(secret, sealed string) {
	cur := s.state.Load()
	doc := *cur.doc
	doc.BudgetWebhookSecretSet = true
	s.state.Store(&priceState{doc: &doc, table: cur.table, loc: cur.loc, secret: secret, sealed: sealed})
}

// ParsePricesPatch reads the body of PATCH /api/settings/prices; problems are keyed by field
// path.
func ParsePricesPatch(raw []byte) (PricesPatch, map[string]errs.Msg) {
	fields := map[string]errs.Msg{}
	var p PricesPatch
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		fields[""] = errs.M("err.json_object")
		return p, fields
	}
	for _, k := range slicesSortedKeys(top) {
		v := top[k]
		switch k {
		case "models":
			var models map[string]json.RawMessage
			if err := json.Unmarshal(v, &models); err != nil || models == nil {
				fields["models"] = errs.M("err.json_object")
				continue
			}
			p.Models = map[string]*ModelPrice{}
			for _, key := range slicesSortedKeys(models) {
				if string(models[key]) == "null" {
					p.Models[key] = nil
					continue
				}
				if mp, ok := parseModelPrice("models."+key, models[key], fields); ok {
					p.Models[key] = &mp
				}
			}
		case "time_zone", "budget_webhook_url":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				fields[k] = errs.M("err.string")
				continue
			}
			if k == "time_zone" {
				p.TimeZone = &s
			} else {
				p.BudgetWebhookURL = &s
			}
		case "budget_webhook_secret_set", "built_in_models", "about":
			// read-only: ignored
		default:
			fields[k] = errs.M("err.unknown_setting")
		}
	}
	return p, fields
}

// parseModelPrice reads one price object; input and output prices are required.
func parseModelPrice(path string, raw json.RawMessage, fields map[string]errs.Msg) (ModelPrice, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		fields[path] = errs.M("err.json_object")
		return ModelPrice{}, false
	}
	var mp ModelPrice
	targets := map[string]*float64{"input_per_mtok": &mp.InputPerMTok, "output_per_mtok": &mp.OutputPerMTok,
		"cache_write_per_mtok": &mp.CacheWritePerMTok, "cache_read_per_mtok": &mp.CacheReadPerMTok}
	ok := true
	for _, name := range slicesSortedKeys(obj) {
		dst, known := targets[name]
		if !known {
			fields[path+"."+name] = errs.M("err.unknown_setting")
			ok = false
			continue
		}
		if err := json.Unmarshal(obj[name], dst); err != nil || string(obj[name]) == "null" {
			fields[path+"."+name] = errs.M("err.number")
			ok = false
		}
	}
	for _, name := range []string{"input_per_mtok", "output_per_mtok"} {
		if _, given := obj[name]; !given {
			fields[path+"."+name] = errs.M("err.required")
			ok = false
		}
	}
	return mp, ok
}

// checkModelPrice adds an error for every price out of range.
func checkModelPrice(path string, p ModelPrice, fields map[string]errs.Msg) {
	for name, v := range map[string]float64{"input_per_mtok": p.InputPerMTok, "output_per_mtok": p.OutputPerMTok,
		"cache_write_per_mtok": p.CacheWritePerMTok, "cache_read_per_mtok": p.CacheReadPerMTok} {
		if !(v >= 0 && v <= MaxPricePerMTok) { // also refuses NaN
			fields[path+"."+name] = errs.M("prices.err.price_range", MaxPricePerMTok)
		}
	}
}

// CheckPriceKey says what is wrong with a key of the document, if anything: it is a
// provider/model (a provider's name, a slash, the upstream model id) or a pattern over
// provider/model, of 1–MaxPriceKeyLen bytes of printable text without spaces around it.
func CheckPriceKey(key string) (errs.Msg, bool) {
	if m, bad := names.CheckPattern(key, MaxPriceKeyLen, "prices.err.key_empty", "prices.err.key_too_long"); bad {
		return m, true
	}
	if isPattern(key) {
		if _, err := compilePattern(key); err != nil {
			return errs.M("keys.err.pattern_syntax", key), true
		}
		// Every name a pattern sees starts with "provider/": without a slash it would match
		// nothing unless it begins with a wildcard.
		if !strings.Contains(key, "/") && key[0] != '*' {
			return errs.M("prices.err.pattern_no_provider", key, key), true
		}
		return errs.Msg{}, false
	}
	provider, model, ok := strings.Cut(key, "/")
	switch {
	case !ok || model == "":
		return errs.M("prices.err.key_shape", key), true
	case !providerNameRE.MatchString(provider):
		return errs.M("prices.err.key_provider", provider), true
	}
	return errs.Msg{}, false
}

// checkTimeZone says what is wrong with a time zone name: it must be an IANA zone ("UTC",
// "Europe/Berlin"); "Local" is refused, as it would move with the machine.
func checkTimeZone(name string) (errs.Msg, bool) {
	if name == "" || name == "Local" || strings.TrimSpace(name) != name {
		return errs.M("prices.err.time_zone", name), true
	}
	if _, err := time.LoadLocation(name); err != nil {
		return errs.M("prices.err.time_zone", name), true
	}
	return errs.Msg{}, false
}
