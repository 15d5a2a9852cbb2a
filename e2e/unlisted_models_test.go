package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// echoModel answers a chat completion naming the model the upstream was asked for, so a test
// sees that the upstream (not the gateway) answered; "gone" is a model the upstream does not
// serve, answered with OpenAI's own 404.
func echoModel(w http.ResponseWriter, r *http.Request) {
	var req struct{ Model string }
	_ = json.NewDecoder(r.Body).Decode(&req)
	w.Header().Set("Content-Type", "application/json")
	if req.Model == "gone" {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"The model gone does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}}`)
		return
	}
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"from upstream"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, req.Model)
}

// A provider/model the provider does not list is forwarded and the upstream decides: a model
// released since the last discovery refresh answers at once, one the upstream does not serve
// answers its 404 (locked out when the model lockout is on). GET /v1/models/{id} still knows
// only listed models.
func TestUnlistedModelIsForwardedAndTheUpstreamDecides(t *testing.T) {
	e, up, key := testenv.SetupOne(t, echoModel)
	id := e.ProviderID("up")
	if p := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", id), nil, 200); p["listed_models_only"] != false {
		t.Fatalf("listed_models_only must default to false: %v", p)
	}
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"enabled": false}}, 200)

	// A model released upstream after discovery works before the next refresh.
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-brand-new","messages":[{"role":"user","content":"hi"}]}`)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 200 || gjson.Get(body, "model").String() != "gpt-brand-new" ||
		gjson.Get(body, "choices.0.message.content").String() != "from upstream" {
		t.Fatalf("unlisted model: %d %s", r.StatusCode, body)
	}
	reqs := up.ChatRequests()
	if len(reqs) != 1 || gjson.Get(reqs[0].Body, "model").String() != "gpt-brand-new" {
		t.Fatalf("the upstream must get the model as named: %v", reqs)
	}
	// On the Anthropic surface too, translated.
	r = e.PostAnthropic("/v1/messages", key, `{"model":"up/gpt-brand-new","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(body, "content.0.text").String() != "from upstream" {
		t.Fatalf("unlisted model on messages: %d %s", r.StatusCode, body)
	}
	// The model endpoint describes the models the gateway knows: an unlisted one is 404.
	req, _ := http.NewRequest("GET", e.Base+"/v1/models/up/gpt-brand-new", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 404 || gjson.Get(body, "error.code").String() != "model_not_found" {
		t.Fatalf("GET /v1/models/{unlisted}: %d %s", resp.StatusCode, body)
	}

	// A model the upstream does not serve: its 404 reaches the client in the client's format,
	// with the upstream's words; nothing is locked while the lockout is off.
	r = e.Chat(context.Background(), key, `{"model":"up/gone","messages":[]}`)
	body = testenv.ReadAll(t, r)
	if r.StatusCode != 404 || !strings.Contains(gjson.Get(body, "error.message").String(), "gone does not exist") {
		t.Fatalf("upstream 404: %d %s", r.StatusCode, body)
	}
	r = e.PostAnthropic("/v1/messages", key, `{"model":"up/gone","max_tokens":5,"messages":[]}`, nil)
	body = testenv.ReadAll(t, r)
	if r.StatusCode != 404 || gjson.Get(body, "error.type").String() != "not_found_error" ||
		!strings.Contains(gjson.Get(body, "error.message").String(), "gone does not exist") {
		t.Fatalf("upstream 404 on messages: %d %s", r.StatusCode, body)
	}
	if items := e.ModelCooldowns(); len(items) != 0 {
		t.Fatalf("lockouts while switched off: %v", items)
	}

	// With the model lockout on, the upstream's 404 locks the model on that connection, as for
	// a listed model; the next request is refused without an upstream call.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"model_lockout": map[string]any{"enabled": true}}, 200)
	testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"up/gone","messages":[]}`))
	items := e.ModelCooldowns()
	if len(items) != 1 || items[0]["model"] != "gone" || items[0]["scope"] != "model" {
		t.Fatalf("lockouts: %v", items)
	}
	calls := len(up.ChatRequests())
	r = e.Chat(context.Background(), key, `{"model":"up/gone","messages":[]}`)
	body = testenv.ReadAll(t, r)
	if r.StatusCode != 429 || !strings.Contains(body, "model_locked_out") || len(up.ChatRequests()) != calls {
		t.Fatalf("locked unlisted model: %d %s", r.StatusCode, body)
	}
	// A made-up name is bounded: 256 bytes are forwarded, longer is refused before any work.
	long := "up/" + strings.Repeat("m", 253)
	r = e.Chat(context.Background(), key, `{"model":"`+long+`","messages":[]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(body, "model").String() != long[3:] {
		t.Fatalf("a 256-byte model: %d %s", r.StatusCode, body)
	}
	calls = len(up.ChatRequests())
	r = e.Chat(context.Background(), key, `{"model":"`+long+`m","messages":[]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 400 || gjson.Get(body, "error.code").String() != "invalid_request" ||
		!strings.Contains(body, "longer than 256 bytes") || len(up.ChatRequests()) != calls {
		t.Fatalf("a 257-byte model: %d %s", r.StatusCode, body)
	}
	// Other unlisted models of the same connection still go through.
	r = e.Chat(context.Background(), key, `{"model":"up/gpt-other","messages":[]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(body, "model").String() != "gpt-other" {
		t.Fatalf("another unlisted model: %d %s", r.StatusCode, body)
	}
}

// With listed_models_only a provider refuses the models it does not list, in the client's
// format and without an upstream call, after one on-demand refresh of its model list; a model
// the refreshed list shows goes through. The switch is set and read through the API and
// survives a restart.
func TestListedModelsOnlyRefusesUnlistedModels(t *testing.T) {
	e, up, key := testenv.SetupOne(t, echoModel)
	id := e.ProviderID("up")

	// Strict JSON, as for every other field: a wrong type or a misspelt key is refused and
	// nothing is saved.
	for _, bad := range []map[string]any{{"listed_models_only": "yes"}, {"listed_models_only": 1}, {"listed_model_only": true}} {
		if code := e.API("PATCH", fmt.Sprintf("/api/providers/%d", id), bad, nil); code != 422 {
			t.Fatalf("PATCH %v: %d, want 422", bad, code)
		}
	}
	if p := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", id), nil, 200); p["listed_models_only"] != false {
		t.Fatalf("a refused PATCH changed the provider: %v", p)
	}
	p := e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", id), map[string]any{"listed_models_only": true}, 200)
	if p["listed_models_only"] != true {
		t.Fatalf("PATCH answer: %v", p)
	}
	refuse := func(model string) {
		t.Helper()
		calls := len(up.ChatRequests())
		r := e.Chat(context.Background(), key, `{"model":"`+model+`","messages":[]}`)
		body := testenv.ReadAll(t, r)
		if r.StatusCode != 404 || gjson.Get(body, "error.code").String() != "model_not_found" ||
			!strings.Contains(gjson.Get(body, "error.message").String(), model) {
			t.Fatalf("%s on chat: %d %s", model, r.StatusCode, body)
		}
		r = e.PostAnthropic("/v1/messages", key, `{"model":"`+model+`","max_tokens":5,"messages":[]}`, nil)
		body = testenv.ReadAll(t, r)
		if r.StatusCode != 404 || gjson.Get(body, "type").String() != "error" || gjson.Get(body, "error.type").String() != "not_found_error" {
			t.Fatalf("%s on messages: %d %s", model, r.StatusCode, body)
		}
		if n := len(up.ChatRequests()); n != calls {
			t.Fatalf("%s reached the upstream", model)
		}
	}
	refuse("up/gpt-unknown")
	// A listed model still goes through.
	if r := e.Chat(context.Background(), key, `{"model":"up/gpt-test","messages":[]}`); r.StatusCode != 200 {
		t.Fatalf("listed model: %d %s", r.StatusCode, testenv.ReadAll(t, r))
	} else {
		testenv.ReadAll(t, r)
	}

	// The upstream starts serving a new model: refused until the list shows it (the list
	// cannot be fetched meanwhile, so no refresh running in the background can show it); the
	// on-demand refresh (at most every 30 s) finds it without waiting for the periodic one.
	up.ModelsDown.Store(true)
	up.SetModels("gpt-test", "gpt-fresh")
	refuse("up/gpt-fresh")
	up.ModelsDown.Store(false)
	// A refresh the catalog changes above started in the background may still be failing;
	// past it, the next request refreshes on demand and goes through.
	e.Eventually("a model the refreshed list shows goes through", func() bool {
		e.Clock.Advance(31 * time.Second)
		r := e.Chat(context.Background(), key, `{"model":"up/gpt-fresh","messages":[]}`)
		body := testenv.ReadAll(t, r)
		return r.StatusCode == 200 && gjson.Get(body, "model").String() == "gpt-fresh"
	})

	// The switch is stored: it is still on after a restart, and off again when patched off.
	e.Restart()
	if p := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", id), nil, 200); p["listed_models_only"] != true {
		t.Fatalf("after restart: %v", p)
	}
	found := false
	for _, it := range e.MustAPI("GET", "/api/providers", nil, 200)["items"].([]any) {
		if m := it.(map[string]any); m["name"] == "up" {
			found = m["listed_models_only"] == true
		}
	}
	if !found {
		t.Fatal("the provider list lacks listed_models_only")
	}
	e.WaitModels(key, "up/gpt-test")
	refuse("up/gpt-unknown")
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", id), map[string]any{"listed_models_only": false}, 200)
	if r := e.Chat(context.Background(), key, `{"model":"up/gpt-unknown","messages":[]}`); r.StatusCode != 200 {
		t.Fatalf("switched off: %d %s", r.StatusCode, testenv.ReadAll(t, r))
	} else {
		testenv.ReadAll(t, r)
	}

	// Created with the switch on, through the API.
	out := e.MustAPI("POST", "/api/providers", map[string]any{"name": "strict", "type": "openai-compatible",
		"base_url": up.URL + "/v1", "listed_models_only": true}, 201)
	if out["listed_models_only"] != true {
		t.Fatalf("create: %v", out)
	}
}

// Bare model names still resolve only when exactly one provider lists them, whatever the
// providers forward under their own names.
func TestBareModelNeedsExactlyOneLister(t *testing.T) {
	a := testenv.NewFakeUpstream(t, echoModel, "shared", "only-a")
	b := testenv.NewFakeUpstream(t, echoModel, "shared")
	e := testenv.New(t)
	e.AddProvider("a", a.URL+"/v1")
	e.AddConnection("a", "main", "sk-a", 0)
	bID := e.AddProvider("b", b.URL+"/v1")
	e.AddConnection("b", "main", "sk-b", 0)
	key := e.NewKey()
	e.WaitModels(key, "a/only-a")
	e.WaitModels(key, "b/shared")

	r := e.Chat(context.Background(), key, `{"model":"only-a","messages":[]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || r.Header.Get("X-Switchyard-Provider") != "a" {
		t.Fatalf("one lister: %d %s", r.StatusCode, body)
	}
	r = e.Chat(context.Background(), key, `{"model":"shared","messages":[]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 400 || gjson.Get(body, "error.code").String() != "ambiguous_model" {
		t.Fatalf("two listers: %d %s", r.StatusCode, body)
	}
	calls := len(a.ChatRequests()) + len(b.ChatRequests())
	r = e.Chat(context.Background(), key, `{"model":"listed-nowhere","messages":[]}`)
	if body := testenv.ReadAll(t, r); r.StatusCode != 404 || gjson.Get(body, "error.code").String() != "model_not_found" {
		t.Fatalf("no lister: %d %s", r.StatusCode, body)
	}
	if len(a.ChatRequests())+len(b.ChatRequests()) != calls {
		t.Fatal("a bare name nobody lists reached an upstream")
	}

	// Once b is gone, a alone lists the shared name, and it resolves there.
	if status := e.API("DELETE", fmt.Sprintf("/api/providers/%d", bID), nil, nil); status != 204 {
		t.Fatalf("delete provider b: %d", status)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r = e.Chat(context.Background(), key, `{"model":"shared","messages":[]}`)
		body := testenv.ReadAll(t, r)
		if r.StatusCode == 200 && r.Header.Get("X-Switchyard-Provider") == "a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after b was deleted: %d %s", r.StatusCode, body)
		}
	}
}
