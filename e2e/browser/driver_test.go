package browser

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
	"switchyard/static"
)

const chromiumPath = "/usr/bin/chromium"

// startBrowser starts headless Debian Chromium for a test (stopped at cleanup) after checking
// that it and the built assets exist. Without chromium the test is skipped locally but fails
// in CI, so a green run cannot hide a missing install.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; the CI image must install Debian's chromium", chromiumPath)
		}
		t.Skipf("%s is missing; install chromium to run the browser test", chromiumPath)
	}
	if _, err := fs.Stat(static.FS, "dist/js/htmx.min.js"); err != nil { // embedded when the binary was built
		t.Fatal("static/dist/js/htmx.min.js is missing: run `npm ci && npm run build` (or `make assets`) before the tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium keeps its singleton socket in a directory of its own under TMPDIR, which it
		// leaves behind when it is killed at the end of the test: give it one that is removed.
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return browser
}

// dashBrowser is headless Chromium driving the dashboard for one test. Every command has a time
// limit; a failed one fails the test, or the step running it (see run).
type dashBrowser struct {
	t   *testing.T
	ctx context.Context
	// after runs at the end of every do (TestDashboardInBrowser keeps each page it saw).
	after []chromedp.Action[chromedp.Void]
}

func newDashBrowser(t *testing.T) *dashBrowser {
	t.Helper()
	return &dashBrowser{t: t, ctx: startBrowser(t)}
}

// run runs f as a subtest; while it runs, the browser's failures are the subtest's.
func (b *dashBrowser) run(name string, f func(t *testing.T)) bool {
	parent := b.t
	parent.Helper()
	return parent.Run(name, func(t *testing.T) {
		b.t = t
		defer func() { b.t = parent }()
		f(t)
	})
}

// step is run where a failed step ends the whole test (later steps build on it).
func (b *dashBrowser) step(name string, f func(t *testing.T)) {
	b.t.Helper()
	if !b.run(name, f) {
		b.t.FailNow()
	}
}

// get runs an action that yields a value, with a time limit.
func get[T any](b *dashBrowser, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// do runs steps with a time limit.
func (b *dashBrowser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	get(b, chromedp.Steps(append(steps, b.after...)...))
}

// text returns the text of the first element matching sel.
func (b *dashBrowser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(get(b, chromedp.Text(chromedp.CSS(sel))))
}

// value returns the value of the form field sel.
func (b *dashBrowser) value(sel string) string {
	b.t.Helper()
	return get(b, chromedp.Value(chromedp.CSS(sel)))
}

// eval evaluates a JavaScript expression (awaited when it is a promise) to a string.
func (b *dashBrowser) eval(expr string) string {
	b.t.Helper()
	return evalAs[string](b, expr)
}

// evalAs evaluates a JavaScript expression (awaited when it is a promise) into a T.
func evalAs[T any](b *dashBrowser, expr string) T {
	b.t.Helper()
	return get(b, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// shown reports whether the element sel is displayed.
func (b *dashBrowser) shown(sel string) bool {
	b.t.Helper()
	return b.eval(`getComputedStyle(document.querySelector('`+sel+`')).display`) != "none"
}

// fitsPhone fails the step when the page is wider than the 390 px screen it is shown on.
func (b *dashBrowser) fitsPhone(where string) {
	b.t.Helper()
	if over := b.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
		b.t.Errorf("%s overflows a 390 px screen by %s px", where, over)
	}
}

// spilling names the elements matching sel whose content is wider than they are, and by how
// much ("" when none is).
func (b *dashBrowser) spilling(sel string) string {
	b.t.Helper()
	return b.eval(`[...document.querySelectorAll('` + sel + `')].filter(el => el.scrollWidth > el.clientWidth + 1)
		.map(el => (el.id || el.className) + ' ' + (el.scrollWidth - el.clientWidth) + 'px').join(', ')`)
}

// loads runs a, which navigates, and waits until the new page has loaded.
func loads(a chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.WaitEvent(page.LoadEventFired, nil, a)(ctx, tg)
		return chromedp.Void{}, err
	}
}

// clickLoad clicks something that navigates and waits until the new page has loaded.
func clickLoad(sel string) chromedp.Action[chromedp.Void] {
	return loads(chromedp.Click(chromedp.CSS(sel)))
}

// logIn opens at (the login page, or a page that asks for it) and logs in with password.
func logIn(at, password string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(at),
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		clickLoad(`.login button[type="submit"]`),
	)
}

// onPhoneInGerman logs in to e on a 390 px phone and opens path in German.
func onPhoneInGerman(e *testenv.Env, path string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.EmulateViewport(390, 844),
		logInTo(e),
		chromedp.Navigate(e.Base+"/lang/de?next="+path),
	)
}

// de is a German catalog text.
func de(key string, args ...any) string { return i18n.TL(i18n.DE, key, args...) }

// logInTo logs in to a testenv gateway from its login page.
func logInTo(e *testenv.Env) chromedp.Action[chromedp.Void] {
	return logIn(e.Base+"/login", e.Vars["SWITCHYARD_ADMIN_PASSWORD"])
}

// settled waits until htmx has finished every request, swap and settle on the page. New content
// is wired (its hx- attributes processed) only when it loses .htmx-added, one settle delay after
// the swap: a click before that is the browser's own form submit, a page load.
var settled = chromedp.Poll[chromedp.Void](`!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')`,
	chromedp.WithPollingTimeout(15*time.Second))

// dialogFor clicks sel, which asks first (confirm()), and returns the question. The click runs
// from a timer: confirm() blocks the page, and with it any command that waits for the click.
func (b *dashBrowser) dialogFor(sel string) string {
	b.t.Helper()
	dialog := get(b, chromedp.WaitEvent(page.JavascriptDialogOpening, nil,
		chromedp.Evaluate[chromedp.Void](`setTimeout(() => document.querySelector('`+sel+`').click(), 0)`)))
	return dialog.Message
}

// acceptDialog answers the open question with OK.
func acceptDialog(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
	return chromedp.Void{}, err
}

// shot saves the whole page when SWITCHYARD_SCREENSHOTS names a directory (for a look at the
// design); it costs nothing otherwise.
func (b *dashBrowser) shot(name string) {
	b.t.Helper()
	b.shotOf(name, "")
}

// shotOf saves the element sel alone, or the whole page when sel is "", as shot does.
func (b *dashBrowser) shotOf(name, sel string) {
	b.t.Helper()
	dir := os.Getenv("SWITCHYARD_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := get(b, func(ctx context.Context, tg *chromedp.Target) ([]byte, error) {
		if sel != "" {
			return chromedp.Screenshot(chromedp.CSS(sel))(ctx, tg)
		}
		if _, err := chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)(ctx, tg); err != nil {
			return nil, err
		}
		return chromedp.FullScreenshot(100)(ctx, tg)
	})
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
