package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"switchyard/e2e/testenv"
)

// rawAdmin sends a body as it is to the admin API with the admin token.
func rawAdmin(t *testing.T, e *testenv.Env, method, path, body string) (int, string) {
	t.Helper()
	st, _, b := testenv.Call(t, http.DefaultClient, method, e.Base+path, body,
		map[string]string{"Authorization": "Bearer " + testenv.AdminToken, "Content-Type": "application/json"})
	return st, b
}

// adminRaw sends a raw body to the admin API with the token and returns the status and the
// decoded error body.
func adminRaw(t *testing.T, e *testenv.Env, method, path, body string) (int, map[string]any) {
	t.Helper()
	st, raw := rawAdmin(t, e, method, path, body)
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("%s %s: not JSON: %q", method, path, raw)
	}
	return st, out
}

// clientHeader authenticates a client call with key, in Anthropic's dialect when anthropic is set.
func clientHeader(key string, anthropic bool) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + key}
	if anthropic {
		h["anthropic-version"] = "2023-06-01"
	}
	return h
}
