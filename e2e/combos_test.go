package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"switchyard/e2e/testenv"
)

// comboEnv is a gateway with two providers (a: connections main and spare; b: key-1).
func comboEnv(t *testing.T) *testenv.Env {
	t.Helper()
	e := testenv.New(t)
	e.AddProvider("a", "http://127.0.0.1:9/v1")
	e.AddConnection("a", "main", "sk-a-main", 0)
	e.AddConnection("a", "spare", "sk-a-spare", 1)
	e.AddProvider("b", "http://127.0.0.1:9/v1")
	e.AddConnection("b", "key-1", "sk-b", 0)
	return e
}

func comboID(t *testing.T, m map[string]any) string {
	t.Helper()
	id, ok := m["id"].(float64)
	if !ok || id <= 0 {
		t.Fatalf("no id in %v", m)
	}
	return itoa(int64(id))
}

// fieldsOf returns the field errors of a 422 answer.
func fieldsOf(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	detail, _ := out["error"].(map[string]any)
	f, _ := detail["fields"].(map[string]any)
	if f == nil {
		t.Fatalf("no field errors: %v", out)
	}
	return f
}

// TestCombosCRUD: create (201, defaults filled in), list, get, a partial update that replaces
// the targets, persistence across a restart, delete (204), then 404.
func TestCombosCRUD(t *testing.T) {
	e := comboEnv(t)
	created := e.MustAPI("POST", "/api/combos", map[string]any{"name": "resilient-chat", "targets": []any{
		map[string]any{"provider": "a", "model": "gpt-x"},
		map[string]any{"provider": "b", "model": "gpt-y", "connection": "key-1", "weight": 7},
	}}, 201)
	id := comboID(t, created)
	raw, _ := json.Marshal(created) // keys sorted: a target's absent fields are left out, not empty
	for _, want := range []string{`"name":"resilient-chat"`, `"strategy":"priority"`, `"max_attempts":0`, `"target_timeout_ms":0`,
		`"wait_until_reset":false`, `"wait_until_reset_max_ms":900000`,
		`"targets":[{"model":"gpt-x","provider":"a","weight":1},{"connection":"key-1","model":"gpt-y","provider":"b","weight":7}]`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("created combo lacks %s: %s", want, raw)
		}
	}
	if created["created_at"].(float64) <= 0 || created["updated_at"].(float64) <= 0 {
		t.Fatalf("timestamps %v", created)
	}
	list := e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["name"] != "resilient-chat" {
		t.Fatalf("list %v", list)
	}
	if got := e.MustAPI("GET", "/api/combos/"+id, nil, 200); got["name"] != "resilient-chat" {
		t.Fatalf("get %v", got)
	}

	e.MustAPI("POST", "/api/combos", map[string]any{"name": "inner", "strategy": "round-robin",
		"targets": []any{map[string]any{"provider": "a", "model": "m"}}}, 201)
	updated := e.MustAPI("PATCH", "/api/combos/"+id, map[string]any{"strategy": "weighted", "max_attempts": 4,
		"target_timeout_ms": 60000, "wait_until_reset": true, "wait_until_reset_max_ms": 600000,
		"targets": []any{map[string]any{"combo": "inner", "weight": 3}, map[string]any{"provider": "b", "model": "gpt-y"}}}, 200)
	raw, _ = json.Marshal(updated)
	for _, want := range []string{`"strategy":"weighted"`, `"max_attempts":4`, `"target_timeout_ms":60000`, `"wait_until_reset":true`,
		`"wait_until_reset_max_ms":600000`, `"targets":[{"combo":"inner","weight":3},{"model":"gpt-y","provider":"b","weight":1}]`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("updated combo lacks %s: %s", want, raw)
		}
	}
	// A partial update leaves the rest alone.
	e.MustAPI("PATCH", "/api/combos/"+id, map[string]any{"max_attempts": 0}, 200)

	e.Restart()
	got := e.MustAPI("GET", "/api/combos/"+id, nil, 200)
	raw, _ = json.Marshal(got)
	if !strings.Contains(string(raw), `"strategy":"weighted"`) || !strings.Contains(string(raw), `"max_attempts":0`) ||
		!strings.Contains(string(raw), `{"combo":"inner","weight":3}`) {
		t.Fatalf("after a restart: %s", raw)
	}

	e.MustAPI("DELETE", "/api/combos/"+id, nil, 204)
	e.MustAPI("GET", "/api/combos/"+id, nil, 404)
	e.MustAPI("DELETE", "/api/combos/"+id, nil, 404)
	e.MustAPI("PATCH", "/api/combos/"+id, map[string]any{"max_attempts": 1}, 404)
	if n := len(e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any)); n != 1 {
		t.Fatalf("%d combos left, want inner", n)
	}
}

// TestCombosRefuseInvalid: every rule is a 422 naming its field, and nothing is saved.
func TestCombosRefuseInvalid(t *testing.T) {
	e := comboEnv(t)
	pt := func(p, m string) map[string]any { return map[string]any{"provider": p, "model": m} }
	ct := func(n string) map[string]any { return map[string]any{"combo": n} }
	mk := func(name string, targets ...any) map[string]any {
		return map[string]any{"name": name, "targets": targets}
	}
	// A chain of three: c1 → c2 → c3 (a fourth level is refused below).
	e.MustAPI("POST", "/api/combos", mk("c3", pt("a", "m")), 201)
	e.MustAPI("POST", "/api/combos", mk("c2", ct("c3")), 201)
	e.MustAPI("POST", "/api/combos", mk("c1", ct("c2")), 201)
	cases := []struct {
		name  string
		body  map[string]any
		field string
		text  string // part of the field's message
	}{
		{"missing provider", mk("x", pt("a", "m"), pt("b", "m"), pt("nope", "m")), "targets[2].provider", "nope"},
		{"missing combo", mk("x", pt("a", "m"), pt("b", "m"), ct("ghost")), "targets[2].combo", "ghost"},
		{"depth 4", mk("x", ct("c1")), "targets[0].combo", "x → c1 → c2 → c3"},
		{"connection of another provider", mk("x", map[string]any{"provider": "b", "model": "m", "connection": "main"}),
			"targets[0].connection", "main"},
		{"combo and provider at once", mk("x", map[string]any{"combo": "c3", "provider": "a", "model": "m"}), "targets[0]", ""},
		{"empty target", mk("x", map[string]any{}), "targets[0]", ""},
		{"weight 0", mk("x", map[string]any{"provider": "a", "model": "m", "weight": 0}), "targets[0].weight", "100"},
		{"weight 101", mk("x", map[string]any{"provider": "a", "model": "m", "weight": 101}), "targets[0].weight", "100"},
		{"no targets", mk("x"), "targets", ""},
		{"name with a slash", mk("a/b", pt("a", "m")), "name", "/"},
		{"name of a provider", mk("a", pt("a", "m")), "name", "provider"},
		{"empty name", mk("  ", pt("a", "m")), "name", ""},
		{"unknown strategy", map[string]any{"name": "x", "strategy": "fastest", "targets": []any{pt("a", "m")}}, "strategy", "headroom"},
		{"max attempts", map[string]any{"name": "x", "max_attempts": 31, "targets": []any{pt("a", "m")}}, "max_attempts", "30"},
		{"target timeout", map[string]any{"name": "x", "target_timeout_ms": 500, "targets": []any{pt("a", "m")}}, "target_timeout_ms", ""},
		{"wait cap", map[string]any{"name": "x", "wait_until_reset_max_ms": 0, "targets": []any{pt("a", "m")}}, "wait_until_reset_max_ms", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := e.MustAPI("POST", "/api/combos", c.body, 422)
			f := fieldsOf(t, out)
			msg, ok := f[c.field].(string)
			if !ok || !strings.Contains(msg, c.text) {
				t.Fatalf("field %s: %q (all: %v)", c.field, msg, f)
			}
		})
	}
	t.Run("cycle on update", func(t *testing.T) {
		id := comboID(t, e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any)[2].(map[string]any)) // c3
		out := e.MustAPI("PATCH", "/api/combos/"+id, map[string]any{"targets": []any{pt("a", "m"), ct("c1")}}, 422)
		if msg, _ := fieldsOf(t, out)["targets[1].combo"].(string); !strings.Contains(msg, "c3 → c1 → c2 → c3") {
			t.Fatalf("cycle message %q", msg)
		}
	})
	t.Run("depth 4 by nesting under a combo that is itself nested", func(t *testing.T) {
		e.MustAPI("POST", "/api/combos", mk("d", pt("b", "m")), 201)
		id := comboID(t, e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any)[2].(map[string]any)) // c3
		out := e.MustAPI("PATCH", "/api/combos/"+id, map[string]any{"targets": []any{ct("d")}}, 422)
		if msg, _ := fieldsOf(t, out)["targets[0].combo"].(string); !strings.Contains(msg, "c1 → c2 → c3 → d") {
			t.Fatalf("depth message %q", msg)
		}
	})
	t.Run("malformed and unknown fields", func(t *testing.T) {
		if st, out := adminRaw(t, e, "POST", "/api/combos", `{"name":"x","targets":[`); st != 400 {
			t.Fatalf("malformed: %d %v", st, out)
		}
		if st, out := adminRaw(t, e, "POST", "/api/combos", `{"name":"x","name":"y","targets":[{"provider":"a","model":"m"}]}`); st != 400 {
			t.Fatalf("duplicate key: %d %v", st, out)
		}
		if st, out := adminRaw(t, e, "POST", "/api/combos", `{"name":"x","targets":[{"provdier":"a","model":"m"}]}`); st != 422 {
			t.Fatalf("unknown field: %d %v", st, out)
		}
	})
	t.Run("duplicate name", func(t *testing.T) {
		out := e.MustAPI("POST", "/api/combos", mk("c3", pt("b", "m")), 409)
		if _, ok := fieldsOf(t, out)["name"]; !ok {
			t.Fatalf("conflict without the field: %v", out)
		}
	})
	var names []string
	for _, it := range e.MustAPI("GET", "/api/combos", nil, 200)["items"].([]any) {
		names = append(names, it.(map[string]any)["name"].(string))
	}
	if !slices.Equal(names, []string{"c1", "c2", "c3", "d"}) {
		t.Fatalf("combos after the refusals: %v", names)
	}
}

// TestCombosKeepTheirReferences: what a combo names cannot go away under it: deleting or renaming
// a provider or a pinned connection, or deleting or renaming a combo another combo names, is a
// 409 naming the combos; the same succeeds once nothing names it. A provider cannot take a
// combo's name.
func TestCombosKeepTheirReferences(t *testing.T) {
	e := comboEnv(t)
	pa := itoa(e.ProviderID("a"))
	pb := itoa(e.ProviderID("b"))
	main := itoa(e.ConnectionID("main"))
	spare := itoa(e.ConnectionID("spare"))
	inner := comboID(t, e.MustAPI("POST", "/api/combos", map[string]any{"name": "inner", "targets": []any{
		map[string]any{"provider": "a", "model": "m", "connection": "main"}}}, 201))
	outer := comboID(t, e.MustAPI("POST", "/api/combos", map[string]any{"name": "outer", "targets": []any{
		map[string]any{"combo": "inner"}, map[string]any{"provider": "b", "model": "m"}}}, 201))

	conflict := func(method, path string, body any, names ...string) {
		t.Helper()
		out := e.MustAPI(method, path, body, 409)
		detail := out["error"].(map[string]any)
		msg, _ := detail["message"].(string)
		if detail["code"] != "in_use" {
			t.Errorf("%s %s: code %v", method, path, detail["code"])
		}
		for _, n := range names {
			if !strings.Contains(msg, n) {
				t.Errorf("%s %s: message %q does not name %s", method, path, msg, n)
			}
		}
	}
	conflict("DELETE", "/api/providers/"+pa, nil, "inner")
	conflict("DELETE", "/api/providers/"+pb, nil, "outer")
	conflict("PATCH", "/api/providers/"+pb, map[string]any{"name": "b2"}, "outer")
	conflict("DELETE", "/api/connections/"+main, nil, "main", "inner")
	conflict("PATCH", "/api/connections/"+main, map[string]any{"name": "main-2"}, "inner")
	conflict("PATCH", "/api/connections/"+main, map[string]any{"provider": "b"}, "inner")
	conflict("DELETE", "/api/combos/"+inner, nil, "inner", "outer")
	conflict("PATCH", "/api/combos/"+inner, map[string]any{"name": "inner-2"}, "outer")
	// Everything is still there.
	e.MustAPI("GET", "/api/providers/"+pa, nil, 200)
	e.MustAPI("GET", "/api/connections/"+main, nil, 200)
	e.MustAPI("GET", "/api/combos/"+inner, nil, 200)

	// What no combo names can go: a connection that is not pinned, other fields of a provider.
	e.MustAPI("PATCH", "/api/connections/"+spare, map[string]any{"name": "spare-2"}, 200)
	e.MustAPI("DELETE", "/api/connections/"+spare, nil, 204)
	e.MustAPI("PATCH", "/api/providers/"+pa, map[string]any{"base_url": "http://127.0.0.1:10/v1"}, 200)
	e.MustAPI("PATCH", "/api/connections/"+main, map[string]any{"priority": 3}, 200)

	// A provider cannot take a combo's name.
	out := e.MustAPI("POST", "/api/providers", map[string]any{"name": "outer", "type": "openai", "base_url": "http://x/v1"}, 422)
	if _, ok := fieldsOf(t, out)["name"]; !ok {
		t.Fatalf("provider named like a combo: %v", out)
	}
	e.MustAPI("PATCH", "/api/providers/"+pa, map[string]any{"name": "inner"}, 422)

	// Once the references are gone, so can the things.
	e.MustAPI("DELETE", "/api/combos/"+outer, nil, 204)
	e.MustAPI("PATCH", "/api/providers/"+pb, map[string]any{"name": "b2"}, 200)
	e.MustAPI("PATCH", "/api/combos/"+inner, map[string]any{"name": "inner-2"}, 200)
	e.MustAPI("DELETE", "/api/combos/"+inner, nil, 204)
	e.MustAPI("DELETE", "/api/connections/"+main, nil, 204)
	e.MustAPI("DELETE", "/api/providers/"+pa, nil, 204)
}

// TestCombosNeverDangleUnderConcurrentChanges: a combo saved while its provider is deleted ends
// either with both (the delete refused) or with neither (the save refused), never a combo that
// names a provider that is gone.
func TestCombosNeverDangleUnderConcurrentChanges(t *testing.T) {
	e := testenv.New(t)
	for i := range 15 {
		name := fmt.Sprintf("p%d", i)
		pid := itoa(e.AddProvider(name, "http://127.0.0.1:9/v1"))
		var wg sync.WaitGroup
		var saved, deleted int
		wg.Add(2)
		go func() {
			defer wg.Done()
			saved = e.API("POST", "/api/combos", map[string]any{"name": "c" + name,
				"targets": []any{map[string]any{"provider": name, "model": "m"}}}, nil)
		}()
		go func() {
			defer wg.Done()
			deleted = e.API("DELETE", "/api/providers/"+pid, nil, nil)
		}()
		wg.Wait()
		switch {
		case saved == 201 && deleted == 409, saved == 422 && deleted == 204:
		default:
			t.Fatalf("round %d: save %d, delete %d", i, saved, deleted)
		}
		providerLeft := e.API("GET", "/api/providers/"+pid, nil, nil) == http.StatusOK
		if (saved == 201) != providerLeft {
			t.Fatalf("round %d: combo saved %v, provider left %v", i, saved == 201, providerLeft)
		}
	}
}

// TestCombosAreListedAsModels: GET /v1/models (and /models) lists every combo by its name, owned
// by the gateway, in OpenAI's shape, and with its name as display name in Anthropic's;
// GET /v1/models/{name} answers it; a deleted combo is gone from both.
func TestCombosAreListedAsModels(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	id := comboID(t, e.MustAPI("POST", "/api/combos", map[string]any{"name": "resilient-chat",
		"targets": []any{map[string]any{"provider": "up", "model": "gpt-test"}}}, 201))

	get := func(path string, anthropic bool) (int, map[string]any) {
		t.Helper()
		st, _, body := testenv.Call(t, http.DefaultClient, "GET", e.Base+path, "", clientHeader(key, anthropic))
		var out map[string]any
		json.Unmarshal([]byte(body), &out)
		return st, out
	}
	find := func(list map[string]any, id string) map[string]any {
		for _, d := range list["data"].([]any) {
			if m := d.(map[string]any); m["id"] == id {
				return m
			}
		}
		return nil
	}
	for _, path := range []string{"/v1/models", "/models"} {
		_, list := get(path, false)
		m := find(list, "resilient-chat")
		if m == nil || m["owned_by"] != "switchyard" || m["object"] != "model" || m["created"].(float64) <= 0 {
			t.Fatalf("%s: combo entry %v in %v", path, m, list)
		}
		if find(list, "up/gpt-test") == nil {
			t.Fatalf("%s: the provider's model went missing", path)
		}
		_, list = get(path, true)
		m = find(list, "resilient-chat")
		if m == nil || m["type"] != "model" || m["display_name"] != "resilient-chat" || m["created_at"] == "" {
			t.Fatalf("%s anthropic: combo entry %v", path, m)
		}
	}
	if st, m := get("/v1/models/resilient-chat", false); st != 200 || m["id"] != "resilient-chat" || m["owned_by"] != "switchyard" {
		t.Fatalf("one model: %d %v", st, m)
	}
	if st, m := get("/models/resilient-chat", true); st != 200 || m["display_name"] != "resilient-chat" || m["type"] != "model" {
		t.Fatalf("one model, anthropic: %d %v", st, m)
	}
	e.MustAPI("DELETE", "/api/combos/"+id, nil, 204)
	if _, list := get("/v1/models", false); find(list, "resilient-chat") != nil {
		t.Fatal("a deleted combo is still listed")
	}
	if st, _ := get("/v1/models/resilient-chat", false); st != 404 {
		t.Fatalf("a deleted combo: %d", st)
	}
}
