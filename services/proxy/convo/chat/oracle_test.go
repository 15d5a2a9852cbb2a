package chat

// The old pairwise translators (services/proxy/translate) are what the gateway does today: here
// they are the oracle this package is held to, on their own goldens' inputs. The file goes away
// whole with the translate package; nothing else refers to it.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/translate"
)

const oracleData = "../../translate/testdata"

func oracleFiles(t *testing.T, dir, ext string) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(oracleData, dir, "*"+ext))
	if len(files) == 0 {
		t.Fatalf("no oracle inputs in %s", dir)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ext)] = b
	}
	return out
}

// badRequests are chat bodies the translator refused, with every kind of wrong type it knew.
var badRequests = []string{
	`[]`, `{"model":"m"`, `{"model":1}`, `{"messages":{}}`, `{"max_tokens":1.5}`, `{"max_tokens":"1"}`,
	`{"max_completion_tokens":1e3}`, `{"max_tokens":99999999999999999999}`, `{"temperature":"hot"}`, `{"top_p":true}`,
	`{"stream":"yes"}`, `{"stream_options":[]}`, `{"stream_options":{"include_usage":1}}`, `{"tools":{}}`, `{"tools":[1]}`,
	`{"tools":[{"type":1}]}`, `{"tools":[{"function":[]}]}`, `{"tools":[{"function":{"name":1}}]}`,
	`{"tools":[{"function":{"description":{}}}]}`, `{"parallel_tool_calls":0}`, `{"reasoning_effort":3}`, `{"user":{}}`,
	`{"messages":["hi"]}`, `{"messages":[{"role":1}]}`, `{"messages":[{"role":"tool","tool_call_id":2}]}`,
	`{"messages":[{"role":"assistant","reasoning_content":[]}]}`, `{"messages":[{"role":"user","name":false}]}`,
	`{"messages":[{"role":"assistant","tool_calls":{}}]}`, `{"messages":[{"role":"assistant","tool_calls":[1]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"function":"f"}]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"id":1,"function":{}}]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"index":0.5,"function":{}}]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":{}}}]}]}`,
	`{"messages":[{"role":"user"},{"role":"user","tool_calls":[{"type":true,"function":{}}]}]}`,
}

// The reader refuses what the translator refused, with the same words, and takes what it took.
func TestOracleRequestErrors(t *testing.T) {
	inputs := slices.Clone(badRequests)
	for _, b := range oracleFiles(t, "chat_request", ".json") {
		inputs = append(inputs, string(b))
	}
	for _, body := range inputs {
		_, want := translate.ChatToMessages([]byte(body), translate.Target{})
		_, got := ReadRequest([]byte(body))
		if (want == nil) != (got == nil) || want != nil && want.Error() != got.Error() {
			t.Errorf("%s: error %v, translate's %v", body, got, want)
		}
	}
}

// FuzzOracleRequestErrors: on any body, the reader refuses exactly when the translator did
// (bodies with the fields only the reader reads, which it checks too, aside).
func FuzzOracleRequestErrors(f *testing.F) {
	for _, b := range badRequests {
		f.Add([]byte(b))
	}
	seedDir(f, "request", ".json")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, k := range []string{`"response_format"`, `"metadata"`, `"service_tier"`, `"store"`} {
			if strings.Contains(string(body), k) {
				return
			}
		}
		_, want := translate.ChatToMessages(body, translate.Target{})
		_, got := ReadRequest(body)
		if (want == nil) != (got == nil) {
			t.Fatalf("%q: error %v, translate's %v", body, got, want)
		}
	})
}

// answerSummary is what an answer says, in Anthropic's terms (the translator's output).
type answerSummary struct {
	Thinking, Text string
	Calls          []summaryCall
	Stop           string
	Input, Output  int64
	CacheRead      int64
	Error          string
}

type summaryCall struct {
	ID, Name string
	Input    any
}

var anthropicStop = map[convo.StopReason]string{convo.StopEnd: "end_turn", convo.StopMaxTokens: "max_tokens",
	convo.StopToolUse: "tool_use", convo.StopContentFilter: "refusal"}

// summaryOfEvents reads the model's events as the translator's Anthropic output says them.
func summaryOfEvents(evs []convo.Event) answerSummary {
	var s answerSummary
	var u convo.Usage
	kinds := map[int]convo.BlockKind{}
	calls := map[int]int{}
	args := map[int]string{}
	for _, e := range evs {
		switch e.Kind {
		case convo.EvBlockStart:
			kinds[e.Index] = e.Block
			if e.Block == convo.BlockToolCall {
				calls[e.Index] = len(s.Calls)
				s.Calls = append(s.Calls, summaryCall{ID: e.ID, Name: e.Name})
			}
		case convo.EvDelta:
			switch kinds[e.Index] {
			case convo.BlockThinking:
				s.Thinking += e.Text.String()
			case convo.BlockText:
				s.Text += e.Text.String()
			case convo.BlockToolCall:
				args[e.Index] += e.Text.String()
			}
		case convo.EvUsage:
			u.Merge(e.Usage)
		case convo.EvStop:
			s.Stop = anthropicStop[e.Stop]
		case convo.EvError:
			s.Error = e.Err.Message
		}
	}
	for i, c := range calls {
		var v any
		if json.Unmarshal([]byte(args[i]), &v) != nil {
			v = map[string]any{}
		}
		if _, ok := v.(map[string]any); !ok {
			v = map[string]any{}
		}
		s.Calls[c].Input = v
	}
	s.Input, s.Output = u.Input, u.Output
	if u.CacheRead > 0 && u.CacheRead <= u.Input {
		s.Input, s.CacheRead = u.Input-u.CacheRead, u.CacheRead
	}
	return s
}

// summaryOfMessages reads an Anthropic answer (or the content blocks a stream built).
func summaryOfMessages(m gjson.Result) answerSummary {
	s := answerSummary{Stop: m.Get("stop_reason").String(), Input: m.Get("usage.input_tokens").Int(),
		Output: m.Get("usage.output_tokens").Int(), CacheRead: m.Get("usage.cache_read_input_tokens").Int()}
	for _, b := range m.Get("content").Array() {
		switch b.Get("type").String() {
		case "thinking":
			s.Thinking += b.Get("thinking").String()
		case "text":
			s.Text += b.Get("text").String()
		case "tool_use":
			var v any
			_ = json.Unmarshal([]byte(b.Get("input").Raw), &v)
			s.Calls = append(s.Calls, summaryCall{ID: b.Get("id").String(), Name: b.Get("name").String(), Input: v})
		}
	}
	return s
}

var oracleAnswers = []string{
	`{"id":"a","model":"m","choices":[{"message":{"content":null,"refusal":"I can't."},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":9,"completion_tokens":1}}`,
	`{"choices":[{"index":0,"message":{"reasoning":"no","reasoning_content":"yes","content":"x"}},{"index":1,"message":{"content":"other"}}]}`,
	`{"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"[1]"}},{"function":{"name":"g"}}]},"finish_reason":"function_call"}]}`,
	`{"choices":[{"message":{"content":"\"q\" \u00e9\n"},"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}`,
	`{"choices":[]}`,
}

// The answer reader finds in a chat completion what the translator found: reasoning, text,
// tool calls, the stop reason, usage with cached tokens.
func TestOracleAnswerReader(t *testing.T) {
	inputs := slices.Clone(oracleAnswers)
	for _, b := range oracleFiles(t, "chat_response", ".json") {
		inputs = append(inputs, string(b))
	}
	for _, in := range inputs {
		want, err := translate.ChatResponseToMessages([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := ReadAnswer(nil, []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		w, g := summaryOfMessages(gjson.ParseBytes(want)), summaryOfEvents(evs)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %s\nwant %s", in, mustJSON(g), mustJSON(w))
		}
	}
}

// summaryOfAnthropicStream reads an Anthropic stream as a client builds the message.
func summaryOfAnthropicStream(t *testing.T, doc []byte) answerSummary {
	t.Helper()
	var blocks []map[string]any
	partial := map[int]string{}
	msg := map[string]any{}
	usage := map[string]any{}
	errMsg := ""
	for _, ev := range splitEvents(doc) {
		_, data := convo.ParseEvent(ev)
		e := gjson.ParseBytes(data)
		switch e.Get("type").String() {
		case "message_start":
			_ = json.Unmarshal([]byte(e.Get("message.usage").Raw), &usage)
		case "content_block_start":
			var b map[string]any
			_ = json.Unmarshal([]byte(e.Get("content_block").Raw), &b)
			blocks = append(blocks, b)
		case "content_block_delta":
			i := int(e.Get("index").Int())
			d := e.Get("delta")
			switch d.Get("type").String() {
			case "text_delta":
				blocks[i]["text"] = blocks[i]["text"].(string) + d.Get("text").String()
			case "thinking_delta":
				blocks[i]["thinking"] = blocks[i]["thinking"].(string) + d.Get("thinking").String()
			case "input_json_delta":
				partial[i] += d.Get("partial_json").String()
			}
		case "message_delta":
			msg["stop_reason"] = e.Get("delta.stop_reason").String()
			var u map[string]any
			_ = json.Unmarshal([]byte(e.Get("usage").Raw), &u)
			for k, v := range u {
				usage[k] = v
			}
		case "error":
			errMsg = e.Get("error.message").String()
		}
	}
	for i, p := range partial {
		var v any
		if json.Unmarshal([]byte(p), &v) != nil {
			v = map[string]any{}
		}
		blocks[i]["input"] = v
	}
	msg["content"], msg["usage"] = blocks, usage
	b, _ := json.Marshal(msg)
	s := summaryOfMessages(gjson.ParseBytes(b))
	s.Error = errMsg
	return s
}

var oracleStreams = []string{
	`data: {"id":"c","model":"m","choices":[{"delta":{"reasoning":"r"}}]}` + "\n\n" +
		`data: {"id":"c","choices":[{"delta":{"content":"t"}}]}` + "\n\n" +
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}` + "\n\n" +
		"data: [DONE]\n\n",
	`data: {"choices":[{"delta":{"content":"cut"},"finish_reason":"length"}]}` + "\n\ndata: [DONE]\n\n",
	`data: {"choices":[{"delta":{"content":"x"}}]}` + "\n\n" + `data: {"error":{"message":"boom","type":"rate_limit_error"}}` + "\n\n",
}

// The stream reader finds in chat chunks what the stream translator found.
func TestOracleStreamReader(t *testing.T) {
	inputs := slices.Clone(oracleStreams)
	for _, b := range oracleFiles(t, "chat_stream", ".sse") {
		inputs = append(inputs, string(b))
	}
	for _, in := range inputs {
		tr := translate.NewChatToMessagesStream()
		var out []byte
		for _, ev := range splitEvents([]byte(in)) {
			out = tr.Event(out, ev)
		}
		w, g := summaryOfAnthropicStream(t, out), summaryOfEvents(readStream([]byte(in)))
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %s\nwant %s", in, mustJSON(g), mustJSON(w))
		}
	}
}

var stopOfAnthropic = map[string]convo.StopReason{"end_turn": convo.StopEnd, "max_tokens": convo.StopMaxTokens,
	"tool_use": convo.StopToolUse, "stop_sequence": convo.StopSequence, "refusal": convo.StopRefusal, "pause_turn": convo.StopPause}

// anthropicUsage is an Anthropic usage object in the model's terms.
func anthropicUsage(u gjson.Result) convo.Usage {
	var m convo.Usage
	if v := u.Get("input_tokens"); v.Exists() {
		m.Input, m.Has = v.Int()+u.Get("cache_read_input_tokens").Int()+u.Get("cache_creation_input_tokens").Int(), convo.HasInput
	}
	if v := u.Get("cache_read_input_tokens"); v.Exists() {
		m.CacheRead, m.Has = v.Int(), m.Has|convo.HasCacheRead
	}
	if v := u.Get("cache_creation_input_tokens"); v.Exists() {
		m.CacheWrite, m.Has = v.Int(), m.Has|convo.HasCacheWrite
	}
	if v := u.Get("output_tokens"); v.Exists() {
		m.Output, m.Has = v.Int(), m.Has|convo.HasOutput
	}
	return m
}

// eventsOfMessages is an Anthropic answer as the model's events: the stand-in for the messages
// reader, to feed the chat writer what the translator was fed.
func eventsOfMessages(body []byte) []convo.Event {
	m := gjson.ParseBytes(body)
	evs := []convo.Event{{Kind: convo.EvStart, ID: m.Get("id").String(), Model: m.Get("model").String()}}
	for i, b := range m.Get("content").Array() {
		switch b.Get("type").String() {
		case "thinking":
			evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockThinking},
				convo.Event{Kind: convo.EvDelta, Index: i, Block: convo.BlockThinking, Text: convo.TextOf(b.Get("thinking"))},
				convo.Event{Kind: convo.EvSignature, Index: i, Text: convo.TextOf(b.Get("signature"))})
		case "text":
			evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockText},
				convo.Event{Kind: convo.EvDelta, Index: i, Block: convo.BlockText, Text: convo.TextOf(b.Get("text"))})
		case "tool_use":
			evs = append(evs, convo.Event{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockToolCall, ID: b.Get("id").String(), Name: b.Get("name").String()},
				convo.Event{Kind: convo.EvDelta, Index: i, Block: convo.BlockToolCall, Text: convo.QuoteText(b.Get("input").Raw)})
		}
		evs = append(evs, convo.Event{Kind: convo.EvBlockStop, Index: i})
	}
	return append(evs, convo.Event{Kind: convo.EvUsage, Usage: anthropicUsage(m.Get("usage"))},
		convo.Event{Kind: convo.EvStop, Stop: stopOfAnthropic[m.Get("stop_reason").String()]}, convo.Event{Kind: convo.EvEnd})
}

// The answer writer writes what the translator wrote for an Anthropic answer, byte for byte.
func TestOracleAnswerWriter(t *testing.T) {
	for name, in := range oracleFiles(t, "messages_response", ".json") {
		want, err := translate.MessagesResponseToChat(in, 1700000000)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendAnswer(nil, &convo.Request{}, eventsOfMessages(in), 1700000000)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// eventsOfAnthropicEvent is one Anthropic stream event as the model's events (the stand-in for
// the messages stream reader).
func eventsOfAnthropicEvent(ev []byte) []convo.Event {
	_, data := convo.ParseEvent(ev)
	e := gjson.ParseBytes(data)
	i := int(e.Get("index").Int())
	switch e.Get("type").String() {
	case "message_start":
		m := e.Get("message")
		return []convo.Event{{Kind: convo.EvStart, ID: m.Get("id").String(), Model: m.Get("model").String()},
			{Kind: convo.EvUsage, Usage: anthropicUsage(m.Get("usage"))}}
	case "content_block_start":
		b := e.Get("content_block")
		switch b.Get("type").String() {
		case "thinking":
			return []convo.Event{{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockThinking}}
		case "text":
			return []convo.Event{{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockText}}
		case "tool_use":
			return []convo.Event{{Kind: convo.EvBlockStart, Index: i, Block: convo.BlockToolCall, ID: b.Get("id").String(), Name: b.Get("name").String()}}
		}
	case "content_block_delta":
		d := e.Get("delta")
		switch d.Get("type").String() {
		case "text_delta":
			return []convo.Event{{Kind: convo.EvDelta, Index: i, Text: convo.TextOf(d.Get("text"))}}
		case "thinking_delta":
			return []convo.Event{{Kind: convo.EvDelta, Index: i, Text: convo.TextOf(d.Get("thinking"))}}
		case "input_json_delta":
			return []convo.Event{{Kind: convo.EvDelta, Index: i, Text: convo.TextOf(d.Get("partial_json"))}}
		case "signature_delta":
			return []convo.Event{{Kind: convo.EvSignature, Index: i, Text: convo.TextOf(d.Get("signature"))}}
		}
	case "content_block_stop":
		return []convo.Event{{Kind: convo.EvBlockStop, Index: i}}
	case "message_delta":
		return []convo.Event{{Kind: convo.EvUsage, Usage: anthropicUsage(e.Get("usage"))},
			{Kind: convo.EvStop, Stop: stopOfAnthropic[e.Get("delta.stop_reason").String()]}}
	case "message_stop":
		return []convo.Event{{Kind: convo.EvEnd}}
	case "error":
		return []convo.Event{{Kind: convo.EvError, Err: &convo.Error{Type: e.Get("error.type").String(), Message: e.Get("error.message").String()}}}
	}
	return nil
}

// The stream writer writes, chunk for chunk, what the translator wrote for an Anthropic stream
// (the error chunk's keys aside: the translator wrote them sorted).
func TestOracleStreamWriter(t *testing.T) {
	for name, in := range oracleFiles(t, "messages_stream", ".sse") {
		for _, includeUsage := range []bool{true, false} {
			tr := &translate.MessagesToChatStream{IncludeUsage: includeUsage, Created: 1700000000}
			w := NewStreamWriter(&convo.Request{IncludeUsage: includeUsage}, 1700000000)
			var want, got []byte
			for _, ev := range splitEvents(in) {
				want = tr.Event(want, ev)
				evs := eventsOfAnthropicEvent(ev)
				for i := range evs {
					got = w.Write(got, &evs[i])
				}
			}
			we, ge := splitEvents(want), splitEvents(got)
			if len(we) != len(ge) {
				t.Fatalf("%s: %d chunks, translate's %d\n got %s\nwant %s", name, len(ge), len(we), got, want)
			}
			for i := range we {
				_, wd := convo.ParseEvent(we[i])
				_, gd := convo.ParseEvent(ge[i])
				var wv, gv any
				_ = json.Unmarshal(wd, &wv)
				_ = json.Unmarshal(gd, &gv)
				if string(wd) != string(gd) && !(wv != nil && reflect.DeepEqual(wv, gv) && strings.Contains(string(wd), `"error"`)) {
					t.Errorf("%s chunk %d:\n got %s\nwant %s", name, i, gd, wd)
				}
			}
		}
	}
}

// requestOfMessages is an Anthropic request in the model (the stand-in for the messages
// request reader, as the contract describes it), to feed the chat request writer what the
// translator was fed.
func requestOfMessages(body []byte) *convo.Request {
	m := gjson.ParseBytes(body)
	r := &convo.Request{Model: m.Get("model").String(), MaxTokens: int(m.Get("max_tokens").Int()), Stream: m.Get("stream").Bool()}
	if v := m.Get("temperature"); v.Exists() {
		f := v.Float()
		r.Temperature = &f
	}
	if v := m.Get("top_p"); v.Exists() {
		f := v.Float()
		r.TopP = &f
	}
	if v := m.Get("top_k"); v.Exists() {
		n := int(v.Int())
		r.TopK = &n
	}
	for _, s := range m.Get("stop_sequences").Array() {
		r.Stop = append(r.Stop, s.String())
	}
	if v := m.Get("metadata"); v.Exists() {
		r.Metadata = []byte(v.Raw)
	}
	if m.Get("thinking.type").String() == "enabled" {
		r.ThinkingBudget = int(m.Get("thinking.budget_tokens").Int())
	}
	textPart := func(b gjson.Result) convo.Part {
		p := convo.Part{Kind: convo.PartText, Text: convo.TextOf(b.Get("text"))}
		if c := b.Get("cache_control"); c.Exists() {
			p.Cache = []byte(c.Raw)
		}
		return p
	}
	if s := m.Get("system"); s.Type == gjson.String {
		r.System = []convo.Part{{Kind: convo.PartText, Text: convo.TextOf(s)}}
	} else {
		for _, b := range s.Array() {
			r.System = append(r.System, textPart(b))
		}
	}
	for _, t := range m.Get("tools").Array() {
		switch typ := t.Get("type").String(); typ {
		case "", "custom":
			r.Tools = append(r.Tools, convo.Tool{Kind: convo.ToolFunction, Name: t.Get("name").String(),
				Description: t.Get("description").String(), Parameters: []byte(t.Get("input_schema").Raw)})
		default:
			r.Tools = append(r.Tools, convo.Tool{Kind: convo.ToolServer, Type: typ, Name: t.Get("name").String(), Family: "anthropic", Raw: []byte(t.Raw)})
		}
	}
	if tc := m.Get("tool_choice"); tc.Exists() {
		switch tc.Get("type").String() {
		case "auto":
			r.ToolChoice.Mode = convo.ChoiceAuto
		case "any":
			r.ToolChoice.Mode = convo.ChoiceAny
		case "none":
			r.ToolChoice.Mode = convo.ChoiceNone
		case "tool":
			r.ToolChoice = convo.ToolChoice{Mode: convo.ChoiceTool, Name: tc.Get("name").String()}
		}
		if tc.Get("disable_parallel_tool_use").Bool() {
			f := false
			r.ParallelToolCalls = &f
		}
	}
	for _, msg := range m.Get("messages").Array() {
		c := msg.Get("content")
		if c.Type == gjson.String {
			role := convo.RoleUser
			if msg.Get("role").String() == "assistant" {
				role = convo.RoleAssistant
			}
			r.Messages = append(r.Messages, convo.Message{Role: role, Parts: []convo.Part{{Kind: convo.PartText, Text: convo.TextOf(c)}}})
			continue
		}
		var results, parts []convo.Part
		for _, b := range c.Array() {
			switch b.Get("type").String() {
			case "text":
				parts = append(parts, textPart(b))
			case "image":
				src := b.Get("source")
				p := convo.Part{Kind: convo.PartImage, URL: src.Get("url").String()}
				if src.Get("type").String() == "base64" {
					p.MediaType, p.Data = src.Get("media_type").String(), src.Get("data").String()
				}
				parts = append(parts, p)
			case "tool_use":
				parts = append(parts, convo.Part{Kind: convo.PartToolCall, ID: b.Get("id").String(), Name: b.Get("name").String(), Args: []byte(b.Get("input").Raw)})
			case "thinking":
				parts = append(parts, convo.Part{Kind: convo.PartThinking, Text: convo.TextOf(b.Get("thinking")), Signature: b.Get("signature").String()})
			case "tool_result":
				res := convo.Part{Kind: convo.PartToolResult, ID: b.Get("tool_use_id").String(), IsError: b.Get("is_error").Bool()}
				if rc := b.Get("content"); rc.Type == gjson.String {
					res.Content = []convo.Part{{Kind: convo.PartText, Text: convo.TextOf(rc)}}
				} else {
					for _, x := range rc.Array() {
						res.Content = append(res.Content, textPart(x))
					}
				}
				results = append(results, res)
			}
		}
		if len(results) > 0 {
			r.Messages = append(r.Messages, convo.Message{Role: convo.RoleTool, Parts: results})
		}
		if len(parts) > 0 {
			role := convo.RoleUser
			if msg.Get("role").String() == "assistant" {
				role = convo.RoleAssistant
			}
			r.Messages = append(r.Messages, convo.Message{Role: role, Parts: parts})
		}
	}
	return r
}

// The request writer writes for an Anthropic request what the translator wrote, the same JSON;
// what neither can carry is dropped by both (server tools under the contract's name now).
func TestOracleRequestWriter(t *testing.T) {
	rename := strings.NewReplacer("tools[].type=", "tools.")
	for name, in := range oracleFiles(t, "messages_request", ".json") {
		target := translate.Target{MaxCompletionTokens: strings.Contains(string(in), `"openai/`)}
		want, err := translate.MessagesToChat(in, target)
		if err != nil {
			t.Fatal(err)
		}
		r := requestOfMessages(in)
		got, err := AppendRequest(nil, r, convo.Target{MaxCompletionTokens: target.MaxCompletionTokens})
		if err != nil {
			t.Fatal(err)
		}
		var wv, gv any
		_ = json.Unmarshal(want.Body, &wv)
		if err := json.Unmarshal(got, &gv); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
		}
		if !reflect.DeepEqual(gv, wv) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want.Body)
		}
		var wd []string
		for _, d := range want.Dropped {
			wd = append(wd, rename.Replace(d))
		}
		gd := slices.Clone(r.Dropped)
		slices.Sort(wd)
		slices.Sort(gd)
		if !slices.Equal(gd, wd) {
			t.Errorf("%s: dropped %q, translate's %q", name, gd, wd)
		}
	}
}

// The same work, side by side: the model's read and write against the translator's one pass.
func BenchmarkOracleAgentRequestTranslate(b *testing.B) {
	body := agentRequest()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := translate.ChatToMessages(body, translate.Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOracleAnswerTranslate(b *testing.B) {
	b.SetBytes(int64(len(bigChat)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := translate.ChatResponseToMessages(bigChat); err != nil {
			b.Fatal(err)
		}
	}
}
