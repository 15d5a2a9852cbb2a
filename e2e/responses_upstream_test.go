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
// off; given the results (the input ends with function_call_output items), the answer in text.
// gpt-5-codex always reasons first; its reasoning item carries a summary only when the request
// asks for one (reasoning.summary), and its encrypted content only when the request includes it.
func planCodex(req gjson.Result) codexPlan {
	input := req.Get("input").Array()
	answered := len(input) > 0 && input[len(input)-1].Get("type").String() == "function_call_output"
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
// streamed: reasoning with its summary and encrypted content, two parallel function calls,
// usage with cached and reasoning tokens, then after the calls' outputs the answer; a budget
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
			r, err := client.Responses.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			return r
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
