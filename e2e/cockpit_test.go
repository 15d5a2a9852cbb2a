package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// TestLivePollsAnswerOnlyChanges: each live poll sends back the version of the state its page
// shows and gets 204 (nothing to swap) while that state is unchanged — also while countdowns
// run — and the new state with its new version once something happened.
func TestLivePollsAnswerOnlyChanges(t *testing.T) {
	e, _, key, _, _ := twoKeysBAnswers(t, testenv.Status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"Rate limit reached"}}`))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"model_lockout": map[string]any{"enabled": true}}, 200)
	d := newStateDash(t, e)

	for _, c := range []struct{ page, poll, input string }{
		{"/providers", "/providers/state", "state-version"},
		{"/model-cooldowns", "/model-cooldowns/table", "lockouts-version"},
		{"/", "/overview/health", "health-version"},
	} {
		version := func(body string) string {
			return testenv.Between(testenv.Between(body, `id="`+c.input+`"`, `>`), `value="`, `"`)
		}
		e.MustAPI("POST", "/api/resilience/reset", map[string]any{}, 200) // nothing cools, nothing is locked
		v := version(d.get(c.page, false))
		if v == "" {
			t.Fatalf("%s carries no version for its poll", c.page)
		}
		poll := func(v string) (int, string) {
			return testenv.Fetch(t, d.c, "GET", e.Base+c.poll+"?v="+v, nil, map[string]string{"HX-Request": "true"})
		}
		if code, _ := poll(v); code != http.StatusNoContent {
			t.Fatalf("%s: unchanged state answered %d, want 204", c.poll, code)
		}
		// a answers 429: it cools down and the model is locked on it (429 is a lockout code).
		testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
		e.Clock.Advance(30 * time.Second)
		code, body := poll(v)
		if code != http.StatusOK || !strings.Contains(body, `hx-swap-oob="true"`) || version(body) == v || version(body) == "" {
			t.Fatalf("%s after a change: %d, want the new state and version:\n%.400s", c.poll, code, body)
		}
		if code, _ := poll(version(body)); code != http.StatusNoContent {
			t.Fatalf("%s: the new version answered %d", c.poll, code)
		}
		e.Clock.Advance(20 * time.Second) // countdowns run; that alone is no change
		if code, _ := poll(version(body)); code != http.StatusNoContent {
			t.Fatalf("%s: a running countdown changed the version", c.poll)
		}
	}
}

// TestOverviewWithoutJavaScript: the Overview names each trouble with a link to its place and
// draws the charts on the server; the Request log filters with a plain GET form.
func TestOverviewWithoutJavaScript(t *testing.T) {
	e, _, key, ids := testenv.SetupConns(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-a":    testenv.Status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"Rate limit reached"}}`),
		"sk-dead": testenv.Status(401, nil, `{"error":{"message":"Incorrect API key sk-dead"}}`),
		"sk-b":    testenv.JSONAnswer(testenv.CompletionJSON),
	}), testenv.UpConn{Name: "a", Key: "sk-a", Priority: 0}, testenv.UpConn{Name: "dead", Key: "sk-dead", Priority: 1}, testenv.UpConn{Name: "b", Key: "sk-b", Priority: 2})
	a, dead := ids[0], ids[1]
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	d := newStateDash(t, e)

	for _, lang := range i18n.Langs {
		d.setLang(lang)
		body := d.get("/", false)
		for _, want := range []string{
			`data-kind="connection_cooling"`, `href="/providers#conn-` + strconv.FormatInt(a, 10) + `"`,
			`data-kind="connection_terminal"`, `href="/providers#conn-` + strconv.FormatInt(dead, 10) + `"`,
			d.text("health.title"), `id="chart-requests"`, `class="bar s-requests"`, `id="by-provider"`, `id="by-key"`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s overview lacks %q", lang, want)
			}
		}
		if strings.Contains(body, d.text("health.ok_title")) {
			t.Errorf("%s: all clear although connections are in trouble", lang)
		}
	}
	d.setLang(i18n.EN)
	if body := d.get("/?range=day", false); !strings.Contains(body, `id="range-day" href="/?range=day#traffic" class="active"`) {
		t.Error("the day range is not selected")
	}

	body := d.get("/requests?status=2xx&provider=up", false)
	if !strings.Contains(body, `id="requests-table"`) || !strings.Contains(body, "<option value=\"2xx\" selected>") {
		t.Fatal("the request log does not filter by status")
	}
	if code, body := testenv.Fetch(t, d.c, "GET", e.Base+"/requests?status=nope", nil, nil); code != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "flash-error") {
		t.Fatalf("a bad filter: %d", code)
	}
	if code, _ := testenv.Fetch(t, d.c, "GET", e.Base+"/requests/999999", nil, nil); code != http.StatusNotFound {
		t.Fatalf("an unknown request: %d", code)
	}
	// No credential on any of the pages, although the upstream echoed one.
	for _, p := range []string{"/", "/providers", "/requests", "/requests/1", "/requests/2", "/requests/3", "/requests/4"} {
		if _, body := testenv.Fetch(t, d.c, "GET", e.Base+p, nil, nil); strings.Contains(body, "sk-dead") || strings.Contains(body, "sk-a\"") {
			t.Errorf("%s shows a credential", p)
		}
	}
	var logged struct {
		Items []struct {
			ClientKeyID int64 `json:"client_key_id"`
		}
	}
	e.API("GET", "/api/requests?status=2xx", nil, &logged) // the chat and WaitModels' model lists
	if keys := d.get("/keys", false); !strings.Contains(keys, d.text("keys.requests_n", strconv.Itoa(len(logged.Items)))) ||
		!strings.Contains(keys, d.text("keys.tokens_in_out", "3", "2")) {
		t.Errorf("the keys page does not count today's request and tokens of the key: %s", testenv.Between(keys, `class="usage"`, `</td>`))
	}
}
