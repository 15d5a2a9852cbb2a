package browser

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// stateBrowser is headless Chromium with the flags of TestDashboardInBrowser.
type stateBrowser struct {
	t   *testing.T
	ctx context.Context
}

func newStateBrowser(t *testing.T) *stateBrowser {
	t.Helper()
	browser := startBrowser(t)
	return &stateBrowser{t: t, ctx: browser}
}

// step runs f as a subtest; while it runs, the browser's failures are the subtest's, and a
// failed step ends the whole test (later steps build on it).
func (b *stateBrowser) step(name string, f func(t *testing.T)) {
	parent := b.t
	parent.Helper()
	ok := parent.Run(name, func(t *testing.T) {
		b.t = t
		defer func() { b.t = parent }()
		f(t)
	})
	if !ok {
		parent.FailNow()
	}
}

// do runs steps with a time limit.
func (b *stateBrowser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// text returns the text of the first element matching sel.
func (b *stateBrowser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatal(err)
	}
	return strings.TrimSpace(s)
}

// eval evaluates a JavaScript expression to a string.
func (b *stateBrowser) eval(expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// clickLoad clicks something that navigates and waits until the new page has loaded.
func (b *stateBrowser) clickLoad(sel string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))(ctx, tg)
		return chromedp.Void{}, err
	}
}

// shot saves the page when SWITCHYARD_SCREENSHOTS names a directory.
func (b *stateBrowser) shot(name string) {
	b.t.Helper()
	dir := os.Getenv("SWITCHYARD_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) ([]byte, error) {
		if _, err := chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)(ctx, tg); err != nil {
			return nil, err
		}
		return chromedp.FullScreenshot(100)(ctx, tg)
	})
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

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
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	a := strconv.FormatInt(e.AddConnection("up", "a", "sk-a", 0), 10)
	e.AddConnection("up", "b", "sk-b", 1)
	e.AddProvider("lk", lk.URL+"/v1")
	e.AddConnection("lk", "main", "sk-main", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	e.WaitModels(key, "lk/gpt-a")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)

	b := newStateBrowser(t)
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	cell := "#cstate-" + a

	step("log in", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/login"),
			chromedp.WaitVisible(chromedp.CSS("#password")),
			chromedp.SendKeys(chromedp.CSS("#password"), e.Vars["SWITCHYARD_ADMIN_PASSWORD"]),
			b.clickLoad(`.login button[type="submit"]`),
			chromedp.WaitVisible(chromedp.CSS("#nav-cooldowns")),
		)
	})

	step("a 429 cools the connection with a live countdown", func(t *testing.T) {
		if r := e.Chat(context.Background(), key, testenv.ChatBody); r.StatusCode != 200 {
			t.Fatalf("chat: %d", r.StatusCode)
		}
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
		if s := e.State(mustInt(t, a)); s.Status != "active" || s.BackoffLevel != 0 {
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

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
