package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// call makes one request with headers and returns the status, the headers and the body. A
// "Host" header names the host the request asks for, as a client reaching the gateway under
// another name would.
func call(t *testing.T, c *http.Client, method, u, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, testenv.ReadAll(t, resp)
}

// rawAdmin sends a body as it is to the admin API with the admin token.
func rawAdmin(t *testing.T, e *testenv.Env, method, path, body string) (int, string) {
	t.Helper()
	st, _, b := call(t, http.DefaultClient, method, e.Base+path, body,
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
