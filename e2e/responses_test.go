package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// nativeResponses is an upstream that serves the Responses API itself and plays the tool round:
// a function call (with a reasoning item when asked), then the answer.
func nativeResponses(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	items := gjson.GetBytes(body, "input").Array()
	answered := len(items) > 0 && items[len(items)-1].Get("type").String() == "function_call_output"
	var output []string
	if !answered && gjson.GetBytes(body, "reasoning.effort").Exists() {
		output = append(output, `{"type":"reasoning","id":"rs_n","summary":[{"type":"summary_text","text":"`+weatherThought+`"}]}`)
	}
	if answered {
		output = append(output, `{"type":"message","id":"msg_n","status":"completed","role":"assistant","content":[{"type":"output_text","text":"`+weatherAnswer+`","annotations":[]}]}`)
	} else {
		output = append(output, `{"type":"function_call","id":"fc_n","call_id":"call_n","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"}`)
	}
	resp := `{"id":"resp_native","object":"response","created_at":1,"status":"completed","model":"gpt-native","output":[` +
		strings.Join(output, ",") + `],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13}}`
	if !gjson.GetBytes(body, "stream").Bool() {
		testenv.JSONAnswer(resp)(w, r)
		return
	}
	seq := 0
	ev := func(typ, fields string) string {
		s := fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}", typ, typ, seq, fields)
		seq++
		return s
	}
	inProgress := strings.Replace(strings.Replace(resp, `"completed"`, `"in_progress"`, 1), strings.Join(output, ","), "", 1)
	events := []string{ev("response.created", `"response":`+inProgress), ev("response.in_progress", `"response":`+inProgress)}
	for i, item := range output {
		events = append(events, ev("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":%s`, i, item)))
		if strings.Contains(item, `"output_text"`) {
			events = append(events, ev("response.output_text.delta", fmt.Sprintf(`"item_id":"msg_n","output_index":%d,"content_index":0,"delta":%q`, i, weatherAnswer)))
		}
		events = append(events, ev("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, i, item)))
	}
	events = append(events, ev("response.completed", `"response":`+resp))
	testenv.SSEAnswer(events, -1)(w, r)
}

// responsesGateway adds to sdkGateway a native provider ("native", type openai, model
// gpt-native) whose upstream serves the Responses API.
func responsesGateway(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	e, key := sdkGateway(t)
	native := testenv.NewFakeUpstream(t, toolOpenAI, "gpt-native")
	native.ServeResponses(nativeResponses)
	e.AddProviderOfType("native", "openai", native.URL+"/v1")
	e.AddConnection("native", "main", "sk-native", 0)
	e.WaitModels(key, "native/gpt-native")
	return e, key
}

// TestResponsesSDKReachesEveryProvider drives the official OpenAI SDK's Responses API through a
// whole tool round with reasoning, buffered and streamed: natively to an OpenAI provider,
// translated to an OpenAI-compatible one and to an Anthropic one.
func TestResponsesSDKReachesEveryProvider(t *testing.T) {
	e, key := responsesGateway(t)
	client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	ctx := context.Background()
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)
	for _, model := range []string{"native/gpt-native", "up/gpt-test", "anthropic/claude-test"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", model, stream), func(t *testing.T) {
				params := responses.ResponseNewParams{Model: model, Tools: []responses.ToolUnionParam{tool},
					Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")},
					Reasoning: openai.ReasoningParam{Effort: openai.ReasoningEffortMedium}}
				first := runResponse(t, client, ctx, params, stream)
				var call responses.ResponseOutputItemUnion
				reasoned := false
				for _, it := range first.Output {
					switch it.Type {
					case "function_call":
						call = it
					case "reasoning":
						reasoned = len(it.Summary) == 1 && it.Summary[0].Text == weatherThought
					}
				}
				if call.Name != "get_weather" || gjson.Get(call.Arguments.OfString, "city").String() != "Paris" || call.CallID == "" || !reasoned {
					t.Fatalf("first answer: %s", first.RawJSON())
				}
				out := responses.ResponseInputItemParamOfFunctionCallOutput("18 °C")
				out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
					responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
					out}}
				final := runResponse(t, client, ctx, params, stream)
				if final.OutputText() != weatherAnswer || final.Status != "completed" || final.Usage.TotalTokens == 0 {
					t.Fatalf("final answer: %s", final.RawJSON())
				}
			})
		}
	}
}

// newResponse makes one Responses call without streaming.
func newResponse(t *testing.T, client openai.Client, ctx context.Context, params responses.ResponseNewParams) *responses.Response {
	t.Helper()
	r, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runResponse makes one Responses call; streamed, it checks the event sequence and returns the
// answer of response.completed.
func runResponse(t *testing.T, client openai.Client, ctx context.Context, params responses.ResponseNewParams, stream bool) *responses.Response {
	t.Helper()
	if !stream {
		return newResponse(t, client, ctx, params)
	}
	st := client.Responses.NewStreaming(ctx, params)
	var types []string
	var final *responses.Response
	next := int64(0)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != next {
			t.Fatalf("event %s has sequence number %d, want %d", ev.Type, ev.SequenceNumber, next)
		}
		next++
		types = append(types, ev.Type)
		if ev.Type == "response.completed" {
			r := ev.Response
			final = &r
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if final == nil || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Fatalf("events %v", types)
	}
	return final
}

// codexRequest is the shape of what Codex CLI sends on wire_api = "responses": instructions,
// developer and environment messages, its tools, reasoning with summaries, store off, streamed.
const codexRequest = `{"model":"%s","instructions":"You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI on a user's computer.",
"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>Filesystem sandboxing: workspace-write.</permissions instructions>"}]},
{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>"}]},
{"type":"message","role":"user","content":[{"type":"input_text","text":"What is the weather in Paris?"}]}],
"tools":[{"type":"function","name":"shell","description":"Runs a shell command and returns its output.","strict":false,"parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}},"workdir":{"type":"string"},"timeout_ms":{"type":"number"}},"required":["command"],"additionalProperties":false}},
{"type":"function","name":"get_weather","description":"Current weather","strict":false,"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
{"type":"web_search"}],
"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"medium","summary":"auto"},"store":false,"stream":true,
"include":["reasoning.encrypted_content"],"prompt_cache_key":"019a6c3e-7f3b-7d31-b0c4-4c9a8f6f2a11","text":{"verbosity":"medium"}}`

// Codex CLI's request, replayed as it sends it, gets a stream Codex accepts from every kind of
// provider: lifecycle events in order, numbered without gaps, items added before they are done,
// and response.completed with usage last.
func TestCodexRequestIsServed(t *testing.T) {
	e, key := responsesGateway(t)
	for _, model := range []string{"native/gpt-native", "up/gpt-test", "anthropic/claude-test"} {
		t.Run(model, func(t *testing.T) {
			r := e.Post(context.Background(), "/v1/responses", key, fmt.Sprintf(codexRequest, model), nil)
			names, data := sseEvents(t, r)
			if r.StatusCode != 200 || len(names) < 4 || names[0] != "response.created" || names[len(names)-1] != "response.completed" {
				t.Fatalf("%d events %v", r.StatusCode, names)
			}
			open := map[int64]bool{}
			for i, d := range data {
				if gjson.Get(d, "sequence_number").Int() != int64(i) || gjson.Get(d, "type").String() != names[i] {
					t.Fatalf("event %d: %s %s", i, names[i], d)
				}
				idx := gjson.Get(d, "output_index").Int()
				switch names[i] {
				case "response.output_item.added":
					open[idx] = true
				case "response.output_item.done":
					if !open[idx] {
						t.Fatalf("item %d done before it was added", idx)
					}
					delete(open, idx)
				}
			}
			last := data[len(data)-1]
			if len(open) != 0 || gjson.Get(last, "response.usage.total_tokens").Int() == 0 ||
				gjson.Get(last, `response.output.#(type=="function_call").name`).String() != "get_weather" {
				t.Fatalf("completed: %s (open items %v)", last, open)
			}
		})
	}
}

// Stored state — previous_response_id, a conversation, an earlier answer by item_reference (the
// Vercel AI SDK's way with store on) — needs a provider that keeps responses, or the gateway's
// own record of it: refused clearly, naming the field, the response or the item, when the
// request is translated and the gateway does not hold it (sent on, the turns it names would be
// lost without a word), passed on when it is native.
func TestPreviousResponseID(t *testing.T) {
	e, key := responsesGateway(t)
	// A previous response or an item the gateway does not hold (answer_items_test.go: those of
	// its own translated answers) is previous_response_not_found or item_not_found.
	for _, c := range []struct{ body, field, code string }{
		{`{"model":"%s","input":"hi","previous_response_id":"resp_1"}`, "resp_1", "previous_response_not_found"},
		{`{"model":"%s","input":"hi","conversation":{"id":"conv_1"}}`, "conversation", "unsupported_parameter"},
		{`{"model":"%s","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"item_reference","id":"msg_1"},` +
			`{"role":"user","content":[{"type":"input_text","text":"And then?"}]}]}`, "msg_1", "item_not_found"},
	} {
		r := e.Post(context.Background(), "/v1/responses", key, fmt.Sprintf(c.body, "up/gpt-test"), nil)
		body := testenv.ReadAll(t, r)
		if r.StatusCode != 400 || gjson.Get(body, "error.code").String() != c.code ||
			gjson.Get(body, "error.type").String() != "invalid_request_error" || !strings.Contains(gjson.Get(body, "error.message").String(), c.field) {
			t.Fatalf("translated, %s: %d %s", c.field, r.StatusCode, body)
		}
		r = e.Post(context.Background(), "/v1/responses", key, fmt.Sprintf(c.body, "native/gpt-native"), nil)
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(body, "object").String() != "response" {
			t.Fatalf("native, %s: %d %s", c.field, r.StatusCode, body)
		}
	}
}

// A translated Responses stream that breaks ends with an error event that continues the
// sequence, never silently.
func TestBrokenResponsesStreamEndsWithError(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.SSEAnswer(testenv.SSEChunks, 2))
	r := e.Post(context.Background(), "/v1/responses", key, `{"model":"up/gpt-test","input":"hi","stream":true}`, nil)
	names, data := sseEvents(t, r)
	last := data[len(data)-1]
	if names[len(names)-1] != "error" || gjson.Get(last, "code").String() != "stream_incomplete" ||
		gjson.Get(last, "sequence_number").Int() != int64(len(data)-1) {
		t.Fatalf("events %v %v", names, data)
	}
}

// A native Responses stream that breaks, whether the upstream ends its body early or drops the
// connection, ends with an error event that continues the sequence, on an openai provider and
// on an openai-compatible one that declares the Responses API; never silently.
func TestBrokenNativeResponsesStreamEndsWithError(t *testing.T) {
	events := []string{
		`event: response.created` + "\n" + `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_cut","object":"response","created_at":1,"status":"in_progress","model":"gpt-native","output":[]}}`,
		`event: response.output_item.added` + "\n" + `data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_cut","status":"in_progress","role":"assistant","content":[]}}`,
		`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_cut","output_index":0,"content_index":0,"delta":"It is"}`,
	}
	cuts := map[string]http.HandlerFunc{
		"body ends": testenv.SSEAnswer(events, -1),
		"connection drops": func(w http.ResponseWriter, r *http.Request) {
			testenv.SSEAnswer(events, -1)(w, r)
			io.WriteString(w, `event: response.output_text.delta`+"\n"+`data: {"type":"response.output_text.delta","sequ`)
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler) // the upstream's connection goes away mid-event
		},
	}
	for cut, h := range cuts {
		up := testenv.NewFakeUpstream(t, toolOpenAI, "gpt-native")
		up.ServeResponses(h)
		e := testenv.New(t)
		e.AddProviderOfType("native", "openai", up.URL+"/v1")
		e.AddConnection("native", "main", "sk-native", 0)
		e.MustAPI("POST", "/api/providers", map[string]any{"name": "vllm", "type": "openai-compatible",
			"base_url": up.URL + "/v1", "responses_api": true}, 201)
		e.AddConnection("vllm", "main", "sk-vllm", 0)
		key := e.NewKey()
		e.WaitModels(key, "native/gpt-native")
		e.WaitModels(key, "vllm/gpt-native")
		for _, model := range []string{"native/gpt-native", "vllm/gpt-native"} {
			t.Run(cut+"/"+model, func(t *testing.T) {
				before := len(up.ChatRequests())
				r := e.Post(context.Background(), "/v1/responses", key, `{"model":"`+model+`","input":"hi","stream":true}`, nil)
				names, data := sseEvents(t, r)
				if r.StatusCode != 200 || len(names) != len(events)+1 {
					t.Fatalf("%d events %v %v", r.StatusCode, names, data)
				}
				for i, d := range data[:len(events)] {
					if want := events[i][strings.Index(events[i], "data: ")+len("data: "):]; d != want {
						t.Fatalf("event %d changed on the way:\n got %s\nwant %s", i, d, want)
					}
				}
				checkStreamError(t, "responses", names, data, "stream_incomplete", "")
				if len(up.ChatRequests()) != before {
					t.Fatal("a native request went through chat completions")
				}
			})
		}
	}
}

// modelsGateway serves gpt-test and shared on provider "up", shared on "other" (so the bare
// name shared is ambiguous) and claude-test on the Anthropic provider.
func modelsGateway(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	ant := testenv.NewFakeAnthropic(t, testenv.MessagesAnswer())
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-test", "shared")
	other := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "shared")
	e := testenv.New(t)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	e.AddConnection("anthropic", "main", "sk-ant", 0)
	e.AddProvider("up", up.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
	e.AddProvider("other", other.URL+"/v1")
	e.AddConnection("other", "main", "sk-other", 0)
	key := e.NewKey()
	for _, m := range []string{"anthropic/claude-test", "up/gpt-test", "up/shared", "other/shared"} {
		e.WaitModels(key, m)
	}
	return e, key
}

// getModel asks GET /v1/models/{id}, in Anthropic's dialect when anthropic is set.
func getModel(t *testing.T, e *testenv.Env, key, id string, anthropic bool) (int, string) {
	t.Helper()
	st, _, body := testenv.Call(t, http.DefaultClient, "GET", e.Base+"/v1/models/"+id, "", clientHeader(key, anthropic))
	return st, body
}

// models.retrieve answers for every id routing accepts and /v1/models lists: provider/model
// (its slash escaped or not) and a bare name that one provider serves, in OpenAI's shape or,
// with anthropic-version, in Anthropic's. An unknown id is 404 and an ambiguous bare name the
// error routing gives it, each in the caller's shape.
func TestModelsRetrieve(t *testing.T) {
	e, key := modelsGateway(t)
	client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	ctx := context.Background()
	for _, c := range []struct{ id, owner string }{
		{"up/gpt-test", "up"}, {"gpt-test", "up"}, {"claude-test", "anthropic"}, {"anthropic/claude-test", "anthropic"},
	} {
		m, err := client.Models.Get(ctx, c.id)
		if err != nil || m.ID != c.id || m.OwnedBy != c.owner || m.Object != "model" || m.Created == 0 {
			t.Fatalf("openai retrieve %s: %+v %v", c.id, m, err)
		}
		// What retrieve finds, routing serves.
		r := e.Chat(ctx, key, `{"model":"`+c.id+`","messages":[{"role":"user","content":"hi"}]}`)
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
			t.Fatalf("chat with %s: %d %s", c.id, r.StatusCode, body)
		}
	}
	ant := anthropic.NewClient(option.WithBaseURL(e.Base), option.WithAPIKey(key), option.WithMaxRetries(0))
	for _, id := range []string{"claude-test", "anthropic/claude-test", "gpt-test"} {
		m, err := ant.Models.Get(ctx, id, anthropic.ModelGetParams{})
		if err != nil || m.ID != id || m.CreatedAt.IsZero() {
			t.Fatalf("anthropic retrieve %s: %+v %v", id, m, err)
		}
	}
	for _, id := range []string{"up/gpt-test", "up%2Fgpt-test", "gpt-test"} {
		status, body := getModel(t, e, key, id, true)
		created, err := time.Parse(time.RFC3339, gjson.Get(body, "created_at").String())
		if status != 200 || gjson.Get(body, "type").String() != "model" || gjson.Get(body, "display_name").String() != "gpt-test" ||
			err != nil || created.IsZero() || gjson.Get(body, "object").Exists() || gjson.Get(body, "owned_by").Exists() {
			t.Fatalf("anthropic shape of %s: %d %s", id, status, body)
		}
		status, body = getModel(t, e, key, id, false)
		if status != 200 || gjson.Get(body, "object").String() != "model" || gjson.Get(body, "owned_by").String() != "up" ||
			gjson.Get(body, "created").Int() == 0 || gjson.Get(body, "type").Exists() {
			t.Fatalf("openai shape of %s: %d %s", id, status, body)
		}
	}

	for _, c := range []struct {
		id, code, anthropicType string
		status                  int
		// forwarded: routing sends the name to its provider, which decides (a provider forwards
		// models it does not list); retrieve still knows only listed models.
		forwarded bool
	}{
		{"up/nope", "model_not_found", "not_found_error", 404, true},
		{"nope", "model_not_found", "not_found_error", 404, false},
		{"nobody/gpt-test", "model_not_found", "not_found_error", 404, false},
		{"shared", "ambiguous_model", "invalid_request_error", 400, false},
	} {
		status, body := getModel(t, e, key, c.id, false)
		if status != c.status || gjson.Get(body, "error.code").String() != c.code || !gjson.Get(body, "error.param").Exists() ||
			gjson.Get(body, "error.type").String() == "" || !strings.Contains(gjson.Get(body, "error.message").String(), c.id) {
			t.Fatalf("openai %s: %d %s", c.id, status, body)
		}
		status, body = getModel(t, e, key, c.id, true)
		if status != c.status || gjson.Get(body, "type").String() != "error" || gjson.Get(body, "error.type").String() != c.anthropicType ||
			!strings.Contains(gjson.Get(body, "error.message").String(), c.id) {
			t.Fatalf("anthropic %s: %d %s", c.id, status, body)
		}
		// Routing refuses the same names the same way, and forwards the unlisted model of a
		// known provider.
		r := e.Chat(ctx, key, `{"model":"`+c.id+`","messages":[{"role":"user","content":"hi"}]}`)
		body = testenv.ReadAll(t, r)
		if c.forwarded && r.StatusCode != 200 {
			t.Fatalf("chat with %s: %d %s, want it forwarded", c.id, r.StatusCode, body)
		}
		if !c.forwarded && (r.StatusCode != c.status || gjson.Get(body, "error.code").String() != c.code) {
			t.Fatalf("chat with %s: %d %s", c.id, r.StatusCode, body)
		}
	}
	if _, err := client.Models.Get(ctx, "up/nope"); err == nil {
		t.Fatal("an unknown model was found")
	}
}

// The Responses flag of an openai-compatible provider is set in the dashboard's provider form
// and in the API, and makes /v1/responses pass through.
func TestResponsesFlagOnTheProvider(t *testing.T) {
	up := testenv.NewFakeUpstream(t, toolOpenAI)
	up.ServeResponses(nativeResponses)
	e := testenv.New(t)
	c := e.Login()
	code, _ := testenv.Fetch(t, c, http.MethodPost, e.Base+"/providers", map[string][]string{"name": {"vllm"},
		"type": {"openai-compatible"}, "base_url": {up.URL + "/v1"}, "responses_api": {"true"}}, nil)
	if code != http.StatusOK {
		t.Fatalf("create: %d", code)
	}
	p := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", e.ProviderID("vllm")), nil, 200)
	if p["responses_api"] != true {
		t.Fatalf("provider %v", p)
	}
	e.AddConnection("vllm", "main", "sk-v", 0)
	key := e.NewKey()
	e.WaitModels(key, "vllm/gpt-test")
	r := e.Post(context.Background(), "/v1/responses", key, `{"model":"vllm/gpt-test","input":"hi"}`, nil)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(body, "id").String() != "resp_native" {
		t.Fatalf("native: %d %s", r.StatusCode, body)
	}
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("vllm")), map[string]any{"responses_api": false}, 200)
	r = e.Post(context.Background(), "/v1/responses", key, `{"model":"vllm/gpt-test","input":"hi"}`, nil)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(body, "id").String() == "resp_native" ||
		gjson.Get(body, "object").String() != "response" {
		t.Fatalf("translated: %d %s", r.StatusCode, body)
	}
}

// A WebSocket upgrade on /v1/responses is refused with 426, pointing the client at HTTP POST.
func TestResponsesWebSocketIsRefused(t *testing.T) {
	e, key := sdkGateway(t)
	req, _ := http.NewRequest("GET", e.Base+"/v1/responses", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := testenv.ReadAll(t, r)
	// 426 is what makes Codex fall back to HTTP POST at once.
	if r.StatusCode != 426 || r.Header.Get("Allow") != "POST" || gjson.Get(body, "error.code").String() != "websocket_unsupported" {
		t.Fatalf("%d %v %s", r.StatusCode, r.Header, body)
	}
	// A plain GET is a wrong method, not a refused upgrade.
	req, _ = http.NewRequest("GET", e.Base+"/v1/responses", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	r, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body = testenv.ReadAll(t, r)
	if r.StatusCode != 405 || r.Header.Get("Allow") != "POST" || gjson.Get(body, "error.code").String() != "websocket_unsupported" {
		t.Fatalf("plain GET: %d %v %s", r.StatusCode, r.Header, body)
	}
}

// A Responses answer made through translation says whether the gateway keeps it (answer items,
// answer_items_test.go): store: true unless the request said false. The whole answer, and the
// response objects of a stream's response.created and response.completed.
func TestTranslatedResponsesSayWhetherStored(t *testing.T) {
	e, _, key := testenv.SetupOne(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(string(mustRead(r)), `"stream":true`) {
			testenv.SSEAnswer(testenv.SSEChunks, -1)(w, r)
			return
		}
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	})
	for _, c := range []struct {
		store string
		want  gjson.Type
	}{{`,"store":true`, gjson.True}, {``, gjson.True}, {`,"store":false`, gjson.False}} {
		r := e.Post(context.Background(), "/v1/responses", key, `{"model":"up/gpt-test","input":"hi"`+c.store+`}`, nil)
		if body := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(body, "store").Type != c.want {
			t.Fatalf("%q: %d %s", c.store, r.StatusCode, body)
		}
		r = e.Post(context.Background(), "/v1/responses", key, `{"model":"up/gpt-test","input":"hi","stream":true`+c.store+`}`, nil)
		names, data := sseEvents(t, r)
		seen := 0
		for i, n := range names {
			if n == "response.created" || n == "response.completed" {
				seen++
				if gjson.Get(data[i], "response.store").Type != c.want {
					t.Fatalf("%q, %s: %s", c.store, n, data[i])
				}
			}
		}
		if seen != 2 {
			t.Fatalf("events %v", names)
		}
	}
}
