package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	anthropic1 "github.com/anthropics/anthropic-sdk-go"
	option1 "github.com/anthropics/anthropic-sdk-go/option"
	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// The fakes below play one tool round: asked a question, they call get_weather for Paris; given
// the tool's result, they answer in text. Each answers in its own format, streamed or not.

const weatherAnswer = "It is 18 °C in Paris."

// weatherThought is the reasoning the fakes show when the request asks for it.
const weatherThought = "The user wants the weather: call get_weather."

// streamChat streams a chat completion through the OpenAI SDK and returns what its accumulator
// made of the chunks; every chunk must be one the accumulator takes.
func streamChat(t *testing.T, client openai.Client, ctx context.Context, params openai.ChatCompletionNewParams) openai.ChatCompletionAccumulator {
	t.Helper()
	st := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for st.Next() {
		if !acc.AddChunk(st.Current()) {
			t.Fatal("a chunk the accumulator refused")
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("chat stream: %v", err)
	}
	return acc
}

// toolOpenAI is an OpenAI-compatible upstream that plays the tool round.
func toolOpenAI(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	msgs := gjson.GetBytes(body, "messages").Array()
	last := msgs[len(msgs)-1]
	answered := last.Get("role").String() == "tool"
	thinks := gjson.GetBytes(body, "reasoning_effort").String() != "" && !answered
	if gjson.GetBytes(body, "stream").Bool() {
		var events []string
		chunk := func(delta, finish string) string {
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			return `data: {"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
		}
		events = append(events, chunk(`{"role":"assistant","content":""}`, ""))
		if thinks {
			events = append(events, chunk(`{"reasoning_content":"`+weatherThought+`"}`, ""))
		}
		if answered {
			events = append(events, chunk(`{"content":"It is 18 °C"}`, ""), chunk(`{"content":" in Paris."}`, ""), chunk(`{}`, "stop"))
		} else {
			events = append(events, chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, ""),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, ""),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, ""), chunk(`{}`, "tool_calls"))
		}
		if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
			events = append(events, `data: {"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`)
		}
		testenv.SSEAnswer(append(events, "data: [DONE]"), -1)(w, r)
		return
	}
	msg := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`
	if thinks {
		msg = strings.Replace(msg, `"content":null`, `"content":null,"reasoning_content":"`+weatherThought+`"`, 1)
	}
	finish := "tool_calls"
	if answered {
		msg, finish = `{"role":"assistant","content":"`+weatherAnswer+`"}`, "stop"
	}
	testenv.JSONAnswer(`{"id":"chatcmpl-t","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":`+msg+
		`,"finish_reason":"`+finish+`"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`)(w, r)
}

// toolAnthropic is an Anthropic upstream that plays the tool round.
func toolAnthropic(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	msgs := gjson.GetBytes(body, "messages").Array()
	answered := strings.Contains(msgs[len(msgs)-1].Raw, `"tool_result"`)
	thinks := gjson.GetBytes(body, "thinking.type").String() == "enabled" && !answered
	if gjson.GetBytes(body, "stream").Bool() {
		ev := func(name, data string) string { return "event: " + name + "\ndata: " + data }
		events := []string{ev("message_start", `{"type":"message_start","message":{"id":"msg_t","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`)}
		stop := "tool_use"
		next := 0
		if thinks {
			events = append(events, ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"`+weatherThought+`"}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`),
				ev("content_block_stop", `{"type":"content_block_stop","index":0}`))
			next = 1
		}
		idx := fmt.Sprint(next)
		if answered {
			stop = "end_turn"
			events = append(events, ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is 18 °C"}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" in Paris."}}`),
				ev("content_block_stop", `{"type":"content_block_stop","index":0}`))
		} else {
			events = append(events, ev("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`),
				ev("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`),
				ev("content_block_stop", `{"type":"content_block_stop","index":`+idx+`}`))
		}
		events = append(events, ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":4}}`),
			ev("message_stop", `{"type":"message_stop"}`))
		testenv.SSEAnswer(events, -1)(w, r)
		return
	}
	content, stop := `[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]`, "tool_use"
	if thinks {
		content = `[{"type":"thinking","thinking":"` + weatherThought + `","signature":"sig"},` + content[1:]
	}
	if answered {
		content, stop = `[{"type":"text","text":"`+weatherAnswer+`"}]`, "end_turn"
	}
	testenv.JSONAnswer(`{"id":"msg_t","type":"message","role":"assistant","model":"claude-test","content":`+content+
		`,"stop_reason":"`+stop+`","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":4}}`)(w, r)
}

// sdkGateway is a gateway with an Anthropic provider ("anthropic", model claude-test) and an
// OpenAI-compatible one ("up", model gpt-test), both playing the tool round.
func sdkGateway(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	return gatewayWith(t, toolAnthropic, toolOpenAI)
}

// gatewayWith is sdkGateway's setup with other upstream handlers: messages answers the
// Anthropic provider, chat the OpenAI-compatible one.
func gatewayWith(t *testing.T, messages, chat http.HandlerFunc) (*testenv.Env, string) {
	t.Helper()
	ant := testenv.NewFakeAnthropic(t, messages)
	oai := testenv.NewFakeUpstream(t, chat)
	e := testenv.New(t)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("anthropic")), map[string]any{"base_url": ant.URL}, 200)
	e.AddConnection("anthropic", "main", "sk-ant", 0)
	e.AddProvider("up", oai.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
	key := e.NewKey()
	e.WaitModels(key, "anthropic/claude-test")
	e.WaitModels(key, "up/gpt-test")
	return e, key
}

// TestAnthropicSDKsReachBothKindsOfProvider drives the official Anthropic Go SDK, both major
// lines (v1 sends x-api-key, v2 a bearer token), through a whole tool round, buffered and
// streamed (with the SDK's accumulator), against an Anthropic provider and, translated, an
// OpenAI-compatible one.
func TestAnthropicSDKsReachBothKindsOfProvider(t *testing.T) {
	e, key := sdkGateway(t)
	for _, model := range []string{"anthropic/claude-test", "up/gpt-test"} {
		t.Run("v2/"+model, func(t *testing.T) { anthropicV2Round(t, e, key, model) })
		t.Run("v1/"+model, func(t *testing.T) { anthropicV1Round(t, e, key, model) })
	}
}

func anthropicV2Round(t *testing.T, e *testenv.Env, key, model string) {
	client := anthropic.NewClient(option.WithBaseURL(e.Base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Current weather"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}
	ask := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))}
	for _, stream := range []bool{false, true} {
		params := anthropic.MessageNewParams{Model: model, MaxTokens: 256, Messages: ask, Tools: tools}
		msg, _ := sendClaude(t, client, params, stream)
		if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" ||
			msg.Content[0].Name != "get_weather" || gjson.GetBytes(msg.Content[0].Input, "city").String() != "Paris" {
			t.Fatalf("stream=%v: want a get_weather call, got %+v", stream, msg)
		}
		params.Messages = append(append([]anthropic.MessageParam{}, ask...), msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[0].ID, "18 °C", false)))
		final, _ := sendClaude(t, client, params, stream)
		if final.StopReason != "end_turn" || len(final.Content) != 1 || final.Content[0].Text != weatherAnswer || final.Usage.OutputTokens == 0 {
			t.Fatalf("stream=%v: final answer %+v", stream, final)
		}
	}
}

func anthropicV1Round(t *testing.T, e *testenv.Env, key, model string) {
	ctx := context.Background()
	client := anthropic1.NewClient(option1.WithBaseURL(e.Base+"/"), option1.WithAPIKey(key), option1.WithMaxRetries(0))
	tools := []anthropic1.ToolUnionParam{{OfTool: &anthropic1.ToolParam{Name: "get_weather",
		InputSchema: anthropic1.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}
	ask := []anthropic1.MessageParam{anthropic1.NewUserMessage(anthropic1.NewTextBlock("Weather in Paris?"))}
	params := anthropic1.MessageNewParams{Model: model, MaxTokens: 256, Messages: ask, Tools: tools}
	var msg anthropic1.Message
	st := client.Messages.NewStreaming(ctx, params)
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Name != "get_weather" {
		t.Fatalf("want a get_weather call, got %+v", msg)
	}
	params.Messages = append(append([]anthropic1.MessageParam{}, ask...), msg.ToParam(),
		anthropic1.NewUserMessage(anthropic1.NewToolResultBlock(msg.Content[0].ID, "18 °C", false)))
	final, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if final.StopReason != "end_turn" || len(final.Content) != 1 || final.Content[0].Text != weatherAnswer {
		t.Fatalf("final answer %+v", final)
	}
}

// TestOpenAISDKReachesAnthropicProvider drives the official OpenAI Go SDK through a tool round
// against an Anthropic provider, buffered and streamed with its accumulator.
func TestOpenAISDKReachesAnthropicProvider(t *testing.T) {
	e, key := sdkGateway(t)
	ctx := context.Background()
	client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
	ask := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}
	for _, stream := range []bool{false, true} {
		params := openai.ChatCompletionNewParams{Model: "anthropic/claude-test", Messages: ask, Tools: tools}
		var msg openai.ChatCompletionMessage
		var finish string
		if stream {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			acc := streamChat(t, client, ctx, params)
			if acc.Usage.TotalTokens == 0 {
				t.Fatal("no usage in the translated stream")
			}
			msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
		} else {
			c, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			msg, finish = c.Choices[0].Message, c.Choices[0].FinishReason
		}
		if finish != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" ||
			gjson.Get(msg.ToolCalls[0].Function.Arguments, "city").String() != "Paris" {
			t.Fatalf("stream=%v: want a get_weather call, got %s %+v", stream, finish, msg)
		}
		params.Messages = append(append([]openai.ChatCompletionMessageParamUnion{}, ask...), msg.ToParam(),
			openai.ToolMessage("18 °C", msg.ToolCalls[0].ID))
		c, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if c.Choices[0].FinishReason != "stop" || c.Choices[0].Message.Content != weatherAnswer {
			t.Fatalf("stream=%v: final answer %+v", stream, c.Choices[0])
		}
	}
}
