package e2e

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"switchyard/db"
	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// excludedOf reads diagnostics.excluded of an error answer.
func excludedOf(t *testing.T, body string) []map[string]any {
	t.Helper()
	var doc struct {
		Diagnostics struct {
			Excluded []map[string]any `json:"excluded"`
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Diagnostics.Excluded) == 0 {
		t.Fatalf("no diagnostics.excluded: %s", body)
	}
	return doc.Diagnostics.Excluded
}

// A Claude account signed in through the real flow becomes connection claude-1; its e-mail is
// the operator's to see (admin API, dashboard row and edit page) and never a client's: not in
// diagnostics.excluded, error messages, response headers or Prometheus labels, even when the
// operator names the connection after it. Signing in again updates the same connection and keeps
// the name the operator gave it in the edit form.
func TestClaudeAccountEmailStaysWithOperators(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	const email = "ada@example.com"
	now := e.Clock.Now()
	f.SetUsage(email, testenv.UsageJSON(100, now.Add(2*time.Hour), 40, now.Add(72*time.Hour)))

	start := e.MustAPI("POST", "/api/oauth/claude/start", nil, 200)
	var conn map[string]any
	if st := e.API("POST", "/api/oauth/claude/complete", map[string]any{"code": f.Authorize(start["auth_url"].(string), email)}, &conn); st != 201 {
		t.Fatalf("complete: %d %v", st, conn)
	}
	id := int64(conn["id"].(float64))
	if conn["name"] != "claude-1" || conn["account"].(map[string]any)["email"] != email {
		t.Fatalf("connection %v", conn)
	}
	if got := e.MustAPI("GET", "/api/connections/"+itoa(id), nil, 200); got["account"].(map[string]any)["email"] != email {
		t.Fatalf("the admin API hides the account from the operator: %v", got)
	}
	admin := e.Login()
	if _, page := testenv.Fetch(t, admin, "GET", e.Base+"/providers", nil, nil); !strings.Contains(page, `<span class="conn-account">`+email+`</span>`) {
		t.Fatal("the providers page does not show the account's e-mail")
	}
	if _, page := testenv.Fetch(t, admin, "GET", e.Base+"/connections/"+itoa(id)+"/edit", nil, nil); !strings.Contains(page, email) {
		t.Fatal("the edit page does not show the account's e-mail")
	}

	// The account is at its 5-hour wall: the client's 429 names the connection, not the account.
	e.WaitModels(key, "anthropic/claude-test")
	e.Eventually("the account polled", func() bool { return connState(e, id)["usage"].(map[string]any)["skipped_until"] != nil })
	excluded := func(want string) {
		t.Helper()
		resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
		body := testenv.ReadAll(t, resp)
		if resp.StatusCode != 429 {
			t.Fatalf("at the wall: %d %s", resp.StatusCode, body)
		}
		if x := excludedOf(t, body); len(x) != 1 || x[0]["connection"] != want || x[0]["reason"] != "quota_window" {
			t.Fatalf("excluded %v, want connection %q", x, want)
		}
		if strings.Contains(body, "@") {
			t.Fatalf("the answer carries an address: %s", body)
		}
		for k, vs := range resp.Header {
			if strings.Contains(strings.Join(vs, ","), "@") {
				t.Fatalf("header %s: %v", k, vs)
			}
		}
		if m := e.Metrics(); strings.Contains(m, "@") {
			t.Fatalf("metrics carry an address: %s", m)
		} else if !strings.Contains(m, fmt.Sprintf(`switchyard_claude_usage_utilization{connection=%q,provider="anthropic",window="five_hour"} 100`, want)) {
			t.Fatalf("metrics lack the connection %q: %s", want, m)
		}
	}
	excluded("claude-1")

	// The operator names the connection after the account: clients see its id instead.
	if st, page := postForm(t, admin, e.Base+"/connections/"+itoa(id)+"/edit", url.Values{"name": {email}, "priority": {"0"},
		"enabled": {"true"}}, i18n.EN); st != 200 || !strings.Contains(page, html.EscapeString(i18n.TL(i18n.EN, "connections.updated", email))) {
		t.Fatalf("rename through the form: %d", st)
	}
	excluded("#" + itoa(id))

	// Renamed in the edit form; signing in again updates the same connection and keeps the name.
	if st, _ := postForm(t, admin, e.Base+"/connections/"+itoa(id)+"/edit", url.Values{"name": {"Ada's Max"}, "priority": {"0"},
		"enabled": {"true"}}, i18n.EN); st != 200 {
		t.Fatalf("rename: %d", st)
	}
	excluded("Ada's Max")
	again := e.MustAPI("POST", "/api/oauth/claude/start", map[string]any{"name": "ignored-for-a-known-account"}, 200)
	var updated map[string]any
	if st := e.API("POST", "/api/oauth/claude/complete", map[string]any{"code": f.Authorize(again["auth_url"].(string), email)}, &updated); st != 200 {
		t.Fatalf("re-sign-in: %d %v", st, updated)
	}
	if int64(updated["id"].(float64)) != id || updated["name"] != "Ada's Max" {
		t.Fatalf("re-sign-in: %v", updated)
	}
	if items := e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any); len(items) != 1 {
		t.Fatalf("%d connections after the re-sign-in", len(items))
	}

	// A second account gets the next neutral name; one with a chosen name gets that.
	if bob := e.AddClaudeAccount(f, "bob@example.com"); e.MustAPI("GET", "/api/connections/"+itoa(bob), nil, 200)["name"] != "claude-1" {
		t.Fatal("the second account is not claude-1 (the first free name)")
	}
	named := e.MustAPI("POST", "/api/oauth/claude/start", map[string]any{"name": "team"}, 200)
	var cy map[string]any
	e.API("POST", "/api/oauth/claude/complete", map[string]any{"code": f.Authorize(named["auth_url"].(string), "cy@example.com")}, &cy)
	if cy["name"] != "team" {
		t.Fatalf("chosen name: %v", cy)
	}
	if out := e.MustAPI("POST", "/api/oauth/claude/start", map[string]any{"name": "a\nb"}, 422); !strings.Contains(fmt.Sprint(out), "U+000A") {
		t.Fatalf("a name with a line break: %v", out)
	}
}

// An upstream error that names the account's e-mail reaches the client without it.
func TestUpstreamErrorsLoseTheAccountsEmail(t *testing.T) {
	e, f, key := claudeSetup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"ada@example.com may not use this model"}}`)
	})
	e.AddClaudeAccount(f, "ada@example.com")
	e.WaitModels(key, "anthropic/claude-test")
	resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != 400 || strings.Contains(body, "@") || !strings.Contains(body, "may not use this model") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// A connection named after its account's e-mail by an earlier version is renamed once, at the
// first start after the upgrade; the log names the new name and the id, never the e-mail.
func TestEmailNamedConnectionRenamedAtStart(t *testing.T) {
	e, f, _ := claudeSetup(t, nil)
	id := e.AddClaudeAccount(f, "ada@example.com")
	e.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"name": "ada@example.com"}, 200)
	e.Stop()
	// What an earlier version's database looks like: the renaming never ran on it.
	d, err := db.Open(e.Store())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.W.Exec(`DELETE FROM key_value WHERE key = 'catalog.oauth_names_neutral'`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	before := len(e.Logs.String())
	e.Start()
	if got := e.MustAPI("GET", "/api/connections/"+itoa(id), nil, 200); got["name"] != "claude-1" || got["account"].(map[string]any)["email"] != "ada@example.com" {
		t.Fatalf("after the upgrade: %v", got)
	}
	logs := e.Logs.String()[before:]
	line := testenv.Between(logs, "renamed a Claude connection", "\n")
	if line == "" || !strings.Contains(line, "name=claude-1") || strings.Contains(logs, "ada@example.com") {
		t.Fatalf("log: %s", logs)
	}
}

// The sign-in link on the Claude card comes from the sign-in the server keeps: a completion form
// that carries an address of its own (javascript:, or an http page elsewhere) never gets it
// rendered as a link, whatever else the form says.
func TestClaudeSignInLinkComesFromTheServer(t *testing.T) {
	e, _, _ := claudeSetup(t, nil)
	admin := e.Login()
	st, page := postForm(t, admin, e.Base+"/oauth/claude/start", url.Values{"provider": {"anthropic"}}, i18n.EN)
	href := html.UnescapeString(testenv.Between(page, `<a href="`, `" target="_blank" rel="noopener noreferrer" id="claude-auth-link"`))
	state := html.UnescapeString(testenv.Between(page, `<input type="hidden" name="state" value="`, `"`))
	if st != 200 || !strings.HasPrefix(href, "https://claude.ai/oauth/authorize?") || state == "" || !strings.Contains(href, "state="+state) {
		t.Fatalf("start: %d, link %q, state %q", st, href, state)
	}
	for _, forged := range []string{"javascript:alert(document.cookie)", "http://evil.example/authorize", "https://evil.example/authorize"} {
		// With the state of the pending sign-in: the server's link again.
		st, page := postForm(t, admin, e.Base+"/oauth/claude/complete", url.Values{"auth_url": {forged}, "state": {state}, "code": {""}}, i18n.EN)
		if st != 422 || strings.Contains(page, "evil.example") || strings.Contains(page, "javascript:") ||
			html.UnescapeString(testenv.Between(page, `<a href="`, `" target="_blank" rel="noopener noreferrer" id="claude-auth-link"`)) != href {
			t.Fatalf("%s with the pending state: %d", forged, st)
		}
		// Without one (or with a state that is none of ours): the first step, no link at all.
		for _, s := range []string{"", "forged-state"} {
			st, page := postForm(t, admin, e.Base+"/oauth/claude/complete", url.Values{"auth_url": {forged}, "state": {s}, "code": {"x#" + s}}, i18n.EN)
			if st != 422 || strings.Contains(page, "claude-auth-link") || strings.Contains(page, "evil.example") ||
				strings.Contains(page, "javascript:") || !strings.Contains(page, `id="claude-start"`) {
				t.Fatalf("%s with state %q: %d", forged, s, st)
			}
		}
	}
}
