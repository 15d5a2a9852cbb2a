package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// itemUpstream is a chat-completions upstream whose answers are a text and a tool call, each
// answer with ids of its own (chatcmpl-N, call_N) unless repeat is set: then every answer has
// the same ids and another text, as some self-hosted servers answer.
type itemUpstream struct {
	mu     sync.Mutex
	n      int
	repeat bool
}

func (u *itemUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.n++
	n, id := u.n, fmt.Sprint(u.n)
	if u.repeat {
		id = "same"
	}
	u.mu.Unlock()
	text := fmt.Sprintf("answer %d", n)
	call := `{"id":"call_` + id + `","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`
	if !gjson.GetBytes(body, "stream").Bool() {
		testenv.JSONAnswer(`{"id":"chatcmpl-`+id+`","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"`+text+`","tool_calls":[`+call+`]},"finish_reason":"tool_calls"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)(w, r)
		return
	}
	chunk := func(delta, finish string) string {
		return `data: {"id":"chatcmpl-` + id + `","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":` +
			delta + `,"finish_reason":` + finish + `}]}`
	}
	testenv.SSEAnswer([]string{
		chunk(`{"role":"assistant","content":"`+text+`"}`, "null"),
		chunk(`{"tool_calls":[`+strings.Replace(call, `{"id"`, `{"index":0,"id"`, 1)+`]}`, "null"),
		chunk(`{}`, `"tool_calls"`),
		`data: [DONE]`,
	}, -1)(w, r)
}

// TestTranslatedAnswerItemsByReference: a Responses client of a chat-completions provider that
// sends its earlier answers back as item references (the Vercel AI SDK with store on, its
// default) has them put back in their places: the upstream gets the whole conversation. Items
// are kept per client key, not for store: false; an id the gateway does not hold is the
// client's 400.
func TestTranslatedAnswerItemsByReference(t *testing.T) {
	u := &itemUpstream{}
	e, up, key := testenv.SetupOne(t, u.serve)
	ctx := context.Background()
	post := func(key, body string) (*http.Response, string) {
		t.Helper()
		r := e.Post(ctx, "/v1/responses", key, body, nil)
		return r, testenv.ReadAll(t, r)
	}
	// answer is a first turn's answer: its output items, from the whole answer or, streamed,
	// from response.completed.
	answer := func(key string, stream bool, extra string) []gjson.Result {
		t.Helper()
		body := `{"model":"up/gpt-test","input":"Weather in Paris?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]` +
			extra + fmt.Sprintf(`,"stream":%v}`, stream)
		if !stream {
			r, b := post(key, body)
			if r.StatusCode != 200 {
				t.Fatalf("first turn: %d %s", r.StatusCode, b)
			}
			return gjson.Get(b, "output").Array()
		}
		r := e.Post(ctx, "/v1/responses", key, body, nil)
		names, data := sseEvents(t, r)
		if r.StatusCode != 200 || names[len(names)-1] != "response.completed" {
			t.Fatalf("first turn: %d %v", r.StatusCode, names)
		}
		return gjson.Get(data[len(data)-1], "response.output").Array()
	}
	// next sends the second turn: the first turn's items by reference, the tool's result.
	next := func(key string, items []gjson.Result) (*http.Response, string) {
		t.Helper()
		input := `{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]}`
		callID := ""
		for _, it := range items {
			input += `,{"type":"item_reference","id":"` + it.Get("id").String() + `"}`
			if it.Get("type").String() == "function_call" {
				callID = it.Get("call_id").String()
			}
		}
		input += `,{"type":"function_call_output","call_id":"` + callID + `","output":"sunny"}`
		return post(key, `{"model":"up/gpt-test","input":[`+input+`]}`)
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			items := answer(key, stream, "")
			if len(items) != 2 || items[0].Get("type").String() != "message" || items[1].Get("type").String() != "function_call" {
				t.Fatalf("first turn's items %v", items)
			}
			text := items[0].Get("content.0.text").String()
			before := len(up.ChatRequests())
			r, b := next(key, items)
			if r.StatusCode != 200 {
				t.Fatalf("second turn: %d %s", r.StatusCode, b)
			}
			sent := up.ChatRequests()[before].Body
			msgs := gjson.Get(sent, "messages").Array()
			if len(msgs) != 3 || msgs[1].Get("role").String() != "assistant" || msgs[1].Get("content").String() != text ||
				msgs[1].Get("tool_calls.0.id").String() != items[1].Get("call_id").String() ||
				msgs[1].Get("tool_calls.0.function.name").String() != "get_weather" ||
				msgs[2].Get("role").String() != "tool" || msgs[2].Get("content").String() != "sunny" {
				t.Fatalf("the upstream got %s, want the user's question, the answer %q with its call, the call's result", sent, text)
			}
		})
	}

	t.Run("not held", func(t *testing.T) {
		notHeld := func(what string, r *http.Response, b string) {
			t.Helper()
			if r.StatusCode != 400 || gjson.Get(b, "error.code").String() != "item_not_found" ||
				gjson.Get(b, "error.type").String() != "invalid_request_error" || !strings.Contains(gjson.Get(b, "error.message").String(), "store: false") {
				t.Fatalf("%s: %d %s", what, r.StatusCode, b)
			}
		}
		before := len(up.ChatRequests())
		items := answer(key, false, "")
		other := e.NewKey()
		r, b := next(other, items)
		notHeld("another client key", r, b)
		if !strings.Contains(b, items[0].Get("id").String()) {
			t.Fatalf("the message does not name the item: %s", b)
		}
		r, b = next(key, answer(key, false, `,"store":false`))
		notHeld("an answer made with store: false", r, b)
		r, b = post(key, `{"model":"up/gpt-test","input":[{"type":"item_reference","id":"msg_never"}]}`)
		notHeld("an id never given", r, b)
		if got := len(up.ChatRequests()) - before; got != 2 {
			t.Fatalf("%d upstream calls, want the two first turns only", got)
		}
	})

	// The ids of kept answers are the gateway's own: an upstream that repeats its ids (or sends
	// none) does not make one answer's reference name another's item.
	t.Run("an upstream that repeats its ids", func(t *testing.T) {
		u.mu.Lock()
		u.repeat = true
		u.mu.Unlock()
		first, second := answer(key, false, ""), answer(key, true, "")
		if first[0].Get("id").String() == second[0].Get("id").String() || first[1].Get("id").String() == second[1].Get("id").String() ||
			first[1].Get("call_id").String() != second[1].Get("call_id").String() {
			t.Fatalf("items %v and %v: want ids of their own, the upstream's call id", first, second)
		}
		for _, items := range [][]gjson.Result{first, second} {
			before := len(up.ChatRequests())
			if r, b := next(key, items); r.StatusCode != 200 {
				t.Fatalf("second turn: %d %s", r.StatusCode, b)
			}
			sent := up.ChatRequests()[before].Body
			if got, want := gjson.Get(sent, "messages.1.content").String(), items[0].Get("content.0.text").String(); got != want {
				t.Fatalf("the reference put back %q, want %q", got, want)
			}
		}
	})
}

// Claude's thinking before a tool call, shown to a Responses client as a reasoning item without
// its signature (the client did not ask for encrypted reasoning), goes back to Anthropic signed
// when the client names the item: Anthropic wants the last assistant turn's thinking, signed,
// before its tool calls.
func TestReferencedThinkingKeepsItsSignature(t *testing.T) {
	ant := testenv.NewFakeAnthropic(t, func(w http.ResponseWriter, r *http.Request) {
		testenv.JSONAnswer(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[`+
			`{"type":"thinking","thinking":"Paris, so metric.","signature":"EqQBsig"},`+
			`{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],`+
			`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":3}}`)(w, r)
	})
	e := testenv.New(t)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	e.AddConnection("anthropic", "main", "sk-ant", 0)
	key := e.NewKey()
	e.WaitModels(key, "anthropic/claude-test")
	ctx := context.Background()
	tools := `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"reasoning":{"effort":"medium"}`
	r := e.Post(ctx, "/v1/responses", key, `{"model":"anthropic/claude-test","input":"Weather in Paris?",`+tools+`}`, nil)
	b := testenv.ReadAll(t, r)
	items := gjson.Get(b, "output").Array()
	if r.StatusCode != 200 || len(items) != 2 || items[0].Get("type").String() != "reasoning" || items[0].Get("encrypted_content").Exists() {
		t.Fatalf("first turn: %d %s; want a reasoning item without encrypted content, and the call", r.StatusCode, b)
	}
	input := `{"role":"user","content":"Weather in Paris?"},{"type":"item_reference","id":"` + items[0].Get("id").String() +
		`"},{"type":"item_reference","id":"` + items[1].Get("id").String() + `"},{"type":"function_call_output","call_id":"toolu_1","output":"sunny"}`
	r = e.Post(ctx, "/v1/responses", key, `{"model":"anthropic/claude-test","input":[`+input+`],`+tools+`}`, nil)
	if b := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("second turn: %d %s", r.StatusCode, b)
	}
	reqs := ant.MessageRequests()
	sent := reqs[len(reqs)-1].Body
	turn := gjson.Get(sent, "messages.1")
	if turn.Get("role").String() != "assistant" || turn.Get("content.0.type").String() != "thinking" ||
		turn.Get("content.0.signature").String() != "EqQBsig" || turn.Get("content.0.thinking").String() != "Paris, so metric." ||
		turn.Get("content.1.type").String() != "tool_use" || turn.Get("content.1.id").String() != "toolu_1" ||
		gjson.Get(sent, "messages.2.content.0.type").String() != "tool_result" {
		t.Fatalf("Anthropic got %s; want the signed thinking, the call, its result", sent)
	}
}

// The official SDK continues a conversation by previous_response_id; through a chat-completions
// provider the gateway keeps the conversation (the request that began it, each answer, each
// turn's new input) and sends the upstream the whole of it, turn after turn, whole or streamed.
// The answers say which response they continued and that they are stored. A response the
// gateway does not hold — another client key's, one never made — is the client's 400
// previous_response_not_found.
func TestTranslatedPreviousResponseID(t *testing.T) {
	u := &itemUpstream{repeat: true}
	e, up, key := testenv.SetupOne(t, u.serve)
	client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	ctx := context.Background()
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)
	params := responses.ResponseNewParams{Model: "up/gpt-test", Tools: []responses.ToolUnionParam{tool},
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")}}
	first := runResponse(t, client, ctx, params, false)
	var call responses.ResponseOutputItemUnion
	for _, it := range first.Output {
		if it.Type == "function_call" {
			call = it
		}
	}
	if call.CallID != "call_same" || !gjson.Get(first.RawJSON(), "store").Bool() || first.PreviousResponseID != "" {
		t.Fatalf("first answer: %s", first.RawJSON())
	}
	// The turns the upstream gets: role and content (or the call's id) of each message.
	sentTurns := func() []string {
		reqs := up.ChatRequests()
		var turns []string
		for _, m := range gjson.Get(reqs[len(reqs)-1].Body, "messages").Array() {
			turns = append(turns, m.Get("role").String()+":"+m.Get("content").String()+m.Get("tool_calls.0.id").String())
		}
		return turns
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	params.PreviousResponseID = openai.String(first.ID)
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}
	second := runResponse(t, client, ctx, params, true)
	want := []string{"system:Be brief.", "user:Weather in Paris?", "assistant:answer 1call_same", "tool:sunny"}
	if got := sentTurns(); !slices.Equal(got, want) {
		t.Fatalf("second turn: the upstream got %q, want %q", got, want)
	}
	if second.PreviousResponseID != first.ID || second.ID == first.ID || !gjson.Get(second.RawJSON(), "store").Bool() {
		t.Fatalf("second answer: %s", second.RawJSON())
	}
	params.PreviousResponseID = openai.String(second.ID)
	params.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("And tomorrow?")}
	third := runResponse(t, client, ctx, params, false)
	want = append(want, "assistant:answer 2call_same", "user:And tomorrow?")
	if got := sentTurns(); !slices.Equal(got, want) || third.PreviousResponseID != second.ID {
		t.Fatalf("third turn: the upstream got %q, want %q", got, want)
	}

	notHeld := func(what, key, prev string) {
		t.Helper()
		before := len(up.ChatRequests())
		r := e.Post(ctx, "/v1/responses", key, `{"model":"up/gpt-test","input":"Go on.","previous_response_id":"`+prev+`"}`, nil)
		b := testenv.ReadAll(t, r)
		if r.StatusCode != 400 || gjson.Get(b, "error.code").String() != "previous_response_not_found" ||
			!strings.Contains(gjson.Get(b, "error.message").String(), prev) || len(up.ChatRequests()) != before {
			t.Fatalf("%s: %d %s", what, r.StatusCode, b)
		}
	}
	notHeld("another client key's", e.NewKey(), third.ID)
	notHeld("one never made", key, "resp_never")

	// An answer to a request with store: false is not kept.
	r := e.Post(ctx, "/v1/responses", key, `{"model":"up/gpt-test","input":"Hi.","store":false}`, nil)
	b := testenv.ReadAll(t, r)
	if r.StatusCode != 200 || gjson.Get(b, "store").Bool() {
		t.Fatalf("store: false: %d %s", r.StatusCode, b)
	}
	notHeld("one made with store: false", key, gjson.Get(b, "id").String())
}
