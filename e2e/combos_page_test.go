package e2e

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// targetNames reads a combo's targets from the admin API as provider/model or combo names.
func targetNames(t *testing.T, e *testenv.Env, id string) []string {
	t.Helper()
	var out []string
	for _, it := range e.MustAPI("GET", "/api/combos/"+id, nil, 200)["targets"].([]any) {
		m := it.(map[string]any)
		if c, ok := m["combo"].(string); ok {
			out = append(out, c)
			continue
		}
		out = append(out, m["provider"].(string)+"/"+m["model"].(string))
	}
	return out
}

// cardOf cuts one combo's card out of the Combos page.
func cardOf(page, name string) string {
	_, rest, ok := strings.Cut(page, `id="combo-`+name+`"`)
	if !ok {
		return ""
	}
	card, _, _ := strings.Cut(rest, "</section>")
	return card
}

var targetInput = regexp.MustCompile(`name="target" type="text" value="([^"]*)"`)

// formTargets reads the target rows of the combo form, in order.
func formTargets(body string) string {
	var out []string
	for _, m := range targetInput.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return strings.Join(out, ",")
}

var liveStatus = regexp.MustCompile(`class="target-live" id="(tlive-[0-9]+-[0-9a-f]{8})" data-status="([a-z]+)"`)

// TestCombosPageWithoutJavaScript drives the Combos pages as plain forms (what a browser without
// JavaScript posts) and as htmx requests: the list with each target's live state, moving targets,
// the form's row buttons, validation on the form, deleting, and the poll.
func TestCombosPageWithoutJavaScript(t *testing.T) {
	// The only connection of "up" cools down for ten minutes.
	e, _ := testenv.NewWithCooledProvider(t)
	inner := comboID(t, e.MustAPI("POST", "/api/combos", map[string]any{"name": "inner", "strategy": "round-robin",
		"targets": []any{map[string]any{"provider": "ok", "model": "gpt-test"}}}, 201))
	outer := comboID(t, e.MustAPI("POST", "/api/combos", map[string]any{"name": "outer", "targets": []any{
		map[string]any{"provider": "up", "model": "gpt-test"}, map[string]any{"provider": "ok", "model": "gpt-test", "connection": "fine"},
		map[string]any{"combo": "inner"}}}, 201))

	c := e.Login()
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	post := func(path string, form url.Values, htmx bool) (int, string) {
		t.Helper()
		h := map[string]string{}
		if htmx {
			h["HX-Request"] = "true"
		}
		return testenv.Fetch(t, &noFollow, http.MethodPost, e.Base+path, form, h)
	}
	page := func() string {
		t.Helper()
		code, body := testenv.Fetch(t, c, http.MethodGet, e.Base+"/combos", nil, nil)
		if code != 200 {
			t.Fatalf("combos page: %d", code)
		}
		return body
	}

	t.Run("the list shows every target with its live state", func(t *testing.T) {
		body := page()
		card := cardOf(body, "outer")
		if card == "" || !strings.Contains(body, `id="nav-combos"`) || !strings.Contains(body, `aria-current="page"`) {
			t.Fatal("no card for outer, or no active nav entry")
		}
		states := liveStatus.FindAllStringSubmatch(card, -1)
		if len(states) != 3 {
			t.Fatalf("%d live states in the card, want 3", len(states))
		}
		// up/gpt-test: its one connection cools for 10 minutes; ok/gpt-test on "fine": ready;
		// inner: its one target is ready.
		if states[0][2] != "waiting" || states[1][2] != "ready" || states[2][2] != "ready" {
			t.Fatalf("states %v", states)
		}
		first := card[strings.Index(card, states[0][1]):strings.Index(card, states[1][1])]
		for _, want := range []string{`data-countdown-ms="600000"`, testenv.Esc(i18n.EN, "combos.live.waiting"), "0 of 1 connections usable", "1 cooling"} {
			if !strings.Contains(first, want) {
				t.Errorf("the cooling target lacks %q: %s", want, first)
			}
		}
		second := card[strings.Index(card, states[1][1]):strings.Index(card, states[2][1])]
		if !strings.Contains(second, "Connection fine: usable") || !strings.Contains(card, "only connection fine") {
			t.Errorf("the pinned target: %s", second)
		}
		if !strings.Contains(card, `href="#combo-inner"`) || !strings.Contains(card, "1 of 1 ready") {
			t.Error("the nested combo is not linked or not counted")
		}
		if !strings.Contains(cardOf(body, "inner"), `href="#combo-outer"`) {
			t.Error("inner does not say outer uses it")
		}
		for _, want := range []string{testenv.Esc(i18n.EN, "strategy.round-robin"), testenv.Esc(i18n.EN, "strategy.round-robin.help")} {
			if !strings.Contains(cardOf(body, "inner"), want) {
				t.Errorf("inner's card lacks %q", want)
			}
		}
	})

	t.Run("the poll answers 204 while nothing changed and the states out of band after a change", func(t *testing.T) {
		body := page()
		v := testenv.Between(body, `id="combos-version" name="v" value="`, `"`)
		if v == "" {
			t.Fatal("no version on the page")
		}
		if code, _ := testenv.Fetch(t, c, http.MethodGet, e.Base+"/combos/state?v="+v, nil, nil); code != http.StatusNoContent {
			t.Fatalf("unchanged poll: %d", code)
		}
		e.MustAPI("POST", "/api/connections/"+itoa(e.ConnectionID("cool"))+"/reset", nil, 200)
		code, frag := testenv.Fetch(t, c, http.MethodGet, e.Base+"/combos/state?v="+v, nil, nil)
		if code != 200 || strings.Contains(frag, "<html") || !strings.Contains(frag, `hx-swap-oob="true"`) {
			t.Fatalf("changed poll: %d %.200s", code, frag)
		}
		for _, m := range liveStatus.FindAllStringSubmatch(frag, -1) {
			if m[2] != "ready" {
				t.Fatalf("after clearing the cooldown: %v", m)
			}
		}
	})

	moveForm := func(body, combo, label string) url.Values {
		t.Helper()
		card := cardOf(body, combo)
		_, row, ok := strings.Cut(card, `data-target="`+label+`"`)
		if !ok {
			t.Fatalf("no row %s in %s", label, combo)
		}
		return url.Values{"index": {testenv.Between(row, `name="index" value="`, `"`)},
			"key": {strings.ReplaceAll(testenv.Between(row, `name="key" value="`, `"`), "&#34;", `"`)}}
	}
	t.Run("moving without JavaScript saves and redirects", func(t *testing.T) {
		f := moveForm(page(), "outer", "ok/gpt-test")
		f.Set("dir", "up")
		code, _ := post("/combos/"+outer+"/move", f, false)
		if code != http.StatusSeeOther {
			t.Fatalf("move: %d", code)
		}
		if got := targetNames(t, e, outer); strings.Join(got, ",") != "ok/gpt-test,up/gpt-test,inner" {
			t.Fatalf("order after moving up: %v", got)
		}
		// The same form again is stale: the target is no longer there; nothing moves.
		code, _ = post("/combos/"+outer+"/move", f, false)
		if code != http.StatusSeeOther || !strings.Contains(page(), "flash-error") {
			t.Fatalf("stale move: %d, want a redirect with a message", code)
		}
		if got := targetNames(t, e, outer); strings.Join(got, ",") != "ok/gpt-test,up/gpt-test,inner" {
			t.Fatalf("a stale move moved: %v", got)
		}
	})
	t.Run("moving with htmx answers the card", func(t *testing.T) {
		f := moveForm(page(), "outer", "inner")
		f.Set("dir", "up")
		code, frag := post("/combos/"+outer+"/move", f, true)
		if code != 200 || !strings.HasPrefix(strings.TrimSpace(frag), `<section class="card combo" id="combo-outer"`) {
			t.Fatalf("htmx move: %d %.200s", code, frag)
		}
		if strings.Index(frag, `data-target="inner"`) > strings.Index(frag, `data-target="up/gpt-test"`) {
			t.Fatal("the card shows the old order")
		}
		if got := targetNames(t, e, outer); strings.Join(got, ",") != "ok/gpt-test,inner,up/gpt-test" {
			t.Fatalf("order: %v", got)
		}
	})

	t.Run("the form's row buttons change rows without saving", func(t *testing.T) {
		code, body := testenv.Fetch(t, c, http.MethodGet, e.Base+"/combos/new", nil, nil)
		if code != 200 || strings.Count(body, `name="target"`) != 2 || !strings.Contains(body, testenv.Esc(i18n.EN, "strategy.headroom.help")) {
			t.Fatalf("new form: %d", code)
		}
		form := url.Values{"name": {"fresh"}, "strategy": {"weighted"}, "target": {"ok/gpt-test", "up/gpt-test"},
			"connection": {"", ""}, "weight": {"2", ""}, "op": {"add"}}
		code, body = post("/combos", form, false)
		if code != 200 || formTargets(body) != "ok/gpt-test,up/gpt-test," || !strings.Contains(body, "<html") {
			t.Fatalf("add a row: %d %q", code, formTargets(body))
		}
		form.Set("op", "up-1")
		code, frag := post("/combos", form, true)
		if code != 200 || strings.Contains(frag, "<html") || formTargets(frag) != "up/gpt-test,ok/gpt-test" ||
			!strings.Contains(frag, `id="weight-1" name="weight" type="text" value="2"`) {
			t.Fatalf("move a row up with htmx: %d %q", code, formTargets(frag))
		}
		form.Set("op", "remove-0")
		if _, body = post("/combos", form, false); formTargets(body) != "up/gpt-test" {
			t.Fatalf("remove the first row: %q", formTargets(body))
		}
		if n := len(e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any)); n != 2 {
			t.Fatalf("a row button saved: %d combos", n)
		}
	})

	t.Run("saving shows errors beside the rows and creates", func(t *testing.T) {
		form := url.Values{"name": {"fresh"}, "strategy": {"weighted"}, "target": {"ok/gpt-test", "nope/m", "", "outer"},
			"connection": {"", "", "", "x"}, "weight": {"2", "abc", "", ""}, "op": {"save"}}
		code, body := post("/combos", form, false)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="weight-1-error"`) {
			t.Fatalf("weight that is no number: %d", code)
		}
		form["weight"] = []string{"2", "", "", ""}
		code, body = post("/combos", form, false)
		// The empty third row is dropped: "outer" is row 2 now.
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="target-1-error"`) ||
			!strings.Contains(body, `id="connection-2-error"`) || strings.Count(body, `name="target"`) != 3 {
			t.Fatalf("invalid targets: %d", code)
		}
		if !strings.Contains(body, "No provider is named “nope”") {
			t.Error("the missing provider is not named")
		}
		form = url.Values{"name": {"fresh"}, "strategy": {"weighted"}, "target": {"ok/gpt-test", "inner", ""},
			"connection": {"fine", "", ""}, "weight": {"2", "", ""}, "max_attempts": {"5"}, "target_timeout_ms": {""},
			"wait_until_reset": {"true"}, "wait_until_reset_max_ms": {"60000"}}
		code, _ = post("/combos", form, false)
		if code != http.StatusSeeOther {
			t.Fatalf("create: %d", code)
		}
		var id string
		for _, it := range e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any) {
			if m := it.(map[string]any); m["name"] == "fresh" {
				id = comboID(t, m)
				if m["strategy"] != "weighted" || m["max_attempts"].(float64) != 5 || m["wait_until_reset"] != true ||
					m["wait_until_reset_max_ms"].(float64) != 60000 {
					t.Fatalf("created %v", m)
				}
			}
		}
		if got := targetNames(t, e, id); strings.Join(got, ",") != "ok/gpt-test,inner" {
			t.Fatalf("targets %v", got)
		}
		// The edit form shows it and saves a change.
		code, body = testenv.Fetch(t, c, http.MethodGet, e.Base+"/combos/"+id+"/edit", nil, nil)
		if code != 200 || !strings.Contains(body, `value="fine"`) || !strings.Contains(body, `value="inner"`) {
			t.Fatalf("edit page: %d", code)
		}
		form.Set("strategy", "latency")
		form["target"] = []string{"inner", "ok/gpt-test"}
		form["connection"] = []string{"", ""}
		form["weight"] = []string{"", ""}
		if code, _ := post("/combos/"+id+"/edit", form, false); code != http.StatusSeeOther {
			t.Fatalf("edit: %d", code)
		}
		if got := targetNames(t, e, id); strings.Join(got, ",") != "inner,ok/gpt-test" {
			t.Fatalf("targets after the edit %v", got)
		}
		if code, _ := post("/combos/"+id+"/delete", nil, false); code != http.StatusSeeOther {
			t.Fatalf("delete: %d", code)
		}
		e.MustAPI("GET", "/api/combos/"+id, nil, 404)
	})

	t.Run("what a combo uses cannot be deleted from the dashboard either", func(t *testing.T) {
		if code, _ := post("/combos/"+inner+"/delete", nil, false); code != http.StatusSeeOther {
			t.Fatalf("delete inner: %d", code)
		}
		if body := page(); !strings.Contains(body, "flash-error") || !strings.Contains(body, "Combo inner is a target of outer") {
			t.Fatal("no message that outer uses inner")
		}
		e.MustAPI("GET", "/api/combos/"+inner, nil, 200)
		if code, _ := post("/providers/"+itoa(e.ProviderID("ok"))+"/delete", nil, false); code != http.StatusSeeOther {
			t.Fatalf("delete provider ok: %d", code)
		}
		_, body := testenv.Fetch(t, c, http.MethodGet, e.Base+"/providers", nil, nil)
		if !strings.Contains(body, "flash-error") || !strings.Contains(body, "Provider ok is a target of the combos inner, outer") {
			t.Fatal("no message naming the combos that use provider ok")
		}
	})

	t.Run("German", func(t *testing.T) {
		testenv.Fetch(t, c, http.MethodGet, e.Base+"/lang/de?next=/combos", nil, nil)
		body := page()
		for _, key := range []string{"combos.title", "nav.combos", "combos.col.target", "combos.live.ready", "strategy.round-robin"} {
			if !strings.Contains(body, testenv.Esc(i18n.DE, key)) {
				t.Errorf("German page lacks %s", key)
			}
		}
	})
}
