package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"switchyard/db"
	"switchyard/e2e/testenv"
	"switchyard/i18n"
	"switchyard/services/secrets"
)

var whsecRE = regexp.MustCompile(`whsec_[0-9a-f]{64}`)

// storedWebhookSecret opens the webhook secret as the stopped gateway's database keeps it, with
// the instance's secret key; it also says whether the stored form holds it in the clear.
func storedWebhookSecret(t *testing.T, e *testenv.Env) (secret string, clear bool) {
	t.Helper()
	d, err := db.Open(e.Store())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	raw, ok, err := db.GetValue(context.Background(), d.W, "settings.prices.budget_webhook_secret")
	if err != nil || !ok {
		t.Fatalf("no stored webhook secret: %v", err)
	}
	key, _, err := secrets.LoadOrCreateKey(e.DataDir, e.Vars["SWITCHYARD_SECRET_KEY"])
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secrets.NewBox(key)
	sealed, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := box.Open(sealed, []byte("prices:budget_webhook_secret"))
	if err != nil {
		t.Fatal(err)
	}
	return string(plain), strings.Contains(raw, "whsec_")
}

// The prices document through the admin API: defaults, a merge that takes effect at once,
// refusals naming their fields, persistence across a restart, and the webhook secret that only
// its rotation ever shows.
func TestPricesAPI(t *testing.T) {
	e := testenv.New(t)

	st, body := rawAdmin(t, e, "GET", "/api/settings/prices", "")
	if st != 200 {
		t.Fatalf("GET: %d %s", st, body)
	}
	var doc struct {
		Models        map[string]map[string]float64 `json:"models"`
		TimeZone      string                        `json:"time_zone"`
		WebhookURL    string                        `json:"budget_webhook_url"`
		SecretSet     bool                          `json:"budget_webhook_secret_set"`
		BuiltInModels int                           `json:"built_in_models"`
		About         string                        `json:"about"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Models == nil || len(doc.Models) != 0 || doc.TimeZone != "UTC" || doc.WebhookURL != "" || !doc.SecretSet ||
		doc.BuiltInModels < 150 || !strings.Contains(doc.About, "LiteLLM") {
		t.Fatalf("defaults: %s", body)
	}
	if whsecRE.MatchString(body) || strings.Contains(body, "secret\":\"") {
		t.Fatalf("GET shows the secret: %s", body)
	}

	t.Run("patch merges and applies", func(t *testing.T) {
		got := e.MustAPI("PATCH", "/api/settings/prices", map[string]any{
			"models": map[string]any{
				"rp/sim-small": map[string]any{"input_per_mtok": 1.25, "output_per_mtok": 5, "cache_read_per_mtok": 0.125},
				"rp/sim-*":     map[string]any{"input_per_mtok": 0.5, "output_per_mtok": 1},
			},
			"time_zone": "Europe/Berlin", "budget_webhook_url": "https://hooks.example.com/budget",
		}, 200)
		models := got["models"].(map[string]any)
		if len(models) != 2 || got["time_zone"] != "Europe/Berlin" || got["budget_webhook_url"] != "https://hooks.example.com/budget" {
			t.Fatalf("%v", got)
		}
		small := models["rp/sim-small"].(map[string]any)
		if small["input_per_mtok"] != 1.25 || small["output_per_mtok"] != 5.0 || small["cache_read_per_mtok"] != 0.125 || small["cache_write_per_mtok"] != 0.0 {
			t.Fatalf("rp/sim-small: %v", small)
		}
		// null removes one; the others and the other fields stay.
		got = e.MustAPI("PATCH", "/api/settings/prices", map[string]any{"models": map[string]any{"rp/sim-*": nil,
			"anthropic/claude-sonnet-4-5": map[string]any{"input_per_mtok": 2, "output_per_mtok": 10}}}, 200)
		models = got["models"].(map[string]any)
		if _, gone := models["rp/sim-*"]; gone || len(models) != 2 || got["time_zone"] != "Europe/Berlin" {
			t.Fatalf("after removing: %v", got)
		}
		// What GET returns can be sent back as it is.
		_, read := rawAdmin(t, e, "GET", "/api/settings/prices", "")
		if st, b := rawAdmin(t, e, "PATCH", "/api/settings/prices", read); st != 200 {
			t.Fatalf("PATCH of a GET: %d %s", st, b)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		_, before := rawAdmin(t, e, "GET", "/api/settings/prices", "")
		for _, c := range []struct {
			body   string
			status int
			fields []string
		}{
			{`{"models": {"rp/x": {"input_per_mtok": -1, "output_per_mtok": 100001}}}`, 422,
				[]string{"models.rp/x.input_per_mtok", "models.rp/x.output_per_mtok"}},
			{`{"models": {"rp/x": {"input_per_mtok": 1}}}`, 422, []string{"models.rp/x.output_per_mtok"}},
			{`{"models": {"rp/x": {"input_per_mtok": "1", "output_per_mtok": 1}}}`, 422, []string{"models.rp/x.input_per_mtok"}},
			{`{"models": {"sim-small": {"input_per_mtok": 1, "output_per_mtok": 1}}}`, 422, []string{"models.sim-small"}},
			{`{"models": {"gpt-4o*": {"input_per_mtok": 1, "output_per_mtok": 1}}}`, 422, []string{"models.gpt-4o*"}},
			{`{"models": {"rp/[x": {"input_per_mtok": 1, "output_per_mtok": 1}}}`, 422, []string{"models.rp/[x"}},
			{`{"models": {"rp/x": {"input_per_mtok": 1, "output_per_mtok": 1, "discount": 0.5}}}`, 422, []string{"models.rp/x.discount"}},
			{`{"time_zone": "Europe/Atlantis"}`, 422, []string{"time_zone"}},
			{`{"time_zone": "Local"}`, 422, []string{"time_zone"}},
			{`{"budget_webhook_url": "javascript:alert(1)"}`, 422, []string{"budget_webhook_url"}},
			{`{"budget_webhook_secret": "whsec_mine"}`, 422, []string{"budget_webhook_secret"}},
			{`{"time_zone": "Asia/Tokyo", "budget_webhook_url": "hooks.example.com"}`, 422, []string{"budget_webhook_url"}},
			{`{"time_zone": "Asia/Tokyo"`, 400, nil},
			{`{"time_zone": "Asia/Tokyo", "time_zone": "UTC"}`, 400, nil},
			{`{"models": {"rp/x": {"input_per_mtok": 1, "output_per_mtok": 1, "INPUT_per_mtok": 2}}}`, 400, nil},
		} {
			st, b := rawAdmin(t, e, "PATCH", "/api/settings/prices", c.body)
			if st != c.status {
				t.Errorf("%s: %d %s, want %d", c.body, st, b, c.status)
				continue
			}
			var out struct {
				Error struct {
					Message string            `json:"message"`
					Fields  map[string]string `json:"fields"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(b), &out); err != nil || out.Error.Message == "" {
				t.Errorf("%s: not an error document: %s", c.body, b)
			}
			if len(out.Error.Fields) != len(c.fields) {
				t.Errorf("%s: fields %v, want %v", c.body, out.Error.Fields, c.fields)
			}
			for _, f := range c.fields {
				if out.Error.Fields[f] == "" {
					t.Errorf("%s: no message for %s in %v", c.body, f, out.Error.Fields)
				}
			}
		}
		if _, after := rawAdmin(t, e, "GET", "/api/settings/prices", ""); after != before {
			t.Fatalf("a refused patch changed the document:\n%s\n%s", before, after)
		}
	})

	t.Run("the webhook secret is shown once, sealed at rest, kept across a restart", func(t *testing.T) {
		e.Stop()
		first, clear := storedWebhookSecret(t, e)
		if clear || !whsecRE.MatchString(first) {
			t.Fatalf("the first secret %q (stored in the clear: %v)", first, clear)
		}
		e.Start()
		var r1, r2 map[string]string
		if st := e.API("POST", "/api/settings/prices/webhook-secret", nil, &r1); st != 200 || !whsecRE.MatchString(r1["secret"]) || r1["secret"] == first {
			t.Fatalf("rotate: %d %v", st, r1)
		}
		if st := e.API("POST", "/api/settings/prices/webhook-secret", nil, &r2); st != 200 || r2["secret"] == r1["secret"] {
			t.Fatalf("a second rotation: %d %v", st, r2)
		}
		if _, b := rawAdmin(t, e, "GET", "/api/settings/prices", ""); strings.Contains(b, r2["secret"]) || !strings.Contains(b, `"budget_webhook_secret_set":true`) {
			t.Fatalf("GET after rotating: %s", b)
		}
		e.Stop()
		if kept, clear := storedWebhookSecret(t, e); kept != r2["secret"] || clear {
			t.Fatalf("stored %q, rotated to %q", kept, r2["secret"])
		}
		e.Start()
		if strings.Contains(e.Logs.String(), r2["secret"]) || strings.Contains(e.Logs.String(), first) {
			t.Fatal("a webhook secret is in the log")
		}
		e.Stop()
		if kept, _ := storedWebhookSecret(t, e); kept != r2["secret"] {
			t.Fatal("a restart replaced the webhook secret")
		}
		e.Start()
	})

	t.Run("kept across a restart", func(t *testing.T) {
		_, before := rawAdmin(t, e, "GET", "/api/settings/prices", "")
		e.Restart()
		if _, after := rawAdmin(t, e, "GET", "/api/settings/prices", ""); after != before {
			t.Fatalf("after a restart:\n%s\nwas\n%s", after, before)
		}
	})
}

// The Prices card without a browser: a plain form post saves and redirects, a refused one
// re-renders the page with the errors at their rows, and the look-up answers from the table that
// was just saved.
func TestPricesCardForms(t *testing.T) {
	s := newSettingsSite(t)
	form := func(kv ...string) url.Values {
		v := url.Values{"time_zone": {"UTC"}, "budget_webhook_url": {""}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	prices := func() map[string]any {
		var doc map[string]any
		if err := json.Unmarshal([]byte(s.get(t, "/api/settings/prices")), &doc); err != nil {
			t.Fatal(err)
		}
		return doc["models"].(map[string]any)
	}

	st, _ := s.post(t, "/settings/prices", form("models[new].pattern", "rp/sim-small", "models[new].input_per_mtok", "1,5",
		"models[new].output_per_mtok", "3", "action", "add"), false)
	if st != http.StatusSeeOther {
		t.Fatalf("add: %d", st)
	}
	if m := prices(); m["rp/sim-small"].(map[string]any)["input_per_mtok"] != 1.5 {
		t.Fatalf("saved %v", m)
	}

	// A refused save: the row keeps what was typed and says why; nothing is saved.
	st, page := s.post(t, "/settings/prices", form("models[0].pattern", "rp/sim-small", "models[0].input_per_mtok", "1.5",
		"models[0].output_per_mtok", "3", "models[new].pattern", "sim-large", "models[new].input_per_mtok", "lots",
		"time_zone", "Mars/Base"), true)
	if st != http.StatusUnprocessableEntity {
		t.Fatalf("refused: %d", st)
	}
	doc, _ := goquery.NewDocumentFromReader(strings.NewReader(page))
	if doc.Find("#s-models-new-input_per_mtok-error").Text() == "" || doc.Find("#s-models-new-output_per_mtok-error").Text() == "" ||
		doc.Find("#s-time_zone-error").Text() == "" || doc.Find(".error-note").Length() != 1 {
		t.Fatalf("errors not at their fields: %s", page)
	}
	if v, _ := doc.Find("#s-models-new-pattern").Attr("value"); v != "sim-large" {
		t.Fatalf("the new row lost what was typed: %q", v)
	}
	if len(prices()) != 1 {
		t.Fatal("a refused save changed the prices")
	}
	// The service's own checks land at the row too: a key that is no provider/model.
	_, page = s.post(t, "/settings/prices", form("models[0].pattern", "rp/sim-small", "models[0].input_per_mtok", "1.5",
		"models[0].output_per_mtok", "3", "models[new].pattern", "sim-large", "models[new].input_per_mtok", "1",
		"models[new].output_per_mtok", "1"), true)
	doc, _ = goquery.NewDocumentFromReader(strings.NewReader(page))
	if got := doc.Find("#s-models-new-pattern-error").Text(); !strings.Contains(got, "sim-large") {
		t.Fatalf("pattern error %q", got)
	}

	// Look up, in German: the override, a built-in entry, and no price.
	s.lang(t, i18n.DE)
	for q, want := range map[string]string{
		"rp/sim-small":                i18n.TL(i18n.DE, "prices.source.override", "rp/sim-small"),
		"anthropic/claude-sonnet-4-5": i18n.TL(i18n.DE, "prices.source.built_in", "claude-sonnet-4-5"),
		"rp/unknown-model":            "",
	} {
		st, page := s.post(t, "/settings/prices", form("models[0].pattern", "rp/sim-small", "models[0].input_per_mtok", "1.5",
			"models[0].output_per_mtok", "3", "lookup_model", q, "action", "lookup"), true)
		doc, _ := goquery.NewDocumentFromReader(strings.NewReader(page))
		got := doc.Find("#prices-lookup-result").Text()
		if st != 200 || got == "" {
			t.Fatalf("look up %s: %d %q", q, st, got)
		}
		switch {
		case want == "":
			if !strings.Contains(got, i18n.TL(i18n.DE, "prices.lookup.none")) {
				t.Errorf("%s: %q", q, got)
			}
		case !strings.Contains(got, want) || !strings.Contains(got, "Eingabe 1,5") && q == "rp/sim-small":
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
	s.lang(t, i18n.EN)

	// A price saved elsewhere after the page was drawn is not the page's to remove; renaming a
	// row replaces its price.
	e := s.env
	e.MustAPI("PATCH", "/api/settings/prices", map[string]any{"models": map[string]any{"rp/other": map[string]any{"input_per_mtok": 7, "output_per_mtok": 7}}}, 200)
	if st, _ := s.post(t, "/settings/prices", form("models[0].key", "rp/sim-small", "models[0].pattern", "rp/sim-renamed",
		"models[0].input_per_mtok", "1.5", "models[0].output_per_mtok", "3"), true); st != 200 {
		t.Fatalf("rename: %d", st)
	}
	if m := prices(); len(m) != 2 || m["rp/other"] == nil || m["rp/sim-renamed"] == nil {
		t.Fatalf("after renaming: %v", m)
	}
	// Removing the row removes the price.
	if st, _ := s.post(t, "/settings/prices", form("models[0].key", "rp/sim-renamed", "models[0].pattern", "rp/sim-renamed",
		"models[0].input_per_mtok", "1.5", "models[0].output_per_mtok", "3", "delete", "models[0]"), true); st != 200 || len(prices()) != 1 {
		t.Fatalf("remove: %d %v", st, prices())
	}

	// Rotating asks first, then shows the new secret once; the page never shows it again.
	st, page = s.post(t, "/settings/prices", form("action", "rotate"), true)
	if st != 200 || !strings.Contains(page, `id="prices-rotate-confirm"`) || whsecRE.MatchString(page) {
		t.Fatalf("rotate asks: %d", st)
	}
	_, page = s.post(t, "/settings/prices", form("action", "rotate-confirm"), true)
	secret := whsecRE.FindString(page)
	if secret == "" || !strings.Contains(page, `id="prices-secret-value"`) {
		t.Fatalf("no new secret shown: %s", page)
	}
	if strings.Contains(s.get(t, "/settings"), secret) {
		t.Fatal("the settings page shows the secret again")
	}
}
