package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// apiFields sends an admin API request that must be refused with 422 and returns its fields.
func apiFields(t *testing.T, e *testenv.Env, method, path string, body any) map[string]string {
	t.Helper()
	var out struct {
		Error struct {
			Fields map[string]string `json:"fields"`
		} `json:"error"`
	}
	if st := e.API(method, path, body, &out); st != http.StatusUnprocessableEntity {
		t.Fatalf("%s %s: %d, want 422", method, path, st)
	}
	return out.Error.Fields
}

// Every settings document is bounded: a list of more than 1,000 entries or a string of more than
// 4 KiB is refused with 422 naming the field, and nothing is saved — the resilience document, the
// OAuth document and a provider's overrides, through the admin API and the rules card.
func TestSettingsDocumentsAreBounded(t *testing.T) {
	e := testenv.New(t)
	rules := func(n int, marker string) []map[string]any {
		out := make([]map[string]any, n)
		for i := range out {
			out[i] = map[string]any{"name": fmt.Sprintf("r%d", i), "statuses": []int{429}, "body_markers": []string{marker},
				"reason": "rate_limit", "scope": "connection"}
		}
		return out
	}
	before := e.MustAPI("GET", "/api/settings/resilience", nil, 200)
	long := strings.Repeat("x", 5<<10)

	if f := apiFields(t, e, "PATCH", "/api/settings/resilience", map[string]any{"error_rules": rules(1001, "quota")}); !strings.Contains(f["error_rules"], "1000") {
		t.Fatalf("1,001 rules: %v", f)
	}
	if f := apiFields(t, e, "PATCH", "/api/settings/resilience", map[string]any{"error_rules": rules(1, long)}); !strings.Contains(f["error_rules[0].body_markers[0]"], "4 KiB") {
		t.Fatalf("a 5 KiB marker: %v", f)
	}
	statuses := make([]string, 1001)
	for i := range statuses {
		statuses[i] = "429"
	}
	if f := apiFields(t, e, "PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"retry_on_statuses": statuses}}); f["retry.retry_on_statuses"] == "" {
		t.Fatalf("1,001 statuses: %v", f)
	}
	if f := apiFields(t, e, "PATCH", "/api/settings/resilience", map[string]any{"model_lockout": map[string]any{
		"families": map[string]any{"anthropic": map[string]any{"opus": []string{"claude-" + long}}}}}); f["model_lockout.families.anthropic.opus[0]"] == "" {
		t.Fatalf("a 5 KiB family pattern: %v", f)
	}
	if after := e.MustAPI("GET", "/api/settings/resilience", nil, 200); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("a refused document changed the settings")
	}
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"error_rules": rules(1000, strings.Repeat("y", 500))}, 200)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"error_rules": rules(1, strings.Repeat("y", 4<<10))}, 200)

	oauthBefore := e.MustAPI("GET", "/api/settings/oauth", nil, 200)
	if f := apiFields(t, e, "PATCH", "/api/settings/oauth", map[string]any{"claude": map[string]any{"authorize_url": "https://claude.ai/" + long}}); f["claude.authorize_url"] == "" {
		t.Fatalf("a 5 KiB address: %v", f)
	}
	if fmt.Sprint(e.MustAPI("GET", "/api/settings/oauth", nil, 200)) != fmt.Sprint(oauthBefore) {
		t.Fatal("a refused OAuth document changed the settings")
	}
	if f := apiFields(t, e, "PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("openai")), map[string]any{
		"resilience": map[string]any{"retry": map[string]any{"retry_on_statuses": statuses}}}); f["resilience.retry.retry_on_statuses"] == "" {
		t.Fatalf("provider overrides: %v", f)
	}

	// The rules card shows the message at the rule's field.
	s := newSettingsSite(t)
	form := cardForm(t, s.get(t, "/settings"), "error-rules")
	form.Set("error_rules[new].name", "huge")
	form.Set("error_rules[new].statuses", "429")
	form.Set("error_rules[new].body_markers", "ok\n"+long)
	form.Set("error_rules[new].reason", "rate_limit")
	code, body := s.post(t, "/settings/error-rules", form, true)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("card: %d", code)
	}
	if msg := fieldMessage(body, "error_rules[new].body_markers"); !strings.Contains(msg, "4 KiB") {
		t.Fatalf("card message at body_markers: %q", msg)
	}
	if !strings.Contains(s.get(t, "/api/settings/resilience"), `"error_rules":[]`) {
		t.Fatal("the refused rule was saved")
	}
}
