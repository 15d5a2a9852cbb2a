package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

func setupLockouts(t *testing.T, chat http.HandlerFunc, extra map[string]any) (*testenv.Env, *testenv.FakeUpstream, string) {
	t.Helper()
	up := testenv.NewFakeUpstream(t, chat, "gpt-a", "gpt-b", "other")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-main", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-a")
	ml := map[string]any{"enabled": true}
	for k, v := range extra {
		ml[k] = v
	}
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"model_lockout": ml,
		"retry": map[string]any{"max_retries": 0}}, 200)
	return e, up, key
}

func TestNotFoundLocksOnlyThatModel(t *testing.T) {
	e, up, key := setupLockouts(t, testenv.PerModel(map[string]http.HandlerFunc{
		"gpt-a": testenv.Status(404, nil, `{"error":{"message":"The model gpt-a does not exist","code":"model_not_found"}}`),
	}), nil)
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`)
	testenv.ReadAll(t, r)
	if r.StatusCode != 404 {
		t.Fatalf("first: %d", r.StatusCode)
	}
	items := e.ModelCooldowns()
	if len(items) != 1 || items[0]["model"] != "gpt-a" || items[0]["scope"] != "model" || items[0]["remaining_ms"].(float64) != 120000 {
		t.Fatalf("lockouts: %v", items)
	}
	// The same connection keeps serving another model.
	r = e.Chat(context.Background(), key, `{"model":"up/gpt-b","messages":[]}`)
	testenv.ReadAll(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("other model on the same connection: %d", r.StatusCode)
	}
	// The locked model is refused without calling the upstream: 429 naming the locked target.
	calls := len(up.ChatRequests())
	r = e.Chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "120" || !strings.Contains(body, "model_locked_out") ||
		!strings.Contains(body, `"reason":"model_lockout"`) || len(up.ChatRequests()) != calls {
		t.Fatalf("locked: %d %s %s", r.StatusCode, r.Header.Get("Retry-After"), body)
	}
	// A restart keeps the lockout.
	e.Restart()
	if items := e.ModelCooldowns(); len(items) != 1 {
		t.Fatalf("after restart: %v", items)
	}
	// Re-enable puts the model back into routing at once.
	out := e.MustAPI("DELETE", "/api/resilience/model-cooldowns", map[string]any{"provider": "up", "connection": "main", "model": "gpt-a"}, 200)
	if out["removed"].(float64) != 1 || len(e.ModelCooldowns()) != 0 {
		t.Fatalf("re-enable: %v", out)
	}
	testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`))
	if len(up.ChatRequests()) != calls+1 {
		t.Fatal("the re-enabled model was not sent upstream")
	}
}

func TestRateLimitLocksTheQuotaFamily(t *testing.T) {
	e, _, key := setupLockouts(t, testenv.PerModel(map[string]http.HandlerFunc{
		"gpt-a": testenv.Status(429, map[string]string{"Retry-After": "600"}, `{"error":{"message":"quota for gpt family reached","type":"rate_limit"}}`),
	}), map[string]any{"families": map[string]any{"up": map[string]any{"gpt": []string{"gpt-*"}}}})
	testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"up/gpt-a","messages":[]}`))
	items := e.ModelCooldowns()
	if len(items) != 1 || items[0]["scope"] != "family" || items[0]["target"] != "family:gpt" || items[0]["remaining_ms"].(float64) != 600000 {
		t.Fatalf("lockouts: %v", items)
	}
	e.MustAPI("POST", "/api/connections/1/reset", map[string]any{}, 200) // end the connection cooldown
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-b","messages":[]}`)
	testenv.ReadAll(t, r)
	if r.StatusCode != 429 {
		t.Fatalf("a sibling of the family must be locked too: %d", r.StatusCode)
	}
	r = e.Chat(context.Background(), key, `{"model":"up/other","messages":[]}`)
	testenv.ReadAll(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("a model outside the family keeps serving: %d", r.StatusCode)
	}
	e.MustAPI("DELETE", "/api/resilience/model-cooldowns", map[string]any{"all": true}, 200)
	if len(e.ModelCooldowns()) != 0 {
		t.Fatal("re-enable all")
	}
	e.Clock.Advance(time.Second)
}

func TestLockoutOffByDefault(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.Status(404, nil, `{"error":{"message":"no such model"}}`))
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	if items := e.ModelCooldowns(); len(items) != 0 {
		t.Fatalf("lockouts while switched off: %v", items)
	}
	var out map[string]any
	if st := e.API("DELETE", "/api/resilience/model-cooldowns", map[string]any{"provider": "up"}, &out); st != 422 {
		t.Fatalf("missing model: %d", st)
	}
}
