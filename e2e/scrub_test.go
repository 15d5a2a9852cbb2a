package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// An upstream 400 that quotes the connection's key ("Invalid request with key sk-…") is relayed
// without it: the client's answer, the state API, the log and the request log never hold the
// key, whether it is shaped like a provider key or is any other string.
func TestUpstream400QuotingTheKeyIsScrubbed(t *testing.T) {
	for _, secret := range []string{"sk-proj-SECRET0123456789abcdef", "local.vllm.token.0042"} {
		t.Run(secret[:8], func(t *testing.T) {
			up := testenv.NewFakeUpstream(t, testenv.Status(400, nil,
				`{"error":{"message":"Invalid request with key `+secret+`","type":"invalid_request_error"}}`))
			e := testenv.New(t)
			e.AddProvider("up", up.URL+"/v1")
			e.AddConnection("up", "main", secret, 0)
			key := e.NewKey()
			e.WaitModels(key, "up/gpt-test")
			r := e.Chat(context.Background(), key, testenv.ChatBody)
			body := testenv.ReadAll(t, r)
			if r.StatusCode != 400 || !strings.Contains(body, "Invalid request with key [redacted]") {
				t.Fatalf("client: %d %s", r.StatusCode, body)
			}
			state := e.MustAPI("GET", "/api/resilience/state", nil, 200)
			logged := requestLog(t, e, "?surface=/v1/chat/completions")
			if len(logged) != 1 || logged[0].Status != 400 {
				t.Fatalf("request log: %+v", logged)
			}
			detail := e.MustAPI("GET", fmt.Sprintf("/api/requests/%d", logged[0].ID), nil, 200)
			for what, text := range map[string]string{"client answer": body, "state": fmt.Sprint(state), "log": e.Logs.String(),
				"request log": fmt.Sprint(logged), "request detail": fmt.Sprint(detail)} {
				if strings.Contains(text, secret) {
					t.Errorf("the key reached the %s", what)
				}
			}
		})
	}
}

// A stream that sends a good delta and then an error event quoting the key reaches the client
// without the key: in OpenAI's format (an error object as data) and in Anthropic's (event: error).
func TestStreamErrorEventQuotingTheKeyIsScrubbed(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		const secret = "sk-proj-STREAM0123456789abcdef"
		up := testenv.NewFakeUpstream(t, sseThenError(testenv.SSEChunks[1],
			`data: {"error":{"message":"Invalid request with key `+secret+`","type":"invalid_request_error"}}`))
		e := testenv.New(t)
		e.AddProvider("up", up.URL+"/v1")
		e.AddConnection("up", "main", secret, 0)
		key := e.NewKey()
		e.WaitModels(key, "up/gpt-test")
		r := e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		got := testenv.ReadAll(t, r)
		if r.StatusCode != 200 || !strings.Contains(got, `"Hel"`) || !strings.Contains(got, "[redacted]") || strings.Contains(got, secret) {
			t.Fatalf("client stream: %d\n%s", r.StatusCode, got)
		}
		if strings.Contains(e.Logs.String(), secret) {
			t.Fatal("the key reached the log")
		}
	})
	t.Run("messages", func(t *testing.T) {
		const secret = "anthropic.plain.key.0042"
		up := testenv.NewFakeAnthropic(t, sseThenError(testenv.MessageEvents[0]+"\n\n"+testenv.MessageEvents[3],
			"event: error\ndata: "+`{"type":"error","error":{"type":"overloaded_error","message":"overloaded for `+secret+`"}}`))
		e := testenv.New(t)
		e.AddProviderOfType("ant", "anthropic-compatible", up.URL)
		e.AddConnection("ant", "main", secret, 0)
		key := e.NewKey()
		e.WaitModels(key, "ant/claude-test")
		r := e.PostAnthropic("/v1/messages", key, `{"model":"ant/claude-test","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
		got := testenv.ReadAll(t, r)
		if r.StatusCode != 200 || !strings.Contains(got, `"Hel"`) || !strings.Contains(got, "overloaded for [redacted]") || strings.Contains(got, secret) {
			t.Fatalf("client stream: %d\n%s", r.StatusCode, got)
		}
	})
}

// sseThenError streams the good events, then the error event, and ends.
func sseThenError(good, bad string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		io.WriteString(w, good+"\n\n")
		rc.Flush()
		io.WriteString(w, bad+"\n\n")
		rc.Flush()
	}
}

// An upstream that echoes a key it refuses in any form never gets it back out: a key shorter
// than the redaction's by-value minimum (removed where it stands as a word, while words that
// contain it stay), OpenAI's partly masked echo ("sk-abc*****wxyz") and a masked echo of a key of
// any other shape ("****0042"). Neither the client, the log, the state API nor the request log
// holds what the upstream said of the key.
func TestShortAndMaskedKeyEchoesAreScrubbed(t *testing.T) {
	cases := []struct {
		name, key, echo, leak string
		stays                 string // ordinary text around it that must survive
	}{
		{"short key", "q7z", "Invalid API key q7z; the q7zone setting is fine", "key q7z", "q7zone"},
		{"openai masked echo", "sk-proj-AbCdEf0123456789wxyz", "Incorrect API key provided: sk-proj-************************wxyz. You can find your API key at https://platform.openai.com/account/api-keys.",
			"********wxyz", "You can find your API key"},
		{"masked echo of another shape", "local.vllm.token.0042", "Authentication Fails, Your api key: ****0042 is invalid", "****0042", "is invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A 403 is relayed with the upstream's words (a 401 would make the connection
			// expired and the client read the gateway's own message instead).
			up := testenv.NewFakeUpstream(t, testenv.Status(403, nil, `{"error":{"message":"`+c.echo+`","type":"invalid_request_error"}}`))
			e := testenv.New(t)
			e.AddProvider("up", up.URL+"/v1")
			e.AddConnection("up", "main", c.key, 0)
			key := e.NewKey()
			e.WaitModels(key, "up/gpt-test")
			r := e.Chat(context.Background(), key, testenv.ChatBody)
			body := testenv.ReadAll(t, r)
			if r.StatusCode != 403 || !strings.Contains(body, "[redacted]") || !strings.Contains(body, c.stays) {
				t.Fatalf("client: %d %s", r.StatusCode, body)
			}
			logged := requestLog(t, e, "?surface=/v1/chat/completions")
			if len(logged) != 1 || !strings.Contains(logged[0].Error, "[redacted]") {
				t.Fatalf("request log: %+v", logged)
			}
			detail := e.MustAPI("GET", fmt.Sprintf("/api/requests/%d", logged[0].ID), nil, 200)
			state := e.MustAPI("GET", "/api/resilience/state", nil, 200)
			for what, text := range map[string]string{"client answer": body, "log": e.Logs.String(), "state": fmt.Sprint(state),
				"request log": fmt.Sprint(logged), "request detail": fmt.Sprint(detail)} {
				if strings.Contains(text, c.leak) || c.key != "q7z" && strings.Contains(text, c.key) {
					t.Errorf("the %s holds the key's echo: %s", what, text)
				}
			}
		})
	}
}
