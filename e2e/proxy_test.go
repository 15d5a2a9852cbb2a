package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func TestChatNonStreamingPassesThrough(t *testing.T) {
	e, up, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	resp := e.Chat(context.Background(), key, `{"model":"up/gpt-test","messages":[{"role":"user","content":"hi"}]}`)
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != 200 || body != testenv.CompletionJSON {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	reqs := up.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("upstream saw %d requests", len(reqs))
	}
	var sent map[string]any
	json.Unmarshal([]byte(reqs[0].Body), &sent)
	if sent["model"] != "gpt-test" {
		t.Errorf("upstream model = %v, want the provider's own name", sent["model"])
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-upstream-secret-1" {
		t.Errorf("upstream auth = %q", got)
	}
	if strings.Contains(reqs[0].Header.Get("Authorization"), key) {
		t.Error("client key leaked upstream")
	}
}

func TestChatStreamingRelaysEveryEvent(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.SSEAnswer(testenv.SSEChunks, -1))
	resp := e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() != "" {
			got = append(got, sc.Text())
		}
	}
	if strings.Join(got, "\n") != strings.Join(testenv.SSEChunks, "\n") {
		t.Fatalf("events differ:\n%s", strings.Join(got, "\n"))
	}
}

// Events longer than the gateway's stream read buffer (a first event with a long preamble, a
// tool call's arguments in one delta, a last event carrying the whole output) arrive whole and
// in order, each in one piece, interleaved with short ones.
func TestLongStreamEventsArriveWhole(t *testing.T) {
	long := func(i, n int) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` +
			strings.Repeat(string(rune('a'+i)), n) + `"},"finish_reason":null}]}`
	}
	events := []string{long(0, 5000), long(1, 10), long(2, 1023), long(3, 1024), long(4, 1025), long(5, 70000), long(6, 3)}
	events = append(events, "data: [DONE]")
	e, _, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			io.WriteString(w, ev+"\n\n")
			w.(http.Flusher).Flush()
		}
	})
	resp := e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
	body := testenv.ReadAll(t, resp)
	if want := strings.Join(events, "\n\n") + "\n\n"; body != want {
		t.Fatalf("the stream changed on the way: %d bytes, want %d", len(body), len(want))
	}
}

func TestTruncatedStreamEndsWithStreamIncomplete(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.SSEAnswer(testenv.SSEChunks, 2))
	resp := e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
	body := testenv.ReadAll(t, resp)
	if !strings.Contains(body, testenv.SSEChunks[1]) {
		t.Fatalf("received events were not relayed: %q", body)
	}
	if !strings.HasSuffix(strings.TrimSpace(body), `"code":"stream_incomplete","param":null}}`) {
		t.Fatalf("stream does not end with stream_incomplete: %q", body)
	}
	if strings.Contains(body, "[DONE]") {
		t.Fatal("an incomplete stream must not claim [DONE]")
	}
}

func TestUpstream500IsOpenAIError(t *testing.T) {
	e, _, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>boom</html>", http.StatusInternalServerError)
	})
	resp := e.Chat(context.Background(), key, `{"model":"up/gpt-test","messages":[]}`)
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal([]byte(testenv.ReadAll(t, resp)), &body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 || body.Error.Message == "" || body.Error.Type == "" || body.Error.Code == "" {
		t.Fatalf("status %d body %+v", resp.StatusCode, body)
	}
}

func TestClientCancelReachesUpstream(t *testing.T) {
	started := make(chan struct{})
	canceled := make(chan struct{})
	e, _, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(canceled)
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.Base+"/v1/chat/completions",
		strings.NewReader(`{"model":"up/gpt-test","messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request should have been canceled")
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream never saw the cancel")
	}
}

func TestProxyRejectsBadRequests(t *testing.T) {
	e, up, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	// A provider forwards models it does not list unless told otherwise; this one refuses them.
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("up")), map[string]any{"listed_models_only": true}, 200)
	big := `{"model":"up/gpt-test","messages":[{"role":"user","content":"` + strings.Repeat("x", 33<<20) + `"}]}`
	cases := []struct {
		name   string
		key    string
		header string
		body   string
		status int
		code   string
		text   string
	}{
		{"too large", key, "", big, 413, "request_too_large", ""},
		{"malformed json", key, "", `{"model":`, 400, "invalid_request", "not valid JSON"},
		{"not an object", key, "", `[1,2]`, 400, "invalid_request", ""},
		{"missing model", key, "", `{"messages":[]}`, 400, "invalid_request", "model"},
		{"no key", "", "", `{"model":"up/gpt-test"}`, 401, "missing_api_key", ""},
		{"wrong key", "sk-sy-wrong", "", `{"model":"up/gpt-test"}`, 401, "invalid_api_key", ""},
		{"unknown provider", key, "", `{"model":"nope/gpt-test"}`, 404, "model_not_found", "nope/gpt-test"},
		{"unlisted model, listed models only", key, "", `{"model":"up/gpt-missing"}`, 404, "model_not_found", "up/gpt-missing"},
		{"x-api-key works", key, "x-api-key", `{"model":"up/gpt-test","messages":[]}`, 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.Base+"/v1/chat/completions", strings.NewReader(c.body))
			if c.key != "" {
				if c.header == "x-api-key" {
					req.Header.Set("x-api-key", c.key)
				} else {
					req.Header.Set("Authorization", "Bearer "+c.key)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := testenv.ReadAll(t, resp)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.code != "" && !strings.Contains(body, `"code":"`+c.code+`"`) {
				t.Errorf("body lacks code %s: %s", c.code, body)
			}
			if c.text != "" && !strings.Contains(body, c.text) {
				t.Errorf("body lacks %q: %s", c.text, body)
			}
		})
	}
	if n := len(up.ChatRequests()); n != 1 {
		t.Errorf("only the valid request may reach the upstream; it saw %d", n)
	}
}

func TestConnectionsSpreadByPriorityThenRoundRobin(t *testing.T) {
	e, up, key, _ := testenv.SetupConns(t, testenv.JSONAnswer(testenv.CompletionJSON),
		testenv.UpConn{Name: "a", Key: "sk-a", Priority: 0}, testenv.UpConn{Name: "b", Key: "sk-b", Priority: 0}, testenv.UpConn{Name: "backup", Key: "sk-backup", Priority: 5})
	for i := 0; i < 6; i++ {
		testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"up/gpt-test","messages":[]}`))
	}
	count := map[string]int{}
	for _, r := range up.ChatRequests() {
		count[r.Header.Get("Authorization")]++
	}
	if count["Bearer sk-a"] != 3 || count["Bearer sk-b"] != 3 || count["Bearer sk-backup"] != 0 {
		t.Fatalf("distribution %v", count)
	}
}

func TestOpenAISDKThroughGateway(t *testing.T) {
	e, _, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string
			Stream bool
		}
		json.NewDecoder(r.Body).Decode(&req)
		if req.Model == "unknown" {
			testenv.Status(404, nil, `{"error":{"message":"The model unknown does not exist","type":"invalid_request_error","code":"model_not_found"}}`)(w, r)
			return
		}
		if req.Stream {
			testenv.SSEAnswer(testenv.SSEChunks, -1)(w, r)
			return
		}
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	})
	client := openai.NewClient(option.WithBaseURL(e.Base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "up/gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	c, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "Hello there" {
		t.Fatalf("content %q", c.Choices[0].Message.Content)
	}
	acc := streamChat(t, client, ctx, params)
	if acc.Choices[0].Message.Content != "Hello" {
		t.Fatalf("streamed content %q", acc.Choices[0].Message.Content)
	}
	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "up/gpt-test" {
		t.Fatalf("models %+v", page.Data)
	}
	// An upstream failure reaches the SDK as a typed API error.
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "up/unknown",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var apiErr *openai.Error
	if !errorsAs(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("want a 404 API error, got %v", err)
	}
}
