package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// The operator of a remote gateway adds two ChatGPT accounts with device codes and one Copilot
// account, and points a Claude-Code-like client (messages, streaming) at a combo over them. When
// the first ChatGPT account hits its 5-hour limit the traffic moves to the second, and stays there
// until the first resets; with both at their wall Copilot serves; the dashboard shows each
// ChatGPT account's windows.
func TestSubscriptionAccountsComboScenario(t *testing.T) {
	e, auth, backend, key := chatgptGateway(t, true)
	gh := testenv.NewFakeGitHub(t)
	e.UseFakeGitHub(gh)

	deviceSignIn := func(account, email string) int64 {
		t.Helper()
		flow := e.MustAPI("POST", "/api/oauth/codex/device", map[string]any{"provider": "codex"}, 200)
		auth.Approve(flow["user_code"].(string), account, email, "plus")
		e.Clock.Advance(time.Duration(flow["interval"].(float64)) * time.Second)
		conn := e.MustAPI("POST", "/api/oauth/codex/device/poll", map[string]any{"flow": flow["flow"]}, 201)
		return int64(conn["id"].(float64))
	}
	ada, bob := deviceSignIn("acct-ada", "ada@example.com"), deviceSignIn("acct-bob", "bob@example.com")
	cop := e.AddCopilotAccount(gh, "copilot", "octocat", 583231)
	name := func(id int64) string {
		return e.MustAPI("GET", fmt.Sprintf("/api/connections/%d", id), nil, 200)["name"].(string)
	}
	if name(ada) != "chatgpt-1" || name(bob) != "chatgpt-2" || name(cop) != "copilot-1" {
		t.Fatalf("names %s %s %s", name(ada), name(bob), name(cop))
	}
	e.MustAPI("POST", "/api/combos", map[string]any{"name": "agents", "strategy": "priority", "targets": []any{
		map[string]any{"provider": "codex", "model": "gpt-5-codex", "connection": "chatgpt-1"},
		map[string]any{"provider": "codex", "model": "gpt-5-codex", "connection": "chatgpt-2"},
		map[string]any{"provider": "copilot", "model": "gpt-4.1"},
	}}, 201)

	now := e.Clock.Now()
	window := func(used float64, minutes int, reset time.Duration) *testenv.CodexWindow {
		return &testenv.CodexWindow{UsedPercent: used, WindowMinutes: minutes, ResetAfter: reset}
	}
	backend.SetUsage("acct-ada", testenv.CodexUsage{Primary: window(97, 300, 2*time.Hour), Secondary: window(40, 10080, 72*time.Hour)})
	backend.SetUsage("acct-bob", testenv.CodexUsage{Primary: window(10, 300, 4*time.Hour), Secondary: window(5, 10080, 100*time.Hour)})

	// What Claude Code sends: messages, streamed, with its User-Agent.
	ask := func() (status int, body string) {
		t.Helper()
		resp := e.PostAnthropic("/v1/messages", key, `{"model":"agents","max_tokens":256,"stream":true,`+
			`"system":[{"type":"text","text":"You are Claude Code."}],"messages":[{"role":"user","content":"Say hello."}]}`,
			map[string]string{"User-Agent": "claude-cli/2.1.300 (external, cli)"})
		return resp.StatusCode, testenv.ReadAll(t, resp)
	}
	calls := func() []string { return backend.AccountsCalled() }
	// codexAnswered reports whether a messages stream ended and carried the backend's text.
	codexAnswered := func(body string) bool {
		var text strings.Builder
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && gjson.Get(d, "delta.type").String() == "text_delta" {
				text.WriteString(gjson.Get(d, "delta.text").String())
			}
		}
		return strings.Contains(body, "event: message_stop") && text.String() == testenv.CodexText
	}

	if st, body := ask(); st != 200 || !codexAnswered(body) {
		t.Fatalf("first request: %d %s", st, body)
	}
	if got := calls(); len(got) != 1 || got[0] != "acct-ada" {
		t.Fatalf("the first account serves first: %q", got)
	}

	// The first account hits its 5-hour limit.
	reset := now.Add(2 * time.Hour)
	backend.SetLimit("acct-ada", &testenv.CodexLimit{ResetsAt: reset, ResetsIn: reset.Sub(e.Clock.Now())})
	for i := 0; i < 3; i++ {
		if st, body := ask(); st != 200 || !codexAnswered(body) {
			t.Fatalf("request %d at the first account's wall: %d %s", i, st, body)
		}
	}
	if got := calls(); strings.Join(got, ",") != "acct-ada,acct-ada,acct-bob,acct-bob,acct-bob" {
		t.Fatalf("traffic did not move to the second account and stay there: %q", got)
	}
	st := chatgptConn(e, ada)
	if until := chatgptTime(t, st.Get("until")); st.Get("reason").String() != "quota_exhausted" || !until.Equal(reset) {
		t.Fatalf("the first account rests until its reset: %s", st.Raw)
	}
	if u := st.Get("usage.five_hour.utilization").Float(); u != 100 {
		t.Fatalf("the first account's 5-hour window: %v (%s)", u, st.Raw)
	}
	if u := chatgptConn(e, bob).Get("usage.five_hour.utilization").Float(); u != 10 {
		t.Fatalf("the second account's 5-hour window: %v", u)
	}

	// The dashboard shows both ChatGPT accounts with their windows.
	status, page := testenv.Fetch(t, e.Login(), "GET", e.Base+"/providers", nil, nil)
	if status != 200 {
		t.Fatalf("providers page: %d", status)
	}
	for _, want := range []string{"chatgpt-1", "chatgpt-2", "copilot-1", "100 %", "10 %", "40 %"} {
		if !strings.Contains(page, want) {
			t.Errorf("the providers page lacks %q", want)
		}
	}

	// Both ChatGPT accounts at their wall: Copilot serves.
	backend.SetLimit("acct-bob", &testenv.CodexLimit{ResetsAt: now.Add(4 * time.Hour), ResetsIn: 4*time.Hour - e.Clock.Since(now)})
	if st, body := ask(); st != 200 || !strings.Contains(body, "event: message_stop") {
		t.Fatalf("both ChatGPT accounts at their wall: %d %s", st, body)
	}
	if n := len(gh.ChatRequests()); n != 1 {
		t.Fatalf("Copilot calls: %d", n)
	}

	// The first account's window resets: it serves again.
	backend.SetLimit("acct-ada", nil)
	e.Clock.Advance(reset.Sub(e.Clock.Now()) + time.Second)
	if st, body := ask(); st != 200 || !codexAnswered(body) {
		t.Fatalf("after the reset: %d %s", st, body)
	}
	if got := calls(); got[len(got)-1] != "acct-ada" {
		t.Fatalf("after the reset the first account serves: %q", got)
	}
	chatgptNoTokens(t, auth, "the log", e.Logs.String())
	chatgptNoTokens(t, auth, "the providers page", page)
}
