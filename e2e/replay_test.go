package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// Reasoning a client sends back is verified by the upstream that reads it. A conversation that
// moved from one ChatGPT account to another (the first reached its usage wall) sends the second
// the first's sealed reasoning, which it cannot read: it refuses the whole request, and would
// refuse every later one of the conversation. The gateway sends the request once more, to the
// same account, without the replayed reasoning, and names the drop in the request log.
func TestReplayedReasoningAnotherAccountCannotReadIsDropped(t *testing.T) {
	e, auth, backend, key := chatgptGateway(t, true)
	ada := e.AddCodexAccount(auth, "codex", "acct-ada", "ada@example.com", "plus")
	bob := e.AddCodexAccount(auth, "codex", "acct-bob", "bob@example.com", "pro")
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", bob), map[string]any{"priority": 2}, 200) // ada first
	client := claudeCodeClient(e, key)

	params := anthropic.MessageNewParams{Model: chatgptModel, MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}}
	first, _ := sendClaude(t, client, params, true)
	sealed := false
	for _, b := range first.Content {
		if b.Signature == testenv.CodexSeal("acct-ada") || b.Data == testenv.CodexSeal("acct-ada") {
			sealed = true
		}
	}
	if !sealed || string(first.Model) != chatgptModel {
		t.Fatalf("the first answer carries no reasoning sealed for ada, or names another model: %s", first.RawJSON())
	}

	// Ada reaches her usage wall: the next turn goes to bob, with ada's reasoning in its history.
	backend.SetLimit("acct-ada", &testenv.CodexLimit{Plan: "plus", ResetsAt: e.Clock.Now().Add(time.Hour)})
	params.Messages = append(params.Messages, first.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Once more.")))
	second, hr := sendClaude(t, client, params, true)
	if second.StopReason != "end_turn" || len(second.Content) == 0 || second.Content[len(second.Content)-1].Text != testenv.CodexText {
		t.Fatalf("second turn: %s", second.RawJSON())
	}
	reqs := backend.Requests()
	if got := backend.AccountsCalled(); !slices.Equal(got, []string{"acct-ada", "acct-ada", "acct-bob", "acct-bob"}) {
		t.Fatalf("backend calls %q", got)
	}
	refused, resent := reqs[2].Body, reqs[3].Body
	if gjson.Get(refused, `input.#(type=="reasoning").encrypted_content`).String() != testenv.CodexSeal("acct-ada") {
		t.Fatalf("the refused call did not replay ada's reasoning: %s", refused)
	}
	if gjson.Get(resent, `input.#(type=="reasoning")`).Exists() ||
		gjson.Get(resent, "input.#").Int() != gjson.Get(refused, "input.#").Int()-1 ||
		!strings.Contains(resent, `"Once more."`) || !strings.Contains(resent, `"Say hello."`) {
		t.Fatalf("the call made again is not the refused one without the reasoning:\n%s\n%s", refused, resent)
	}

	row := loggedRow(e, hr)
	dropped, _ := row["dropped"].([]any)
	if row["status"] != 200.0 || !slices.Contains(dropped, any("replayed_reasoning")) {
		t.Fatalf("logged %v", row)
	}
	detail := e.MustAPI("GET", fmt.Sprintf("/api/requests/%v", row["id"]), nil, 200)
	var steps []string
	for _, st := range detail["attempts"].([]any) {
		s := st.(map[string]any)
		steps = append(steps, fmt.Sprint(s["connection_id"], " ", s["kind"], " ", s["status"], " ", s["reason"]))
	}
	// ada's wall, bob refusing the reasoning, bob answering.
	if want := []string{fmt.Sprint(ada, " first 429 quota_exhausted"), fmt.Sprint(bob, " failover 400 reasoning_replay_rejected"),
		fmt.Sprint(bob, " retry 200 ")}; !slices.Equal(steps, want) {
		t.Fatalf("attempts %q, want %q", steps, want)
	}
	if m := e.Metrics(); !strings.Contains(m, `field="replayed_reasoning"`) {
		t.Fatal("the drop is not counted in metrics")
	}

	// The conversation's next turn carries ada's reasoning again, and bob's own of the second
	// turn: bob refused ada's before, so it goes without it at once, and bob's stays.
	params.Messages = append(params.Messages, second.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And again.")))
	before := len(backend.Requests())
	third, hr := sendClaude(t, client, params, true)
	if third.StopReason != "end_turn" {
		t.Fatalf("third turn: %s", third.RawJSON())
	}
	reqs = backend.Requests()
	if got := gjson.Get(reqs[len(reqs)-1].Body, `input.#(type=="reasoning")#.encrypted_content`).Raw; len(reqs)-before != 1 ||
		got != `["`+testenv.CodexSeal("acct-bob")+`"]` {
		t.Fatalf("third turn: %d calls, the last with reasoning %s; want one call with bob's reasoning alone", len(reqs)-before, got)
	}
	if row := loggedRow(e, hr); !slices.Contains(row["dropped"].([]any), any("replayed_reasoning")) {
		t.Fatalf("third turn logged %v", row)
	}

	// A Codex CLI client's own reasoning items go back as they are, and the same holds: bob is
	// sent ada's reasoning no more.
	codexCLI := `{"model":"` + chatgptModel + `","stream":true,"store":false,"instructions":"Be brief.","input":[` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"Say hello."}]},` +
		`{"type":"reasoning","summary":[],"encrypted_content":"` + testenv.CodexSeal("acct-ada") + `"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello."}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"Once more."}]}]}`
	resp := e.Post(context.Background(), "/v1/responses", key, codexCLI, nil)
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "event: response.completed") {
		t.Fatalf("codex cli: %d %s", resp.StatusCode, body)
	}
	if reqs := backend.Requests(); len(reqs) != before+2 || gjson.Get(reqs[len(reqs)-1].Body, `input.#(type=="reasoning")`).Exists() {
		t.Fatalf("codex cli: %d calls, the last %s; want one, without ada's reasoning", len(reqs)-before-1, reqs[len(reqs)-1].Body)
	}

	// What goes first is the reasoning of earlier turns: bob's own of the current turn (since the
	// user's last words, across a tool call) stays. Another's in the current turn too: a second
	// refusal, and then none goes. (Reasoning of accounts bob has not refused before: carol's,
	// dave's, erin's.) What bob refused once is not sent to bob again.
	turn := func(earlier, current string) string {
		return `{"model":"` + chatgptModel + `","stream":true,"store":false,"instructions":"Be brief.","input":[` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"Say hello."}]},` +
			`{"type":"reasoning","summary":[],"encrypted_content":"` + testenv.CodexSeal(earlier) + `"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello."}]},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"Run it."}]},` +
			`{"type":"reasoning","summary":[],"encrypted_content":"` + testenv.CodexSeal(current) + `"},` +
			`{"type":"function_call","call_id":"call_1","name":"shell","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"call_1","output":"ok"}]}`
	}
	bobs := `["` + testenv.CodexSeal("acct-bob") + `"]`
	for _, c := range []struct {
		earlier, current string
		calls            int
		left             string
	}{
		{"acct-carol", "acct-bob", 2, bobs},  // carol's refused: the earlier turns' reasoning goes
		{"acct-erin", "acct-dave", 3, `[]`},  // erin's, then dave's refused: all goes
		{"acct-carol", "acct-dave", 1, `[]`}, // both refused before: left out at once
		{"acct-erin", "acct-bob", 1, bobs},
	} {
		before := len(backend.Requests())
		resp := e.Post(context.Background(), "/v1/responses", key, turn(c.earlier, c.current), nil)
		if body := testenv.ReadAll(t, resp); resp.StatusCode != http.StatusOK {
			t.Fatalf("reasoning from %s and %s: %d %s", c.earlier, c.current, resp.StatusCode, body)
		}
		reqs := backend.Requests()
		last := reqs[len(reqs)-1].Body
		if got := gjson.Get(last, `input.#(type=="reasoning")#.encrypted_content`).Raw; len(reqs)-before != c.calls || got != c.left {
			t.Fatalf("reasoning from %s and %s: %d calls, the last with reasoning %s; want %d, %s",
				c.earlier, c.current, len(reqs)-before, got, c.calls, c.left)
		}
	}
}

// The same for Anthropic: a thinking block whose signature the upstream refuses (written by
// another model a combo used before) is dropped, the request made once more on the same
// connection, and the rest of the body goes as the client sent it.
func TestReplayedThinkingAnthropicRefusesIsDropped(t *testing.T) {
	refuse := testenv.Status(400, nil, `{"type":"error","error":{"type":"invalid_request_error",`+
		`"message":"messages.1.content.0: Invalid `+"`signature`"+` in `+"`thinking`"+` block"}}`)
	answer := testenv.MessagesAnswer()
	e, up, key, _, _ := anthropicSetup(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"signature":"written-by-another-model"`)) {
			refuse(w, r)
			return
		}
		answer(w, r)
	})
	body := `{"model":"anthropic/claude-test","max_tokens":64,"thinking":{"type":"enabled","budget_tokens":32},"messages":[` +
		`{"role":"user","content":"Say hello."},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Greet.","signature":"written-by-another-model"},{"type":"text","text":"Hello."}]},` +
		`{"role":"user","content":"Once more."}]}`
	r := e.PostAnthropic("/v1/messages", key, body, nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 || got != testenv.MessageJSONNaming("anthropic/claude-test") {
		t.Fatalf("answer: %d %s", r.StatusCode, got)
	}
	sent := up.MessageRequests()
	want := strings.Replace(strings.Replace(body, `"anthropic/claude-test"`, `"claude-test"`, 1),
		`{"type":"thinking","thinking":"Greet.","signature":"written-by-another-model"},`, "", 1)
	if len(sent) != 2 || sent[1].Body != want || sent[1].Header.Get("x-api-key") != sent[0].Header.Get("x-api-key") {
		t.Fatalf("%d upstream calls; the last:\n got %s\nwant %s", len(sent), sent[len(sent)-1].Body, want)
	}
	if row := loggedRow(e, r); !slices.Contains(row["dropped"].([]any), any("replayed_reasoning")) {
		t.Fatalf("logged %v", row)
	}
	// The conversation's next request carries the block again: it goes without it at once.
	r = e.PostAnthropic("/v1/messages", key, body, nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 || got != testenv.MessageJSONNaming("anthropic/claude-test") {
		t.Fatalf("again: %d %s", r.StatusCode, got)
	}
	if sent := up.MessageRequests(); len(sent) != 3 || sent[2].Body != want {
		t.Fatalf("again: %d upstream calls in all, the last %s; want one more, without the block", len(sent), sent[len(sent)-1].Body)
	}
	// What the connection refused is kept in the store: after a restart it still goes without.
	e.Restart()
	r = e.PostAnthropic("/v1/messages", key, body, nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 200 || got != testenv.MessageJSONNaming("anthropic/claude-test") {
		t.Fatalf("after a restart: %d %s", r.StatusCode, got)
	}
	if sent := up.MessageRequests(); len(sent) != 4 || sent[3].Body != want {
		t.Fatalf("after a restart: %d upstream calls in all, the last %s; want one more, without the block", len(sent), sent[len(sent)-1].Body)
	}

	// A refusal of anything else is the client's answer, made once.
	e2, up2, key2, _, _ := anthropicSetup(t, testenv.Status(400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`))
	if r := e2.PostAnthropic("/v1/messages", key2, body, nil); r.StatusCode != 400 || len(up2.MessageRequests()) != 1 {
		t.Fatalf("another refusal: %d after %d calls", r.StatusCode, len(up2.MessageRequests()))
	}
}
