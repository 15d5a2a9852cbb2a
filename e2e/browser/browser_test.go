package browser

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/app"
	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

const (
	dashPassword = "dashboard-test-password-42"
	// dashSecret is the upstream API key typed into the connection form; no page may show it.
	dashSecret = "sk-upstream-SECRET-5f2c9a7e1d"
)

// startDashApp boots the real gateway exactly as production does, on a fresh data directory
// and an empty environment.
func startDashApp(t *testing.T) *app.App {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	noEnv := func(string) (string, bool) { return "", false }
	a, err := app.Start(context.Background(), app.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), AdminPassword: dashPassword,
		LogLevel: "warn", LogFormat: "text", ShutdownGrace: 5 * time.Second, RequestLogDays: 7, RequestLogRows: 100_000}, noEnv, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(5 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	})
	return a
}

// dashUpstream is an OpenAI-compatible server that lists two models for the right key.
func dashUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+dashSecret {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`)
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake-small","object":"model"},{"id":"fake-large","object":"model"}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// dashClient is a logged-in HTTP client for the dashboard (cookies kept, redirects followed).
func dashClient(t *testing.T, base string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := c.PostForm(base+"/login", url.Values{"password": {dashPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("login: status %d at %s", resp.StatusCode, resp.Request.URL)
	}
	return c
}

// TestDashboardPages renders every page with a logged-in session through the real router, in
// both languages, and checks the form answers that need no browser.
func TestDashboardPages(t *testing.T) {
	app := startDashApp(t)
	base := "http://" + app.Addr
	c := dashClient(t, base)

	pages := map[string]string{"/": "overview.title", "/providers": "providers.title", "/combos": "combos.title", "/keys": "keys.title", "/settings": "settings.title",
		"/usage": "usage.title"}
	for _, lang := range i18n.Langs {
		if code, _ := testenv.Fetch(t, c, http.MethodGet, base+"/lang/"+string(lang)+"?next=/", nil, nil); code != http.StatusOK {
			t.Fatalf("switch to %s: status %d", lang, code)
		}
		for path, titleKey := range pages {
			code, body := testenv.Fetch(t, c, http.MethodGet, base+path, nil, nil)
			if code != http.StatusOK {
				t.Errorf("%s %s: status %d", lang, path, code)
				continue
			}
			for _, key := range []string{titleKey, "nav.overview", "nav.providers", "nav.keys", "nav.settings", "nav.logout"} {
				if !strings.Contains(body, testenv.Esc(lang, key)) {
					t.Errorf("%s %s: missing %q", lang, path, i18n.TL(lang, key))
				}
			}
			if !strings.Contains(body, `<html lang="`+string(lang)+`"`) || !strings.Contains(body, `name="htmx-config"`) {
				t.Errorf("%s %s: no html lang or htmx config", lang, path)
			}
		}
	}
	testenv.Fetch(t, c, http.MethodGet, base+"/lang/en?next=/", nil, nil)

	t.Run("provider form keeps input and shows field errors", func(t *testing.T) {
		code, body := testenv.Fetch(t, c, http.MethodPost, base+"/providers",
			url.Values{"name": {"Not Valid"}, "type": {"openai"}, "base_url": {"ftp://x"}}, nil)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="provider-name-error"`) ||
			!strings.Contains(body, `id="provider-base-url-error"`) || !strings.Contains(body, `value="Not Valid"`) {
			t.Fatalf("status %d, body lacks field errors or typed value", code)
		}
	})

	t.Run("settings card without htmx", func(t *testing.T) {
		form := url.Values{"connection_cooldown.max_cooldown_ms": {"1800000"}, "connection_cooldown.api_key.base_cooldown_ms": {"3000"},
			"connection_cooldown.api_key.max_backoff_steps": {""}, "connection_cooldown.api_key.use_upstream_retry_hints": {"true"},
			"connection_cooldown.oauth.base_cooldown_ms": {"5000"}, "connection_cooldown.oauth.max_backoff_steps": {"8"}}
		code, body := testenv.Fetch(t, c, http.MethodPost, base+"/settings/connection-cooldown", form, nil)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "<html") ||
			!strings.Contains(body, `id="s-connection_cooldown-api_key-max_backoff_steps-error"`) {
			t.Fatalf("empty field: status %d, want a whole page with the error", code)
		}
		form.Set("connection_cooldown.api_key.max_backoff_steps", "6")
		noFollow := *c
		noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		code, _ = testenv.Fetch(t, &noFollow, http.MethodPost, base+"/settings/connection-cooldown", form, nil)
		if code != http.StatusSeeOther {
			t.Fatalf("valid save: status %d, want 303", code)
		}
		_, body = testenv.Fetch(t, c, http.MethodGet, base+"/settings?saved=connection-cooldown", nil, nil)
		if !strings.Contains(body, `value="6"`) || !strings.Contains(body, "saved-note") {
			t.Fatal("saved value or note missing after the redirect")
		}
	})

	t.Run("settings card with htmx", func(t *testing.T) {
		form := url.Values{"connection_cooldown.max_cooldown_ms": {"1000"}, "connection_cooldown.api_key.base_cooldown_ms": {"3000"},
			"connection_cooldown.api_key.max_backoff_steps": {"5"}, "connection_cooldown.oauth.base_cooldown_ms": {"5000"},
			"connection_cooldown.oauth.max_backoff_steps": {"8"}}
		code, body := testenv.Fetch(t, c, http.MethodPost, base+"/settings/connection-cooldown", form, map[string]string{"HX-Request": "true"})
		if code != http.StatusUnprocessableEntity || strings.Contains(body, "<html") || !strings.HasPrefix(body, `<form id="card-connection-cooldown"`) ||
			!strings.Contains(body, `id="s-connection_cooldown-oauth-base_cooldown_ms-error"`) {
			t.Fatalf("cross-field error: status %d, want the card alone with the error: %.300s", code, body)
		}
	})

	t.Run("edit, test and delete", func(t *testing.T) {
		up := dashUpstream(t)
		noFollow := *c
		noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		post := func(path string, form url.Values, htmx bool) (int, string) {
			h := map[string]string{}
			if htmx {
				h["HX-Request"] = "true"
			}
			return testenv.Fetch(t, &noFollow, http.MethodPost, base+path, form, h)
		}
		if code, _ := post("/providers", url.Values{"name": {"up"}, "type": {"openai"}, "base_url": {up.URL + "/v1"}}, false); code != http.StatusSeeOther {
			t.Fatalf("create provider: %d", code)
		}
		if code, _ := post("/connections", url.Values{"provider": {"up"}, "name": {"c1"}, "api_key": {dashSecret}}, false); code != http.StatusSeeOther {
			t.Fatalf("create connection: %d", code)
		}
		_, list := testenv.Fetch(t, c, http.MethodGet, base+"/providers", nil, nil)
		_, section, _ := strings.Cut(list, `id="provider-up"`)
		provID := testenv.Between(section, `action="/providers/`, `/delete"`)
		connID := testenv.Between(section, `action="/connections/`, `/test"`)
		if provID == "" || connID == "" || strings.Contains(list, dashSecret) {
			t.Fatalf("provider %q / connection %q not listed, or the key shown", provID, connID)
		}
		if code, body := testenv.Fetch(t, c, http.MethodGet, base+"/providers/"+provID+"/edit", nil, nil); code != http.StatusOK || !strings.Contains(body, up.URL+"/v1") {
			t.Fatalf("edit provider page: %d", code)
		}
		if code, body := post("/providers/"+provID+"/edit", url.Values{"type": {"nope"}, "base_url": {"x"}}, false); code != http.StatusUnprocessableEntity ||
			!strings.Contains(body, `id="provider-type-error"`) || !strings.Contains(body, `id="provider-base-url-error"`) {
			t.Fatalf("invalid provider edit: %d", code)
		}
		if code, body := testenv.Fetch(t, c, http.MethodGet, base+"/connections/"+connID+"/edit", nil, nil); code != http.StatusOK ||
			strings.Contains(body, dashSecret) || !strings.Contains(body, `value="c1"`) {
			t.Fatalf("edit connection page: %d", code)
		}
		// An empty API key keeps the stored one: the test call still authenticates.
		if code, _ := post("/connections/"+connID+"/edit", url.Values{"name": {"c1-renamed"}, "priority": {"3"}, "max_concurrent": {""},
			"enabled": {"true"}, "api_key": {""}}, false); code != http.StatusSeeOther {
			t.Fatalf("edit connection: %d", code)
		}
		if code, body := post("/connections/"+connID+"/test", nil, true); code != http.StatusOK || !strings.Contains(body, "result-ok") {
			t.Fatalf("htmx test after the edit: %d %s", code, body)
		}
		if code, _ := post("/connections/"+connID+"/test", nil, false); code != http.StatusSeeOther {
			t.Fatalf("plain test: %d, want a redirect with a flash message", code)
		}
		if _, body := testenv.Fetch(t, c, http.MethodGet, base+"/providers", nil, nil); !strings.Contains(body, "flash-success") || !strings.Contains(body, "c1-renamed") {
			t.Fatal("the plain test's flash message or the renamed connection is missing")
		}
		code, _ := post("/connections/"+connID+"/delete", nil, true)
		if code != http.StatusNoContent {
			t.Fatalf("htmx delete connection: %d, want 204 with HX-Redirect", code)
		}
		if code, _ := post("/providers/"+provID+"/delete", nil, false); code != http.StatusSeeOther {
			t.Fatalf("delete provider: %d", code)
		}
		if _, body := testenv.Fetch(t, c, http.MethodGet, base+"/providers", nil, nil); strings.Contains(body, `id="provider-up"`) {
			t.Fatal("provider still listed after delete")
		}
	})

	t.Run("client keys", func(t *testing.T) {
		code, body := testenv.Fetch(t, c, http.MethodPost, base+"/keys", url.Values{"name": {""}}, nil)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="key-name-error"`) {
			t.Fatalf("empty name: %d", code)
		}
		code, body = testenv.Fetch(t, c, http.MethodPost, base+"/keys", url.Values{"name": {"ci"}}, nil)
		box := testenv.Between(body, `id="new-key-value"`, `</output>`)
		key := box[strings.LastIndex(box, ">")+1:]
		if code != http.StatusOK || !strings.HasPrefix(key, "sk-sy-") {
			t.Fatalf("create: %d, key %q", code, key)
		}
		_, body = testenv.Fetch(t, c, http.MethodGet, base+"/keys", nil, nil)
		id := testenv.Between(body, `action="/keys/`, `/revoke"`)
		if strings.Contains(body, key) || id == "" {
			t.Fatal("the key is shown again, or it cannot be revoked")
		}
		if code, _ := testenv.Fetch(t, c, http.MethodPost, base+"/keys/"+id+"/revoke", nil, nil); code != http.StatusOK {
			t.Fatalf("revoke: %d", code)
		}
		if _, body := testenv.Fetch(t, c, http.MethodGet, base+"/keys", nil, nil); strings.Contains(body, `action="/keys/`+id+`/revoke"`) {
			t.Fatal("a revoked key can still be revoked")
		}
	})

	t.Run("unknown things", func(t *testing.T) {
		for _, path := range []string{"/providers/999/edit", "/connections/999/edit"} {
			code, body := testenv.Fetch(t, c, http.MethodGet, base+path, nil, nil)
			if code != http.StatusOK || !strings.Contains(body, testenv.Esc(i18n.EN, "err.not_found")) {
				t.Errorf("%s: status %d, want the list with a not-found message", path, code)
			}
		}
	})
}

// TestDashboardInBrowser drives the dashboard in headless Chromium the way an operator does.
func TestDashboardInBrowser(t *testing.T) {
	upstream := dashUpstream(t)
	app := startDashApp(t)
	base := "http://" + app.Addr

	b := newDashBrowser(t)

	// Every page the browser showed, for the check that the secret never appears.
	var seen []string
	b.after = append(b.after, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		h, err := chromedp.Evaluate[string](`document.documentElement.outerHTML`)(ctx, tg)
		seen = append(seen, h)
		return chromedp.Void{}, err
	})
	type cooldownDoc struct {
		Values struct {
			ConnectionCooldown struct {
				OAuth struct {
					MaxBackoffSteps int `json:"max_backoff_steps"`
				} `json:"oauth"`
			} `json:"connection_cooldown"`
		} `json:"values"`
		Sources map[string]string `json:"sources"`
	}
	// settingsNow reads GET /api/settings/resilience with the browser's session.
	settingsNow := func() cooldownDoc {
		return evalAs[cooldownDoc](b, `fetch('/api/settings/resilience', {credentials: 'same-origin'}).then(r => r.json())`)
	}
	step := b.step
	const stepsField = "#s-connection_cooldown-oauth-max_backoff_steps"

	step("log in", func(t *testing.T) {
		b.do(
			chromedp.Navigate(base+"/providers"),
			chromedp.WaitVisible(chromedp.CSS("#password")),
		)
		b.shot("login")
		b.do(
			chromedp.SendKeys(chromedp.CSS("#password"), dashPassword),
			clickLoad(`.login button[type="submit"]`),
			chromedp.WaitVisible(chromedp.CSS("#add-provider")),
			chromedp.WaitVisible(chromedp.CSS("#nav-providers.active")),
		)
	})

	step("add provider", func(t *testing.T) {
		b.do(
			chromedp.SendKeys(chromedp.CSS("#provider-name"), "Bad Name"),
			chromedp.SetValue(chromedp.CSS("#provider-type"), "openai-compatible"),
			chromedp.SendKeys(chromedp.CSS("#provider-base-url"), upstream.URL+"/v1"),
			clickLoad("#add-provider-submit"),
			chromedp.WaitVisible(chromedp.CSS("#provider-name-error")),
		)
		if v := b.value("#provider-base-url"); v != upstream.URL+"/v1" {
			t.Fatalf("typed base URL not kept after the error: %q", v)
		}
		b.do(
			chromedp.SetValue(chromedp.CSS("#provider-name"), "fake-up"),
			clickLoad("#add-provider-submit"),
			chromedp.WaitVisible(chromedp.CSS("#provider-fake-up")),
			chromedp.WaitVisible(chromedp.CSS(".flash-success")),
		)
	})

	step("add connection", func(t *testing.T) {
		b.do(
			chromedp.SetValue(chromedp.CSS("#conn-provider"), "fake-up"),
			chromedp.SendKeys(chromedp.CSS("#conn-name"), "primary"),
			chromedp.SendKeys(chromedp.CSS("#conn-api-key"), dashSecret),
			chromedp.SendKeys(chromedp.CSS("#conn-priority"), "first"),
			clickLoad("#add-connection-submit"),
			chromedp.WaitVisible(chromedp.CSS("#conn-priority-error")),
		)
		if v := b.value("#conn-api-key"); v != "" {
			t.Fatal("the API key was rendered back into the form")
		}
		if v := b.value("#conn-name"); v != "primary" {
			t.Fatalf("typed name not kept: %q", v)
		}
		b.do(
			chromedp.SendKeys(chromedp.CSS("#conn-api-key"), dashSecret),
			chromedp.SetValue(chromedp.CSS("#conn-priority"), "1"),
			chromedp.SendKeys(chromedp.CSS("#conn-max-concurrent"), "4"),
			clickLoad("#add-connection-submit"),
			chromedp.WaitVisible(chromedp.CSS("#provider-fake-up tbody tr")),
		)
	})

	step("test connection", func(t *testing.T) {
		b.do(
			chromedp.Click(chromedp.CSS(`#provider-fake-up form.test-form button`)),
			chromedp.WaitVisible(chromedp.CSS(`#provider-fake-up .test-result .result`)),
		)
		got := b.text(`#provider-fake-up .test-result .result`)
		if want := "Connected: 2 models"; !strings.HasPrefix(got, want) {
			t.Fatalf("test result %q, want %q…", got, want)
		}
		b.shot("providers")
	})

	step("client key shown once", func(t *testing.T) {
		b.do(
			chromedp.Navigate(base+"/keys"),
			chromedp.WaitVisible(chromedp.CSS("#key-name")),
			chromedp.SendKeys(chromedp.CSS("#key-name"), "laptop"),
			clickLoad("#create-key-submit"),
			chromedp.WaitVisible(chromedp.CSS("#new-key-value")),
		)
		b.shot("key-created")
		key := b.text("#new-key-value")
		if !strings.HasPrefix(key, "sk-sy-") {
			t.Fatalf("new key %q", key)
		}
		// On a phone the key wraps; its box grows with it instead of spilling over the copy
		// button or past the page edge.
		b.do(chromedp.EmulateViewport(390, 800))
		fit := b.eval(`(() => {
			const v = document.getElementById('new-key-value'), b = document.getElementById('copy-key');
			const r = v.getBoundingClientRect(), c = b.getBoundingClientRect();
			const overlap = r.left < c.right && c.left < r.right && r.top < c.bottom && c.top < r.bottom;
			return [v.scrollHeight <= v.clientHeight + 1, !overlap, document.documentElement.scrollWidth <= 390].join();
		})()`)
		b.do(chromedp.EmulateViewport(1280, 900))
		if fit != "true,true,true" {
			t.Fatalf("the new key does not fit its box at 390 px (contained, clear of the copy button, no page overflow): %s", fit)
		}
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the new key does not authenticate: %d", resp.StatusCode)
		}
		b.do(
			chromedp.Navigate(base+"/keys"),
			chromedp.WaitVisible(chromedp.CSS("#keys-table")),
			chromedp.WaitNotPresent(chromedp.CSS("#new-key")),
		)
		if page := seen[len(seen)-1]; strings.Contains(page, key) || !strings.Contains(page, key[:12]) {
			t.Fatal("after a reload the key must be gone and only its prefix listed")
		}
	})

	step("revoke key after confirming", func(t *testing.T) {
		if q := b.dialogFor(`#keys-table form[action$="/revoke"] button`); !strings.HasPrefix(q, "Revoke key laptop?") {
			t.Fatalf("confirmation asks %q", q)
		}
		b.do(
			loads(acceptDialog),
			chromedp.WaitVisible(chromedp.CSS("#keys-table tr.revoked")),
			chromedp.WaitVisible(chromedp.CSS(".flash-success")),
		)
	})

	step("switch language", func(t *testing.T) {
		b.do(
			chromedp.Navigate(base+"/providers"),
			chromedp.WaitVisible(chromedp.CSS("#lang-de")),
			clickLoad("#lang-de"),
			chromedp.WaitReady(chromedp.CSS(`html[lang="de"]`)),
		)
		if got := b.text("#nav-providers"); got != i18n.TL(i18n.DE, "nav.providers") {
			t.Fatalf("German navigation shows %q", got)
		}
		b.shot("providers-de")
		if loc := get(b, chromedp.Location()); !strings.HasSuffix(loc, "/providers") {
			t.Fatalf("language switch did not come back: %s", loc)
		}
		b.do(
			clickLoad("#lang-en"),
			chromedp.WaitReady(chromedp.CSS(`html[lang="en"]`)),
		)
		if got := b.text("#nav-settings"); got != "Settings" {
			t.Fatalf("English navigation shows %q", got)
		}
	})

	step("settings card", func(t *testing.T) {
		b.do(
			chromedp.Navigate(base+"/settings"),
			chromedp.WaitVisible(chromedp.CSS("#card-connection-cooldown")),
			// A marker that survives only if the card is swapped in place, not by a page load.
			chromedp.Evaluate[chromedp.Void](`window.__stillHere = true`),
			chromedp.SetValue(chromedp.CSS(stepsField), "99"),
			chromedp.Click(chromedp.CSS("#save-connection-cooldown")),
			chromedp.WaitVisible(chromedp.CSS(stepsField+"-error")),
			settled,
		)
		if got := b.text(stepsField + "-error"); !strings.Contains(got, "between 0 and 20") {
			t.Fatalf("field error %q", got)
		}
		b.shot("settings-error")
		doc := settingsNow()
		if doc.Values.ConnectionCooldown.OAuth.MaxBackoffSteps != 8 ||
			doc.Sources["connection_cooldown.oauth.max_backoff_steps"] != "default" {
			t.Fatalf("an invalid value was saved: %+v", doc)
		}
		b.do(
			chromedp.SetValue(chromedp.CSS(stepsField), "12"),
			chromedp.Click(chromedp.CSS("#save-connection-cooldown")),
			chromedp.WaitVisible(chromedp.CSS("#card-connection-cooldown .saved-note")),
		)
		if ok := b.eval(`String(window.__stillHere === true)`); ok != "true" {
			t.Fatal("the card save reloaded the page instead of swapping the card")
		}
		if doc := settingsNow(); doc.Values.ConnectionCooldown.OAuth.MaxBackoffSteps != 12 ||
			doc.Sources["connection_cooldown.oauth.max_backoff_steps"] != "persisted" ||
			doc.Sources["connection_cooldown.oauth.base_cooldown_ms"] != "default" {
			t.Fatalf("valid value not saved as the only persisted change: %+v", doc)
		}
		b.do(
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(stepsField)),
		)
		if v := b.value(stepsField); v != "12" {
			t.Fatalf("after a reload the field shows %q", v)
		}
	})

	if os.Getenv("SWITCHYARD_SCREENSHOTS") != "" {
		step("screenshots", func(t *testing.T) {
			for _, p := range []struct{ path, waitFor, name string }{
				{"/settings", "#card-connection-cooldown", "settings"}, {"/", "#quick-start", "overview"}, {"/keys", "#keys-table", "keys"},
			} {
				b.do(chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.waitFor)))
				b.shot(p.name)
			}
		})
	}

	step("secret never rendered", func(t *testing.T) {
		if len(seen) < 10 {
			t.Fatalf("only %d pages seen", len(seen))
		}
		for i, page := range seen {
			if strings.Contains(page, dashSecret) {
				t.Fatalf("page %d shows the upstream API key", i)
			}
		}
	})
}
