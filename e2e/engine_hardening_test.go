package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// A field named twice is refused before anything is sent upstream: the gateway would check the
// first while the upstream ran the second.
func TestDuplicatedFieldsAreRefused(t *testing.T) {
	e, up, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	for _, body := range []string{
		`{"model":"up/gpt-test","model":"other-model","messages":[]}`,
		`{"model":"up/gpt-test","stream":false,"messages":[],"stream":true}`,
		`{"model":"up/gpt-test","stream":true,"stream_options":{"include_usage":false,"include_usage":true},"messages":[]}`,
	} {
		r := e.Chat(context.Background(), key, body)
		got := testenv.ReadAll(t, r)
		if r.StatusCode != 400 || gjson.Get(got, "error.code").String() != "duplicate_key" {
			t.Fatalf("%s: %d %s", body, r.StatusCode, got)
		}
	}
	r := e.PostAnthropic("/v1/messages", key, `{"model":"up/gpt-test","max_tokens":1,"model":"x","messages":[]}`, nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 400 || gjson.Get(got, "error.type").String() != "invalid_request_error" {
		t.Fatalf("messages: %d %s", r.StatusCode, got)
	}
	r = e.Post(context.Background(), "/v1/responses", key, `{"model":"up/gpt-test","input":"hi","model":"x"}`, nil)
	if got := testenv.ReadAll(t, r); r.StatusCode != 400 || gjson.Get(got, "error.code").String() != "duplicate_key" {
		t.Fatalf("responses: %d %s", r.StatusCode, got)
	}
	if n := len(up.ChatRequests()); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
}

// An upstream that echoes the connection's key in its error never gets it to the client, the
// state API or the log.
func TestUpstreamErrorsNeverCarryTheKey(t *testing.T) {
	const secret = "sk-a-SECRET-0123456789abcdef"
	e, _, key, ids := testenv.SetupConns(t, testenv.Status(500, nil, `{"error":{"message":"Invalid request with key `+secret+` and sk-proj-OTHER0123456789abc"}}`),
		testenv.UpConn{Name: "main", Key: secret, Priority: 0})
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 500 || !strings.Contains(body, "[redacted]") {
		t.Fatalf("client: %d %s", r.StatusCode, body)
	}
	state := e.MustAPI("GET", "/api/resilience/state", nil, 200)
	all := fmt.Sprint(state) + body + e.Logs.String()
	for _, s := range []string{secret, "sk-proj-OTHER0123456789abc"} {
		if strings.Contains(all, s) {
			t.Fatalf("a key reached a client answer, the state or the log: %s", s)
		}
	}
	if st := e.State(ids[0]); st.Status != "cooling" {
		t.Fatalf("state %+v", st)
	}
}

// An upstream 400 that quotes the connection's key ("Invalid request with key sk-…") is relayed
// without it: the client's answer, the state API, the log and the request log never hold the
// key, whether it is shaped like a provider key or is any other string.
func TestUpstream400QuotingTheKeyIsScrubbed(t *testing.T) {
	for _, secret := range []string{"sk-proj-SECRET0123456789abcdef", "local.vllm.token.0042"} {
		t.Run(secret[:8], func(t *testing.T) {
			e, _, key, _ := testenv.SetupConns(t, testenv.Status(400, nil,
				`{"error":{"message":"Invalid request with key `+secret+`","type":"invalid_request_error"}}`), testenv.UpConn{Name: "main", Key: secret, Priority: 0})
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
		e, _, key, _ := testenv.SetupConns(t, sseThenError(testenv.SSEChunks[1],
			`data: {"error":{"message":"Invalid request with key `+secret+`","type":"invalid_request_error"}}`), testenv.UpConn{Name: "main", Key: secret, Priority: 0})
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
			e, _, key, _ := testenv.SetupConns(t, testenv.Status(403, nil, `{"error":{"message":"`+c.echo+`","type":"invalid_request_error"}}`), testenv.UpConn{Name: "main", Key: c.key, Priority: 0})
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

// Success statuses with answers the request cannot have come from are the upstream's failures:
// they cool the connection and the request fails over.
func TestUpstreamProtocolFailuresFailOver(t *testing.T) {
	cases := []struct {
		name   string
		stream bool
		a      http.HandlerFunc
	}{
		{"json answer to a stream request", true, testenv.JSONAnswer(testenv.CompletionJSON)},
		{"html labelled as json", false, testenv.JSONAnswer(`<html>oops</html>`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			good := func(w http.ResponseWriter, r *http.Request) {
				if c.stream {
					testenv.SSEAnswer(testenv.SSEChunks, -1)(w, r)
					return
				}
				testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
			}
			e, _, key, a, _ := testenv.TwoKeys(t, testenv.ByKey(map[string]http.HandlerFunc{"sk-a": c.a, "sk-b": good}))
			body := testenv.ChatBody
			if c.stream {
				body = `{"model":"up/gpt-test","stream":true,"messages":[]}`
			}
			r := e.Chat(context.Background(), key, body)
			got := testenv.ReadAll(t, r)
			if r.StatusCode != 200 || c.stream != strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") ||
				c.stream != strings.Contains(got, "[DONE]") {
				t.Fatalf("client: %d %s %s", r.StatusCode, r.Header.Get("Content-Type"), got)
			}
			if s := e.State(a); s.Status != "cooling" || s.ErrorCode != 502 {
				t.Fatalf("connection a: %+v", s)
			}
		})
	}
	// With nowhere to fail over to, the client gets a 502 naming the broken protocol.
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(`<html>oops</html>`))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	got := testenv.ReadAll(t, r)
	if r.StatusCode != 502 || gjson.Get(got, "error.code").String() != "server_error" || !strings.Contains(got, "not the expected JSON") {
		t.Fatalf("single connection: %d %s", r.StatusCode, got)
	}
}

// A connection at its concurrency cap is passed over while a sibling has a free slot; requests
// wait in line only when every connection is full.
func TestSaturatedConnectionSpillsOver(t *testing.T) {
	g := newGated()
	e, up, key, a, _ := testenv.TwoKeys(t, g.handler)
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", a), map[string]any{"max_concurrent": 2}, 200)
	send := func(n int) *sync.WaitGroup {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
			}()
		}
		return &wg
	}
	perKey := func() map[string]int {
		out := map[string]int{}
		for _, r := range up.ChatRequests() {
			out[r.Header.Get("Authorization")]++
		}
		return out
	}
	wg := send(5)
	for i := 0; i < 5; i++ {
		<-g.arrived // all five reached an upstream: none waits in a line
	}
	if got := perKey(); got["Bearer sk-a"] != 2 || got["Bearer sk-b"] != 3 {
		t.Fatalf("distribution %v", got)
	}
	if q := e.QueueStats(a); q["waiting"].(float64) != 0 {
		t.Fatalf("a's queue %v", q)
	}
	close(g.release)
	wg.Wait()

	// Both full: the next request waits on the first connection, which the dashboard shows.
	g2 := newGated()
	e2, _, key2, a2, b2 := testenv.TwoKeys(t, g2.handler)
	e2.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", a2), map[string]any{"max_concurrent": 1}, 200)
	e2.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", b2), map[string]any{"max_concurrent": 1}, 200)
	var wg2 sync.WaitGroup
	one := func() {
		wg2.Add(1)
		go func() { defer wg2.Done(); testenv.ReadAll(t, e2.Chat(context.Background(), key2, testenv.ChatBody)) }()
	}
	one()
	<-g2.arrived // on a
	one()
	<-g2.arrived // on b
	one()
	e2.Eventually("the third request waits on a", func() bool { return e2.QueueStats(a2)["waiting"].(float64) == 1 })
	if q := e2.QueueStats(b2); q["waiting"].(float64) != 0 {
		t.Fatalf("b's queue %v", q)
	}
	close(g2.release)
	wg2.Wait()

}

// A provider with no enabled connection (none added, or the only one switched off) answers at
// once, on every surface and streamed or not, with a 404 no_executable_targets in the client's
// format that no client retries: x-should-retry: false, no Retry-After, a message naming the
// provider and where connections are added. Nothing is counted against the provider: once a
// connection is there, the next request is served.
func TestProviderWithoutConnectionIsANonRetryable404(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e := testenv.New(t)
	e.AddProvider("bare", up.URL+"/v1")
	e.AddProvider("off", up.URL+"/v1")
	off := e.AddConnection("off", "main", "sk-off", 0)
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", off), map[string]any{"enabled": false}, 200)
	key := e.NewKey()
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"enabled": true, "failure_threshold": 1}}, 200)
	for _, provider := range []string{"bare", "off"} {
		for _, s := range surfaces {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", provider, s.name, stream), func(t *testing.T) {
					body := s.body(provider + "/gpt-test")
					if stream {
						body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
					}
					r := e.Post(context.Background(), s.path, key, body, map[string]string{"anthropic-version": "2023-06-01"})
					got := testenv.ReadAll(t, r)
					if r.StatusCode != 404 || r.Header.Get("X-Should-Retry") != "false" || r.Header.Get("Retry-After") != "" {
						t.Fatalf("%d x-should-retry %q retry-after %q: %s", r.StatusCode, r.Header.Get("X-Should-Retry"), r.Header.Get("Retry-After"), got)
					}
					checkShape(t, s.name, got)
					msg := gjson.Get(got, "error.message").String()
					if !strings.Contains(msg, "provider "+provider+" has no enabled connection") || !strings.Contains(msg, "Providers & Connections") {
						t.Fatalf("message %q", msg)
					}
					if s.name == "messages" {
						if typ := gjson.Get(got, "error.type").String(); typ != "not_found_error" {
							t.Fatalf("type %s", typ)
						}
					} else if code := gjson.Get(got, "error.code").String(); code != "no_executable_targets" {
						t.Fatalf("code %s", code)
					}
				})
			}
		}
	}
	if len(up.ChatRequests()) != 0 {
		t.Fatal("an upstream was called")
	}
	if b := e.ProviderStatus("bare")["breaker"]; b != "closed" {
		t.Fatalf("the breaker counted it: %v", b)
	}
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", off), map[string]any{"enabled": true}, 200)
	if r := e.Chat(context.Background(), key, `{"model":"off/gpt-test","messages":[]}`); r.StatusCode != 200 {
		t.Fatalf("with its connection on again: %d %s", r.StatusCode, testenv.ReadAll(t, r))
	} else {
		testenv.ReadAll(t, r)
	}
}

// Out of credits is not bad credentials. Every connection out of credits: 429 insufficient_quota
// (OpenAI's type and code; Anthropic's billing_error), x-should-retry: false, Retry-After at the
// next re-probe. One out of credits and the other expired: still 429 at the re-probe (a later
// request can succeed then), naming both states; the Retry-After counts down with the clock.
// Every connection expired or banned: 401 connections_unusable.
func TestOutOfCreditsIsNotBadCredentials(t *testing.T) {
	e, _, key, a, b := testenv.TwoKeys(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-a": testenv.Status(402, nil, `{"error":{"message":"Insufficient credits: top up to continue","type":"insufficient_credits"}}`),
		"sk-b": testenv.Status(401, nil, `{"error":{"message":"key revoked"}}`),
	}))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	check := func(name string, r *http.Response, status int, typ, code, anthropic, retryAfter, words string) {
		t.Helper()
		got := testenv.ReadAll(t, r)
		if r.StatusCode != status || r.Header.Get("X-Should-Retry") != "false" || r.Header.Get("Retry-After") != retryAfter {
			t.Fatalf("%s: %d x-should-retry %q retry-after %q: %s", name, r.StatusCode, r.Header.Get("X-Should-Retry"), r.Header.Get("Retry-After"), got)
		}
		if anthropic != "" {
			if gjson.Get(got, "error.type").String() != anthropic {
				t.Fatalf("%s: %s", name, got)
			}
		} else if gjson.Get(got, "error.type").String() != typ || gjson.Get(got, "error.code").String() != code {
			t.Fatalf("%s: %s", name, got)
		}
		if !strings.Contains(gjson.Get(got, "error.message").String(), words) {
			t.Fatalf("%s: the message lacks %q: %s", name, words, got)
		}
	}
	// a runs out of credits, b's key is refused: one request tries both.
	check("mixed", e.Chat(context.Background(), key, testenv.ChatBody), 429, "insufficient_quota", "insufficient_quota", "", "1800",
		"(credits_exhausted, expired)")
	if sa, sb := e.State(a), e.State(b); sa.Status != "credits_exhausted" || sb.Status != "expired" {
		t.Fatalf("a %+v, b %+v", sa, sb)
	}
	e.Clock.Advance(10 * time.Minute)
	check("mixed, later, anthropic shape", e.PostAnthropic("/v1/messages", key, `{"model":"up/gpt-test","max_tokens":8,"messages":[]}`, nil),
		429, "", "", "billing_error", "1200", "out of credits")
	check("mixed, responses", e.Post(context.Background(), "/v1/responses", key, `{"model":"up/gpt-test","input":"hi"}`, nil),
		429, "insufficient_quota", "insufficient_quota", "", "1200", "the next check of the credits is in 1200 s")

	// Both out of credits.
	e.MustAPI("POST", fmt.Sprintf("/api/connections/%d/reset", b), map[string]any{"terminal": true}, 200)
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", b), map[string]any{"api_key": "sk-a"}, 200)
	check("all out of credits", e.Chat(context.Background(), key, testenv.ChatBody), 429, "insufficient_quota", "insufficient_quota", "", "1200",
		"(credits_exhausted)")

	// Both need new credentials: 401.
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", a), map[string]any{"api_key": "sk-b"}, 200)
	e.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", b), map[string]any{"api_key": "sk-b"}, 200)
	check("all expired", e.Chat(context.Background(), key, testenv.ChatBody), 401, "authentication_error", "connections_unusable", "", "",
		"reconnect")
}
