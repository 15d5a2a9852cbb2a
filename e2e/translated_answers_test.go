package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// answerText is the text an upstream answers to the tag a request carries: the tag repeated to a
// length that depends on it (from under 1 KB to about 60 KB), so translated answers of many sizes
// go through the gateway's reused answer buffers at once.
func answerText(tag string) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(tag, "tag-"))
	return strings.Repeat(tag+" \"quoted\" ", 40+(n*997)%4000)
}

// lastText is the text of the last message of a chat or messages request (a string, or the text
// of its first part).
func lastText(body []byte) string {
	c := gjson.GetBytes(body, "messages.@reverse.0.content")
	if c.IsArray() {
		return c.Get("0.text").String()
	}
	return c.String()
}

// TestTranslatedAnswersKeepTheirOwnBytes sends many translated requests at once, every one with
// its own answer of its own size, over every buffered translation (Responses and messages to a
// chat upstream, chat and Responses to an Anthropic one): each client gets exactly its answer.
func TestTranslatedAnswersKeepTheirOwnBytes(t *testing.T) {
	chat := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		text, _ := json.Marshal(answerText(lastText(b)))
		testenv.JSONAnswer(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":`+string(text)+`},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`)(w, r)
	}
	messages := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		text, _ := json.Marshal(answerText(lastText(b)))
		testenv.JSONAnswer(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":`+
			string(text)+`}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":5}}`)(w, r)
	}
	e, key := gatewayWith(t, messages, chat)

	type route struct {
		name, path, model string
		body              func(tag string) string
		text              string // where the answer text is
	}
	routes := []route{
		{"responses→chat", "/v1/responses", "up/gpt-test", func(tag string) string { return `{"model":"up/gpt-test","input":"` + tag + `"}` }, "output.0.content.0.text"},
		{"messages→chat", "/v1/messages", "up/gpt-test", func(tag string) string {
			return `{"model":"up/gpt-test","max_tokens":100,"messages":[{"role":"user","content":"` + tag + `"}]}`
		}, "content.0.text"},
		{"chat→messages", "/v1/chat/completions", "anthropic/claude-test", func(tag string) string {
			return `{"model":"anthropic/claude-test","messages":[{"role":"user","content":"` + tag + `"}]}`
		}, "choices.0.message.content"},
		{"responses→messages", "/v1/responses", "anthropic/claude-test", func(tag string) string {
			return `{"model":"anthropic/claude-test","input":"` + tag + `"}`
		}, "output.0.content.0.text"},
	}
	const workers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan string, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := w*each + i
				rt := routes[n%len(routes)]
				tag := "tag-" + strconv.Itoa(n)
				header := map[string]string{}
				if rt.path == "/v1/messages" {
					header["anthropic-version"] = "2023-06-01"
				}
				resp := e.Post(context.Background(), rt.path, key, rt.body(tag), header)
				got := testenv.ReadAll(t, resp)
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("%s %s: status %d: %.300s", rt.name, tag, resp.StatusCode, got)
					continue
				}
				if text := gjson.Get(got, rt.text).String(); text != answerText(tag) {
					errs <- fmt.Sprintf("%s %s: answer of %d bytes is not its own (%.120s…)", rt.name, tag, len(text), text)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}
