package browser

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"switchyard/e2e/testenv"
)

// TestKeyAccessFormInBrowser: on a phone (390 px) in German, an operator opens a client key's
// edit page, limits it to some models (a refused pattern comes back with its message, in
// German), gives it the lease scope on a connection, and saves; the list shows what the key may
// use, the admin API has the new lists and the key is refused a model outside them. A new key is
// made with the same fields on the list page. Neither page is wider than the phone.
func TestKeyAccessFormInBrowser(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-test", "gpt-other")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddProvider("alt-provider-with-a-long-name", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-main", 0)
	spare := e.AddConnection("up", "spare-connection-with-a-rather-long-name", "sk-spare", 1)
	e.AddConnection("alt-provider-with-a-long-name", "only", "sk-alt", 0)
	created := e.MustAPI("POST", "/api/keys", map[string]any{"name": "laptop", "allowed_models": []string{"up/*"}}, 201)
	key, id := created["key"].(string), strconv.FormatInt(int64(created["id"].(float64)), 10)
	e.WaitModels(key, "up/gpt-test")

	b := newDashBrowser(t)
	step := b.step

	step("the list shows what the key may use, in German, on a phone", func(t *testing.T) {
		b.do(
			onPhoneInGerman(e, "/keys"),
			chromedp.WaitVisible(chromedp.CSS("#keys-table")),
		)
		if got := b.text("#key-" + id + " .key-access"); !strings.Contains(got, de("keys.access.models", "up/*")) {
			t.Fatalf("access cell %q", got)
		}
		if got := b.text(`label[for="key-allowed-models"]`); got != de("keys.field.allowed_models") {
			t.Fatalf("create form label %q", got)
		}
		b.fitsPhone("/keys")
		b.shot("keys-390-de")
	})

	step("a refused pattern comes back with its German message", func(t *testing.T) {
		b.do(
			clickLoad("#edit-key-"+id),
			chromedp.WaitVisible(chromedp.CSS("#key-allowed-models")),
		)
		if got := b.eval(`document.querySelector('#key-allowed-models').value`); got != "up/*" {
			t.Fatalf("the patterns field shows %q", got)
		}
		b.fitsPhone("the edit page")
		b.shot("key-edit-390-de")
		b.do(
			chromedp.SetValue(chromedp.CSS("#key-allowed-models"), "up/gpt-test\nup/[oops"),
			chromedp.Click(chromedp.CSS("#key-lease-exclusive")),
			clickLoad("#save-key"),
			chromedp.WaitVisible(chromedp.CSS("#key-allowed-models-error")),
		)
		if got := b.text("#key-allowed-models-error"); !strings.Contains(got, "up/[oops") || !strings.Contains(got, de("keys.err.pattern_syntax", "up/[oops")) {
			t.Fatalf("pattern error %q", got)
		}
		if got := b.text("#key-connections-error"); got != de("keys.err.lease_needs_connections", "lease:exclusive") {
			t.Fatalf("connections error %q", got)
		}
		if b.eval(`document.querySelector('#key-allowed-models').value`) != "up/gpt-test\nup/[oops" ||
			b.eval(`String(document.querySelector('#key-lease-exclusive').checked)`) != "true" {
			t.Fatal("the form lost what was typed")
		}
		b.fitsPhone("the edit page with errors")
		b.shot("key-edit-errors-390-de")
		if k := e.MustAPI("GET", "/api/keys/"+id, nil, 200); k["allowed_models"].([]any)[0] != "up/*" {
			t.Fatalf("a refused form changed the key: %v", k)
		}
	})

	step("edit allowed models and connections, and save", func(t *testing.T) {
		b.do(
			chromedp.SetValue(chromedp.CSS("#key-allowed-models"), "up/gpt-test, alt-provider-with-a-long-name/*"),
			chromedp.Click(chromedp.CSS("#key-conn-"+strconv.FormatInt(spare, 10))),
			clickLoad("#save-key"),
			chromedp.WaitVisible(chromedp.CSS("#keys-table")),
		)
		if got := b.text(".flash-success"); got != de("keys.updated_flash", "laptop") {
			t.Fatalf("flash %q", got)
		}
		if got := b.text("#key-" + id + " .key-access"); !strings.Contains(got, de("keys.access.lease", 1)) ||
			!strings.Contains(got, "up/gpt-test, alt-provider-with-a-long-name/*") {
			t.Fatalf("access cell %q", got)
		}
		k := e.MustAPI("GET", "/api/keys/"+id, nil, 200)
		if !sameList(k["allowed_models"], "up/gpt-test", "alt-provider-with-a-long-name/*") || !sameList(k["scopes"], "lease:exclusive") ||
			!sameList(k["allowed_connections"], strconv.FormatInt(spare, 10)) {
			t.Fatalf("the key after saving: %v", k)
		}
		b.fitsPhone("/keys after saving")
		r := e.Chat(context.Background(), key, `{"model":"up/gpt-other","messages":[{"role":"user","content":"hi"}]}`)
		if body := testenv.ReadAll(t, r); r.StatusCode != 403 {
			t.Fatalf("a model outside the new list: %d %s", r.StatusCode, body)
		}
		// The edit page shows what is stored.
		b.do(chromedp.Navigate(e.Base+"/keys/"+id+"/edit"), chromedp.WaitVisible(chromedp.CSS("#key-allowed-models")))
		if b.eval(`document.querySelector('#key-allowed-models').value`) != "up/gpt-test\nalt-provider-with-a-long-name/*" ||
			b.eval(`String(document.querySelector('#key-conn-`+strconv.FormatInt(spare, 10)+`').checked)`) != "true" {
			t.Fatal("the edit page does not show the stored lists")
		}
	})

	step("a new key with the same fields", func(t *testing.T) {
		b.do(
			chromedp.Navigate(e.Base+"/keys"),
			chromedp.WaitVisible(chromedp.CSS("#create-key")),
			chromedp.SendKeys(chromedp.CSS("#key-name"), "agent"),
			chromedp.SetValue(chromedp.CSS("#key-allowed-models"), "up/gpt-other"),
			clickLoad("#create-key-submit"),
			chromedp.WaitVisible(chromedp.CSS("#new-key-value")),
		)
		secret := b.text("#new-key-value")
		r := e.Chat(context.Background(), secret, `{"model":"up/gpt-other","messages":[{"role":"user","content":"hi"}]}`)
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("the new key on its model: %d %s", r.StatusCode, body)
		}
		r = e.Chat(context.Background(), secret, testenv.ChatBody)
		if body := testenv.ReadAll(t, r); r.StatusCode != 403 {
			t.Fatalf("the new key outside its list: %d %s", r.StatusCode, body)
		}
		b.fitsPhone("/keys with the new key")
		b.shot("keys-created-390-de")
		b.do(chromedp.EmulateViewport(1440, 900), chromedp.Navigate(e.Base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys-table")))
		if spill := b.spilling(".card"); spill != "" {
			t.Errorf("at 1440 px, content wider than its card: %s", spill)
		}
		b.shot("keys-1440-de")
	})
}

// sameList reports whether a decoded JSON list holds exactly these values (numbers compared as
// their decimal text).
func sameList(v any, want ...string) bool {
	list, _ := v.([]any)
	if len(list) != len(want) {
		return false
	}
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			s = strconv.FormatFloat(x.(float64), 'f', -1, 64)
		}
		if s != want[i] {
			return false
		}
	}
	return true
}
