package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// settingsCardIDs are the settings page's cards in page order.
var settingsCardIDs = []string{"request-queue", "connection-cooldown", "retry", "circuit-breaker", "provider-overrides", "combo-routing",
	"combo-cooldown-wait", "quota-share", "provider-cooldown", "model-lockout", "session-affinity", "claude-low-priority", "claude-oauth", "codex-oauth",
	"copilot-oauth", "streams", "discovery", "dashboard-sessions", "error-rules", "prices"}

// settingsSite is a logged-in client of a fresh gateway with the helpers the card tests share.
type settingsSite struct {
	env    *testenv.Env
	base   string
	c      *http.Client // follows no redirect
	follow *http.Client
}

func newSettingsSite(t *testing.T) *settingsSite {
	t.Helper()
	e := testenv.New(t)
	c := e.Login()
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &settingsSite{env: e, base: e.Base, c: &noFollow, follow: c}
}

// lang switches the session's language.
func (s *settingsSite) lang(t *testing.T, l i18n.Lang) {
	t.Helper()
	if code, _ := testenv.Fetch(t, s.follow, http.MethodGet, s.base+"/lang/"+string(l)+"?next=/settings", nil, nil); code != http.StatusOK {
		t.Fatalf("switch to %s: %d", l, code)
	}
}

func (s *settingsSite) get(t *testing.T, path string) string {
	t.Helper()
	code, body := testenv.Fetch(t, s.c, http.MethodGet, s.base+path, nil, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, code)
	}
	return body
}

// post sends a card's form, as htmx does when htmx is set.
func (s *settingsSite) post(t *testing.T, path string, form url.Values, htmx bool) (int, string) {
	t.Helper()
	h := map[string]string{}
	if htmx {
		h["HX-Request"] = "true"
	}
	return testenv.Fetch(t, s.c, http.MethodPost, s.base+path, form, h)
}

// settingsDoc reads GET /api/settings/resilience (with the session) as raw values by path.
type settingsDoc struct {
	Values  map[string]any    `json:"values"`
	Sources map[string]string `json:"sources"`
}

func (s *settingsSite) settings(t *testing.T) settingsDoc {
	t.Helper()
	var doc settingsDoc
	if err := json.Unmarshal([]byte(s.get(t, "/api/settings/resilience")), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// value is the JSON of the effective value at a dotted path.
func (d settingsDoc) value(path string) string {
	var v any = d.Values
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// cardForm is what a browser would post for the card #card-<id> of a page: its text, hidden
// and checked inputs, textareas and selects (buttons and template content left out).
func cardForm(t *testing.T, page, id string) url.Values {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	card := doc.Find("form#card-" + id)
	if card.Length() != 1 {
		t.Fatalf("card %s not on the page", id)
	}
	form := url.Values{}
	card.Find("input, textarea, select").Each(func(_ int, el *goquery.Selection) {
		name, _ := el.Attr("name")
		if name == "" || el.ParentsFiltered("template").Length() > 0 {
			return
		}
		switch goquery.NodeName(el) {
		case "textarea":
			form.Add(name, el.Text())
		case "select":
			opt := el.Find("option[selected]")
			if opt.Length() == 0 {
				opt = el.Find("option").First()
			}
			v, _ := opt.Attr("value")
			form.Add(name, v)
		default:
			typ, _ := el.Attr("type")
			if (typ == "checkbox" || typ == "radio") && el.AttrOr("checked", "-") == "-" {
				return
			}
			form.Add(name, el.AttrOr("value", ""))
		}
	})
	return form
}

// errorIDOf is the id of the error message of the field named path (views.fieldID + "-error").
func errorIDOf(path string) string {
	return "s-" + strings.NewReplacer(".", "-", "[", "-", "]", "").Replace(path) + "-error"
}

// fieldMessage is the error message a card's answer shows at the field named path.
func fieldMessage(body, path string) string {
	doc, _ := goquery.NewDocumentFromReader(strings.NewReader(body))
	return doc.Find("#" + errorIDOf(path)).Text()
}

// catalogKeyRE looks like a catalog key, shown when a catalog lacks it.
var catalogKeyRE = regexp.MustCompile(`\b(settings|setting|card|rules|rule|overrides|chips|source|err)\.[a-z][a-z0-9_]*(\.[a-z0-9_-]+)*`)

// leakedKey returns a catalog key that a page shows as text or in an attribute people read.
func leakedKey(page string) string {
	doc, _ := goquery.NewDocumentFromReader(strings.NewReader(page))
	doc.Find("script, style").Remove()
	if m := catalogKeyRE.FindString(doc.Text()); m != "" {
		return m
	}
	var found string
	doc.Find("[title], [aria-label], [placeholder], [data-invalid], [data-label]").Each(func(_ int, el *goquery.Selection) {
		for _, a := range []string{"title", "aria-label", "placeholder", "data-invalid", "data-label"} {
			if v, ok := el.Attr(a); ok && catalogKeyRE.MatchString(v) && found == "" {
				found = v
			}
		}
	})
	return found
}

// TestSettingsCardsRender draws the settings page in both languages: every card with its title
// and lead, every field with a source badge, no catalog key in place of a text.
func TestSettingsCardsRender(t *testing.T) {
	s := newSettingsSite(t)
	for _, lang := range i18n.Langs {
		s.lang(t, lang)
		page := s.get(t, "/settings")
		for _, id := range settingsCardIDs {
			for _, key := range []string{"card." + id + ".title", "card." + id + ".lead"} {
				if !strings.Contains(page, testenv.Esc(lang, key)) {
					t.Errorf("%s: card %s lacks %s", lang, id, key)
				}
			}
			if !strings.Contains(page, `id="card-`+id+`"`) || !strings.Contains(page, `hx-post="/settings/`+id+`"`) {
				t.Errorf("%s: card %s is not an htmx form", lang, id)
			}
		}
		if got := regexp.MustCompile(`<form id="card-([a-z-]+)"`).FindAllStringSubmatch(page, -1); len(got) != len(settingsCardIDs) {
			t.Errorf("%s: %d cards, want %d", lang, len(got), len(settingsCardIDs))
		} else {
			for i, m := range got {
				if m[1] != settingsCardIDs[i] {
					t.Errorf("%s: card %d is %s, want %s", lang, i, m[1], settingsCardIDs[i])
				}
			}
		}
		if m := leakedKey(page); m != "" {
			t.Errorf("%s: a catalog key is shown: %q", lang, m)
		}
		doc, _ := goquery.NewDocumentFromReader(strings.NewReader(page))
		doc.Find(".settings-card .setting").Each(func(_ int, el *goquery.Selection) {
			if el.Find(".source").Length() != 1 {
				h, _ := el.Html()
				t.Errorf("%s: a field has no source badge: %.200s", lang, h)
			}
		})
		if !strings.Contains(page, `list="s-model_lockout-error_codes-suggestions"`) || !strings.Contains(page, `<option value="529">`) {
			t.Errorf("%s: the error codes have no suggestions", lang)
		}
	}
	s.lang(t, i18n.EN)
}

// TestSettingsCardsSave saves one valid value through each card (in place with htmx), then
// refuses an invalid one with 422, the message at its field and nothing saved.
func TestSettingsCardsSave(t *testing.T) {
	s := newSettingsSite(t)
	valid := []struct {
		card, path string
		set        map[string][]string // form values replaced
		want       string              // the effective value afterwards, as JSON
	}{
		{"request-queue", "request_queue.max_queue_depth", map[string][]string{"request_queue.max_queue_depth": {"7"}}, "7"},
		{"connection-cooldown", "connection_cooldown.oauth.max_backoff_steps", map[string][]string{"connection_cooldown.oauth.max_backoff_steps": {"9"}}, "9"},
		{"retry", "retry.jitter", map[string][]string{"retry.jitter": {"0,25"}}, "0.25"},
		{"retry", "retry.retry_on_statuses", map[string][]string{"retry.retry_on_statuses": {"429", "503"}, "retry.retry_on_statuses.add": {"5XX, 408"}}, `["429","503","5xx","408"]`},
		{"retry", "retry.retry_on_statuses", map[string][]string{"retry.retry_on_statuses": nil}, `[]`},
		{"circuit-breaker", "circuit_breaker.scope", map[string][]string{"circuit_breaker.scope": {"model"}}, `"model"`},
		{"circuit-breaker", "circuit_breaker.enabled", map[string][]string{"circuit_breaker.enabled": nil}, "false"},
		{"combo-cooldown-wait", "combo_cooldown_wait.max_attempts", map[string][]string{"combo_cooldown_wait.max_attempts": {"3"}}, "3"},
		{"quota-share", "quota_share_concurrency.enabled", map[string][]string{"quota_share_concurrency.enabled": nil}, "false"},
		{"provider-cooldown", "provider_cooldown.api_key.cooldown_ms", map[string][]string{"provider_cooldown.api_key.cooldown_ms": {"120000"}}, "120000"},
		{"model-lockout", "model_lockout.error_codes", map[string][]string{"model_lockout.error_codes": {"429", "503"}, "model_lockout.error_codes.add": {"418 529"}}, "[429,503,418,529]"},
		{"model-lockout", "model_lockout.families", map[string][]string{"model_lockout.families": {"anthropic: opus = claude-opus-*, claude-3-opus\n\nopenai: gpt5 = gpt-5*\n"}},
			`{"anthropic":{"opus":["claude-opus-*","claude-3-opus"]},"openai":{"gpt5":["gpt-5*"]}}`},
		{"session-affinity", "session_affinity_ttl_ms", map[string][]string{"session_affinity_ttl_ms": {"900000"}}, "900000"},
		{"claude-low-priority", "claude_low_priority.lane_cooloff_ms", map[string][]string{"claude_low_priority.lane_cooloff_ms": {"0"}}, "0"},
		{"streams", "streams.throughput_watchdog.min_useful_bytes", map[string][]string{"streams.throughput_watchdog.min_useful_bytes": {"8"}}, "8"},
		{"discovery", "discovery.provider_recheck_interval_ms", map[string][]string{"discovery.provider_recheck_interval_ms": {"0"}}, "0"},
	}
	for _, c := range valid {
		t.Run("save "+c.path, func(t *testing.T) {
			form := cardForm(t, s.get(t, "/settings"), c.card)
			for k, v := range c.set {
				form[k] = v
			}
			code, body := s.post(t, "/settings/"+c.card, form, true)
			if code != http.StatusOK || !strings.HasPrefix(body, `<form id="card-`+c.card+`"`) || !strings.Contains(body, "saved-note") {
				t.Fatalf("status %d: %.400s", code, body)
			}
			doc := s.settings(t)
			if got := doc.value(c.path); got != c.want || doc.Sources[c.path] != "persisted" {
				t.Fatalf("%s = %s (%s), want %s (persisted)", c.path, got, doc.Sources[c.path], c.want)
			}
			// Saving the card unchanged keeps the value and saves nothing else.
			if code, _ := s.post(t, "/settings/"+c.card, cardForm(t, body, c.card), true); code != http.StatusOK {
				t.Fatalf("saving the re-rendered card: %d", code)
			}
			if after := s.settings(t); after.value(c.path) != c.want {
				t.Fatalf("the re-rendered card does not hold the saved value: %s", after.value(c.path))
			}
		})
	}

	invalid := []struct {
		name, card, field string
		set               map[string][]string
		msg               string // part of the message shown at field
	}{
		{"queue depth out of range", "request-queue", "request_queue.max_queue_depth", map[string][]string{"request_queue.max_queue_depth": {"100001"}}, "100,000"},
		{"empty number", "connection-cooldown", "connection_cooldown.max_cooldown_ms", map[string][]string{"connection_cooldown.max_cooldown_ms": {""}}, "Required"},
		{"max backoff below initial", "retry", "retry.max_backoff_ms", map[string][]string{"retry.initial_backoff_ms": {"5000"}, "retry.max_backoff_ms": {"1000"}}, "Initial backoff"},
		{"status class typed wrong", "retry", "retry.retry_on_statuses", map[string][]string{"retry.retry_on_statuses.add": {"5x"}}, "5x"},
		{"status posted wrong", "circuit-breaker", "circuit_breaker.failure_on_statuses", map[string][]string{"circuit_breaker.failure_on_statuses": {"429", "abc"}}, "abc"},
		{"unknown scope", "circuit-breaker", "circuit_breaker.scope", map[string][]string{"circuit_breaker.scope": {"galaxy"}}, "provider, model"},
		{"budget below max wait", "combo-cooldown-wait", "combo_cooldown_wait.budget_ms", map[string][]string{"combo_cooldown_wait.budget_ms": {"1000"}}, "90,000"},
		{"window not a number", "provider-cooldown", "provider_cooldown.oauth.failure_window_ms", map[string][]string{"provider_cooldown.oauth.failure_window_ms": {"15m"}}, "number"},
		{"base lockout too short", "model-lockout", "model_lockout.base_cooldown_ms", map[string][]string{"model_lockout.base_cooldown_ms": {"1000"}}, "5,000"},
		{"max lockout below base", "model-lockout", "model_lockout.max_cooldown_ms", map[string][]string{"model_lockout.base_cooldown_ms": {"60000"}, "model_lockout.max_cooldown_ms": {"30000"}}, "Base cooldown"},
		{"lockout code typed out of range", "model-lockout", "model_lockout.error_codes", map[string][]string{"model_lockout.error_codes.add": {"418, 700"}}, "700"},
		{"lockout code posted out of range", "model-lockout", "model_lockout.error_codes", map[string][]string{"model_lockout.error_codes": {"429", "99"}}, "99"},
		{"backoff steps", "model-lockout", "model_lockout.max_backoff_steps", map[string][]string{"model_lockout.max_backoff_steps": {"21"}}, "20"},
		{"family line unreadable", "model-lockout", "model_lockout.families", map[string][]string{"model_lockout.families": {"anthropic opus claude-opus-*"}}, "Line 1"},
		{"family pattern", "model-lockout", "model_lockout.families", map[string][]string{"model_lockout.families": {"anthropic: opus = claude-*-opus"}}, "anthropic.opus"},
		{"lane wait", "claude-low-priority", "claude_low_priority.slow_max_wait_default_ms", map[string][]string{"claude_low_priority.slow_max_wait_default_ms": {"1000"}}, "60,000"},
		{"idle timeout", "streams", "streams.idle_timeout_ms", map[string][]string{"streams.idle_timeout_ms": {"999"}}, "1,000"},
		{"refresh too often", "discovery", "discovery.model_refresh_interval_ms", map[string][]string{"discovery.model_refresh_interval_ms": {"1000"}}, "60,000"},
	}
	for _, c := range invalid {
		t.Run("refuse "+c.name, func(t *testing.T) {
			before := s.get(t, "/api/settings/resilience")
			form := cardForm(t, s.get(t, "/settings"), c.card)
			for k, v := range c.set {
				form[k] = v
			}
			code, body := s.post(t, "/settings/"+c.card, form, true)
			if code != http.StatusUnprocessableEntity || !strings.HasPrefix(body, `<form id="card-`+c.card+`"`) {
				t.Fatalf("status %d: %.300s", code, body)
			}
			doc, _ := goquery.NewDocumentFromReader(strings.NewReader(body))
			if msg := doc.Find("#" + errorIDOf(c.field)).Text(); !strings.Contains(msg, c.msg) {
				t.Fatalf("message at %s: %q, want it to contain %q", c.field, msg, c.msg)
			}
			if doc.Find(".error-note").Length() != 1 || doc.Find(".saved-note").Length() != 0 {
				t.Fatal("the card does not say that nothing was saved")
			}
			if after := s.get(t, "/api/settings/resilience"); after != before {
				t.Fatalf("a refused save changed the settings:\n%s\n%s", before, after)
			}
		})
	}

	t.Run("German messages", func(t *testing.T) {
		s.lang(t, i18n.DE)
		defer s.lang(t, i18n.EN)
		form := cardForm(t, s.get(t, "/settings"), "model-lockout")
		form.Set("model_lockout.base_cooldown_ms", "1000")
		_, body := s.post(t, "/settings/model-lockout", form, true)
		if msg := fieldMessage(body, "model_lockout.base_cooldown_ms"); !strings.Contains(msg, "5.000 und 600.000") {
			t.Fatalf("German message %q", msg)
		}
	})

	t.Run("without JavaScript", func(t *testing.T) {
		form := cardForm(t, s.get(t, "/settings"), "model-lockout")
		form.Set("model_lockout.max_cooldown_ms", "1000")
		code, body := s.post(t, "/settings/model-lockout", form, false)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "<html") || !strings.Contains(body, `id="`+errorIDOf("model_lockout.max_cooldown_ms")+`"`) {
			t.Fatalf("refused plain save: %d, want the page with the error", code)
		}
		form.Set("model_lockout.max_cooldown_ms", "900000")
		form.Set("model_lockout.error_codes.add", "529")
		code, _ = s.post(t, "/settings/model-lockout", form, false)
		if code != http.StatusSeeOther {
			t.Fatalf("plain save: %d, want 303", code)
		}
		if got := s.settings(t).value("model_lockout.max_cooldown_ms"); got != "900000" {
			t.Fatalf("max cooldown %s", got)
		}
		page := s.get(t, "/settings?saved=model-lockout")
		doc, _ := goquery.NewDocumentFromReader(strings.NewReader(page))
		if doc.Find("#card-model-lockout .saved-note").Length() != 1 || doc.Find(`#card-model-lockout .code-chip[data-value="529"]`).Length() != 1 {
			t.Fatal("after the redirect the card shows no saved note or lacks the added chip")
		}
	})
}

// TestSettingsCardReportsEveryErrorAtOnce saves a card with a value out of range and one that
// is no number: both errors come back in the one answer, and without JavaScript the whole page
// comes back with the card posting to its own fragment, where the browser opens the page.
func TestSettingsCardReportsEveryErrorAtOnce(t *testing.T) {
	s := newSettingsSite(t)
	page := s.get(t, "/settings")
	if !strings.Contains(page, `action="/settings/retry#card-retry"`) {
		t.Fatal("the retry card does not post to its own fragment")
	}
	before := s.get(t, "/api/settings/resilience")
	form := cardForm(t, page, "retry")
	form.Set("retry.max_retries", "99")
	form.Set("retry.jitter", "abc")
	form.Set("retry.retry_on_statuses.add", "5x")
	for _, htmx := range []bool{true, false} {
		code, body := s.post(t, "/settings/retry", form, htmx)
		if code != http.StatusUnprocessableEntity {
			t.Fatalf("htmx %v: status %d", htmx, code)
		}
		doc, _ := goquery.NewDocumentFromReader(strings.NewReader(body))
		card := doc.Find("#card-retry")
		for field, want := range map[string]string{"retry.max_retries": "between 0 and 10", "retry.jitter": "number", "retry.retry_on_statuses": "5x"} {
			if msg := card.Find("#" + errorIDOf(field)).Text(); !strings.Contains(msg, want) {
				t.Errorf("htmx %v: %s: %q, want %q", htmx, field, msg, want)
			}
		}
		if v, _ := card.Find("#s-retry-jitter").Attr("value"); v != "abc" {
			t.Errorf("htmx %v: the typed jitter is not kept: %q", htmx, v)
		}
		if !htmx && (doc.Find("html").Length() != 1 || card.AttrOr("action", "") != "/settings/retry#card-retry") {
			t.Errorf("without JavaScript the answer is not the page with the card at its fragment")
		}
	}
	if after := s.get(t, "/api/settings/resilience"); after != before {
		t.Fatal("a refused save changed the settings")
	}
}

// TestErrorRulesCard round-trips an error rule and a status restatement through the card,
// refuses invalid rules at the right field, deletes, and fills in the example.
func TestErrorRulesCard(t *testing.T) {
	s := newSettingsSite(t)
	type errorRule struct {
		Name           string            `json:"name"`
		Provider       string            `json:"provider"`
		Statuses       []int             `json:"statuses"`
		HeaderMatches  map[string]string `json:"header_matches"`
		BodyMarkers    []string          `json:"body_markers"`
		ExcludeMarkers []string          `json:"exclude_markers"`
		Reason         string            `json:"reason"`
		Scope          string            `json:"scope"`
		CooldownMS     int64             `json:"cooldown_ms"`
		Terminal       string            `json:"terminal"`
	}
	type restatement struct {
		Name           string            `json:"name"`
		Provider       string            `json:"provider"`
		FromStatus     int               `json:"from_status"`
		BodyMarkers    []string          `json:"body_markers"`
		ExcludeMarkers []string          `json:"exclude_markers"`
		HeaderMatches  map[string]string `json:"header_matches"`
		ToStatus       int               `json:"to_status"`
		RetryAfterMS   int64             `json:"retry_after_ms"`
	}
	lists := func() ([]errorRule, []restatement, map[string]string) {
		var doc struct {
			Values struct {
				ErrorRules         []errorRule   `json:"error_rules"`
				StatusRestatements []restatement `json:"status_restatements"`
			} `json:"values"`
			Sources map[string]string `json:"sources"`
		}
		if err := json.Unmarshal([]byte(s.get(t, "/api/settings/resilience")), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Values.ErrorRules, doc.Values.StatusRestatements, doc.Sources
	}
	wantRule := errorRule{Name: "quota-text", Statuses: []int{403, 429}, HeaderMatches: map[string]string{"x-gw-reason": "quota", "x-gw": ""},
		BodyMarkers: []string{"quota exceeded", "over quota"}, ExcludeMarkers: []string{"no access"}, Reason: "quota_exhausted",
		Scope: "connection", CooldownMS: 60000}
	wantRestatement := restatement{Name: "gateway-quota-403", Provider: "my-gateway", FromStatus: 403, BodyMarkers: []string{"quota exceeded"},
		ExcludeMarkers: []string{"no access"}, HeaderMatches: map[string]string{}, ToStatus: 429, RetryAfterMS: 60000}

	var card string // the card as last returned
	t.Run("example fills in the new restatement and saves nothing", func(t *testing.T) {
		form := cardForm(t, s.get(t, "/settings"), "error-rules")
		form.Set("example", "restatement")
		code, body := s.post(t, "/settings/error-rules", form, true)
		if code != http.StatusOK || !strings.Contains(body, `value="gateway-quota-403"`) {
			t.Fatalf("example: %d", code)
		}
		if _, rs, _ := lists(); len(rs) != 0 {
			t.Fatal("the example was saved")
		}
		page := s.get(t, "/settings?example=restatement")
		if !strings.Contains(page, `value="gateway-quota-403"`) {
			t.Fatal("?example=restatement does not fill in the example")
		}
		card = body
	})

	t.Run("add a rule and a restatement", func(t *testing.T) {
		form := cardForm(t, card, "error-rules")
		form.Set("error_rules[new].name", "quota-text")
		form.Set("error_rules[new].statuses", "403, 429")
		form.Set("error_rules[new].body_markers", "quota exceeded\r\nover quota\r\n")
		form.Set("error_rules[new].exclude_markers", "no access")
		form.Set("error_rules[new].header_matches", "x-gw-reason: quota\nx-gw")
		form.Set("error_rules[new].reason", "quota_exhausted")
		form.Set("error_rules[new].cooldown_ms", "60000")
		code, body := s.post(t, "/settings/error-rules", form, true)
		if code != http.StatusOK || !strings.Contains(body, "saved-note") {
			t.Fatalf("add: %d %.500s", code, body)
		}
		rules, rs, src := lists()
		if len(rules) != 1 || len(rs) != 1 {
			t.Fatalf("saved %d rules and %d restatements", len(rules), len(rs))
		}
		if b1, b2 := mustJSON(t, rules[0]), mustJSON(t, wantRule); b1 != b2 {
			t.Errorf("rule\n got %s\nwant %s", b1, b2)
		}
		if b1, b2 := mustJSON(t, rs[0]), mustJSON(t, wantRestatement); b1 != b2 {
			t.Errorf("restatement\n got %s\nwant %s", b1, b2)
		}
		if src["error_rules"] != "persisted" || src["status_restatements"] != "persisted" {
			t.Errorf("sources %v", src)
		}
		for _, want := range []string{`id="s-error_rules-0"`, `id="s-status_restatements-0"`, `value="quota-text"`, "gateway-quota-403", "→ 429"} {
			if !strings.Contains(body, want) {
				t.Errorf("the saved card lacks %q", want)
			}
		}
		card = body
	})

	t.Run("invalid rules are refused at their field", func(t *testing.T) {
		before := s.get(t, "/api/settings/resilience")
		form := cardForm(t, card, "error-rules")
		form.Set("error_rules[0].reason", "nope")
		form.Set("error_rules[new].name", "quota-text") // taken, and no condition
		form.Set("status_restatements[0].to_status", "700")
		form.Set("status_restatements[new].name", "half")
		form.Set("status_restatements[new].from_status", "x")
		code, body := s.post(t, "/settings/error-rules", form, true)
		if code != http.StatusUnprocessableEntity {
			t.Fatalf("status %d", code)
		}
		// The typed from_status is refused here, before the settings service sees the rules.
		if msg := fieldMessage(body, "status_restatements[new].from_status"); !strings.Contains(msg, "whole number") {
			t.Errorf("from_status: %q", msg)
		}
		form.Set("status_restatements[new].from_status", "403")
		form.Set("status_restatements[new].to_status", "429")
		code, body = s.post(t, "/settings/error-rules", form, true)
		if code != http.StatusUnprocessableEntity {
			t.Fatalf("status %d", code)
		}
		doc, _ := goquery.NewDocumentFromReader(strings.NewReader(body))
		for field, want := range map[string]string{
			"error_rules[0].reason":            "rate_limit",
			"error_rules[new].name":            "already",
			"status_restatements[0].to_status": "100 and 599",
		} {
			if msg := doc.Find("#" + errorIDOf(field)).Text(); !strings.Contains(msg, want) {
				t.Errorf("%s: %q, want %q", field, msg, want)
			}
		}
		if msg := doc.Find("#s-error_rules-new .rule-error").Text(); !strings.Contains(msg, "condition") {
			t.Errorf("rule without a condition: %q", msg)
		}
		if doc.Find("#s-error_rules-0 details[open]").Length() != 1 {
			t.Error("a rule with an error is folded")
		}
		if after := s.get(t, "/api/settings/resilience"); after != before {
			t.Fatal("a refused save changed the settings")
		}
	})

	t.Run("delete", func(t *testing.T) {
		form := cardForm(t, card, "error-rules")
		form.Set("delete", "error_rules[0]")
		code, body := s.post(t, "/settings/error-rules", form, false)
		if code != http.StatusSeeOther {
			t.Fatalf("plain delete: %d %.300s", code, body)
		}
		rules, rs, _ := lists()
		if len(rules) != 0 || len(rs) != 1 {
			t.Fatalf("after delete: %d rules, %d restatements", len(rules), len(rs))
		}
		form = cardForm(t, s.get(t, "/settings"), "error-rules")
		form.Set("delete", "status_restatements[0]")
		if code, body := s.post(t, "/settings/error-rules", form, true); code != http.StatusOK || strings.Contains(body, `id="s-status_restatements-0"`) {
			t.Fatalf("htmx delete: %d", code)
		}
		if rules, rs, _ := lists(); len(rules)+len(rs) != 0 {
			t.Fatal("the restatement is still saved")
		}
	})
}

// TestProviderOverridesCard sets, shows, refuses and clears one provider's overrides.
func TestProviderOverridesCard(t *testing.T) {
	s := newSettingsSite(t)
	var provs struct {
		Items []struct {
			ID         int64           `json:"id"`
			Name       string          `json:"name"`
			Resilience json.RawMessage `json:"resilience"`
		} `json:"items"`
	}
	stored := func(name string) string {
		if err := json.Unmarshal([]byte(s.get(t, "/api/providers")), &provs); err != nil {
			t.Fatal(err)
		}
		for _, p := range provs.Items {
			if p.Name == name {
				return string(p.Resilience)
			}
		}
		t.Fatalf("no provider %s", name)
		return ""
	}
	stored("openai")
	i := slices.IndexFunc(provs.Items, func(p struct {
		ID         int64           `json:"id"`
		Name       string          `json:"name"`
		Resilience json.RawMessage `json:"resilience"`
	}) bool {
		return p.Name == "openai"
	})
	id := itoa(provs.Items[i].ID)

	t.Run("pick a provider", func(t *testing.T) {
		form := cardForm(t, s.get(t, "/settings"), "provider-overrides")
		form.Set("pick", id)
		code, body := s.post(t, "/settings/provider-overrides", form, true)
		if code != http.StatusOK || !strings.Contains(body, `name="editing" value="`+id+`"`) {
			t.Fatalf("pick: %d", code)
		}
		if code, _ := s.post(t, "/settings/provider-overrides", form, false); code != http.StatusSeeOther {
			t.Fatalf("plain pick: %d", code)
		}
		if page := s.get(t, "/settings?provider="+id); !strings.Contains(page, `name="editing" value="`+id+`"`) {
			t.Fatal("?provider= does not pick the provider")
		}
	})

	t.Run("save and show", func(t *testing.T) {
		form := cardForm(t, s.get(t, "/settings?provider="+id), "provider-overrides")
		form.Set("retry.max_retries", "5")
		form.Set("retry.retry_on_statuses", "none")
		form.Set("circuit_breaker.enabled", "false")
		form.Set("circuit_breaker.failure_on_statuses", "429, 503")
		form.Set("circuit_breaker.timeout_ms", "60000")
		code, body := s.post(t, "/settings/provider-overrides", form, true)
		if code != http.StatusOK || !strings.Contains(body, "saved-note") {
			t.Fatalf("save: %d %.400s", code, body)
		}
		want := `{"retry":{"max_retries":5,"retry_on_statuses":[]},"circuit_breaker":{"enabled":false,"timeout_ms":60000,"failure_on_statuses":["429","503"]}}`
		if got := stored("openai"); got != want {
			t.Fatalf("stored\n got %s\nwant %s", got, want)
		}
		doc, _ := goquery.NewDocumentFromReader(strings.NewReader(s.get(t, "/settings?provider="+id)))
		row := doc.Find("#po-row-openai").Text()
		for _, o := range []string{"retry.max_retries = 5", "retry.retry_on_statuses = none", "circuit_breaker.enabled = false", "circuit_breaker.timeout_ms = 60000"} {
			if !strings.Contains(row, o) {
				t.Errorf("the list does not show %q: %q", o, row)
			}
		}
		if v, _ := doc.Find("#po-s-retry-max_retries").Attr("value"); v != "5" {
			t.Errorf("max_retries field shows %q", v)
		}
		if doc.Find("#card-provider-overrides .setting:has(#po-s-retry-max_retries) .source-provider").Length() != 1 ||
			doc.Find("#card-provider-overrides .setting:has(#po-s-retry-jitter) .source-inherited").Length() != 1 {
			t.Error("overridden and inherited fields are not told apart")
		}
		if !strings.Contains(doc.Find("#po-row-anthropic").Text(), i18n.TL(i18n.EN, "overrides.inherits_all")) {
			t.Error("a provider without overrides is not shown as inheriting")
		}
	})

	t.Run("refuse", func(t *testing.T) {
		before := stored("openai")
		for _, c := range []struct{ field, value, msg string }{
			{"retry.jitter", "2", "between 0 and 1"},
			{"circuit_breaker.failure_on_statuses", "429, abc", "abc"},
			{"circuit_breaker.success_threshold", "many", "number"},
		} {
			form := cardForm(t, s.get(t, "/settings?provider="+id), "provider-overrides")
			form.Set(c.field, c.value)
			code, body := s.post(t, "/settings/provider-overrides", form, true)
			doc, _ := goquery.NewDocumentFromReader(strings.NewReader(body))
			if msg := doc.Find("#po-" + errorIDOf(c.field)).Text(); code != http.StatusUnprocessableEntity || !strings.Contains(msg, c.msg) {
				t.Errorf("%s=%s: %d %q", c.field, c.value, code, msg)
			}
			if v, _ := doc.Find("#po-" + strings.TrimSuffix(errorIDOf(c.field), "-error")).Attr("value"); v != c.value {
				t.Errorf("%s: the typed value is not kept: %q", c.field, v)
			}
		}
		form := cardForm(t, s.get(t, "/settings?provider="+id), "provider-overrides")
		form.Set("retry.initial_backoff_ms", "5000")
		form.Set("retry.max_backoff_ms", "1000")
		code, body := s.post(t, "/settings/provider-overrides", form, false)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "<html") || !strings.Contains(body, `id="po-`+errorIDOf("retry.max_backoff_ms")+`"`) {
			t.Fatalf("cross-field: %d", code)
		}
		if after := stored("openai"); after != before {
			t.Fatalf("a refused save changed the overrides: %s", after)
		}
	})

	t.Run("clear without JavaScript", func(t *testing.T) {
		form := cardForm(t, s.get(t, "/settings?provider="+id), "provider-overrides")
		for k := range form {
			if strings.HasPrefix(k, "retry.") || strings.HasPrefix(k, "circuit_breaker.") {
				form.Set(k, "")
			}
		}
		code, _ := s.post(t, "/settings/provider-overrides", form, false)
		if code != http.StatusSeeOther {
			t.Fatalf("clear: %d", code)
		}
		if got := stored("openai"); got != "{}" {
			t.Fatalf("after clearing: %s", got)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The dashboard sessions' lifetimes are a document of their own (PATCH /api/settings/sessions);
// their card saves through it like every other card: in place with htmx, with a redirect
// without, and a value out of range is refused at its field with nothing saved.
func TestSessionLifetimesCard(t *testing.T) {
	s := newSettingsSite(t)
	form := cardForm(t, s.get(t, "/settings"), "dashboard-sessions")
	if form["sessions.absolute_lifetime_ms"][0] != "604800000" || form["sessions.idle_timeout_ms"][0] != "86400000" {
		t.Fatalf("the card does not show the defaults: %v", form)
	}
	form["sessions.idle_timeout_ms"] = []string{"3600000"}
	code, body := s.post(t, "/settings/dashboard-sessions", form, true)
	if code != http.StatusOK || !strings.HasPrefix(body, `<form id="card-dashboard-sessions"`) || !strings.Contains(body, "saved-note") {
		t.Fatalf("status %d: %.400s", code, body)
	}
	doc := s.get(t, "/api/settings/sessions")
	if gjson.Get(doc, "values.idle_timeout_ms").Int() != 3600000 || gjson.Get(doc, "sources.idle_timeout_ms").String() != "persisted" ||
		gjson.Get(doc, "sources.absolute_lifetime_ms").String() != "persisted" {
		t.Fatalf("after the save: %s", doc)
	}
	// Without JavaScript: a redirect to the card.
	form["sessions.absolute_lifetime_ms"] = []string{"172800000"}
	if code, _ := s.post(t, "/settings/dashboard-sessions", form, false); code != http.StatusSeeOther {
		t.Fatalf("plain save: %d", code)
	}
	if got := gjson.Get(s.get(t, "/api/settings/sessions"), "values.absolute_lifetime_ms").Int(); got != 172800000 {
		t.Fatalf("absolute lifetime %d", got)
	}
	// Out of range and unreadable: both fields answer at once, nothing saved.
	before := s.get(t, "/api/settings/sessions")
	form["sessions.absolute_lifetime_ms"] = []string{"1000"}
	form["sessions.idle_timeout_ms"] = []string{"soon"}
	code, body = s.post(t, "/settings/dashboard-sessions", form, true)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("refused save: %d %.300s", code, body)
	}
	if msg := fieldMessage(body, "sessions.idle_timeout_ms"); !strings.Contains(msg, "number") {
		t.Fatalf("idle timeout message %q", msg)
	}
	if after := s.get(t, "/api/settings/sessions"); after != before {
		t.Fatalf("a refused save changed the settings:\n%s\n%s", before, after)
	}
	form["sessions.idle_timeout_ms"] = []string{"3600000"}
	code, body = s.post(t, "/settings/dashboard-sessions", form, true)
	page, _ := goquery.NewDocumentFromReader(strings.NewReader(body))
	if msg := page.Find("#" + errorIDOf("sessions.absolute_lifetime_ms")).Text(); code != http.StatusUnprocessableEntity || !strings.Contains(msg, "300,000") {
		t.Fatalf("out of range: %d, message %q", code, msg)
	}
	if page.Find(".error-note").Length() != 1 || s.get(t, "/api/settings/sessions") != before {
		t.Fatal("the card does not say that nothing was saved, or something was")
	}
}
