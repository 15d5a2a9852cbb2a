package browser

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

var clockText = regexp.MustCompile(`^[0-9]+:[0-5][0-9]$`)

// TestLiveStateInBrowser drives the live state in headless Chromium: a connection cooled by a 429
// counts down on the providers page until the operator clears it, and a model locked out by a
// 404 is listed on the Model cooldowns page until the operator re-enables it. The gateway runs on
// a fake clock; the browser waits for concrete elements, never for time.
func TestLiveStateInBrowser(t *testing.T) {
	var fixed atomic.Bool
	lk := testenv.NewFakeUpstream(t, testenv.PerModel(map[string]http.HandlerFunc{
		"gpt-a": func(w http.ResponseWriter, r *http.Request) {
			if fixed.Load() {
				testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
				return
			}
			testenv.Status(404, nil, `{"error":{"message":"The model gpt-a does not exist","code":"model_not_found"}}`)(w, r)
		},
		"gpt-500": testenv.Status(500, nil, `{"error":{"message":"internal failure in the model server","type":"server_error"}}`),
	}), "gpt-a", "gpt-500")
	up := testenv.NewFakeUpstream(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-a": testenv.Status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`),
		"sk-b": testenv.JSONAnswer(testenv.CompletionJSON),
	}))
	e, key, aID := twoConnections(t, up)
	a := strconv.FormatInt(aID, 10)
	e.AddProvider("lk", lk.URL+"/v1")
	e.AddConnection("lk", "main", "sk-main", 0)
	e.WaitModels(key, "lk/gpt-a")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)

	b := newDashBrowser(t)
	step := b.step
	cell := "#cstate-" + a

	step("log in", func(t *testing.T) {
		b.do(
			logInTo(e),
			chromedp.WaitVisible(chromedp.CSS("#nav-cooldowns")),
		)
	})

	step("a 429 cools the connection with a live countdown", func(t *testing.T) {
		chatWants(t, e, key, testenv.ChatBody, 200)
		b.do(
			chromedp.Navigate(e.Base+"/providers"),
			chromedp.WaitVisible(chromedp.CSS(cell+`[data-status="cooling"] .countdown`)),
			// A marker that survives only if the page is updated in place, not reloaded.
			chromedp.Evaluate[chromedp.Void](`window.__stillHere = true`),
		)
		if got := b.text(cell + " .state-badge"); !strings.HasPrefix(got, i18n.TL(i18n.EN, "state.conn.cooling")) {
			t.Fatalf("badge %q, want it to say cooling", got)
		}
		if got := b.text(cell + " .countdown"); !clockText.MatchString(got) || !strings.HasPrefix(got, "10:00") && !strings.HasPrefix(got, "9:5") {
			t.Fatalf("countdown %q, want about 10:00", got)
		}
		// The countdown ticks in the browser between the server's refreshes (the server's clock
		// stands still, so every refresh shows 10:00 again).
		b.do(chromedp.Poll[chromedp.Void](`document.querySelector('`+cell+` .countdown').textContent === '9:59'`,
			chromedp.WithPollingTimeout(10*time.Second)))
		b.shot("state-providers-cooling")
	})

	step("clear cooldown makes it active in place", func(t *testing.T) {
		b.do(
			chromedp.Click(chromedp.CSS("#clear-"+a)),
			chromedp.WaitVisible(chromedp.CSS(cell+`[data-status="active"]`)),
		)
		if got := b.text(cell + " .state-badge"); got != i18n.TL(i18n.EN, "state.conn.active") {
			t.Fatalf("badge %q after clearing", got)
		}
		if b.eval(`String(window.__stillHere === true)`) != "true" {
			t.Fatal("clearing reloaded the page instead of swapping the state")
		}
		if s := e.State(aID); s.Status != "active" || s.BackoffLevel != 0 {
			t.Fatalf("state after clearing: %+v", s)
		}
		// The next poll still shows it active.
		b.do(
			chromedp.Evaluate[chromedp.Void](`document.querySelector('`+cell+`').dataset.polled = 'no'`),
			chromedp.WaitNotPresent(chromedp.CSS(cell+`[data-polled="no"]`)),
			chromedp.WaitVisible(chromedp.CSS(cell+`[data-status="active"]`)),
		)
		b.shot("state-providers-active")
	})

	step("a 404 locks the model; re-enable sends the next request upstream", func(t *testing.T) {
		e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"model_lockout": map[string]any{"enabled": true}}, 200)
		r := e.Chat(context.Background(), key, `{"model":"lk/gpt-a","messages":[{"role":"user","content":"hi"}]}`)
		testenv.ReadAll(t, r)
		if r.StatusCode != 404 {
			t.Fatalf("chat: %d, want the upstream's 404", r.StatusCode)
		}
		row := `#lockouts tr.lockout[data-provider="lk"][data-model="gpt-a"]`
		b.do(
			chromedp.Click(chromedp.CSS("#nav-cooldowns")),
			chromedp.WaitVisible(chromedp.CSS(row)),
		)
		if got := b.text(row + " .countdown"); got != "2:00" && got != "1:59" {
			t.Fatalf("lockout countdown %q", got)
		}
		if got := b.text(row + " td:nth-child(4)"); !strings.Contains(got, i18n.TL(i18n.EN, "cooldowns.scope.model")) {
			t.Fatalf("scope %q", got)
		}
		b.shot("state-cooldowns")

		fixed.Store(true)
		before := len(lk.ChatRequests())
		b.do(
			chromedp.Click(chromedp.CSS(row+" button.reenable")),
			chromedp.WaitNotPresent(chromedp.CSS(row)),
			chromedp.WaitVisible(chromedp.CSS("#lockouts-empty")),
		)
		if n := len(e.ModelCooldowns()); n != 0 {
			t.Fatalf("%d lockouts left after re-enabling", n)
		}
		r = e.Chat(context.Background(), key, `{"model":"lk/gpt-a","messages":[{"role":"user","content":"hi"}]}`)
		body := testenv.ReadAll(t, r)
		reqs := lk.ChatRequests()
		if r.StatusCode != 200 || len(reqs) != before+1 || !strings.Contains(reqs[len(reqs)-1].Body, `"gpt-a"`) {
			t.Fatalf("the next request after re-enabling: %d %s, %d upstream calls", r.StatusCode, body, len(reqs)-before)
		}
		b.shot("state-cooldowns-empty")
	})

	if os.Getenv("SWITCHYARD_SCREENSHOTS") != "" {
		step("screenshots", func(t *testing.T) {
			testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody)) // cool a again
			fixed.Store(false)
			testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"lk/gpt-a","messages":[]}`))
			b.do(chromedp.Navigate(e.Base+"/lang/de?next=/model-cooldowns"), chromedp.WaitVisible(chromedp.CSS("#lockouts tr.lockout")))
			b.shot("state-cooldowns-de")
			b.do(chromedp.Navigate(e.Base+"/providers"), chromedp.WaitVisible(chromedp.CSS(cell+`[data-status="cooling"]`)))
			b.shot("state-providers-de")
			// An open breaker with its last failures.
			var provs struct{ Items []struct{ ID int64 } }
			e.API("GET", "/api/providers", nil, &provs)
			for _, p := range provs.Items {
				e.MustAPI("PATCH", "/api/providers/"+strconv.FormatInt(p.ID, 10), map[string]any{"resilience": map[string]any{
					"circuit_breaker": map[string]any{"failure_threshold": 1}}}, 200)
			}
			testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"lk/gpt-500","messages":[]}`))
			b.do(chromedp.Navigate(e.Base+"/lang/en?next=/providers"), chromedp.WaitVisible(chromedp.CSS(`.breaker-state[data-breaker="open"]`)))
			b.shot("state-providers-open")
			b.do(chromedp.Navigate(e.Base+"/connections/"+a+"/edit"), chromedp.WaitVisible(chromedp.CSS("#conn-queue-overrides")))
			b.shot("state-connection-edit-de")
			b.do(chromedp.Navigate(e.Base+"/lang/en?next=/connections/"+a+"/edit"), chromedp.WaitVisible(chromedp.CSS("#conn-queue-overrides")))
			b.shot("state-connection-edit")
		})
	}
}

// oneConnection starts a gateway (flags: args) whose provider up reaches a fake upstream that
// answers every chat with a completion through one connection, main; it returns the gateway and
// up's id.
func oneConnection(t *testing.T, args ...string) (*testenv.Env, int64) {
	t.Helper()
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e := testenv.New(t, args...)
	id := e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-main", 0)
	return e, id
}

// twoConnections starts a gateway whose provider up reaches upstream through the connections a
// (key sk-a, tried first) and b (sk-b); it returns the gateway, a client key that sees
// up/gpt-test, and a's id.
func twoConnections(t *testing.T, upstream *testenv.FakeUpstream) (*testenv.Env, string, int64) {
	t.Helper()
	e := testenv.New(t)
	e.AddProvider("up", upstream.URL+"/v1")
	a := e.AddConnection("up", "a", "sk-a", 0)
	e.AddConnection("up", "b", "sk-b", 1)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	return e, key, a
}

// TestPinnedSessionsInBrowser: a client session pinned to a connection appears on the
// connection's row of the providers page with the live state's next poll, and the row still fits
// a phone.
func TestPinnedSessionsInBrowser(t *testing.T) {
	e, key, aID := twoConnections(t, testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON)))
	a := strconv.FormatInt(aID, 10)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"session_affinity_ttl_ms": 600_000}, 200)

	b := newDashBrowser(t)
	pinned := "#cqueue-" + a + " .q-pinned"
	b.do(
		logInTo(e),
		chromedp.WaitVisible(chromedp.CSS("#nav-cooldowns")),
		chromedp.Navigate(e.Base+"/providers"),
		chromedp.WaitVisible(chromedp.CSS("#cqueue-"+a)),
	)
	if b.eval(`String(document.querySelector('`+pinned+`') === null)`) != "true" {
		t.Fatal("pinned sessions are shown before any session was pinned")
	}
	for _, s := range []string{"one", "two"} {
		r := e.Post(context.Background(), "/v1/chat/completions", key, testenv.ChatBody, map[string]string{"X-Switchyard-Session": s})
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("chat: %d %s", r.StatusCode, body)
		}
	}
	b.do(chromedp.WaitVisible(chromedp.CSS(pinned)))
	if got := b.text(pinned); got != "2" {
		t.Fatalf("pinned count %q", got)
	}
	if got := b.text("#cqueue-" + a + " .q-main"); !strings.Contains(got, i18n.TL(i18n.EN, "state.queue.pinned")) {
		t.Fatalf("queue cell %q", got)
	}
	b.do(chromedp.EmulateViewport(390, 800))
	defer b.do(chromedp.EmulateViewport(1280, 900))
	b.do(chromedp.Navigate(e.Base+"/providers"), chromedp.WaitVisible(chromedp.CSS(pinned)))
	b.fitsPhone("the providers page")
	b.shot("providers-pinned-390")
}
