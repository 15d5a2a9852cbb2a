package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// OpenAI serves gpt-5-codex (like o1-pro, o3-pro and codex-mini-latest) on /v1/responses only.
// codexResponses below is that endpoint as OpenAI documents it, and it checks a request as
// strictly as OpenAI does, so what the real API would refuse is refused here too: an unknown
// parameter (a cache_control or a chat-only max_tokens that leaked through a translation), a
// tool in the chat shape, a function_call_output without its function_call or a function_call
// without its output, a reasoning item without the encrypted content it was issued with.

const (
	// codexModel is the model a Claude Code user addresses as openai/gpt-5-codex.
	codexModel = "gpt-5-codex"
	// codexFailing fails its streams after the first words with response.failed.
	codexFailing = "gpt-5-codex-failing"
	// codexSealed and codexSealedFinal are the encrypted reasoning of the first and the second
	// turn, handed out when the request includes reasoning.encrypted_content; the model keeps
	// its reasoning across a tool round only when the first comes back unchanged.
	codexSealed      = "gAAAAABo9k2Xcodex-sealed-reasoning-turn-1_Zm9vYmFy=="
	codexSealedFinal = "gAAAAABo9k2Xcodex-sealed-reasoning-turn-2_YmF6cXV4=="
	// codexFailure is the message of the fake's response.failed.
	codexFailure = "An error occurred while processing your request. You can retry your request, or contact us through our help center at help.openai.com if the error persists."
	// codexCutBelow: an answer limited to fewer output tokens ends incomplete (max_output_tokens).
	codexCutBelow = 64
	// timeAnswer is what get_time returns in the tool rounds.
	timeAnswer = "14:00 CEST"
)

// The fake's usage: 1,000 input tokens of which 400 came from the prompt cache, 500 output
// tokens of which 300 were reasoning. At 10 / 20 / 1 USD per million (input / output / cache
// read) that is 600·10 + 400·1 + 500·20 = 16,400 µUSD = 0.0164 USD.
const (
	codexIn, codexCached, codexOut, codexReasoning = 1000, 400, 500, 300
	codexCost                                      = 0.0164
)

// codexItem is one output item of the fake's answer.
type codexItem struct {
	typ    string // reasoning, function_call or message
	id     string
	text   string // the message's text or the reasoning's summary ("" = no summary)
	sealed string // the reasoning's encrypted content ("" = not asked for)
	callID string
	name   string
	args   string
	status string // of a message or function call: completed or incomplete
}

// added is the item as response.output_item.added shows it: empty, in progress. The encrypted
// content is not final yet (OpenAI: "may be incomplete"), so a reader must take it from done.
func (it codexItem) added() json.RawMessage {
	switch it.typ {
	case "reasoning":
		if it.sealed != "" {
			return jobj("id", it.id, "type", "reasoning", "encrypted_content", it.sealed[:12], "summary", []any{})
		}
		return jobj("id", it.id, "type", "reasoning", "summary", []any{})
	case "function_call":
		return jobj("id", it.id, "type", "function_call", "status", "in_progress", "arguments", "", "call_id", it.callID, "name", it.name)
	}
	return jobj("id", it.id, "type", "message", "status", "in_progress", "content", []any{}, "role", "assistant")
}

// done is the whole item, as response.output_item.done and the answer's output show it.
func (it codexItem) done() json.RawMessage {
	switch it.typ {
	case "reasoning":
		summary := []any{}
		if it.text != "" {
			summary = append(summary, jobj("type", "summary_text", "text", it.text))
		}
		if it.sealed != "" {
			return jobj("id", it.id, "type", "reasoning", "encrypted_content", it.sealed, "summary", summary)
		}
		return jobj("id", it.id, "type", "reasoning", "summary", summary)
	case "function_call":
		return jobj("id", it.id, "type", "function_call", "status", it.status, "arguments", it.args, "call_id", it.callID, "name", it.name)
	}
	return jobj("id", it.id, "type", "message", "status", it.status, "content", []any{outputText(it.text)}, "role", "assistant")
}

func outputText(text string) json.RawMessage {
	return jobj("type", "output_text", "annotations", []any{}, "logprobs", []any{}, "text", text)
}

// codexPlan is what the fake answers to one request.
type codexPlan struct {
	items      []codexItem
	status     string // completed, incomplete or failed
	outTokens  int64
	reasonings int64
}

// planCodex decides the answer: with function tools and no results yet, a call of the first
// tool, and in parallel of the second when there are two or more and parallel calls are not
// off; given the results (function_call_output items, which the checks pair with their calls),
// the answer in text.
// gpt-5-codex always reasons first; its reasoning item carries a summary only when the request
// asks for one (reasoning.summary), and its encrypted content only when the request includes it.
func planCodex(req gjson.Result) codexPlan {
	answered := req.Get(`input.#(type=="function_call_output")`).Exists()
	rs := codexItem{typ: "reasoning", id: "rs_0a1b2c3d4e5f60718293a4b5c6d7e8f9"}
	switch req.Get("reasoning.summary").String() {
	case "auto", "concise", "detailed":
		if !answered {
			rs.text = weatherThought
		}
	}
	if includes(req, "reasoning.encrypted_content") {
		rs.sealed = codexSealed
	}
	if answered {
		rs.id = "rs_1a1b2c3d4e5f60718293a4b5c6d7e8f9"
		if rs.sealed != "" {
			rs.sealed = codexSealedFinal
		}
	}
	p := codexPlan{items: []codexItem{rs}, status: "completed", outTokens: codexOut, reasonings: codexReasoning}
	msg := codexItem{typ: "message", id: "msg_2a1b2c3d4e5f60718293a4b5c6d7e8f9", text: weatherAnswer, status: "completed"}
	var tools []string
	for _, tool := range req.Get("tools").Array() {
		if tool.Get("type").String() == "function" {
			tools = append(tools, tool.Get("name").String())
		}
	}
	limit := req.Get("max_output_tokens")
	switch {
	case req.Get("model").String() == codexFailing:
		p.status = "failed"
		p.items = append(p.items, msg)
	case limit.Exists() && limit.Int() < codexCutBelow:
		// The budget ran out in the middle of the answer.
		p.status, p.outTokens, p.reasonings = "incomplete", limit.Int(), limit.Int()-6
		msg.text, msg.status = halves(weatherAnswer)[0], "incomplete"
		p.items = append(p.items, msg)
	case !answered && len(tools) > 0 && req.Get("tool_choice").String() != "none":
		p.items = append(p.items, codexItem{typ: "function_call", id: "fc_3a1b2c3d4e5f60718293a4b5c6d7e8f9",
			callID: "call_Wq8xZ1pT4kLmN2vB", name: tools[0], args: `{"city":"Paris"}`, status: "completed"})
		if len(tools) > 1 && req.Get("parallel_tool_calls").Type != gjson.False {
			p.items = append(p.items, codexItem{typ: "function_call", id: "fc_4a1b2c3d4e5f60718293a4b5c6d7e8f9",
				callID: "call_Hj3kR7sD9fGa5QeC", name: tools[1], args: `{"city":"Paris"}`, status: "completed"})
		}
	default:
		p.items = append(p.items, msg)
	}
	return p
}

func includes(req gjson.Result, what string) bool {
	for _, v := range req.Get("include").Array() {
		if v.String() == what {
			return true
		}
	}
	return false
}

// halves splits a text in two, as a model's deltas fall: at the first space after its middle
// (the second part starts with the space), or at the middle character when there is none.
func halves(s string) []string {
	mid := len(s) / 2
	if i := strings.IndexByte(s[mid:], ' '); i > 0 {
		return []string{s[:mid+i], s[mid+i:]}
	}
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	if mid == 0 {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}

// codexResponse is the response object in the state given: the request's settings echoed as
// OpenAI does, the output items and usage (nil = null).
func codexResponse(req gjson.Result, status string, output []any, usage, errObj, incomplete json.RawMessage) json.RawMessage {
	raw := func(path, def string) json.RawMessage {
		if v := req.Get(path); v.Exists() {
			return json.RawMessage(v.Raw)
		}
		return json.RawMessage(def)
	}
	if output == nil {
		output = []any{}
	}
	return jobj("id", "resp_68f2b0c1d2e3f4a5b6c7d8e9f0a1b2c3", "object", "response", "created_at", 1760690000, "status", status,
		"background", false, "error", errObj, "incomplete_details", incomplete, "instructions", raw("instructions", "null"),
		"max_output_tokens", raw("max_output_tokens", "null"), "max_tool_calls", nil, "model", req.Get("model").String(),
		"output", output, "parallel_tool_calls", raw("parallel_tool_calls", "true"), "previous_response_id", nil,
		"prompt_cache_key", raw("prompt_cache_key", "null"),
		"reasoning", jobj("effort", raw("reasoning.effort", `"medium"`), "summary", raw("reasoning.summary", "null")),
		"safety_identifier", raw("safety_identifier", "null"), "service_tier", "default", "store", raw("store", "true"),
		"temperature", 1.0, "text", jobj("format", jobj("type", "text"), "verbosity", "medium"),
		"tool_choice", raw("tool_choice", `"auto"`), "tools", raw("tools", "[]"), "top_logprobs", 0, "top_p", 1.0,
		"truncation", "disabled", "usage", usage, "user", raw("user", "null"), "metadata", raw("metadata", "{}"))
}

func codexUsage(out, reasoning int64) json.RawMessage {
	return jobj("input_tokens", codexIn, "input_tokens_details", jobj("cached_tokens", codexCached),
		"output_tokens", out, "output_tokens_details", jobj("reasoning_tokens", reasoning), "total_tokens", codexIn+out)
}

// codexResponses is the fake OpenAI's POST /v1/responses.
func codexResponses(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if status, refusal := checkResponsesRequest(body); status != 0 {
		testenv.Status(status, nil, refusal)(w, r)
		return
	}
	req := gjson.ParseBytes(body)
	p := planCodex(req)
	var output []any
	for _, it := range p.items {
		output = append(output, it.done())
	}
	usage := codexUsage(p.outTokens, p.reasonings)
	var incomplete json.RawMessage
	if p.status == "incomplete" {
		incomplete = jobj("reason", "max_output_tokens")
	}
	if !req.Get("stream").Bool() {
		if p.status == "failed" {
			testenv.Status(500, nil, openAIRefusal(codexFailure, "server_error", "", "server_error"))(w, r)
			return
		}
		testenv.JSONAnswer(string(codexResponse(req, p.status, output, usage, nil, incomplete)))(w, r)
		return
	}
	var events []string
	emit := func(typ string, kv ...any) {
		data := jobj(append([]any{"type", typ, "sequence_number", len(events)}, kv...)...)
		events = append(events, "event: "+typ+"\ndata: "+string(data))
	}
	start := codexResponse(req, "in_progress", nil, nil, nil, nil)
	emit("response.created", "response", start)
	emit("response.in_progress", "response", start)
	var sofar []any
	for i, it := range p.items {
		emit("response.output_item.added", "output_index", i, "item", it.added())
		switch it.typ {
		case "reasoning":
			if it.text == "" {
				break
			}
			at := []any{"item_id", it.id, "output_index", i, "summary_index", 0}
			emit("response.reasoning_summary_part.added", append(at, "part", jobj("type", "summary_text", "text", ""))...)
			for _, d := range halves(it.text) {
				emit("response.reasoning_summary_text.delta", append(at, "delta", d, "obfuscation", "q7Tz")...)
			}
			emit("response.reasoning_summary_text.done", append(at, "text", it.text)...)
			emit("response.reasoning_summary_part.done", append(at, "part", jobj("type", "summary_text", "text", it.text))...)
		case "message":
			at := []any{"item_id", it.id, "output_index", i, "content_index", 0}
			emit("response.content_part.added", append(at, "part", outputText(""))...)
			for n, d := range halves(it.text) {
				emit("response.output_text.delta", append(at, "delta", d, "logprobs", []any{}, "obfuscation", "Xb2")...)
				if p.status == "failed" && n == 0 {
					partial := it
					partial.text, partial.status = d, "in_progress"
					failed := codexResponse(req, "failed", append(sofar, partial.done()), nil,
						jobj("code", "server_error", "message", codexFailure), nil)
					emit("response.failed", "response", failed)
					testenv.SSEAnswer(events, -1)(w, r)
					return
				}
			}
			emit("response.output_text.done", append(at, "text", it.text, "logprobs", []any{})...)
			emit("response.content_part.done", append(at, "part", outputText(it.text))...)
		case "function_call":
			at := []any{"item_id", it.id, "output_index", i}
			for _, d := range halves(it.args) {
				emit("response.function_call_arguments.delta", append(at, "delta", d, "obfuscation", "m1")...)
			}
			emit("response.function_call_arguments.done", append(at, "name", it.name, "arguments", it.args)...)
		}
		emit("response.output_item.done", "output_index", i, "item", it.done())
		sofar = append(sofar, it.done())
	}
	emit("response."+p.status, "response", codexResponse(req, p.status, output, usage, nil, incomplete))
	testenv.SSEAnswer(events, -1)(w, r)
}

// jobj is a JSON object with its keys in the order given, as OpenAI writes them.
func jobj(kv ...any) json.RawMessage {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv[i].(string))
		v, err := json.Marshal(kv[i+1])
		if err != nil {
			v = []byte("null")
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}

// openAIRefusal is an OpenAI error body ("" param or code = null).
func openAIRefusal(message, typ, param, code string) string {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	return string(jobj("error", jobj("message", message, "type", typ, "param", orNull(param), "code", orNull(code))))
}

// The Responses API's request, as far as the fake checks it: its parameters, the keys of each
// kind of input item, content part and tool, and the values it accepts (as the openai-go
// release in go.mod knows them).
var (
	responsesParams = fields("access_programs", "background", "context_management", "conversation", "image", "include",
		"input", "instructions", "max_output_tokens", "max_tool_calls", "metadata", "model", "moderation",
		"parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key", "prompt_cache_options",
		"prompt_cache_retention", "reasoning", "safety_identifier", "service_tier", "store", "stream", "stream_options",
		"temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user")
	responsesItemKeys = map[string]map[string]bool{
		"message":              fields("type", "role", "content", "id", "status", "phase"),
		"function_call":        fields("type", "id", "call_id", "name", "namespace", "arguments", "async", "caller", "status"),
		"function_call_output": fields("type", "id", "call_id", "name", "namespace", "output", "caller", "status"),
		"reasoning":            fields("type", "id", "summary", "encrypted_content", "content", "status"),
	}
	responsesPartKeys = map[string]map[string]bool{
		"input_text":  fields("type", "text", "prompt_cache_breakpoint"),
		"input_image": fields("type", "image_url", "file_id", "detail", "prompt_cache_breakpoint"),
		"input_file":  fields("type", "file_id", "file_data", "file_url", "filename", "prompt_cache_breakpoint"),
		"output_text": fields("type", "text", "annotations", "logprobs"),
		"refusal":     fields("type", "refusal"),
	}
	responsesFunctionKeys = fields("type", "name", "description", "parameters", "strict", "async", "defer_loading",
		"allowed_callers", "output_schema")
	responsesBuiltinTools = fields("file_search", "computer", "computer_use_preview", "web_search", "web_search_preview", "mcp",
		"code_interpreter", "programmatic_tool_calling", "image_generation", "local_shell", "shell", "custom", "namespace",
		"tool_search", "apply_patch")
	responsesIncludes = fields("reasoning.encrypted_content", "message.output_text.logprobs", "file_search_call.results",
		"web_search_call.action.sources", "web_search_call.results", "message.input_image.image_url",
		"computer_call_output.output.image_url", "code_interpreter_call.outputs")
	responsesEfforts   = fields("none", "minimal", "low", "medium", "high", "xhigh", "max")
	responsesSummaries = fields("auto", "concise", "detailed")
	toolName           = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

func fields(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkResponsesRequest returns 0 for a request OpenAI would take, else the status and the
// error body OpenAI answers with.
func checkResponsesRequest(body []byte) (int, string) {
	invalid := func(msg, param, code string) (int, string) {
		return 400, openAIRefusal(msg, "invalid_request_error", param, code)
	}
	unknown := func(param string) (int, string) {
		return invalid(fmt.Sprintf("Unknown parameter: '%s'.", param), param, "unknown_parameter")
	}
	onlyKeys := func(v gjson.Result, allowed map[string]bool, at string) (int, string) {
		status, refusal := 0, ""
		v.ForEach(func(k, _ gjson.Result) bool {
			if !allowed[k.String()] {
				status, refusal = unknown(at + k.String())
				return false
			}
			return true
		})
		return status, refusal
	}
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		return invalid("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly.)", "", "")
	}
	req := gjson.ParseBytes(body)
	if st, refusal := onlyKeys(req, responsesParams, ""); st != 0 {
		return st, refusal
	}
	if req.Get("model").String() == "" {
		return invalid("Missing required parameter: 'model'.", "model", "missing_required_parameter")
	}
	for _, b := range []string{"stream", "store", "parallel_tool_calls", "background"} {
		if v := req.Get(b); v.Exists() && !v.IsBool() {
			return invalid(fmt.Sprintf("Invalid type for '%s': expected a boolean, but got %s instead.", b, v.Type), b, "invalid_type")
		}
	}

	// The input: a string, or items in order, each call answered by its output.
	input := req.Get("input")
	calls := map[string]bool{}
	var open []string
	if input.IsArray() {
		for i, item := range input.Array() {
			at := fmt.Sprintf("input[%d].", i)
			typ := item.Get("type").String()
			if typ == "" && item.Get("role").Exists() {
				typ = "message" // an easy input message
			}
			keys, known := responsesItemKeys[typ]
			if !known {
				return invalid(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'message', 'function_call', 'function_call_output' and 'reasoning'.", typ), at+"type", "invalid_value")
			}
			if st, refusal := onlyKeys(item, keys, at); st != 0 {
				return st, refusal
			}
			switch typ {
			case "message":
				role := item.Get("role").String()
				if !fields("user", "assistant", "system", "developer")[role] {
					return invalid(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", role), at+"role", "invalid_value")
				}
				content := item.Get("content")
				if content.Type == gjson.String {
					continue
				}
				if !content.IsArray() {
					return invalid(fmt.Sprintf("Invalid type for '%scontent': expected one of a string or array of input items.", at), at+"content", "invalid_type")
				}
				for j, part := range content.Array() {
					pat := fmt.Sprintf("%scontent[%d].", at, j)
					ptype := part.Get("type").String()
					wants := "'input_text', 'input_image', and 'input_file'"
					ok := ptype == "input_text" || ptype == "input_image" || ptype == "input_file"
					if role == "assistant" {
						wants, ok = "'output_text' and 'refusal'", ptype == "output_text" || ptype == "refusal"
					}
					if !ok {
						return invalid(fmt.Sprintf("Invalid value: '%s'. Supported values are: %s.", ptype, wants), pat+"type", "invalid_value")
					}
					if st, refusal := onlyKeys(part, responsesPartKeys[ptype], pat); st != 0 {
						return st, refusal
					}
					if (ptype == "input_text" || ptype == "output_text") && part.Get("text").Type != gjson.String {
						return invalid(fmt.Sprintf("Missing required parameter: '%stext'.", pat), pat+"text", "missing_required_parameter")
					}
				}
			case "function_call":
				for _, k := range []string{"call_id", "name", "arguments"} {
					if item.Get(k).Type != gjson.String {
						return invalid(fmt.Sprintf("Missing required parameter: '%s%s'.", at, k), at+k, "missing_required_parameter")
					}
				}
				if !toolName.MatchString(item.Get("name").String()) {
					return invalid(fmt.Sprintf("Invalid '%sname': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", at), at+"name", "invalid_value")
				}
				calls[item.Get("call_id").String()] = true
				open = append(open, item.Get("call_id").String())
			case "function_call_output":
				id := item.Get("call_id").String()
				out := item.Get("output")
				if id == "" || !out.Exists() || (out.Type != gjson.String && !out.IsArray()) {
					return invalid(fmt.Sprintf("Missing required parameter: '%soutput'.", at), at+"output", "missing_required_parameter")
				}
				if !calls[id] {
					return invalid(fmt.Sprintf("No tool call found for function call output with call_id %s.", id), "input", "")
				}
				for k, c := range open {
					if c == id {
						open = append(open[:k], open[k+1:]...)
						break
					}
				}
			case "reasoning":
				if !item.Get("summary").IsArray() {
					return invalid(fmt.Sprintf("Missing required parameter: '%ssummary'.", at), at+"summary", "missing_required_parameter")
				}
				sealed := item.Get("encrypted_content").String()
				if sealed == "" {
					// Items live on OpenAI only when stored; this fake stores nothing.
					return 404, openAIRefusal(fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.",
						item.Get("id").String()), "invalid_request_error", "input", "")
				}
				if sealed != codexSealed && sealed != codexSealedFinal {
					return invalid(fmt.Sprintf("The encrypted content for item %s could not be verified.", item.Get("id").String()), "", "invalid_encrypted_content")
				}
			}
		}
	} else if input.Type != gjson.String {
		return invalid("Invalid type for 'input': expected one of a string or array of input items.", "input", "invalid_type")
	}
	if len(open) > 0 {
		return invalid(fmt.Sprintf("No tool output found for function call %s.", open[0]), "input", "")
	}

	// Tools: function tools are flat ({type, name, parameters}), not chat's {type, function}.
	for i, tool := range req.Get("tools").Array() {
		at := fmt.Sprintf("tools[%d].", i)
		typ := tool.Get("type").String()
		if typ != "function" {
			if !responsesBuiltinTools[typ] {
				return invalid(fmt.Sprintf("Invalid value: '%s'.", typ), at+"type", "invalid_value")
			}
			continue
		}
		if tool.Get("name").Type != gjson.String {
			return invalid(fmt.Sprintf("Missing required parameter: '%sname'.", at), at+"name", "missing_required_parameter")
		}
		if !toolName.MatchString(tool.Get("name").String()) {
			return invalid(fmt.Sprintf("Invalid '%sname': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", at), at+"name", "invalid_value")
		}
		if st, refusal := onlyKeys(tool, responsesFunctionKeys, at); st != 0 {
			return st, refusal
		}
		if p := tool.Get("parameters"); p.Exists() && !p.IsObject() {
			return invalid(fmt.Sprintf("Invalid type for '%sparameters': expected an object.", at), at+"parameters", "invalid_type")
		}
	}
	if tc := req.Get("tool_choice"); tc.Exists() {
		switch {
		case tc.Type == gjson.String && fields("auto", "none", "required")[tc.String()]:
		case tc.IsObject() && tc.Get("type").String() == "function":
			if st, refusal := onlyKeys(tc, fields("type", "name"), "tool_choice."); st != 0 {
				return st, refusal
			}
			if tc.Get("name").String() == "" {
				return invalid("Missing required parameter: 'tool_choice.name'.", "tool_choice.name", "missing_required_parameter")
			}
		case tc.IsObject() && (tc.Get("type").String() == "allowed_tools" || responsesBuiltinTools[tc.Get("type").String()]):
		default:
			return invalid("Invalid value for 'tool_choice'.", "tool_choice", "invalid_value")
		}
	}

	if rs := req.Get("reasoning"); rs.Exists() {
		if st, refusal := onlyKeys(rs, fields("effort", "summary", "generate_summary", "context", "mode"), "reasoning."); st != 0 {
			return st, refusal
		}
		if e := rs.Get("effort"); e.Exists() && e.Type != gjson.Null && !responsesEfforts[e.String()] {
			return invalid(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'minimal', 'low', 'medium', and 'high'.", e.String()), "reasoning.effort", "invalid_value")
		}
		if s := rs.Get("summary"); s.Exists() && s.Type != gjson.Null && !responsesSummaries[s.String()] {
			return invalid(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'auto', 'concise', and 'detailed'.", s.String()), "reasoning.summary", "invalid_value")
		}
	}
	for i, inc := range req.Get("include").Array() {
		if !responsesIncludes[inc.String()] {
			return invalid(fmt.Sprintf("Invalid value: '%s'.", inc.String()), fmt.Sprintf("include[%d]", i), "invalid_value")
		}
	}
	if m := req.Get("max_output_tokens"); m.Exists() && m.Type != gjson.Null {
		if m.Type != gjson.Number || m.Int() < 16 {
			return invalid(fmt.Sprintf("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %s instead.", m.Raw),
				"max_output_tokens", "integer_below_min_value")
		}
	}
	if tx := req.Get("text"); tx.Exists() {
		if st, refusal := onlyKeys(tx, fields("format", "verbosity"), "text."); st != 0 {
			return st, refusal
		}
		switch f := tx.Get("format"); f.Get("type").String() {
		case "", "text", "json_object":
		case "json_schema":
			// Flat, unlike chat's response_format.json_schema.{name, schema}.
			if st, refusal := onlyKeys(f, fields("type", "name", "schema", "strict", "description"), "text.format."); st != 0 {
				return st, refusal
			}
			if f.Get("name").String() == "" || !f.Get("schema").IsObject() {
				return invalid("Missing required parameter: 'text.format.name'.", "text.format.name", "missing_required_parameter")
			}
		default:
			return invalid(fmt.Sprintf("Invalid value: '%s'.", f.Get("type").String()), "text.format.type", "invalid_value")
		}
	}
	if so := req.Get("stream_options"); so.Exists() {
		if st, refusal := onlyKeys(so, fields("include_obfuscation"), "stream_options."); st != 0 {
			return st, refusal
		}
	}
	return 0, ""
}

// codexTools are the two function tools the tool rounds offer: the fake calls both at once.
func codexTools() []responses.ToolUnionParam {
	city := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}
	return []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", city, false), responses.ToolParamOfFunction("get_time", city, false)}
}

// readResponsesStream reads a Responses stream as a client must: sequence numbers without gaps,
// every item added before its deltas and done after them, the deltas adding up to the done
// item. It returns the event types and the response of the terminal event.
func readResponsesStream(t *testing.T, st interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) ([]string, *responses.Response) {
	t.Helper()
	var types []string
	var final *responses.Response
	open := map[int64]string{} // output index → the text or arguments the deltas gave so far
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != int64(len(types)) {
			t.Fatalf("event %s has sequence number %d, want %d", ev.Type, ev.SequenceNumber, len(types))
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_item.added":
			if _, dup := open[ev.OutputIndex]; dup {
				t.Fatalf("item %d added twice", ev.OutputIndex)
			}
			open[ev.OutputIndex] = ""
		case "response.output_text.delta", "response.reasoning_summary_text.delta", "response.function_call_arguments.delta":
			if _, ok := open[ev.OutputIndex]; !ok {
				t.Fatalf("%s for item %d, which is not open", ev.Type, ev.OutputIndex)
			}
			open[ev.OutputIndex] += ev.Delta
		case "response.output_item.done":
			got, ok := open[ev.OutputIndex]
			if !ok {
				t.Fatalf("item %d done before it was added", ev.OutputIndex)
			}
			it := ev.Item
			want := ""
			switch it.Type {
			case "message":
				want = it.Content[0].Text
			case "function_call":
				want = it.Arguments.OfString
			case "reasoning":
				if len(it.Summary) > 0 {
					want = it.Summary[0].Text
				}
			}
			if got != want {
				t.Fatalf("item %d: the deltas gave %q, the done item says %q", ev.OutputIndex, got, want)
			}
			delete(open, ev.OutputIndex)
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			final = &r
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if final == nil || len(types) < 3 || types[0] != "response.created" || types[1] != "response.in_progress" ||
		types[len(types)-1] != "response."+string(final.Status) {
		t.Fatalf("events %v", types)
	}
	if final.Status != "failed" && len(open) != 0 {
		t.Fatalf("items never done: %v", open)
	}
	return types, final
}

// The fake Responses upstream speaks the API as OpenAI's own SDK reads it, buffered and
// streamed: reasoning with its summary and encrypted content, two parallel function calls (one
// when parallel calls are off), usage with cached and reasoning tokens, then after the calls' outputs the answer; a budget
// too small ends incomplete, the failing model fails mid-stream; and it refuses what OpenAI
// refuses. This checks the fake itself, without the gateway.
func TestFakeResponsesUpstreamSpeaksTheAPI(t *testing.T) {
	up := testenv.NewFakeUpstream(t, toolOpenAI, codexModel)
	up.ServeResponses(codexResponses)
	client := openai.NewClient(oopt.WithBaseURL(up.URL+"/v1/"), oopt.WithAPIKey("sk-direct"), oopt.WithMaxRetries(0))
	ctx := context.Background()
	ask := responses.ResponseInputItemParamOfMessage("What are the weather and the time in Paris?", responses.EasyInputMessageRoleUser)
	first := responses.ResponseNewParams{Model: codexModel, Tools: codexTools(), Store: openai.Bool(false),
		Input:           responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask}},
		Reasoning:       shared.ReasoningParam{Effort: shared.ReasoningEffortMedium, Summary: shared.ReasoningSummaryAuto},
		Include:         []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		MaxOutputTokens: openai.Int(2048)}
	call := func(t *testing.T, params responses.ResponseNewParams, stream bool) *responses.Response {
		t.Helper()
		if !stream {
			return newResponse(t, client, ctx, params)
		}
		_, r := readResponsesStream(t, client.Responses.NewStreaming(ctx, params))
		return r
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			r := call(t, first, stream)
			if r.Status != "completed" || len(r.Output) != 3 || r.Usage.InputTokens != codexIn || r.Usage.InputTokensDetails.CachedTokens != codexCached ||
				r.Usage.OutputTokens != codexOut || r.Usage.OutputTokensDetails.ReasoningTokens != codexReasoning || r.Usage.TotalTokens != codexIn+codexOut {
				t.Fatalf("first answer: %s", r.RawJSON())
			}
			rs, a, b := r.Output[0], r.Output[1], r.Output[2]
			if rs.Type != "reasoning" || len(rs.Summary) != 1 || rs.Summary[0].Text != weatherThought || rs.EncryptedContent != codexSealed ||
				a.Type != "function_call" || a.Name != "get_weather" || b.Type != "function_call" || b.Name != "get_time" ||
				a.CallID == b.CallID || gjson.Get(a.Arguments.OfString, "city").String() != "Paris" || gjson.Get(b.Arguments.OfString, "city").String() != "Paris" {
				t.Fatalf("first answer: %s", r.RawJSON())
			}
			// The round goes back as Codex sends it: the items as they came, each call's output.
			wOut := responses.ResponseInputItemParamOfFunctionCallOutput("18 °C, sunny")
			wOut.OfFunctionCallOutput.CallID = openai.String(a.CallID)
			tOut := responses.ResponseInputItemParamOfFunctionCallOutput(timeAnswer)
			tOut.OfFunctionCallOutput.CallID = openai.String(b.CallID)
			reasoning := rs.AsReasoning().ToParam()
			fa, fb := a.AsFunctionCall().ToParam(), b.AsFunctionCall().ToParam()
			second := first
			second.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask,
				{OfReasoning: &reasoning}, {OfFunctionCall: &fa}, {OfFunctionCall: &fb}, wOut, tOut}}
			final := call(t, second, stream)
			if final.Status != "completed" || final.OutputText() != weatherAnswer || final.Output[0].EncryptedContent != codexSealedFinal ||
				len(final.Output[0].Summary) != 0 || final.Usage.OutputTokensDetails.ReasoningTokens != codexReasoning {
				t.Fatalf("final answer: %s", final.RawJSON())
			}

			single := first
			single.ParallelToolCalls = openai.Bool(false)
			if r := call(t, single, stream); len(r.Output) != 2 || r.Output[1].Name != "get_weather" {
				t.Fatalf("without parallel calls: %s", r.RawJSON())
			}

			cut := first
			cut.Tools, cut.MaxOutputTokens = nil, openai.Int(32)
			r = call(t, cut, stream)
			if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || r.OutputText() != halves(weatherAnswer)[0] ||
				r.Usage.OutputTokens != 32 {
				t.Fatalf("cut answer: %s", r.RawJSON())
			}
		})
	}

	t.Run("failing model", func(t *testing.T) {
		params := first
		params.Model, params.Tools = codexFailing, nil
		types, r := readResponsesStream(t, client.Responses.NewStreaming(ctx, params))
		if r.Status != "failed" || r.Error.Code != "server_error" || r.Error.Message != codexFailure ||
			types[len(types)-2] != "response.output_text.delta" {
			t.Fatalf("events %v, failed with %s", types, r.RawJSON())
		}
		if _, err := client.Responses.New(ctx, params); err == nil {
			t.Fatal("the failing model answered a buffered request")
		}
	})

	// What OpenAI refuses, the fake refuses, in OpenAI's words.
	sealed := responses.ResponseInputItemParamOfReasoning("rs_x", []responses.ResponseReasoningItemSummaryParam{})
	forged := responses.ResponseInputItemParamOfReasoning("rs_y", []responses.ResponseReasoningItemSummaryParam{})
	forged.OfReasoning.EncryptedContent = openai.String("gAAAAA-forged")
	orphan := responses.ResponseInputItemParamOfFunctionCallOutput("18 °C")
	orphan.OfFunctionCallOutput.CallID = openai.String("call_nobody")
	for _, c := range []struct {
		name   string
		input  responses.ResponseInputParam
		opts   []oopt.RequestOption
		status int
		code   string
	}{
		{"chat's max_tokens", nil, []oopt.RequestOption{oopt.WithJSONSet("max_tokens", 100)}, 400, "unknown_parameter"},
		{"a cache_control on a part", nil, []oopt.RequestOption{oopt.WithJSONSet("input", json.RawMessage(
			`[{"role":"user","content":[{"type":"input_text","text":"hi","cache_control":{"type":"ephemeral"}}]}]`))}, 400, "unknown_parameter"},
		{"a chat-shaped tool", nil, []oopt.RequestOption{oopt.WithJSONSet("tools", json.RawMessage(
			`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`))}, 400, "missing_required_parameter"},
		{"input_text from the assistant", nil, []oopt.RequestOption{oopt.WithJSONSet("input", json.RawMessage(
			`[{"role":"assistant","content":[{"type":"input_text","text":"hi"}]}]`))}, 400, "invalid_value"},
		{"an output without its call", responses.ResponseInputParam{ask, orphan}, nil, 400, ""},
		{"a call without its output", responses.ResponseInputParam{ask, responses.ResponseInputItemParamOfFunctionCall(`{}`, "call_1", "get_weather")}, nil, 400, ""},
		{"reasoning without its encrypted content", responses.ResponseInputParam{ask, sealed}, nil, 404, ""},
		{"reasoning with forged content", responses.ResponseInputParam{ask, forged}, nil, 400, "invalid_encrypted_content"},
		{"too small a budget", nil, []oopt.RequestOption{oopt.WithJSONSet("max_output_tokens", 8)}, 400, "integer_below_min_value"},
	} {
		t.Run("refuses "+c.name, func(t *testing.T) {
			params := first
			if c.input != nil {
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: c.input}
			}
			_, err := client.Responses.New(ctx, params, c.opts...)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != c.status || apiErr.Code != c.code || apiErr.Type != "invalid_request_error" || apiErr.Message == "" {
				t.Fatalf("got %v", err)
			}
		})
	}
	if n := len(up.ChatRequests()); n != 0 {
		t.Fatalf("%d chat completions requests", n)
	}
}

// ---- Through the gateway: chat-completions and messages clients on a Responses upstream ----

// codexChat is the fake OpenAI's chat completions: the Responses-only models are refused there
// in OpenAI's words, any other model plays the tool round.
var codexChat = byModel(map[string]http.HandlerFunc{
	codexModel:   testenv.Status(404, nil, openAIRefusal("This model is only supported in v1/responses and not in v1/chat/completions.", "invalid_request_error", "model", "")),
	codexFailing: testenv.Status(404, nil, openAIRefusal("This model is only supported in v1/responses and not in v1/chat/completions.", "invalid_request_error", "model", "")),
}, toolOpenAI)

// codexGateway is a gateway whose built-in provider "openai" (type openai) points at the fake
// OpenAI, which lists gpt-5-codex, the failing codex model and gpt-4o. The provider's default
// responses_models send the codex models to /responses; gpt-5-codex is priced at 10 / 20 / 1
// USD per million tokens (input / output / cache read).
func codexGateway(t *testing.T) (*testenv.Env, *testenv.FakeUpstream, string) {
	t.Helper()
	up := testenv.NewFakeUpstream(t, codexChat, codexModel, codexFailing, "gpt-4o")
	up.ServeResponses(codexResponses)
	e := testenv.New(t)
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("openai")), map[string]any{"base_url": up.URL + "/v1"}, 200)
	e.AddConnection("openai", "main", "sk-openai-main", 0)
	key := e.NewKey()
	e.WaitModels(key, "openai/"+codexModel)
	testenv.SetPrice(e, "openai/"+codexModel, 10, 20, 12.5, 1)
	return e, up, key
}

// sentTo is what the upstream received on path, in order.
func sentTo(up *testenv.FakeUpstream, path string) []testenv.Recorded {
	var out []testenv.Recorded
	for _, r := range up.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// newResponsesRequest is the one Responses request the upstream received after the first n,
// with no chat completions request at all.
func newResponsesRequest(t *testing.T, up *testenv.FakeUpstream, n int) testenv.Recorded {
	t.Helper()
	if chats := up.ChatRequests(); len(chats) != 0 {
		t.Fatalf("the gateway called chat completions: %s", chats[0].Body)
	}
	sent := sentTo(up, "/v1/responses")
	if len(sent) != n+1 {
		t.Fatalf("%d Responses requests, want %d", len(sent)-n, 1)
	}
	return sent[n]
}

// codexWant is what a translated request must say.
type codexWant struct {
	key    string // the connection's credential
	stream bool
	maxOut int64
	effort string // "" = any effort
	sealed bool   // include reasoning.encrypted_content (a client that can send it back)
}

// checkCodexRequest fails unless the gateway put the client's request in the Responses API's
// own terms: the provider's credential only, the model's upstream name, the stream flag, the
// output limit, the two tools as flat function tools, reasoning with an effort and a summary
// (without one OpenAI shows nothing of the reasoning), and store off (a translated request is
// stateless; nothing asked OpenAI to keep it). It returns the body.
func checkCodexRequest(t *testing.T, sent testenv.Recorded, want codexWant) gjson.Result {
	t.Helper()
	b := gjson.Parse(sent.Body)
	fail := func(what string) { t.Helper(); t.Fatalf("translated request: %s\n%s", what, sent.Body) }
	if sent.Path != "/v1/responses" {
		fail("path " + sent.Path)
	}
	if got := sent.Header.Get("Authorization"); got != "Bearer "+want.key {
		fail("Authorization " + got)
	}
	for _, h := range []string{"X-Api-Key", "Anthropic-Version", "Anthropic-Beta"} {
		if v := sent.Header.Get(h); v != "" {
			fail("the client's " + h + " went upstream: " + v)
		}
	}
	if b.Get("model").String() != codexModel {
		fail("model")
	}
	if b.Get("stream").Bool() != want.stream {
		fail(fmt.Sprintf("stream, want %v", want.stream))
	}
	if b.Get("max_output_tokens").Int() != want.maxOut {
		fail(fmt.Sprintf("max_output_tokens, want %d", want.maxOut))
	}
	tools := b.Get("tools").Array()
	if len(tools) != 2 {
		fail("want the two tools")
	}
	for i, name := range []string{"get_weather", "get_time"} {
		if tools[i].Get("type").String() != "function" || tools[i].Get("name").String() != name ||
			tools[i].Get("parameters.properties.city.type").String() != "string" {
			fail("tool " + name)
		}
	}
	effort := b.Get("reasoning.effort").String()
	if effort == "" || want.effort != "" && effort != want.effort || !responsesSummaries[b.Get("reasoning.summary").String()] {
		fail(fmt.Sprintf("reasoning, want effort %q and a summary", want.effort))
	}
	if b.Get("store").Type != gjson.False {
		fail("store, want false")
	}
	if want.sealed && !includes(b, "reasoning.encrypted_content") {
		fail("include, want reasoning.encrypted_content")
	}
	if !strings.Contains(b.Get("input").Raw, "What are the weather and the time in Paris?") {
		fail("the question is not in the input")
	}
	return b
}

// checkToolRoundInput fails unless the input of a second turn carries both calls of the first
// (names and arguments) with their outputs, each output after its call, and, when sealed, the
// first turn's reasoning with its encrypted content unchanged before the calls.
func checkToolRoundInput(t *testing.T, b gjson.Result, sealed bool) {
	t.Helper()
	calls := map[string]string{} // call id → tool
	outputs := map[string]string{}
	firstCall, reasoning := -1, -1
	for i, it := range b.Get("input").Array() {
		switch it.Get("type").String() {
		case "function_call":
			if firstCall < 0 {
				firstCall = i
			}
			calls[it.Get("call_id").String()] = it.Get("name").String()
			if gjson.Get(it.Get("arguments").String(), "city").String() != "Paris" {
				t.Fatalf("call %d: arguments %s", i, it.Raw)
			}
		case "function_call_output":
			tool := calls[it.Get("call_id").String()]
			if tool == "" {
				t.Fatalf("output %d comes before its call: %s", i, b.Get("input").Raw)
			}
			out := it.Get("output").String()
			if it.Get("output").IsArray() {
				out = ""
				for _, part := range it.Get("output").Array() {
					out += part.Get("text").String()
				}
			}
			outputs[tool] = out
		case "reasoning":
			if it.Get("encrypted_content").String() == codexSealed {
				reasoning = i
			}
		}
	}
	if len(calls) != 2 || !strings.Contains(outputs["get_weather"], "18 °C") || !strings.Contains(outputs["get_time"], timeAnswer) {
		t.Fatalf("the tool round is not in the input: %s", b.Get("input").Raw)
	}
	if sealed && (reasoning < 0 || reasoning > firstCall) {
		t.Fatalf("the first turn's reasoning (%s) is not before its calls: %s", codexSealed, b.Get("input").Raw)
	}
}

// checkCodexRow fails unless the request log row of an answered request shows the Responses
// usage: 1,000 input tokens with 400 cache reads, 500 output with 300 reasoning, 0.0164 USD.
func checkCodexRow(t *testing.T, e *testenv.Env, hr *http.Response) {
	t.Helper()
	if hr == nil || hr.Header.Get("X-Request-Id") == "" {
		t.Fatal("no answer to find in the request log")
	}
	row := loggedRow(e, hr)
	cost, _ := row["cost_usd"].(float64)
	if row["provider"] != "openai" || row["model"] != codexModel || row["status"] != 200.0 || row["input_tokens"] != float64(codexIn) ||
		row["cache_read_tokens"] != float64(codexCached) || row["output_tokens"] != float64(codexOut) ||
		row["reasoning_tokens"] != float64(codexReasoning) || !testenv.Near(cost, codexCost) {
		t.Fatalf("logged %v", row)
	}
}

// claudeCodeClient is the Anthropic SDK set up as Claude Code is: its betas and app header.
func claudeCodeClient(e *testenv.Env, key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(e.Base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithHeader("anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"),
		option.WithHeader("x-app", "cli"))
}

// claudeCodeParams is a first turn as Claude Code sends it: system blocks with a cache mark, a
// system reminder before the question, tools with JSON Schema 7 input schemas (the last one
// cache-marked), thinking on with all of the budget but one token, its user id in metadata.
// Claude Code streams its turns with max_tokens 32,000; the SDK refuses so large a limit
// unstreamed, where the turn asks for 8,192.
func claudeCodeParams(model string, stream bool) anthropic.MessageNewParams {
	maxTokens := int64(32000)
	if !stream {
		maxTokens = 8192
	}
	schema := anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string", "description": "The city"}},
		Required: []string{"city"}, ExtraFields: map[string]any{"additionalProperties": false, "$schema": "http://json-schema.org/draft-07/schema#"}}
	question := anthropic.TextBlockParam{Text: "What are the weather and the time in Paris?", CacheControl: anthropic.NewCacheControlEphemeralParam()}
	return anthropic.MessageNewParams{Model: model, MaxTokens: maxTokens,
		System: []anthropic.TextBlockParam{{Text: "You are Claude Code, Anthropic's official CLI for Claude."},
			{Text: "You are an interactive CLI tool that helps users with software engineering tasks.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
			anthropic.NewTextBlock("<system-reminder>\nAs you answer the user's questions, you can use the following context.\n</system-reminder>"),
			anthropic.ContentBlockParamUnion{OfText: &question})},
		Tools: []anthropic.ToolUnionParam{
			{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Current weather in a city"), InputSchema: schema}},
			{OfTool: &anthropic.ToolParam{Name: "get_time", Description: anthropic.String("Local time in a city"), InputSchema: schema,
				CacheControl: anthropic.NewCacheControlEphemeralParam()}}},
		Thinking: anthropic.ThinkingConfigParamOfEnabled(maxTokens - 1),
		Metadata: anthropic.MetadataParam{UserID: anthropic.String("user_5f0c1b2a_account_7d3e_session_9a8b7c6d")},
	}
}

// sendClaude sends a messages request, streamed (accumulated as the SDK's users do) or not,
// and returns the message and the HTTP answer.
func sendClaude(t *testing.T, client anthropic.Client, params anthropic.MessageNewParams, stream bool) (anthropic.Message, *http.Response) {
	t.Helper()
	var hr *http.Response
	if !stream {
		msg, err := client.Messages.New(context.Background(), params, option.WithResponseInto(&hr))
		if err != nil {
			t.Fatal(err)
		}
		return *msg, hr
	}
	var msg anthropic.Message
	st := client.Messages.NewStreaming(context.Background(), params, option.WithResponseInto(&hr))
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return msg, hr
}

// blocksOf sorts a message's content by type.
func blocksOf(msg anthropic.Message) map[string][]anthropic.ContentBlockUnion {
	out := map[string][]anthropic.ContentBlockUnion{}
	for _, b := range msg.Content {
		out[b.Type] = append(out[b.Type], b)
	}
	return out
}

// A Claude Code user addresses openai/gpt-5-codex, which OpenAI serves on /v1/responses only:
// streamed and not, the whole tool round works. The first answer shows the reasoning summary
// as a signed thinking block, then the two parallel calls as two tool_use blocks, with usage
// (cache reads apart from the input, as Anthropic reports them); the second turn carries the
// reasoning back (its encrypted content, which the model needs with store off) and the calls
// with their results, and the answer is the text. Nothing goes to chat completions, and the
// request log prices the call from the Responses usage.
func TestClaudeCodeReachesACodexModel(t *testing.T) {
	e, up, key := codexGateway(t)
	client := claudeCodeClient(e, key)
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			n := len(sentTo(up, "/v1/responses"))
			params := claudeCodeParams("openai/"+codexModel, stream)
			msg, hr := sendClaude(t, client, params, stream)
			blocks := blocksOf(msg)
			uses, thinking := blocks["tool_use"], blocks["thinking"]
			if msg.StopReason != "tool_use" || len(uses) != 2 || uses[0].Name != "get_weather" || uses[1].Name != "get_time" ||
				uses[0].ID == "" || uses[0].ID == uses[1].ID || gjson.GetBytes(uses[0].Input, "city").String() != "Paris" ||
				gjson.GetBytes(uses[1].Input, "city").String() != "Paris" || len(blocks["text"]) != 0 {
				t.Fatalf("want two tool_use blocks, got %s", msg.RawJSON())
			}
			if len(thinking) != 1 || msg.Content[0].Type != "thinking" || thinking[0].Thinking != weatherThought || thinking[0].Signature == "" {
				t.Fatalf("want the reasoning summary as a signed thinking block first, got %s", msg.RawJSON())
			}
			if msg.Usage.InputTokens != codexIn-codexCached || msg.Usage.CacheReadInputTokens != codexCached || msg.Usage.OutputTokens != codexOut {
				t.Fatalf("usage %s", msg.Usage.RawJSON())
			}
			// The message names the model asked for: Claude Code sends a thinking block back only
			// with a message that names the model its request asks for.
			if string(msg.Model) != params.Model {
				t.Fatalf("the message names %q, the client asked for %q", msg.Model, params.Model)
			}
			b := checkCodexRequest(t, newResponsesRequest(t, up, n), codexWant{key: "sk-openai-main", stream: stream, maxOut: params.MaxTokens, sealed: true})
			if system := b.Get("instructions").String() + b.Get("input").Raw; !strings.Contains(system, "You are Claude Code") ||
				!strings.Contains(system, "You are an interactive CLI tool") {
				t.Fatalf("the system prompt did not reach the model: %s", b.Raw)
			}
			checkCodexRow(t, e, hr)

			params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(
				anthropic.NewToolResultBlock(uses[0].ID, "18 °C, sunny", false), anthropic.NewToolResultBlock(uses[1].ID, timeAnswer, false)))
			final, _ := sendClaude(t, client, params, stream)
			blocks = blocksOf(final)
			if final.StopReason != "end_turn" || len(blocks["text"]) != 1 || blocks["text"][0].Text != weatherAnswer || len(blocks["tool_use"]) != 0 ||
				final.Usage.OutputTokens != codexOut {
				t.Fatalf("final answer %s", final.RawJSON())
			}
			b = checkCodexRequest(t, newResponsesRequest(t, up, n+1), codexWant{key: "sk-openai-main", stream: stream, maxOut: params.MaxTokens, sealed: true})
			checkToolRoundInput(t, b, true)
		})
	}
}

// chatTurn is one chat completion as a client sees it.
type chatTurn struct {
	msg       openai.ChatCompletionMessage
	finish    string
	usage     openai.CompletionUsage
	reasoning string  // reasoning_content, read from the raw JSON (the SDK has no field for it)
	indices   []int64 // the tool call indices of the stream's deltas, in order of appearance
	http      *http.Response
}

// sendChat sends a chat completion, streamed (with usage, accumulated by the SDK) or not.
func sendChat(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams, stream bool) chatTurn {
	t.Helper()
	var c chatTurn
	if !stream {
		r, err := client.Chat.Completions.New(context.Background(), params, oopt.WithResponseInto(&c.http))
		if err != nil {
			t.Fatal(err)
		}
		c.msg, c.finish, c.usage = r.Choices[0].Message, r.Choices[0].FinishReason, r.Usage
		c.reasoning = gjson.Get(r.RawJSON(), "choices.0.message.reasoning_content").String()
		return c
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := client.Chat.Completions.NewStreaming(context.Background(), params, oopt.WithResponseInto(&c.http))
	acc := openai.ChatCompletionAccumulator{}
	seen := map[int64]bool{}
	for st.Next() {
		chunk := st.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", chunk.RawJSON())
		}
		c.reasoning += gjson.Get(chunk.RawJSON(), "choices.0.delta.reasoning_content").String()
		for _, tc := range gjson.Get(chunk.RawJSON(), "choices.0.delta.tool_calls").Array() {
			if i := tc.Get("index").Int(); !seen[i] {
				seen[i] = true
				c.indices = append(c.indices, i)
			}
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) == 0 {
		t.Fatal("no choice in the stream")
	}
	c.msg, c.finish, c.usage = acc.Choices[0].Message, acc.Choices[0].FinishReason, acc.Usage
	return c
}

// chatTools are get_weather and get_time as a chat-completions client declares them.
func chatTools() []openai.ChatCompletionToolUnionParam {
	city := openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("Current weather in a city"), Parameters: city}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Description: openai.String("Local time in a city"), Parameters: city})}
}

// A chat-completions client reaches openai/gpt-5-codex too, streamed and not: the two parallel
// calls as tool_calls 0 and 1, the reasoning summary as reasoning_content, usage with cached
// and reasoning tokens in OpenAI's detail fields; the tool round goes back as function_call and
// function_call_output items, the effort the client asked for is the one sent, the system
// message reaches the model, and the request log prices the call from the Responses usage.
func TestChatClientReachesACodexModel(t *testing.T) {
	e, up, key := codexGateway(t)
	client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	ask := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a terse assistant."),
		openai.UserMessage("What are the weather and the time in Paris?")}
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			n := len(sentTo(up, "/v1/responses"))
			params := openai.ChatCompletionNewParams{Model: "openai/" + codexModel, Messages: ask, Tools: chatTools(),
				ReasoningEffort: shared.ReasoningEffortHigh, MaxCompletionTokens: openai.Int(4096)}
			c := sendChat(t, client, params, stream)
			calls := c.msg.ToolCalls
			if c.finish != "tool_calls" || len(calls) != 2 || calls[0].Function.Name != "get_weather" || calls[1].Function.Name != "get_time" ||
				calls[0].ID == "" || calls[0].ID == calls[1].ID || gjson.Get(calls[0].Function.Arguments, "city").String() != "Paris" ||
				gjson.Get(calls[1].Function.Arguments, "city").String() != "Paris" {
				t.Fatalf("want two tool calls, got %s %s", c.finish, c.msg.RawJSON())
			}
			if stream && fmt.Sprint(c.indices) != "[0 1]" {
				t.Fatalf("tool call indices %v, want [0 1]", c.indices)
			}
			if c.reasoning != weatherThought {
				t.Fatalf("reasoning_content %q, want the summary", c.reasoning)
			}
			u := c.usage
			if u.PromptTokens != codexIn || u.CompletionTokens != codexOut || u.TotalTokens != codexIn+codexOut ||
				u.PromptTokensDetails.CachedTokens != codexCached || u.CompletionTokensDetails.ReasoningTokens != codexReasoning {
				t.Fatalf("usage %s", u.RawJSON())
			}
			b := checkCodexRequest(t, newResponsesRequest(t, up, n), codexWant{key: "sk-openai-main", stream: stream, maxOut: 4096, effort: "high"})
			if !strings.Contains(b.Get("instructions").String()+b.Get("input").Raw, "You are a terse assistant.") {
				t.Fatalf("the system message did not reach the model: %s", b.Raw)
			}
			checkCodexRow(t, e, c.http)

			params.Messages = append(append([]openai.ChatCompletionMessageParamUnion{}, ask...), c.msg.ToParam(),
				openai.ToolMessage("18 °C, sunny", calls[0].ID), openai.ToolMessage(timeAnswer, calls[1].ID))
			final := sendChat(t, client, params, stream)
			if final.finish != "stop" || final.msg.Content != weatherAnswer || len(final.msg.ToolCalls) != 0 {
				t.Fatalf("final answer %s %s", final.finish, final.msg.RawJSON())
			}
			b = checkCodexRequest(t, newResponsesRequest(t, up, n+1), codexWant{key: "sk-openai-main", stream: stream, maxOut: 4096, effort: "high"})
			checkToolRoundInput(t, b, false)
		})
	}
}

// whereChatWent sends a small chat completion for model and says which upstream path it
// reached (and the status the client got).
func whereChatWent(t *testing.T, e *testenv.Env, up *testenv.FakeUpstream, key, model string) (string, int) {
	t.Helper()
	before := len(up.Requests())
	r := e.Chat(context.Background(), key, `{"model":"`+model+`","messages":[{"role":"user","content":"What is the weather in Paris?"}]}`)
	testenv.ReadAll(t, r)
	var paths []string
	for _, sent := range up.Requests()[before:] {
		if sent.Path != "/v1/models" {
			paths = append(paths, sent.Path)
		}
	}
	if len(paths) != 1 {
		t.Fatalf("%s: upstream calls %v, want one", model, paths)
	}
	return paths[0], r.StatusCode
}

// An openai provider sends the models matching its responses_models (default *codex*,
// o1-pro*, o3-pro*) to /v1/responses and every other model to chat completions; changing the
// patterns moves the models.
func TestResponsesModelsPickTheUpstreamFormat(t *testing.T) {
	e, up, key := codexGateway(t)
	id := e.ProviderID("openai")
	p := e.MustAPI("GET", fmt.Sprintf("/api/providers/%d", id), nil, 200)
	if p["upstream_format"] != "chat" || fmt.Sprint(p["responses_models"]) != "[*codex* o1-pro* o3-pro*]" {
		t.Fatalf("provider %v", p)
	}
	if path, st := whereChatWent(t, e, up, key, "openai/gpt-4o"); path != "/v1/chat/completions" || st != 200 {
		t.Fatalf("gpt-4o: %s %d", path, st)
	}
	if path, st := whereChatWent(t, e, up, key, "openai/"+codexModel); path != "/v1/responses" || st != 200 {
		t.Fatalf("%s: %s %d", codexModel, path, st)
	}
	p = e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", id), map[string]any{"responses_models": []string{"gpt-4o*"}}, 200)
	if fmt.Sprint(p["responses_models"]) != "[gpt-4o*]" {
		t.Fatalf("patched provider %v", p)
	}
	if path, st := whereChatWent(t, e, up, key, "openai/gpt-4o"); path != "/v1/responses" || st != 200 {
		t.Fatalf("gpt-4o after the patch: %s %d", path, st)
	}
	// No longer matched, the codex model goes to chat completions, where OpenAI refuses it.
	if path, _ := whereChatWent(t, e, up, key, "openai/"+codexModel); path != "/v1/chat/completions" {
		t.Fatalf("%s after the patch: %s", codexModel, path)
	}
}

// An openai-compatible provider with upstream_format "responses" (a relay that speaks only the
// Responses API) gets every model's chat-completions and messages requests on /v1/responses;
// switched back to "chat", chat completions again. The field is set on create and by PATCH and
// takes only its two values.
func TestCompatibleProviderOnTheResponsesAPI(t *testing.T) {
	up := testenv.NewFakeUpstream(t, toolOpenAI, "qwen3-coder", "gpt-test")
	up.ServeResponses(codexResponses)
	e := testenv.New(t)
	p := e.MustAPI("POST", "/api/providers", map[string]any{"name": "relay", "type": "openai-compatible",
		"base_url": up.URL + "/v1", "upstream_format": "responses"}, 201)
	if p["upstream_format"] != "responses" {
		t.Fatalf("created %v", p)
	}
	id := int64(p["id"].(float64))
	e.AddConnection("relay", "main", "sk-relay", 0)
	key := e.NewKey()
	e.WaitModels(key, "relay/qwen3-coder")
	e.WaitModels(key, "relay/gpt-test")
	client := anthropic.NewClient(option.WithBaseURL(e.Base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	for _, model := range []string{"qwen3-coder", "gpt-test"} {
		t.Run(model, func(t *testing.T) {
			n := len(sentTo(up, "/v1/responses"))
			r := e.Chat(context.Background(), key, `{"model":"relay/`+model+`","messages":[{"role":"user","content":"What is the weather in Paris?"}]}`)
			if body := testenv.ReadAll(t, r); r.StatusCode != 200 || gjson.Get(body, "choices.0.message.content").String() != weatherAnswer {
				t.Fatalf("chat: %d %s", r.StatusCode, body)
			}
			sent := newResponsesRequest(t, up, n)
			if gjson.Get(sent.Body, "model").String() != model || sent.Header.Get("Authorization") != "Bearer sk-relay" {
				t.Fatalf("sent %v %s", sent.Header, sent.Body)
			}
			msg, _ := sendClaude(t, client, anthropic.MessageNewParams{Model: "relay/" + model, MaxTokens: 1024,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}}, true)
			if texts := blocksOf(msg)["text"]; msg.StopReason != "end_turn" || len(texts) != 1 || texts[0].Text != weatherAnswer {
				t.Fatalf("messages: %s", msg.RawJSON())
			}
			if sent := newResponsesRequest(t, up, n+1); gjson.Get(sent.Body, "model").String() != model || !gjson.Get(sent.Body, "stream").Bool() {
				t.Fatalf("sent %s", sent.Body)
			}
		})
	}
	e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", id), map[string]any{"upstream_format": "chat"}, 200)
	if path, st := whereChatWent(t, e, up, key, "relay/gpt-test"); path != "/v1/chat/completions" || st != 200 {
		t.Fatalf("back on chat: %s %d", path, st)
	}
	var refused struct {
		Error struct {
			Fields map[string]string `json:"fields"`
		} `json:"error"`
	}
	if st := e.API("PATCH", fmt.Sprintf("/api/providers/%d", id), map[string]any{"upstream_format": "grpc"}, &refused); st != 422 ||
		refused.Error.Fields["upstream_format"] == "" {
		t.Fatalf("upstream_format grpc: %d %v", st, refused)
	}
}

// A Responses stream that fails midway (response.failed) ends each client's stream with the
// failure in its own format, after the words that came before it: the messages client gets an
// Anthropic error event (its SDK reports the stream's error), the chat client OpenAI's error
// chunk; the request log says the stream ended in an upstream error.
func TestResponsesUpstreamFailsMidStream(t *testing.T) {
	e, _, key := codexGateway(t)
	// Each failed stream counts against the provider's breaker: off here, where the shapes are tested.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"enabled": false}}, 200)
	model := "openai/" + codexFailing
	words := "An error occurred while processing your request"
	cut := halves(weatherAnswer)[0]
	// events reads a stream that must have begun.
	events := func(t *testing.T, r *http.Response) ([]string, []string) {
		t.Helper()
		if r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, testenv.ReadAll(t, r))
		}
		return sseEvents(t, r)
	}
	sawWords := func(t *testing.T, names, data []string, path string) {
		t.Helper()
		for _, d := range data[:len(data)-1] {
			if gjson.Get(d, path).String() == cut {
				return
			}
		}
		t.Fatalf("the words before the failure never came: %v %v", names, data)
	}
	checkFailedRow := func(t *testing.T, r *http.Response) {
		t.Helper()
		if row := loggedRow(e, r); row["error_code"] != "upstream_stream_error" || row["complete"] != false {
			t.Fatalf("logged %v", row)
		}
	}

	t.Run("messages", func(t *testing.T) {
		r := e.PostAnthropic("/v1/messages", key, `{"model":"`+model+`","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"What is the weather in Paris?"}]}`, nil)
		names, data := events(t, r)
		checkStreamError(t, "messages", names, data, "server_error", "api_error")
		if !strings.Contains(gjson.Get(data[len(data)-1], "error.message").String(), words) || strings.Count(strings.Join(names, " "), "error") != 1 {
			t.Fatalf("want the upstream's failure once: %v %v", names, data)
		}
		sawWords(t, names, data, "delta.text")
		checkFailedRow(t, r)

		client := anthropic.NewClient(option.WithBaseURL(e.Base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		st := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: model, MaxTokens: 1024,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}})
		var msg anthropic.Message
		for st.Next() {
			msg.Accumulate(st.Current())
		}
		if texts := blocksOf(msg)["text"]; st.Err() == nil || !strings.Contains(st.Err().Error(), words) || len(texts) != 1 || texts[0].Text != cut {
			t.Fatalf("the SDK's stream: %v, content %+v", st.Err(), msg.Content)
		}
	})

	t.Run("chat", func(t *testing.T) {
		r := e.Chat(context.Background(), key, `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"What is the weather in Paris?"}]}`)
		names, data := events(t, r)
		checkStreamError(t, "chat", names, data, "server_error", "")
		if !strings.Contains(gjson.Get(data[len(data)-1], "error.message").String(), words) {
			t.Fatalf("want the upstream's words: %v", data)
		}
		for _, d := range data {
			if d == "[DONE]" {
				t.Fatalf("a failed stream ended as if it were whole: %v", data)
			}
		}
		sawWords(t, names, data, "choices.0.delta.content")
		checkFailedRow(t, r)

		client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
		st := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}})
		text := ""
		for st.Next() {
			if ch := st.Current(); len(ch.Choices) > 0 {
				text += ch.Choices[0].Delta.Content
			}
		}
		if err := st.Err(); err == nil || !strings.Contains(err.Error(), words) || text != cut {
			t.Fatalf("the SDK's stream: %v, text %q", err, text)
		}
	})
}

// An answer cut by its output budget (response.incomplete, max_output_tokens) ends as each
// format says so: stop_reason max_tokens on messages, finish_reason length on chat, with the
// words that came, streamed and not; the client's limit is the one sent as max_output_tokens.
func TestResponsesUpstreamIncompleteAnswer(t *testing.T) {
	e, up, key := codexGateway(t)
	model := "openai/" + codexModel
	cut := halves(weatherAnswer)[0]
	ant := anthropic.NewClient(option.WithBaseURL(e.Base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	oai := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("messages/stream=%v", stream), func(t *testing.T) {
			n := len(sentTo(up, "/v1/responses"))
			msg, _ := sendClaude(t, ant, anthropic.MessageNewParams{Model: model, MaxTokens: 32,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}}, stream)
			if texts := blocksOf(msg)["text"]; msg.StopReason != "max_tokens" || len(texts) != 1 || texts[0].Text != cut || msg.Usage.OutputTokens != 32 {
				t.Fatalf("cut answer %s", msg.RawJSON())
			}
			if sent := newResponsesRequest(t, up, n); gjson.Get(sent.Body, "max_output_tokens").Int() != 32 {
				t.Fatalf("sent %s", sent.Body)
			}
		})
		t.Run(fmt.Sprintf("chat/stream=%v", stream), func(t *testing.T) {
			n := len(sentTo(up, "/v1/responses"))
			params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}}
			// The streamed request uses today's limit, the other the deprecated one.
			if stream {
				params.MaxCompletionTokens = openai.Int(32)
			} else {
				params.MaxTokens = openai.Int(32)
			}
			c := sendChat(t, oai, params, stream)
			if c.finish != "length" || c.msg.Content != cut || c.usage.CompletionTokens != 32 {
				t.Fatalf("cut answer %s %q %s", c.finish, c.msg.Content, c.usage.RawJSON())
			}
			if sent := newResponsesRequest(t, up, n); gjson.Get(sent.Body, "max_output_tokens").Int() != 32 {
				t.Fatalf("sent %s", sent.Body)
			}
		})
	}
}

// A 429 from the Responses upstream on the first connection moves the request to the healthy
// second one, with the same translated request: the client gets its answer and the request
// log shows both attempts. All resilience applies to a translated Responses call.
func TestResponsesUpstreamRateLimitFailsOver(t *testing.T) {
	limited := testenv.Status(429, map[string]string{"Retry-After": "20", "x-ratelimit-reset-tokens": "20s"},
		openAIRefusal("Rate limit reached for gpt-5-codex in organization org-test on tokens per min (TPM): Limit 40000, Used 39000, Requested 2000. Please try again in 20s.",
			"tokens", "", "rate_limit_exceeded"))
	for _, surface := range []string{"messages", "chat"} {
		t.Run(surface, func(t *testing.T) {
			up := testenv.NewFakeUpstream(t, codexChat, codexModel)
			up.ServeResponses(testenv.ByKey(map[string]http.HandlerFunc{"sk-first": limited, "sk-second": codexResponses}))
			e := testenv.New(t)
			e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", e.ProviderID("openai")), map[string]any{"base_url": up.URL + "/v1"}, 200)
			e.AddConnection("openai", "first", "sk-first", 0)
			e.AddConnection("openai", "second", "sk-second", 1)
			key := e.NewKey()
			e.WaitModels(key, "openai/"+codexModel)
			e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)

			var hr *http.Response
			calls := 0
			if surface == "messages" {
				var msg anthropic.Message
				msg, hr = sendClaude(t, claudeCodeClient(e, key), claudeCodeParams("openai/"+codexModel, true), true)
				calls = len(blocksOf(msg)["tool_use"])
			} else {
				client := openai.NewClient(oopt.WithBaseURL(e.Base+"/v1/"), oopt.WithAPIKey(key), oopt.WithMaxRetries(0))
				c := sendChat(t, client, openai.ChatCompletionNewParams{Model: "openai/" + codexModel, Tools: chatTools(),
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What are the weather and the time in Paris?")}}, false)
				calls, hr = len(c.msg.ToolCalls), c.http
			}
			if calls != 2 {
				t.Fatalf("%d tool calls in the answer, want 2", calls)
			}
			sent := sentTo(up, "/v1/responses")
			if len(sent) != 2 || sent[0].Header.Get("Authorization") != "Bearer sk-first" || sent[1].Header.Get("Authorization") != "Bearer sk-second" ||
				sent[0].Body != sent[1].Body || len(up.ChatRequests()) != 0 {
				t.Fatalf("upstream saw %d Responses requests, %d chat completions: %v", len(sent), len(up.ChatRequests()), sent)
			}
			row := loggedRow(e, hr)
			if row["status"] != 200.0 || row["attempt_count"] != 2.0 || row["connection"] != "second" {
				t.Fatalf("logged %v", row)
			}
			var detail struct {
				Attempts []struct {
					Connection string `json:"connection"`
					Status     int    `json:"status"`
					Reason     string `json:"reason"`
				} `json:"attempts"`
			}
			if st := e.API("GET", fmt.Sprintf("/api/requests/%d", int64(row["id"].(float64))), nil, &detail); st != 200 || len(detail.Attempts) != 2 ||
				detail.Attempts[0].Connection != "first" || detail.Attempts[0].Status != 429 || detail.Attempts[0].Reason != "rate_limit" ||
				detail.Attempts[1].Connection != "second" || detail.Attempts[1].Status != 200 {
				t.Fatalf("attempts %d %+v", st, detail.Attempts)
			}
		})
	}
}
