package e2e

import (
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// The admin API reads exactly one JSON value with no key twice: a body that could be checked
// on one value and acted on with another is refused in the admin error shape, and nothing of
// it is saved.
func TestAdminAPIRefusesDuplicateKeysAndTrailingData(t *testing.T) {
	e := testenv.New(t)
	pid := e.AddProvider("strict", "http://127.0.0.1:9/v1")
	cases := []struct {
		name, method, path, body, code string
	}{
		{"two providers back to back", "POST", "/api/providers",
			`{"name":"one","type":"openai-compatible","base_url":"http://a/v1"}{"name":"two","type":"openai-compatible","base_url":"http://b/v1"}`, "trailing_data"},
		{"provider then garbage", "POST", "/api/providers",
			`{"name":"one","type":"openai-compatible","base_url":"http://a/v1"} x`, "trailing_data"},
		{"provider name twice", "POST", "/api/providers",
			`{"name":"one","type":"openai-compatible","base_url":"http://a/v1","name":"two"}`, "duplicate_key"},
		{"provider name twice by case", "POST", "/api/providers",
			`{"name":"one","type":"openai-compatible","base_url":"http://a/v1","Name":"two"}`, "duplicate_key"},
		{"provider update with two documents", "PATCH", "/api/providers/" + itoa(pid),
			`{"base_url":"http://c/v1"} {"base_url":"http://d/v1"}`, "trailing_data"},
		{"connection key twice", "POST", "/api/connections",
			`{"provider":"strict","name":"c","auth_type":"api_key","api_key":"sk-a","api_key":"sk-b"}`, "duplicate_key"},
		{"override key twice, nested", "POST", "/api/connections",
			`{"provider":"strict","name":"c","auth_type":"api_key","api_key":"sk-a","overrides":{"max_concurrent":1,"max_concurrent":2}}`, "duplicate_key"},
		{"settings key twice", "PATCH", "/api/settings/resilience",
			`{"retry":{"max_retries":1,"max_retries":9}}`, "duplicate_key"},
		{"settings section twice", "PATCH", "/api/settings/resilience",
			`{"retry":{"max_retries":1},"retry":{"max_retries":9}}`, "duplicate_key"},
		{"settings then a second document", "PATCH", "/api/settings/resilience",
			`{"retry":{"max_retries":1}} {"retry":{"max_retries":9}}`, ""},
		{"client key body twice", "POST", "/api/keys", `{"name":"a"}{"name":"b"}`, "trailing_data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, out := adminRaw(t, e, c.method, c.path, c.body)
			if st != http.StatusBadRequest {
				t.Fatalf("status %d: %v", st, out)
			}
			detail, _ := out["error"].(map[string]any)
			if detail == nil || detail["message"] == "" {
				t.Fatalf("not the admin error shape: %v", out)
			}
			if c.code != "" && detail["code"] != c.code {
				t.Fatalf("code %v, want %s: %v", detail["code"], c.code, out)
			}
		})
	}
	// Nothing was saved.
	for _, it := range e.MustAPI("GET", "/api/providers", nil, 200)["items"].([]any) {
		if n := it.(map[string]any)["name"]; n == "one" || n == "two" {
			t.Errorf("provider %v was created", n)
		}
		if u := it.(map[string]any)["base_url"]; u != nil && strings.Contains(u.(string), "http://c/") {
			t.Errorf("provider updated to %v", u)
		}
	}
	if items := e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any); len(items) != 0 {
		t.Errorf("connections created: %v", items)
	}
	var doc struct {
		Values struct {
			Retry struct {
				MaxRetries int `json:"max_retries"`
			} `json:"retry"`
		} `json:"values"`
	}
	e.API("GET", "/api/settings/resilience", nil, &doc)
	if doc.Values.Retry.MaxRetries != 3 {
		t.Errorf("max_retries saved as %d", doc.Values.Retry.MaxRetries)
	}
	// A well-formed body still works.
	e.MustAPI("POST", "/api/providers", map[string]any{"name": "fine", "type": "openai-compatible", "base_url": "http://a/v1"}, 201)
}
