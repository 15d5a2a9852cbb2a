package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

// oddBody is a request body no encoder would write: odd spacing and key order, escapes where
// none are needed, a field no format knows, numbers as written. Passed through, the upstream
// must receive exactly these bytes.
func oddBody(model, rest string) string {
	return "{ \"zz_unknown\" : {\"keep\": [1, 2.50, -0e0]},\n\t\"model\":\"" + model + "\" ," + rest + " }"
}

// TestSameFormatTrafficIsByteExact: when client and upstream speak the same format, the gateway
// decodes only what routing needs; the upstream gets the client's bytes and the client the
// upstream's bytes, answer and stream alike, on all three surfaces.
func TestSameFormatTrafficIsByteExact(t *testing.T) {
	const chatAnswer = `{"id":"chatcmpl-x" , "object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"caf\u00e9 \/ ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5},"x_extra":true}`
	const msgAnswer = `{"id":"msg_x","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"caf\u00e9"}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2},"x_extra":{"a":1}}`
	const respAnswer = `{"id":"resp_x","object":"response","created_at":1,"status":"completed","model":"gpt-native","output":[{"type":"message",` +
		`"id":"m1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"caf\u00e9","annotations":[]}]}],` +
		`"usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5},"x_extra":null}`
	chatStream := []string{
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"caf\u00e9"},"finish_reason":null}],"x":1}`,
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
		`data: [DONE]`,
	}
	msgStream := []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_s\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}",
		"event: ping\ndata: {\"type\": \"ping\"}",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"caf\\u00e9\"}}",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}",
	}
	respStream := []string{
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_s\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-native\",\"output\":[]}}",
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m1\",\"output_index\":0,\"content_index\":0,\"delta\":\"caf\\u00e9\"}",
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_s\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"gpt-native\",\"output\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":2,\"total_tokens\":5}}}",
	}
	streamed := func(body []byte) bool { return strings.Contains(string(body), `"stream":true`) }
	oai := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b := readBody(r)
		if streamed(b) {
			testenv.SSEAnswer(chatStream, -1)(w, r)
			return
		}
		testenv.JSONAnswer(chatAnswer)(w, r)
	}, "gpt-test")
	ant := testenv.NewFakeAnthropic(t, func(w http.ResponseWriter, r *http.Request) {
		if streamed(readBody(r)) {
			testenv.SSEAnswer(msgStream, -1)(w, r)
			return
		}
		testenv.JSONAnswer(msgAnswer)(w, r)
	})
	native := testenv.NewFakeUpstream(t, testenv.JSONAnswer(chatAnswer), "gpt-native")
	native.ServeResponses(func(w http.ResponseWriter, r *http.Request) {
		if streamed(readBody(r)) {
			testenv.SSEAnswer(respStream, -1)(w, r)
			return
		}
		testenv.JSONAnswer(respAnswer)(w, r)
	})
	e := testenv.New(t)
	e.MustAPI("PATCH", "/api/providers/"+itoa(e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	e.AddConnection("anthropic", "main", "sk-ant", 0)
	e.AddProvider("up", oai.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
	e.AddProviderOfType("native", "openai", native.URL+"/v1")
	e.AddConnection("native", "main", "sk-native", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	e.WaitModels(key, "anthropic/claude-test")
	e.WaitModels(key, "native/gpt-native")

	joined := func(evs []string) string { return strings.Join(evs, "\n\n") + "\n\n" }
	cases := []struct {
		name, path, body, answer string
		header                   map[string]string
		sent                     func() []testenv.Recorded
	}{
		{"chat", "/v1/chat/completions", oddBody("gpt-test", `"messages":[{"role":"user","content":"caf\u00e9"}]`), chatAnswer, nil,
			oai.ChatRequests},
		{"chat stream", "/v1/chat/completions", oddBody("gpt-test", `"stream":true,"stream_options":{"include_usage":true},`+
			`"messages":[{"role":"user","content":"hi"}]`), joined(chatStream), nil, oai.ChatRequests},
		{"messages", "/v1/messages", oddBody("claude-test", `"max_tokens":16,"messages":[{"role":"user","content":"caf\u00e9"}]`),
			msgAnswer, map[string]string{"anthropic-version": "2023-06-01"}, ant.MessageRequests},
		{"messages stream", "/v1/messages", oddBody("claude-test", `"max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]`),
			joined(msgStream), map[string]string{"anthropic-version": "2023-06-01"}, ant.MessageRequests},
		{"responses", "/v1/responses", oddBody("gpt-native", `"input":"caf\u00e9"`), respAnswer, nil, native.Requests},
		{"responses stream", "/v1/responses", oddBody("gpt-native", `"stream":true,"input":"hi"`), joined(respStream), nil,
			native.Requests},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := e.Post(context.Background(), c.path, key, c.body, c.header)
			got := testenv.ReadAll(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			if got != c.answer {
				t.Fatalf("the client got other bytes than the upstream sent:\n got %q\nwant %q", got, c.answer)
			}
			sent := c.sent()
			if len(sent) == 0 || sent[len(sent)-1].Body != c.body {
				last := ""
				if len(sent) > 0 {
					last = sent[len(sent)-1].Body
				}
				t.Fatalf("the upstream got other bytes than the client sent:\n got %q\nwant %q", last, c.body)
			}
		})
	}
}

// readBody reads a request's body (the fakes keep it readable again for their handlers).
func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}
