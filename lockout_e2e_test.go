package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// perModel answers per requested model.
func perModel(m map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		json.NewDecoder(r.Body).Decode(&req)
		h, ok := m[req.Model]
		if !ok {
			h = jsonAnswer(completionJSON)
		}
		h(w, r)
	}
}

func (e *testEnv) modelCooldowns() []map[string]any {
	e.t.Helper()
	out := e.mustAPI("GET", "/api/resilience/model-cooldowns", nil, 200)
	var items []map[string]any
	for _, it := range out["items"].([]any) {
		items = append(items, it.(map[string]any))
	}
	return items
}

func setupLockouts(t *testing.T, chat http.HandlerFunc, extra map[string]any) (*testEnv, *fakeUpstream, string) {
	t.Helper()
	up := newFakeUpstream(t, chat, "gpt-a", "gpt-b", "other")
	e := newTestEnv(t)
	e.addProvider("up", up.URL+"/v1")
	e.addConnection("up", "main", "sk-main", 0)
	key := e.newKey()
	e.waitModels(key, "up/gpt-a")
	ml := map[string]any{"enabled": true}
	for k, v := range extra {
		ml[k] = v
	}
	e.mustAPI("PATCH", "/api/settings/resilience", map[string]any{"model_lockout": ml,
		"retry": map[string]any{"max_retries": 0}}, 200)
	return e, up, key
}

func TestNotFoundLocksOnlyThatModel(t *testing.T) {
	e, up, key := setupLockouts(t, perModel(map[string]http.HandlerFunc{
		"gpt-a": status(404, nil, `{"error":{"message":"The model gpt-a does not exist","code":"model_not_found"}}`),
	}), nil)
	r := e.chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`)
	readAll(t, r)
	if r.StatusCode != 404 {
		t.Fatalf("first: %d", r.StatusCode)
	}
	items := e.modelCooldowns()
	if len(items) != 1 || items[0]["model"] != "gpt-a" || items[0]["scope"] != "model" || items[0]["remaining_ms"].(float64) != 120000 {
		t.Fatalf("lockouts: %v", items)
	}
	// The same connection keeps serving another model.
	r = e.chat(context.Background(), key, `{"model":"up/gpt-b","messages":[]}`)
	readAll(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("other model on the same connection: %d", r.StatusCode)
	}
	// The locked model is refused without calling the upstream: 429 naming the locked target.
	calls := len(up.chatRequests())
	r = e.chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`)
	body := readAll(t, r)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "120" || !strings.Contains(body, "model_locked_out") ||
		!strings.Contains(body, `"reason":"model_lockout"`) || len(up.chatRequests()) != calls {
		t.Fatalf("locked: %d %s %s", r.StatusCode, r.Header.Get("Retry-After"), body)
	}
	// A restart keeps the lockout.
	e.restart()
	if items := e.modelCooldowns(); len(items) != 1 {
		t.Fatalf("after restart: %v", items)
	}
	// Re-enable puts the model back into routing at once.
	out := e.mustAPI("DELETE", "/api/resilience/model-cooldowns", map[string]any{"provider": "up", "connection": "main", "model": "gpt-a"}, 200)
	if out["removed"].(float64) != 1 || len(e.modelCooldowns()) != 0 {
		t.Fatalf("re-enable: %v", out)
	}
	readAll(t, e.chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`))
	if len(up.chatRequests()) != calls+1 {
		t.Fatal("the re-enabled model was not sent upstream")
	}
}

func TestRateLimitLocksTheQuotaFamily(t *testing.T) {
	e, _, key := setupLockouts(t, perModel(map[string]http.HandlerFunc{
		"gpt-a": status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"quota for gpt family reached","type":"rate_limit"}}`),
	}), map[string]any{"families": map[string]any{"up": map[string]any{"gpt": []string{"gpt-*"}}}})
	readAll(t, e.chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`))
	items := e.modelCooldowns()
	if len(items) != 1 || items[0]["scope"] != "family" || items[0]["target"] != "family:gpt" || items[0]["remaining_ms"].(float64) != 600000 {
		t.Fatalf("lockouts: %v", items)
	}
	e.mustAPI("POST", "/api/connections/1/reset", map[string]any{}, 200) // end the connection cooldown
	r := e.chat(context.Background(), key, `{"model":"up/gpt-b","messages":[]}`)
	readAll(t, r)
	if r.StatusCode != 429 {
		t.Fatalf("a sibling of the family must be locked too: %d", r.StatusCode)
	}
	r = e.chat(context.Background(), key, `{"model":"up/other","messages":[]}`)
	readAll(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("a model outside the family keeps serving: %d", r.StatusCode)
	}
	e.mustAPI("DELETE", "/api/resilience/model-cooldowns", map[string]any{"all": true}, 200)
	if len(e.modelCooldowns()) != 0 {
		t.Fatal("re-enable all")
	}
	e.clock.Advance(time.Second)
}

func TestLockoutOffByDefault(t *testing.T) {
	e, _, key := setupOne(t, status(404, nil, `{"error":{"message":"no such model"}}`))
	readAll(t, e.chat(context.Background(), key, chatBody))
	if items := e.modelCooldowns(); len(items) != 0 {
		t.Fatalf("lockouts while switched off: %v", items)
	}
	var out map[string]any
	if st := e.api("DELETE", "/api/resilience/model-cooldowns", map[string]any{"provider": "up"}, &out); st != 422 {
		t.Fatalf("missing model: %d", st)
	}
}
