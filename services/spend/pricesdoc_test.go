package spend

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/services/errs"
	"switchyard/services/secrets"
)

// memKV is an in-memory PriceStore that counts writes and can be made to fail.
type memKV struct {
	mu     sync.Mutex
	values map[string]string
	saves  int
	fail   error
}

func newMemKV() *memKV { return &memKV{values: map[string]string{}} }

func (m *memKV) GetValue(_ context.Context, key string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[key]
	return v, ok, nil
}

func (m *memKV) PutValue(_ context.Context, key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.values[key] = value
	return nil
}

func (m *memKV) SaveRevision(ctx context.Context, key, value string) (int64, error) {
	if err := m.PutValue(ctx, key, value); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saves++
	return int64(m.saves), nil
}

func newBox(t *testing.T, key string) *secrets.Box {
	t.Helper()
	b, err := secrets.NewBox([]byte(strings.Repeat(key, 32)[:32]))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newPrices(t *testing.T, kv *memKV, box SecretBox) (*PriceService, []string) {
	t.Helper()
	s, warnings, err := NewPriceService(context.Background(), kv, box)
	if err != nil {
		t.Fatal(err)
	}
	return s, warnings
}

// fieldKeys returns the message keys of a validation error by field.
func fieldKeys(t *testing.T, err error) map[string]string {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != errs.Invalid {
		t.Fatalf("want a validation error, got %v", err)
	}
	out := map[string]string{}
	for k, m := range e.Fields {
		out[k] = m.Key
	}
	return out
}

var whsecRE = regexp.MustCompile(`^whsec_[0-9a-f]{64}$`)

func TestPricesDefaults(t *testing.T) {
	kv := newMemKV()
	s, warnings := newPrices(t, kv, newBox(t, "k"))
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	v := s.View()
	if len(v.Models) != 0 || v.Models == nil || v.TimeZone != "UTC" || v.BudgetWebhookURL != "" || !v.BudgetWebhookSecretSet {
		t.Fatalf("%+v", v.PricesDoc)
	}
	if v.BuiltInModels < 150 || v.About == "" {
		t.Fatalf("built-in %d %q", v.BuiltInModels, v.About)
	}
	if s.Location().String() != "UTC" {
		t.Fatal(s.Location())
	}
	url, secret := s.Webhook()
	if url != "" || !whsecRE.MatchString(secret) {
		t.Fatalf("webhook %q %q", url, secret)
	}
	// The secret is kept sealed, and never in the document.
	if strings.Contains(kv.values[webhookSecretKey], secret) || strings.Contains(kv.values[webhookSecretKey], "whsec_") {
		t.Fatal("the webhook secret is stored in the clear")
	}
	b, _ := json.Marshal(v)
	if strings.Contains(string(b), secret) {
		t.Fatal("the view carries the secret")
	}
	if _, saved := kv.values[PricesKey]; saved {
		t.Fatal("nothing was changed, yet the document was saved")
	}
}

func TestPricesPatch(t *testing.T) {
	ctx := context.Background()
	kv := newMemKV()
	s, _ := newPrices(t, kv, newBox(t, "k"))
	changes := 0
	s.OnChange(func() { changes++ })
	seen := ""
	s.OnChange(func() { seen = s.Location().String() }) // a second hook does not silence the first

	v, err := s.Patch(ctx, []byte(`{"models": {"rp/sim-small": {"input_per_mtok": 1.5, "output_per_mtok": 3},
		"openai/gpt-4o*": {"input_per_mtok": 2, "output_per_mtok": 8, "cache_read_per_mtok": 0.5, "cache_write_per_mtok": 0}},
		"time_zone": "Europe/Berlin", "budget_webhook_url": "https://hooks.example.com/budget"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Models) != 2 || v.Models["rp/sim-small"] != (ModelPrice{InputPerMTok: 1.5, OutputPerMTok: 3}) ||
		v.TimeZone != "Europe/Berlin" || v.BudgetWebhookURL != "https://hooks.example.com/budget" {
		t.Fatalf("%+v", v.PricesDoc)
	}
	if changes != 1 || seen != "Europe/Berlin" {
		t.Fatalf("hooks: %d changes, saw %q", changes, seen)
	}
	// The new table, zone and webhook are in effect at once.
	if p, src, ok := s.Lookup("rp", "openai-compatible", "sim-small"); !ok || p.InputPerMTok != 1.5 || src.Kind != SourceOverride {
		t.Fatalf("rp/sim-small: %+v %+v", p, src)
	}
	if _, src, _ := s.Table().Lookup("openai", "openai", "gpt-4o-mini"); src != (Source{SourceGlob, "openai/gpt-4o*"}) {
		t.Fatalf("openai/gpt-4o-mini: %+v", src)
	}
	if url, _ := s.Webhook(); url != "https://hooks.example.com/budget" {
		t.Fatal(url)
	}

	// models merge: a null removes one, others stay; the other fields stay when absent.
	v, err = s.Patch(ctx, []byte(`{"models": {"rp/sim-small": null, "rp/sim-large": {"input_per_mtok": 4, "output_per_mtok": 4}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(v.Models)); !slices.Equal(got, []string{"openai/gpt-4o*", "rp/sim-large"}) || v.TimeZone != "Europe/Berlin" {
		t.Fatalf("%v %s", got, v.TimeZone)
	}
	if _, _, ok := s.Lookup("rp", "openai-compatible", "sim-small"); ok {
		t.Fatal("a removed price still prices")
	}
	// A document read back is accepted (its read-only fields are ignored); the same values save nothing.
	saves := kv.saves
	read, _ := json.Marshal(s.View())
	if _, err := s.Patch(ctx, read); err != nil {
		t.Fatal(err)
	}
	if kv.saves != saves || changes != 2 {
		t.Fatalf("an unchanged document was saved (%d → %d saves, %d changes)", saves, kv.saves, changes)
	}
	// "" removes the global webhook.
	if v, err := s.Patch(ctx, []byte(`{"budget_webhook_url": ""}`)); err != nil || v.BudgetWebhookURL != "" {
		t.Fatalf("%v %q", err, v.BudgetWebhookURL)
	}

	// Everything survives a restart.
	s2, warnings := newPrices(t, kv, newBox(t, "k"))
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	if !maps.Equal(s2.Snapshot().Models, s.Snapshot().Models) || s2.Location().String() != "Europe/Berlin" {
		t.Fatalf("after a restart: %+v", s2.Snapshot())
	}
	_, sec1 := s.Webhook()
	if _, sec2 := s2.Webhook(); sec2 != sec1 {
		t.Fatal("the webhook secret changed with a restart")
	}
}

func TestPricesPatchRefusals(t *testing.T) {
	ctx := context.Background()
	kv := newMemKV()
	s, _ := newPrices(t, kv, newBox(t, "k"))
	for _, c := range []struct {
		name, body string
		want       map[string]string
	}{
		{"not an object", `[1]`, map[string]string{"": "err.json_object"}},
		{"unknown field", `{"model": {}}`, map[string]string{"model": "err.unknown_setting"}},
		{"models not an object", `{"models": []}`, map[string]string{"models": "err.json_object"}},
		{"a price not an object", `{"models": {"rp/x": 3}}`, map[string]string{"models.rp/x": "err.json_object"}},
		{"missing input and output", `{"models": {"rp/x": {"cache_read_per_mtok": 1}}}`,
			map[string]string{"models.rp/x.input_per_mtok": "err.required", "models.rp/x.output_per_mtok": "err.required"}},
		{"unknown price field", `{"models": {"rp/x": {"input_per_mtok": 1, "output_per_mtok": 1, "input_above_200k_per_mtok": 2}}}`,
			map[string]string{"models.rp/x.input_above_200k_per_mtok": "err.unknown_setting"}},
		{"a price as text", `{"models": {"rp/x": {"input_per_mtok": "1", "output_per_mtok": null}}}`,
			map[string]string{"models.rp/x.input_per_mtok": "err.number", "models.rp/x.output_per_mtok": "err.number"}},
		{"negative and too high", `{"models": {"rp/x": {"input_per_mtok": -1, "output_per_mtok": 100001, "cache_write_per_mtok": 100000}}}`,
			map[string]string{"models.rp/x.input_per_mtok": "prices.err.price_range", "models.rp/x.output_per_mtok": "prices.err.price_range"}},
		{"bad keys", `{"models": {"sim-small": {"input_per_mtok": 1, "output_per_mtok": 1}, "rp/[x": {"input_per_mtok": 1, "output_per_mtok": 1}}}`,
			map[string]string{"models.sim-small": "prices.err.key_shape", "models.rp/[x": "keys.err.pattern_syntax"}},
		{"time zone", `{"time_zone": "Mars/Olympus"}`, map[string]string{"time_zone": "prices.err.time_zone"}},
		{"local time", `{"time_zone": "Local"}`, map[string]string{"time_zone": "prices.err.time_zone"}},
		{"empty time zone", `{"time_zone": ""}`, map[string]string{"time_zone": "prices.err.time_zone"}},
		{"time zone not text", `{"time_zone": 1}`, map[string]string{"time_zone": "err.string"}},
		{"webhook", `{"budget_webhook_url": "ftp://x"}`, map[string]string{"budget_webhook_url": "keys.err.webhook_url"}},
		{"relative webhook", `{"budget_webhook_url": "/hook"}`, map[string]string{"budget_webhook_url": "keys.err.webhook_url"}},
		{"one bad field spoils the save", `{"time_zone": "Europe/Berlin", "budget_webhook_url": "x"}`,
			map[string]string{"budget_webhook_url": "keys.err.webhook_url"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Patch(ctx, []byte(c.body))
			if got := fieldKeys(t, err); !maps.Equal(got, c.want) {
				t.Fatalf("fields %v, want %v", got, c.want)
			}
			if kv.saves != 0 || s.Snapshot().TimeZone != "UTC" {
				t.Fatal("a refused patch changed something")
			}
		})
	}

	// At most MaxPriceEntries prices, counted after the merge.
	many := map[string]any{}
	for i := range MaxPriceEntries {
		many["rp/m"+itoa(i)] = map[string]float64{"input_per_mtok": 1, "output_per_mtok": 1}
	}
	body, _ := json.Marshal(map[string]any{"models": many})
	if _, err := s.Patch(ctx, body); err != nil {
		t.Fatal(err)
	}
	_, err := s.Patch(ctx, []byte(`{"models": {"rp/one-more": {"input_per_mtok": 1, "output_per_mtok": 1}}}`))
	if got := fieldKeys(t, err); got["models"] != "prices.err.too_many" {
		t.Fatalf("%v", got)
	}
	// Removing one makes room again, in the same patch.
	if _, err := s.Patch(ctx, []byte(`{"models": {"rp/maaa": null, "rp/one-more": {"input_per_mtok": 1, "output_per_mtok": 1}}}`)); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string {
	return string(rune('a'+i/26/26%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i%26))
}

// A save that cannot be written changes nothing, in memory either.
func TestPricesSaveFailure(t *testing.T) {
	kv := newMemKV()
	s, _ := newPrices(t, kv, newBox(t, "k"))
	kv.fail = errors.New("disk full")
	_, err := s.Patch(context.Background(), []byte(`{"time_zone": "Asia/Tokyo"}`))
	if errs.CodeOf(err) != errs.Internal {
		t.Fatalf("%v", err)
	}
	if s.Location().String() != "UTC" {
		t.Fatal("an unsaved time zone took effect")
	}
}

func TestWebhookSecretRotation(t *testing.T) {
	ctx := context.Background()
	kv := newMemKV()
	s, _ := newPrices(t, kv, newBox(t, "k"))
	_, before := s.Webhook()
	secret, err := s.RotateWebhookSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !whsecRE.MatchString(secret) || secret == before {
		t.Fatalf("rotated %q (was %q)", secret, before)
	}
	if _, now := s.Webhook(); now != secret {
		t.Fatal("webhooks are not signed with the new secret")
	}
	s2, _ := newPrices(t, kv, newBox(t, "k"))
	if _, now := s2.Webhook(); now != secret {
		t.Fatal("the rotated secret did not survive a restart")
	}
	// With another secret key the sealed secret cannot be opened: a new one is made, and said.
	s3, warnings := newPrices(t, kv, newBox(t, "other"))
	if _, now := s3.Webhook(); now == secret || !whsecRE.MatchString(now) || len(warnings) != 1 || !strings.Contains(warnings[0], "rotate") {
		t.Fatalf("secret %q, warnings %v", now, warnings)
	}
}

// Saved values that no longer validate are dropped with a warning; the rest load.
func TestPricesLoadSkipsInvalid(t *testing.T) {
	kv := newMemKV()
	kv.values[PricesKey] = `{"models": {"rp/ok": {"input_per_mtok": 1, "output_per_mtok": 2},
		"bad key": {"input_per_mtok": 1, "output_per_mtok": 2}, "rp/neg": {"input_per_mtok": -1, "output_per_mtok": 2}},
		"time_zone": "Nowhere/Town", "budget_webhook_url": "gopher://x"}`
	s, warnings := newPrices(t, kv, newBox(t, "k"))
	if len(warnings) != 4 {
		t.Fatalf("warnings %v", warnings)
	}
	doc := s.Snapshot()
	if len(doc.Models) != 1 || doc.TimeZone != "UTC" || doc.BudgetWebhookURL != "" {
		t.Fatalf("%+v", doc)
	}
	kv.values[PricesKey] = `{"models": 7}`
	if _, warnings := newPrices(t, kv, newBox(t, "k")); len(warnings) != 1 {
		t.Fatalf("warnings %v", warnings)
	}
}

// Budget days in a zone far from UTC: the zone's rules are in the binary (time/tzdata).
func TestPricesTimeZone(t *testing.T) {
	s, _ := newPrices(t, newMemKV(), newBox(t, "k"))
	if _, err := s.Patch(context.Background(), []byte(`{"time_zone": "Pacific/Kiritimati"}`)); err != nil {
		t.Fatal(err)
	}
	if _, off := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).In(s.Location()).Zone(); off != 14*3600 {
		t.Fatalf("%s is UTC%+d", s.Location(), off/3600)
	}
}
