package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// stateDash is a logged-in dashboard client of a test gateway (which runs on a fake clock), and
// helpers to read its pages.
type stateDash struct {
	t    *testing.T
	e    *testenv.Env
	c    *http.Client
	lang i18n.Lang
}

func newStateDash(t *testing.T, e *testenv.Env) *stateDash {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	code, _ := testenv.Fetch(t, c, http.MethodPost, e.Base+"/login", url.Values{"password": {e.Vars["SWITCHYARD_ADMIN_PASSWORD"]}}, nil)
	if code != http.StatusSeeOther {
		t.Fatalf("login: status %d", code)
	}
	return &stateDash{t: t, e: e, c: c, lang: i18n.EN}
}

// setLang switches the session's language.
func (d *stateDash) setLang(l i18n.Lang) {
	d.t.Helper()
	if code, _ := testenv.Fetch(d.t, d.c, http.MethodGet, d.e.Base+"/lang/"+string(l)+"?next=/", nil, nil); code != http.StatusSeeOther {
		d.t.Fatalf("switch to %s: status %d", l, code)
	}
	d.lang = l
}

// get fetches a page or fragment and wants 200.
func (d *stateDash) get(path string, htmx bool) string {
	d.t.Helper()
	var h map[string]string
	if htmx {
		h = map[string]string{"HX-Request": "true"}
	}
	code, body := testenv.Fetch(d.t, d.c, http.MethodGet, d.e.Base+path, nil, h)
	if code != http.StatusOK {
		d.t.Fatalf("GET %s: status %d", path, code)
	}
	return body
}

// post submits a form, as htmx does or as a plain browser form does.
func (d *stateDash) post(path string, form url.Values, htmx bool) (int, string) {
	d.t.Helper()
	var h map[string]string
	if htmx {
		h = map[string]string{"HX-Request": "true"}
	}
	if form == nil {
		form = url.Values{}
	}
	return testenv.Fetch(d.t, d.c, http.MethodPost, d.e.Base+path, form, h)
}

// text is how a catalog text of the session's language appears in the HTML.
func (d *stateDash) text(key string, args ...any) string {
	if len(args) > 0 {
		return escText(i18n.TL(d.lang, key, args...))
	}
	return testenv.Esc(d.lang, key)
}

func escText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// connCell is the status cell of connection id in a providers page or fragment.
func connCell(body string, id int64) string {
	sid := strconv.FormatInt(id, 10)
	return testenv.Between(body, `id="cstate-`+sid+`"`, `id="cqueue-`+sid+`"`)
}

// providerStrip is the breaker and state strip of provider id, up to its first connection.
func providerStrip(body string, id int64) string {
	_, after, _ := strings.Cut(body, `id="pbreaker-`+strconv.FormatInt(id, 10)+`"`)
	for _, end := range []string{`id="cstate-`, `<section`, `id="pbreaker-`} {
		if i := strings.Index(after, end); i >= 0 {
			after = after[:i]
		}
	}
	return after
}

// TestProvidersPageState checks the live state on the Providers & Connections page through the
// real router: badges and countdowns in both languages, the poll fragment, and the actions.
func TestProvidersPageState(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-dead": testenv.Status(401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`),
		"sk-a":    testenv.Status(429, map[string]string{"Retry-After": "90"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`),
		"sk-b":    testenv.JSONAnswer(testenv.CompletionJSON),
	}))
	broken := testenv.NewFakeUpstream(t, testenv.Status(500, nil, `{"error":{"message":"upstream exploded","type":"server_error"}}`))
	e := testenv.New(t)
	upID := e.AddProvider("up", up.URL+"/v1")
	brokenID := e.AddProvider("broken", broken.URL+"/v1")
	dead := e.AddConnection("up", "dead", "sk-dead", 0)
	a := e.AddConnection("up", "a", "sk-a", 1)
	b := e.AddConnection("up", "b", "sk-b", 2)
	e.AddConnection("broken", "only", "sk-broken", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	e.WaitModels(key, "broken/gpt-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", brokenID),
		map[string]any{"resilience": map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 1}}}, 200)

	// dead answers 401 (expired), a answers 429 with Retry-After: 90 (cooling), b serves.
	if r := e.Chat(context.Background(), key, testenv.ChatBody); r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, testenv.ReadAll(t, r))
	}
	d := newStateDash(t, e)

	for _, lang := range i18n.Langs {
		d.setLang(lang)
		body := d.get("/providers", false)
		if !strings.Contains(body, `id="nav-cooldowns"`) || !strings.Contains(body, d.text("nav.cooldowns")) {
			t.Errorf("%s: no Model cooldowns entry in the navigation", lang)
		}
		if !strings.Contains(body, `hx-get="/providers/state"`) || !strings.Contains(body, `hx-trigger="every 2s"`) ||
			!strings.Contains(body, `src="/static/app.js?v=`) {
			t.Errorf("%s: the page does not poll its state or load the countdown script", lang)
		}
		cell := connCell(body, a)
		for _, want := range []string{`data-status="cooling"`, d.text("state.conn.cooling"), `data-countdown-ms="90000"`, ">1:30<",
			">429<", d.text("state.reason.rate_limit"), d.text("state.backoff_level", 1),
			`action="/connections/` + strconv.FormatInt(a, 10) + `/clear"`, d.text("state.clear_cooldown")} {
			if !strings.Contains(cell, want) {
				t.Errorf("%s: connection a lacks %q:\n%s", lang, want, cell)
			}
		}
		cell = connCell(body, dead)
		for _, want := range []string{`data-status="expired"`, d.text("state.conn.expired"), ">401<", d.text("state.reset_state"),
			`hx-confirm="` + d.text("state.reset_confirm", "dead") + `"`} {
			if !strings.Contains(cell, want) {
				t.Errorf("%s: connection dead lacks %q:\n%s", lang, want, cell)
			}
		}
		cell = connCell(body, b)
		if !strings.Contains(cell, `data-status="active"`) || !strings.Contains(cell, d.text("state.conn.active")) ||
			strings.Contains(cell, "/clear") || strings.Contains(cell, "/reset") {
			t.Errorf("%s: connection b is not shown active without actions:\n%s", lang, cell)
		}
		for _, want := range []string{`id="cqueue-` + strconv.FormatInt(b, 10) + `"`, d.text("state.queue.executing"),
			d.text("state.queue.waiting"), d.text("state.queue.rejected"), d.text("state.queue.timed_out"), d.text("state.queue.fail_open")} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: queue numbers lack %q", lang, want)
			}
		}
		// One of three connections cools down and one is expired: the provider is degraded, with
		// one usable connection, while its breaker is closed.
		strip := providerStrip(body, upID)
		if !strings.Contains(body, `id="ppill-`+strconv.FormatInt(upID, 10)+`" class="pill pill-warn"`) ||
			!strings.Contains(body, d.text("state.provider.degraded")) || !strings.Contains(body, d.text("state.usable_of", 1, 3)) ||
			!strings.Contains(strip, d.text("state.breaker.closed")) || strings.Contains(strip, "reset-breaker") {
			t.Errorf("%s: provider up is not degraded with a closed breaker:\n%s", lang, strip)
		}
		// The English engine text never reaches a page: the reason and status speak for it.
		if strings.Contains(body, "rate limited (") || strings.Contains(body, "credentials rejected") {
			t.Errorf("%s: an engine text in English is shown", lang)
		}
	}
	d.setLang(i18n.EN)

	t.Run("the countdown ends by itself", func(t *testing.T) {
		frag := d.get("/providers/state", true)
		if !strings.Contains(frag, `id="cstate-`+strconv.FormatInt(a, 10)+`" data-status="cooling" hx-swap-oob="true"`) ||
			!strings.Contains(frag, `id="pstate-`+strconv.FormatInt(upID, 10)+`" hx-swap-oob="true"`) ||
			!strings.Contains(frag, `id="pbreaker-`+strconv.FormatInt(upID, 10)+`" data-breaker="closed" hx-swap-oob="true"`) ||
			!strings.Contains(frag, `id="ppill-`+strconv.FormatInt(upID, 10)+`"`) || strings.Contains(frag, "<html") {
			t.Fatalf("the poll fragment does not swap every state out of band:\n%s", frag)
		}
		e.Clock.Advance(60 * time.Second)
		if cell := connCell(d.get("/providers/state", true), a); !strings.Contains(cell, `data-countdown-ms="30000"`) || !strings.Contains(cell, ">0:30<") {
			t.Fatalf("after 60 s the countdown does not show 0:30:\n%s", cell)
		}
		e.Clock.Advance(30 * time.Second)
		cell := connCell(d.get("/providers/state", true), a)
		if !strings.Contains(cell, `data-status="active"`) || strings.Contains(cell, "data-countdown-ms") {
			t.Fatalf("after the cooldown the connection is not active:\n%s", cell)
		}
		// Only the current state shows: no old error, backoff level or clear action.
		if strings.Contains(cell, d.text("state.backoff_level", 1)) || strings.Contains(cell, "/clear") ||
			strings.Contains(cell, "conn-error") {
			t.Fatalf("an active connection still shows its past cooldown:\n%s", cell)
		}
	})

	t.Run("clear cooldown", func(t *testing.T) {
		cool := func() {
			t.Helper()
			testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
			if s := e.State(a); s.Status != "cooling" {
				t.Fatalf("a does not cool again: %+v", s)
			}
		}
		cool()
		path := fmt.Sprintf("/connections/%d/clear", a)
		code, frag := d.post(path, nil, true)
		if code != http.StatusOK || !strings.HasPrefix(frag, `<div class="conn-state" id="cstate-`+strconv.FormatInt(a, 10)+`" data-status="active">`) ||
			!strings.Contains(frag, `id="cqueue-`+strconv.FormatInt(a, 10)+`" hx-swap-oob="true"`) {
			t.Fatalf("htmx clear: %d %s", code, frag)
		}
		if s := e.State(a); s.Status != "active" || s.BackoffLevel != 0 {
			t.Fatalf("clear must end the cooldown and the backoff: %+v", s)
		}
		cool()
		code, _ = d.post(path, nil, false)
		if code != http.StatusSeeOther {
			t.Fatalf("plain clear: %d", code)
		}
		body := d.get("/providers", false)
		if !strings.Contains(body, "flash-success") || !strings.Contains(connCell(body, a), `data-status="active"`) {
			t.Fatal("the plain clear shows no message or the connection still cools")
		}
		// Clearing a cooldown leaves a terminal state.
		d.post(fmt.Sprintf("/connections/%d/clear", dead), nil, false)
		if s := e.State(dead); s.Status != "expired" {
			t.Fatalf("clear cooldown ended a terminal state: %+v", s)
		}
	})

	t.Run("reset state asks first", func(t *testing.T) {
		path := fmt.Sprintf("/connections/%d/reset", dead)
		code, page := d.post(path, nil, false)
		if code != http.StatusOK || !strings.Contains(page, `id="confirm"`) || !strings.Contains(page, `action="`+path+`"`) ||
			!strings.Contains(page, `name="confirmed" value="true"`) || !strings.Contains(page, d.text("state.reset_confirm", "dead")) {
			t.Fatalf("reset without confirmation: %d, want the confirmation page", code)
		}
		if s := e.State(dead); s.Status != "expired" {
			t.Fatalf("an unconfirmed reset changed the state: %+v", s)
		}
		code, _ = d.post(path, url.Values{"confirmed": {"true"}}, false)
		if code != http.StatusSeeOther {
			t.Fatalf("confirmed reset: %d", code)
		}
		if s := e.State(dead); s.Status != "active" || s.LastError != "" || s.ErrorCode != 0 {
			t.Fatalf("reset must clear the terminal state and the last error: %+v", s)
		}
		body := d.get("/providers", false)
		if cell := connCell(body, dead); !strings.Contains(cell, `data-status="active"`) || strings.Contains(cell, "/reset") {
			t.Fatalf("after the reset:\n%s", cell)
		}
		if code, frag := d.post(fmt.Sprintf("/connections/%d/reset", a), url.Values{"confirmed": {"true"}}, true); code != http.StatusOK ||
			!strings.Contains(frag, `data-status="active"`) {
			t.Fatalf("htmx reset: %d %s", code, frag)
		}
	})

	t.Run("open breaker, last failures and reset", func(t *testing.T) {
		r := e.Chat(context.Background(), key, `{"model":"broken/gpt-test","messages":[{"role":"user","content":"hi"}]}`)
		testenv.ReadAll(t, r)
		body := d.get("/providers", false)
		strip := providerStrip(body, brokenID)
		for _, want := range []string{d.text("state.breaker.open"), d.text("state.next_probe"), `data-countdown-ms="30000"`, ">0:30<",
			d.text("state.last_failures"), "<code>gpt-test</code>", ">500<", "upstream exploded", d.text("state.reset_breaker")} {
			if !strings.Contains(strip, want) {
				t.Errorf("the open breaker's strip lacks %q:\n%s", want, strip)
			}
		}
		if !strings.Contains(body, `id="ppill-`+strconv.FormatInt(brokenID, 10)+`" class="pill pill-error"`) ||
			!strings.Contains(body, d.text("state.provider.circuit_open")) {
			t.Error("the provider's pill does not say the circuit is open")
		}
		// German: the same state in the other language.
		d.setLang(i18n.DE)
		strip = providerStrip(d.get("/providers", false), brokenID)
		if !strings.Contains(strip, d.text("state.breaker.open")) || !strings.Contains(strip, d.text("state.reset_breaker")) {
			t.Errorf("German strip:\n%s", strip)
		}
		d.setLang(i18n.EN)
		e.Clock.Advance(31 * time.Second)
		if strip := providerStrip(d.get("/providers/state", true), brokenID); !strings.Contains(strip, d.text("state.probe_due")) {
			t.Errorf("a due probe is not announced:\n%s", strip)
		}
		code, frag := d.post(fmt.Sprintf("/providers/%d/reset-breaker", brokenID), nil, true)
		if code != http.StatusOK || !strings.HasPrefix(frag, `<div class="breaker-state" id="pbreaker-`+strconv.FormatInt(brokenID, 10)+`" data-breaker="closed">`) ||
			!strings.Contains(frag, `id="pstate-`+strconv.FormatInt(brokenID, 10)+`" hx-swap-oob="true"`) ||
			!strings.Contains(frag, d.text("state.breaker.closed")) || strings.Contains(frag, "reset-breaker") ||
			!strings.Contains(frag, `id="ppill-`+strconv.FormatInt(brokenID, 10)+`"`) {
			t.Fatalf("htmx reset breaker: %d %s", code, frag)
		}
		var st struct {
			Breakers []struct{ Provider, State string }
		}
		e.API("GET", "/api/resilience/state", nil, &st)
		for _, b := range st.Breakers {
			if b.Provider == "broken" && b.State != "closed" {
				t.Fatalf("breaker after reset: %+v", st.Breakers)
			}
		}
		// A plain form reset redirects back with a message.
		testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"broken/gpt-test","messages":[]}`))
		if code, _ := d.post(fmt.Sprintf("/providers/%d/reset-breaker", brokenID), nil, false); code != http.StatusSeeOther {
			t.Fatalf("plain reset breaker: %d", code)
		}
		if body := d.get("/providers", false); !strings.Contains(body, "flash-success") ||
			!strings.Contains(providerStrip(body, brokenID), d.text("state.breaker.closed")) {
			t.Fatal("plain reset breaker: no message or the breaker is still open")
		}
	})

	t.Run("unknown ids", func(t *testing.T) {
		for _, path := range []string{"/connections/999/clear", "/connections/999/reset", "/providers/999/reset-breaker"} {
			if code, _ := d.post(path, url.Values{"confirmed": {"true"}}, false); code != http.StatusSeeOther {
				t.Errorf("%s: %d, want a redirect with a not-found message", path, code)
			}
		}
	})
}

// TestModelCooldownsPageActions checks the Model cooldowns page through the real router.
func TestModelCooldownsPageActions(t *testing.T) {
	var fixed atomic.Bool
	up := testenv.NewFakeUpstream(t, testenv.PerModel(map[string]http.HandlerFunc{
		"gpt-a": func(w http.ResponseWriter, r *http.Request) {
			if fixed.Load() {
				testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
				return
			}
			testenv.Status(404, nil, `{"error":{"message":"The model gpt-a does not exist","code":"model_not_found"}}`)(w, r)
		},
		"gpt-b": testenv.Status(404, nil, `{"error":{"message":"The model gpt-b does not exist","code":"model_not_found"}}`),
	}), "gpt-a", "gpt-b")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	connID := strconv.FormatInt(e.AddConnection("up", "main", "sk-main", 0), 10)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-a")
	d := newStateDash(t, e)

	// Off and empty: the page says what would appear and where to switch it on.
	for _, lang := range i18n.Langs {
		d.setLang(lang)
		body := d.get("/model-cooldowns", false)
		for _, want := range []string{d.text("cooldowns.title"), `id="nav-cooldowns" href="/model-cooldowns" class="nav-link active"`,
			`id="lockouts-empty"`, d.text("cooldowns.empty"), d.text("cooldowns.empty_explain"), `id="lockout-off"`,
			`href="/settings#card-model-lockout"`, d.text("cooldowns.off"), `hx-get="/model-cooldowns/table"`, `hx-trigger="every 2s"`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: empty page lacks %q", lang, want)
			}
		}
	}
	d.setLang(i18n.EN)

	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"model_lockout": map[string]any{"enabled": true},
		"retry": map[string]any{"max_retries": 0}}, 200)
	lock := func(model string) {
		t.Helper()
		r := e.Chat(context.Background(), key, `{"model":"up/`+model+`","messages":[]}`)
		testenv.ReadAll(t, r)
		if r.StatusCode != 404 {
			t.Fatalf("%s: %d, want the upstream's 404", model, r.StatusCode)
		}
	}
	lock("gpt-a")
	e.Clock.Advance(10 * time.Second)
	lock("gpt-b")

	for _, lang := range i18n.Langs {
		d.setLang(lang)
		body := d.get("/model-cooldowns", false)
		rowA := testenv.Between(body, `data-model="gpt-a"`, "</tr>")
		for _, want := range []string{"<strong>up</strong>", "main", "<code>gpt-a</code>", d.text("cooldowns.scope.model"),
			d.text("state.reason.not_found"), `data-countdown-ms="110000"`, ">1:50<", d.text("cooldowns.reenable"),
			`name="model" value="gpt-a"`} {
			if !strings.Contains(rowA, want) {
				t.Errorf("%s: row gpt-a lacks %q:\n%s", lang, want, rowA)
			}
		}
		if i, j := strings.Index(body, `data-model="gpt-a"`), strings.Index(body, `data-model="gpt-b"`); i < 0 || j < i {
			t.Errorf("%s: rows are not sorted by remaining time", lang)
		}
		if strings.Contains(body, `id="lockout-off"`) || !strings.Contains(body, d.text("cooldowns.on")) ||
			!strings.Contains(body, d.text("cooldowns.reenable_all")) || strings.Contains(body, `id="lockouts-empty"`) {
			t.Errorf("%s: the switch, the re-enable-all action or the empty state is wrong", lang)
		}
	}
	d.setLang(i18n.EN)

	t.Run("re-enable one", func(t *testing.T) {
		fixed.Store(true)
		code, frag := d.post("/model-cooldowns/reenable", url.Values{"provider": {"up"}, "connection": {connID}, "model": {"gpt-a"}}, true)
		if code != http.StatusOK || !strings.HasPrefix(frag, `<section class="card" id="lockouts"`) ||
			strings.Contains(frag, `data-model="gpt-a"`) || !strings.Contains(frag, `data-model="gpt-b"`) {
			t.Fatalf("htmx re-enable: %d %s", code, frag)
		}
		before := len(up.ChatRequests())
		r := e.Chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`)
		testenv.ReadAll(t, r)
		reqs := up.ChatRequests()
		if r.StatusCode != 200 || len(reqs) != before+1 || !strings.Contains(reqs[len(reqs)-1].Body, `"gpt-a"`) {
			t.Fatalf("the re-enabled model did not reach the upstream: %d, %d new calls", r.StatusCode, len(reqs)-before)
		}
		// Nothing left to re-enable: a message, no error.
		if code, _ := d.post("/model-cooldowns/reenable", url.Values{"provider": {"up"}, "connection": {connID}, "model": {"gpt-a"}}, false); code != http.StatusSeeOther {
			t.Fatalf("plain re-enable: %d", code)
		}
		if body := d.get("/model-cooldowns", false); !strings.Contains(body, "flash-info") {
			t.Fatal("re-enabling an ended lockout shows no message")
		}
	})

	t.Run("rows disappear when they expire", func(t *testing.T) {
		e.Clock.Advance(119 * time.Second)
		if frag := d.get("/model-cooldowns/table", true); !strings.Contains(frag, `data-model="gpt-b"`) || !strings.Contains(frag, ">0:01<") {
			t.Fatalf("one second before the end:\n%s", frag)
		}
		e.Clock.Advance(time.Second)
		frag := d.get("/model-cooldowns/table", true)
		if strings.Contains(frag, `data-model="gpt-b"`) || !strings.Contains(frag, `id="lockouts-empty"`) || strings.Contains(frag, "<html") {
			t.Fatalf("an expired lockout is still listed:\n%s", frag)
		}
	})

	t.Run("re-enable all asks first", func(t *testing.T) {
		lock("gpt-b")
		code, page := d.post("/model-cooldowns/reenable-all", nil, false)
		if code != http.StatusOK || !strings.Contains(page, `id="confirm"`) || !strings.Contains(page, d.text("cooldowns.reenable_all_confirm", 1)) {
			t.Fatalf("unconfirmed re-enable all: %d", code)
		}
		if len(e.ModelCooldowns()) != 1 {
			t.Fatal("an unconfirmed re-enable all cleared the lockouts")
		}
		if code, _ := d.post("/model-cooldowns/reenable-all", url.Values{"confirmed": {"true"}}, false); code != http.StatusSeeOther {
			t.Fatalf("confirmed re-enable all: %d", code)
		}
		body := d.get("/model-cooldowns", false)
		if len(e.ModelCooldowns()) != 0 || !strings.Contains(body, d.text("cooldowns.reenabled_all", 1)) || !strings.Contains(body, `id="lockouts-empty"`) {
			t.Fatal("re-enable all left lockouts or shows no message")
		}
	})

	t.Run("switched off", func(t *testing.T) {
		lock("gpt-b")
		e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"model_lockout": map[string]any{"enabled": false}}, 200)
		body := d.get("/model-cooldowns", false)
		if !strings.Contains(body, `id="lockout-off"`) || !strings.Contains(body, d.text("cooldowns.off_notice")) ||
			!strings.Contains(body, `data-model="gpt-b"`) {
			t.Fatal("the page does not say that lockout is off while listing the inert lockout")
		}
	})
}

// TestConnectionEditQueueOverrides checks the per-connection queue overrides of the edit form:
// the effective value with its layer beside each field, saving, and field errors.
func TestConnectionEditQueueOverrides(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e := testenv.New(t)
	e.Vars["RATE_LIMIT_EXECUTION_MAX_WAIT_MS"] = "900000"
	e.Restart()
	e.AddProvider("up", up.URL+"/v1")
	id := e.AddConnection("up", "main", "sk-main", 0)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"request_queue": map[string]any{"max_queue_depth": 50}}, 200)
	d := newStateDash(t, e)
	path := fmt.Sprintf("/connections/%d/edit", id)
	// effective is a queue field's label row and its effective value.
	effective := func(body, key string) string {
		return testenv.Between(body, `<label for="conn-rq-`+key+`"`, "</p>")
	}
	form := func(values map[string]string) url.Values {
		f := url.Values{"name": {"main"}, "priority": {"0"}, "max_concurrent": {""}, "enabled": {"true"}}
		for k, v := range values {
			f.Set("request_queue."+k, v)
		}
		return f
	}

	for _, lang := range i18n.Langs {
		d.setLang(lang)
		body := d.get(path, false)
		for key, want := range map[string][]string{
			"max-wait-ms":               {"30" + i18n.TL(lang, "format.thousands") + "000 ms", d.text("source.default")},
			"execution-max-wait-ms":     {"900" + i18n.TL(lang, "format.thousands") + "000 ms", d.text("source.env")},
			"max-queue-depth":           {"<strong>50</strong>", d.text("source.persisted")},
			"requests-per-minute":       {d.text("connedit.no_limit")},
			"min-gap-ms":                {d.text("connedit.no_limit")},
			"max-concurrent-executions": {d.text("connedit.no_limit")},
		} {
			got := effective(body, key)
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("%s: %s shows %q, want %q", lang, key, got, w)
				}
			}
		}
		if !strings.Contains(body, d.text("connedit.queue.title")) || !strings.Contains(body, `placeholder="`+d.text("connedit.inherit")+`"`) {
			t.Errorf("%s: the queue overrides are not explained", lang)
		}
	}
	d.setLang(i18n.EN)

	code, _ := d.post(path, form(map[string]string{"max_wait_ms": "5000", "requests_per_minute": "60", "min_gap_ms": "250"}), false)
	if code != http.StatusSeeOther {
		t.Fatalf("save: %d", code)
	}
	conn := e.MustAPI("GET", fmt.Sprintf("/api/connections/%d", id), nil, 200)
	rq, _ := conn["overrides"].(map[string]any)["request_queue"].(map[string]any)
	if rq["max_wait_ms"] != float64(5000) || rq["requests_per_minute"] != float64(60) || rq["min_gap_ms"] != float64(250) || len(rq) != 3 {
		t.Fatalf("stored overrides: %v", conn["overrides"])
	}
	body := d.get(path, false)
	if !strings.Contains(body, `name="request_queue.max_wait_ms" type="text" inputmode="numeric" value="5000"`) ||
		!strings.Contains(effective(body, "max-wait-ms"), d.text("state.source.connection")) ||
		!strings.Contains(effective(body, "max-wait-ms"), "5,000 ms (5 s)") ||
		!strings.Contains(effective(body, "requests-per-minute"), "60 per minute") ||
		!strings.Contains(effective(body, "execution-max-wait-ms"), d.text("source.env")) {
		t.Fatal("after saving, the edit page does not show the connection's overrides as effective")
	}

	// Bad input: 422 with the field errors and the typed values; nothing saved.
	code, body = d.post(path, form(map[string]string{"max_wait_ms": "soon", "max_queue_depth": "250000"}), false)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="conn-rq-max-wait-ms-error"`) ||
		!strings.Contains(body, `value="soon"`) {
		t.Fatalf("non-number: %d", code)
	}
	code, body = d.post(path, form(map[string]string{"max_wait_ms": "7000", "max_queue_depth": "250000"}), false)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="conn-rq-max-queue-depth-error"`) ||
		!strings.Contains(body, `value="250000"`) || !strings.Contains(body, `value="7000"`) ||
		!strings.Contains(testenv.Between(body, `id="conn-rq-max-queue-depth-error">`, "</p>"), "100,000") {
		t.Fatalf("out of range: %d\n%s", code, testenv.Between(body, `id="conn-queue-overrides"`, "</fieldset>"))
	}
	conn = e.MustAPI("GET", fmt.Sprintf("/api/connections/%d", id), nil, 200)
	if rq := conn["overrides"].(map[string]any)["request_queue"].(map[string]any); rq["max_wait_ms"] != float64(5000) {
		t.Fatalf("a refused form changed the overrides: %v", conn["overrides"])
	}

	// Empty fields inherit again.
	if code, _ := d.post(path, form(nil), false); code != http.StatusSeeOther {
		t.Fatalf("clear overrides: %d", code)
	}
	conn = e.MustAPI("GET", fmt.Sprintf("/api/connections/%d", id), nil, 200)
	if o, _ := conn["overrides"].(map[string]any); len(o) != 0 {
		t.Fatalf("overrides after emptying every field: %v", conn["overrides"])
	}
	if body := d.get(path, false); !strings.Contains(effective(body, "max-wait-ms"), d.text("source.default")) {
		t.Fatal("an emptied field does not inherit")
	}
}
