package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// copilotSetup is a gateway whose copilot.* OAuth settings point at a fake GitHub, with a
// provider copilot and retries off.
func copilotSetup(t *testing.T) (*testenv.Env, *testenv.FakeGitHub, string) {
	t.Helper()
	f := testenv.NewFakeGitHub(t)
	e := testenv.New(t)
	e.UseFakeGitHub(f)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	return e, f, e.NewKey()
}

const copilotChat = `{"model":"copilot/gpt-4.1","messages":[{"role":"user","content":"hi"}]}`

// copilotChatOK posts a chat completion to copilot/gpt-4.1 and returns the Copilot token the
// fake saw on its last chat call.
func copilotChatOK(e *testenv.Env, f *testenv.FakeGitHub, key string) string {
	e.T.Helper()
	resp := e.Chat(context.Background(), key, copilotChat)
	if body := testenv.ReadAll(e.T, resp); resp.StatusCode != 200 || !strings.Contains(body, "Hello there") {
		e.T.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	reqs := f.ChatRequests()
	return bearerOf(reqs[len(reqs)-1])
}

// noTokenAnywhere fails when a GitHub or Copilot token shows in the admin API or the log.
func noTokenAnywhere(t *testing.T, e *testenv.Env, f *testenv.FakeGitHub, more ...string) {
	t.Helper()
	texts := map[string]string{"log": e.Logs.String()}
	for _, path := range []string{"/api/connections", "/api/resilience/state", "/api/providers", "/api/requests"} {
		req, _ := http.NewRequest("GET", e.Base+path, nil)
		req.Header.Set("Authorization", "Bearer "+testenv.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		texts[path] = testenv.ReadAll(t, resp)
	}
	for i, m := range more {
		texts[fmt.Sprint("answer ", i)] = m
	}
	for where, text := range texts {
		for _, tok := range f.Tokens() {
			secret := tok
			if i := strings.IndexByte(tok, ';'); i > 0 {
				secret = tok[:i] // a Copilot token's id part alone is secret enough
			}
			if strings.Contains(text, secret) {
				t.Fatalf("%s shows a token (%s…)", where, tok[:8])
			}
		}
		if strings.Contains(text, "ghdev_") {
			t.Fatalf("%s shows a device code", where)
		}
	}
}

// The device flow through the admin API: GitHub is polled no sooner than the interval, slow_down
// lengthens it, and the approved account becomes copilot-1 (the GitHub login only as the
// account's detail); the same GitHub user again signs the same connection in (200).
func TestCopilotSignInThroughTheAPI(t *testing.T) {
	e, f, _ := copilotSetup(t)
	start := e.MustAPI("POST", "/api/oauth/copilot/device", nil, 200)
	user, flow := start["user_code"].(string), start["flow"]
	if start["verification_url"] != "https://github.com/login/device" || start["interval"] != 5.0 || user == "" || flow == "" {
		t.Fatalf("start %v", start)
	}
	poll := devicePoller(t, e, "copilot", flow)
	deviceIntervals(t, e, poll, f.Polls.Load, func() { f.SlowDownOn.Store(2) })
	f.Approve(user, "octocat", 583231)
	e.Clock.Advance(5 * time.Second)
	if poll(202); f.Polls.Load() != 2 {
		t.Fatal("polled GitHub within the slowed interval")
	}
	e.Clock.Advance(5 * time.Second)
	conn := poll(201)
	account, _ := conn["account"].(map[string]any)
	if conn["name"] != "copilot-1" || conn["auth_type"] != "oauth" || account["email"] != "octocat" {
		t.Fatalf("connection %v", conn)
	}
	if f.Exchanges.Load() != 1 {
		t.Fatalf("%d Copilot token exchanges at sign-in, want 1 (the entitlement check)", f.Exchanges.Load())
	}
	poll(404) // used once

	// The same GitHub user again: 200, the same connection.
	again := e.MustAPI("POST", "/api/oauth/copilot/device", map[string]any{"provider": "copilot"}, 200)
	f.Approve(again["user_code"].(string), "octocat", 583231)
	e.Clock.Advance(5 * time.Second)
	same := e.MustAPI("POST", "/api/oauth/copilot/device/poll", map[string]any{"flow": again["flow"]}, 200)
	if same["id"] != conn["id"] || len(e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any)) != 1 {
		t.Fatalf("signing in again: %v", same)
	}
	// A refusal ends the flow with GitHub's words.
	denied := e.MustAPI("POST", "/api/oauth/copilot/device", nil, 200)
	f.Deny(denied["user_code"].(string))
	e.Clock.Advance(5 * time.Second)
	if out := e.MustAPI("POST", "/api/oauth/copilot/device/poll", map[string]any{"flow": denied["flow"]}, 403); !strings.Contains(fmt.Sprint(out), "denied") {
		t.Fatalf("denied: %v", out)
	}
	e.MustAPI("POST", "/api/oauth/copilot/device", map[string]any{"provider": "anthropic"}, 422)
	noTokenAnywhere(t, e, f, fmt.Sprint(start), fmt.Sprint(conn), fmt.Sprint(same))
}

// A chat completions client and a messages client reach copilot/<model> with the account's
// Copilot token and the Copilot Chat headers; the models come from Copilot's own list.
func TestCopilotServesClients(t *testing.T) {
	e, f, key := copilotSetup(t)
	e.AddCopilotAccount(f, "", "octocat", 1)
	e.WaitModels(key, "copilot/gpt-4.1")
	if models := strings.Join(e.ListModels(key), " "); !strings.Contains(models, "copilot/claude-sonnet-4") {
		t.Fatalf("models %s", models)
	}

	token := copilotChatOK(e, f, key)
	req := f.ChatRequests()[0]
	for k, want := range map[string]string{"Editor-Version": "vscode/1.104.1", "Copilot-Integration-Id": "vscode-chat",
		"Openai-Intent": "conversation-panel", "X-Initiator": "user", "Editor-Plugin-Version": "copilot-chat/0.31.0"} {
		if got := req.Header.Get(k); got != want {
			t.Fatalf("%s: %q, want %q", k, got, want)
		}
	}
	if f.CopilotLogin(token) != "octocat" || req.Header.Get("Copilot-Vision-Request") != "" || !strings.Contains(req.Body, `"model":"gpt-4.1"`) {
		t.Fatalf("chat call: bearer of %q, body %s", f.CopilotLogin(token), req.Body)
	}
	for k, v := range req.Header {
		if strings.Contains(strings.Join(v, " "), key) {
			t.Fatalf("the client key went upstream in %s", k)
		}
	}

	// Streamed.
	resp := e.Chat(context.Background(), key, `{"model":"copilot/gpt-4.1","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, `"content":"Hel"`) || !strings.Contains(body, "[DONE]") {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}
	// A messages client, translated to chat completions.
	resp = e.PostAnthropic("/v1/messages", key, `{"model":"copilot/claude-sonnet-4","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, `"type":"message"`) || !strings.Contains(body, "Hello there") {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}
	reqs := f.ChatRequests()
	if last := reqs[len(reqs)-1]; !strings.Contains(last.Body, `"model":"claude-sonnet-4"`) || last.Header.Get("x-api-key") != "" ||
		last.Header.Get("anthropic-version") != "" {
		t.Fatalf("translated call: %v %s", last.Header, last.Body)
	}
	// A tool's result makes the call the agent's; an image asks for vision.
	copilotChatPost(t, e, key, `{"model":"copilot/gpt-4.1","messages":[{"role":"user","content":"add"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"3"}]}`)
	if reqs = f.ChatRequests(); reqs[len(reqs)-1].Header.Get("X-Initiator") != "agent" {
		t.Fatal("a tool result was not sent as the agent's")
	}
	copilotChatPost(t, e, key, `{"model":"copilot/gpt-4.1","messages":[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`)
	if reqs = f.ChatRequests(); reqs[len(reqs)-1].Header.Get("Copilot-Vision-Request") != "true" {
		t.Fatal("an image without Copilot-Vision-Request")
	}
	if f.Exchanges.Load() != 1 {
		t.Fatalf("%d exchanges: the sign-in's token was not reused", f.Exchanges.Load())
	}
	noTokenAnywhere(t, e, f)
}

func copilotChatPost(t *testing.T, e *testenv.Env, key, body string) {
	t.Helper()
	resp := e.Chat(context.Background(), key, body)
	if b := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
}

// The Copilot token is reused until refresh_in has passed, then exchanged once (the request
// that found it due is not held up); a 401 from Copilot exchanges once more and the request
// succeeds.
func TestCopilotTokenLifecycle(t *testing.T) {
	e, f, key := copilotSetup(t)
	e.AddCopilotAccount(f, "", "octocat", 1)
	first := copilotChatOK(e, f, key)
	copilotChatOK(e, f, key)
	e.Clock.Advance(1499 * time.Second)
	if tok := copilotChatOK(e, f, key); tok != first || f.Exchanges.Load() != 1 {
		t.Fatalf("exchanged before refresh_in: %d exchanges", f.Exchanges.Load())
	}
	e.Clock.Advance(time.Second)
	if tok := copilotChatOK(e, f, key); tok != first {
		t.Fatal("the request that found the token due waited for a new one")
	}
	var second string
	e.Eventually("the new token in use", func() bool { second = copilotChatOK(e, f, key); return second != first })
	for range 5 {
		copilotChatOK(e, f, key)
	}
	if second == first || f.Exchanges.Load() != 2 {
		t.Fatalf("after refresh_in: new token %v, %d exchanges, want 2", second != first, f.Exchanges.Load())
	}

	// Copilot refuses the token: one new exchange, the request goes through.
	f.RevokeCopilot(second)
	calls := len(f.ChatRequests())
	third := copilotChatOK(e, f, key)
	reqs := f.ChatRequests()
	if third == second || len(reqs) != calls+2 || bearerOf(reqs[calls]) != second || f.Exchanges.Load() != 3 {
		t.Fatalf("after a 401: %d calls, %d exchanges", len(reqs)-calls, f.Exchanges.Load())
	}
	noTokenAnywhere(t, e, f)
}

// An account without Copilot cannot sign in (GitHub's words, nothing saved); one that loses
// Copilot later becomes terminal at its next exchange and its requests fail over.
func TestCopilotNotEntitled(t *testing.T) {
	e, f, key := copilotSetup(t)
	f.SetEntitled("nocopilot", false)
	start := e.MustAPI("POST", "/api/oauth/copilot/device", nil, 200)
	f.Approve(start["user_code"].(string), "nocopilot", 9)
	e.Clock.Advance(5 * time.Second)
	out := e.MustAPI("POST", "/api/oauth/copilot/device/poll", map[string]any{"flow": start["flow"]}, 403)
	if text := fmt.Sprint(out); !strings.Contains(text, "not authorized to use Copilot") || strings.Contains(text, "gho_") {
		t.Fatalf("sign-in without Copilot: %v", out)
	}
	if items := e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any); len(items) != 0 {
		t.Fatalf("%d connections saved", len(items))
	}

	alice := e.AddCopilotAccount(f, "", "alice", 1)
	bob := e.AddCopilotAccount(f, "", "bob", 2)
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", bob), map[string]any{"priority": 10}, 200)
	if tok := copilotChatOK(e, f, key); f.CopilotLogin(tok) != "alice" {
		t.Fatalf("served by %s, want alice first", f.CopilotLogin(tok))
	}
	f.SetEntitled("alice", false)
	e.Clock.Advance(31 * time.Minute) // both Copilot tokens expired: the next request exchanges
	if tok := copilotChatOK(e, f, key); f.CopilotLogin(tok) != "bob" {
		t.Fatalf("served by %s, want bob after alice lost Copilot", f.CopilotLogin(tok))
	}
	st := connState(e, alice)
	if st["status"] != "expired" || !strings.Contains(fmt.Sprint(st["last_error"]), "not authorized to use Copilot") {
		t.Fatalf("alice's state %v", st)
	}
	if st := connState(e, bob); st["status"] != "active" {
		t.Fatalf("bob's state %v", st)
	}
	if tok := copilotChatOK(e, f, key); f.CopilotLogin(tok) != "bob" {
		t.Fatal("the terminal account served")
	}
	noTokenAnywhere(t, e, f, fmt.Sprint(out))
}
