package ops

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

func TestSettingsAPIStrictPatchAndPersistence(t *testing.T) {
	e := testenv.New(t)
	e.Vars["SWITCHYARD_RETRY_MAX_RETRIES"] = "5"
	e.Restart()
	doc := e.MustAPI("GET", "/api/settings/resilience", nil, 200)
	sources := doc["sources"].(map[string]any)
	if sources["retry.max_retries"] != "env" || sources["model_lockout.base_cooldown_ms"] != "default" {
		t.Fatalf("sources %v", sources)
	}
	// Strict: unknown keys and bad values are all reported and nothing is saved.
	bad := map[string]any{"model_lockout": map[string]any{"base_cooldown_ms": 1, "bogus": true}, "nope": 1}
	out := e.MustAPI("PATCH", "/api/settings/resilience", bad, 422)
	fields := out["error"].(map[string]any)["fields"].(map[string]any)
	for _, k := range []string{"model_lockout.base_cooldown_ms", "model_lockout.bogus", "nope"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("no field error for %s: %v", k, fields)
		}
	}
	after := e.MustAPI("GET", "/api/settings/resilience", nil, 200)
	if after["revision"].(float64) != 0 {
		t.Fatal("a rejected patch must save nothing")
	}
	// A good patch is saved, wins over env, and survives a restart.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 2},
		"model_lockout": map[string]any{"enabled": true}}, 200)
	e.Restart()
	doc = e.MustAPI("GET", "/api/settings/resilience", nil, 200)
	values := doc["values"].(map[string]any)
	if values["retry"].(map[string]any)["max_retries"].(float64) != 2 || doc["sources"].(map[string]any)["retry.max_retries"] != "persisted" {
		t.Fatalf("after restart: %v / %v", values["retry"], doc["sources"].(map[string]any)["retry.max_retries"])
	}
	if doc["revision"].(float64) != 1 {
		t.Fatalf("revision %v", doc["revision"])
	}
}

func TestAdminAPIRequiresAuth(t *testing.T) {
	e := testenv.New(t)
	for _, r := range e.App.Routes {
		if r.Access != "admin" {
			continue
		}
		path := strings.ReplaceAll(r.Path, ":id", "1")
		req, _ := http.NewRequest(r.Method, e.Base+path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s without auth: %d", r.Method, r.Path, resp.StatusCode)
		}
	}
}

func TestCatalogCRUDNeverReturnsSecretsAndSurvivesRestart(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e := testenv.New(t)
	const secret = "sk-very-secret-upstream-key-XYZ"
	pid := e.AddProvider("vllm-local", up.URL+"/v1")
	cid := e.AddConnection("vllm-local", "primary", secret, 1)
	e.NewKey()

	// Validation: 422 with per-field errors.
	out := e.MustAPI("POST", "/api/providers", map[string]any{"name": "Bad Name", "type": "x", "base_url": "ftp://a"}, 422)
	if f := out["error"].(map[string]any)["fields"].(map[string]any); len(f) != 3 {
		t.Errorf("field errors %v", f)
	}
	e.MustAPI("POST", "/api/providers", map[string]any{"name": "vllm-local", "type": "openai", "base_url": "http://x/v1"}, 409)
	e.MustAPI("PATCH", "/api/connections/"+itoa(cid), map[string]any{"max_concurrent": 2, "priority": 3}, 200)
	e.MustAPI("PATCH", "/api/connections/"+itoa(cid), map[string]any{"overrides": map[string]any{
		"request_queue": map[string]any{"max_wait_ms": 0}}}, 422)

	var buf bytes.Buffer
	for _, p := range []string{"/api/providers", "/api/connections", "/api/connections/" + itoa(cid), "/api/keys"} {
		req, _ := http.NewRequest("GET", e.Base+p, nil)
		req.Header.Set("Authorization", "Bearer "+testenv.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString(testenv.ReadAll(t, resp))
	}
	if strings.Contains(buf.String(), secret) {
		t.Fatal("an API response contains the stored secret")
	}
	res := e.MustAPI("POST", "/api/connections/"+itoa(cid)+"/test", nil, 200)
	if res["ok"] != true || res["models"].(float64) != 1 {
		t.Fatalf("test result %v", res)
	}

	e.Restart()
	conn := e.MustAPI("GET", "/api/connections/"+itoa(cid), nil, 200)
	if conn["max_concurrent"].(float64) != 2 || conn["priority"].(float64) != 3 || conn["has_api_key"] != true {
		t.Fatalf("after restart %v", conn)
	}
	if len(e.MustAPI("GET", "/api/keys", nil, 200)["items"].([]any)) != 1 {
		t.Fatal("key lost")
	}
	// The credential still opens after the restart: a request reaches the upstream with it.
	key := e.NewKey()
	e.WaitModels(key, "vllm-local/gpt-test")
	testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"vllm-local/gpt-test","messages":[]}`))
	if got := up.ChatRequests(); len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+secret {
		t.Fatal("credential not usable after restart")
	}
	e.MustAPI("DELETE", "/api/providers/"+itoa(pid), nil, 204)
	if n := len(e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any)); n != 0 {
		t.Fatalf("connections of a deleted provider remain: %d", n)
	}
	e.Stop()
	// Secrets are not readable in the database file (nor its WAL).
	for _, f := range []string{"switchyard.db", "switchyard.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(e.DataDir, f))
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(key)) {
			t.Fatalf("%s contains a secret in clear", f)
		}
	}
	if strings.Contains(e.Logs.String(), secret) || strings.Contains(e.Logs.String(), key) {
		t.Fatal("a secret reached the log")
	}
}

func TestKeyRevocationTakesEffectAtOnce(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	keys := e.MustAPI("GET", "/api/keys", nil, 200)["items"].([]any)
	id := int64(keys[0].(map[string]any)["id"].(float64))
	if r := e.Chat(context.Background(), key, `{"model":"up/gpt-test"}`); r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	e.MustAPI("DELETE", "/api/keys/"+itoa(id), nil, 204)
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-test"}`)
	testenv.ReadAll(t, r)
	if r.StatusCode != 401 {
		t.Fatalf("revoked key still works: %d", r.StatusCode)
	}
}

func TestKeyLastUsedIsRecordedAndSurvivesRestart(t *testing.T) {
	e, _, _ := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	key := e.NewKey() // listed first (newest first)
	lastUsed := func() any {
		return e.MustAPI("GET", "/api/keys", nil, 200)["items"].([]any)[0].(map[string]any)["last_used_at"]
	}
	if lastUsed() != nil {
		t.Fatal("an unused key has a last-used time")
	}
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	if lastUsed() == nil {
		t.Fatal("use not shown")
	}
	e.Restart() // the pending use time is written on shutdown
	if lastUsed() == nil {
		t.Fatal("last-used time lost across a restart")
	}
}

func TestResetAllEndsCooldownsLockoutsAndBreakersButKeepsTerminalStates(t *testing.T) {
	e, _, key, a, b := testenv.TwoKeys(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-a": testenv.Status(429, map[string]string{"Retry-After": "60"}, `{"error":{"message":"slow down"}}`),
		"sk-b": testenv.Status(401, nil, `{"error":{"message":"Incorrect API key provided"}}`),
	}))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"failure_threshold": 1, "failure_on_statuses": []string{"4xx", "5xx"}}}, 200)
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	if e.State(a).Status != "cooling" || e.State(b).Status != "expired" || e.ProviderStatus("up")["breaker"] != "open" {
		t.Fatalf("setup: %+v %+v %v", e.State(a), e.State(b), e.ProviderStatus("up")["breaker"])
	}
	e.MustAPI("POST", "/api/resilience/reset", nil, 200)
	if e.State(a).Status != "active" || e.State(b).Status != "expired" || e.ProviderStatus("up")["breaker"] != "closed" {
		t.Fatalf("after reset: %+v %+v %v", e.State(a), e.State(b), e.ProviderStatus("up")["breaker"])
	}
}
