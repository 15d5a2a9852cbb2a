package responses

// Comparisons with translate, the pairwise translator this package replaces, as the oracle of
// what the gateway does today. This file goes when translate goes.

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/translate"
)

// A request translate refused, the reader refuses with the same words; one translate read,
// the reader reads.
func TestOracleValidation(t *testing.T) {
	bodies := []string{
		`[]`, `"x"`, `{`, `{"model":1}`, `{"model":null,"input":null}`, `{"instructions":[]}`, `{"tools":{}}`,
		`{"parallel_tool_calls":"yes"}`, `{"max_output_tokens":1.5}`, `{"max_output_tokens":1e3}`, `{"max_output_tokens":-3}`,
		`{"max_output_tokens":99999999999999999999}`, `{"temperature":"hot"}`, `{"top_p":true}`, `{"reasoning":"high"}`,
		`{"reasoning":{"effort":3}}`, `{"reasoning":{"effort":null}}`, `{"stream":1}`, `{"text":"json"}`, `{"user":7}`,
		`{"tools":[1]}`, `{"tools":[null]}`, `{"tools":[{"type":"function","name":2}]}`, `{"tools":[{"type":3}]}`,
		`{"tools":[{"type":"web_search","description":[]}]}`, `{"input":5}`, `{"input":true}`, `{"input":[1]}`, `{"input":[null]}`,
		`{"input":[{"type":"function_call","arguments":{}}]}`, `{"input":[{"role":7}]}`, `{"input":[{"call_id":1}]}`,
		`{"input":[{"role":"user","content":7}]}`, `{"input":[{"role":"user","content":[7]}]}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":3}]}]}`, `{"metadata":"x","store":"yes","include":3}`,
		`{"tool_choice":{"type":"function"}}`, `{"text":{"format":{"type":"json_schema","strict":"yes"}}}`,
	}
	for _, f := range files(t, "request", ".json") {
		bodies = append(bodies, string(read(t, f)))
	}
	for _, body := range bodies {
		_, terr := translate.ResponsesToChat([]byte(body), translate.Target{})
		_, err := ReadRequest([]byte(body))
		if (terr == nil) != (err == nil) || terr != nil && terr.Error() != err.Error() {
			t.Errorf("%s: %v, translate %v", oneLine(body), err, terr)
		}
	}
}

// fact is one thing a conversation says, in the terms chat completions and the model share.
type fact struct {
	Kind, ID, Name, Text string
}

// chatFacts are the facts of the chat request translate wrote.
func chatFacts(body []byte) []fact {
	var out []fact
	leading := true
	var system []string
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		role := m.Get("role").String()
		if role == "system" && leading {
			system = append(system, m.Get("content").String())
			continue
		}
		if leading && len(system) > 0 {
			out = append(out, fact{Kind: "system", Text: strings.Join(system, "\n")})
		}
		leading = false
		c := m.Get("content")
		switch role {
		case "system":
			out = append(out, fact{Kind: "system", Text: c.String()})
		case "user":
			if c.IsArray() {
				for _, p := range c.Array() {
					if p.Get("type").String() == "image_url" {
						out = append(out, fact{Kind: "image", Text: p.Get("image_url.url").String(), Name: p.Get("image_url.detail").String()})
					} else {
						out = append(out, fact{Kind: "user", Text: p.Get("text").String()})
					}
				}
			} else if c.Type == gjson.String {
				out = append(out, fact{Kind: "user", Text: c.String()})
			}
		case "assistant":
			if c.String() != "" {
				out = append(out, fact{Kind: "assistant", Text: c.String()})
			}
			for _, tc := range m.Get("tool_calls").Array() {
				out = append(out, fact{Kind: "call", ID: tc.Get("id").String(), Name: tc.Get("function.name").String(),
					Text: object(tc.Get("function.arguments").String())})
			}
		case "tool":
			out = append(out, fact{Kind: "tool", ID: m.Get("tool_call_id").String(), Text: c.String()})
		}
	}
	if leading && len(system) > 0 {
		out = append(out, fact{Kind: "system", Text: strings.Join(system, "\n")})
	}
	return out
}

// object is a call's arguments as the model carries them: the object they hold, compacted, or {}.
func object(args string) string {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return "{}"
	}
	if _, ok := v.(map[string]any); !ok {
		return "{}"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// modelFacts are the facts of a request of the model.
func modelFacts(r *convo.Request) []fact {
	var out []fact
	var system []string
	for _, p := range r.System {
		system = append(system, p.Text.String())
	}
	if len(system) > 0 {
		out = append(out, fact{Kind: "system", Text: strings.Join(system, "\n")})
	}
	for _, m := range r.Messages {
		var text strings.Builder
		texts := 0
		flush := func() {
			if texts > 0 && text.Len() > 0 {
				out = append(out, fact{Kind: "assistant", Text: text.String()})
			}
			text.Reset()
			texts = 0
		}
		for _, p := range m.Parts {
			switch {
			case m.Role == convo.RoleSystem:
				system := []string{}
				for _, q := range m.Parts {
					system = append(system, q.Text.String())
				}
				out = append(out, fact{Kind: "system", Text: strings.Join(system, "\n")})
			case p.Kind == convo.PartText && m.Role == convo.RoleAssistant:
				text.WriteString(p.Text.String())
				texts++
			case p.Kind == convo.PartText:
				out = append(out, fact{Kind: "user", Text: p.Text.String()})
			case p.Kind == convo.PartImage:
				u := p.URL
				if p.Data != "" {
					u = "data:" + p.MediaType + ";base64," + p.Data
				}
				out = append(out, fact{Kind: "image", Text: u, Name: p.Detail})
			case p.Kind == convo.PartToolCall:
				flush()
				out = append(out, fact{Kind: "call", ID: p.ID, Name: p.Name, Text: object(string(p.Args))})
			case p.Kind == convo.PartToolResult:
				var s strings.Builder
				for _, c := range p.Content {
					s.WriteString(c.Text.String())
				}
				out = append(out, fact{Kind: "tool", ID: p.ID, Text: s.String()})
			}
			if m.Role == convo.RoleSystem {
				break
			}
		}
		flush()
	}
	return out
}

// Everything translate carried from a Responses request into chat completions, the model
// carries: the conversation (system texts, user texts and images, assistant texts, calls with
// their arguments, tool outputs), the function tools, tool choice and the settings; translate's
// drops are either carried now (reasoning items, hosted tools, files, a tool output's images)
// or dropped by the reader too.
func TestOracleRequestCarriesWhatTranslateCarried(t *testing.T) {
	carried := []string{"input[].type=reasoning", "input[].content[].type=input_file", "input[].content[].type=input_image",
		"input[].content[].type=output_text", "previous_response_id", "truncation", "service_tier",
		// A null item: translate made an empty user message of it and named its content
		// dropped; there is nothing in it to carry or drop.
		"input[].content"}
	for _, f := range files(t, "request", ".json") {
		t.Run(strings.TrimSuffix(f[len("testdata/request/"):], ".json"), func(t *testing.T) {
			body := read(t, f)
			tr, err := translate.ResponsesToChat(body, translate.Target{})
			if err != nil {
				t.Fatal(err)
			}
			r := mustRead(t, string(body))
			var chat, model []fact
			for _, x := range chatFacts(tr.Body) {
				if x.Kind != "user" || x.Text != "" { // translate's empty user message for a null item
					chat = append(chat, x)
				}
			}
			refusals := map[string]bool{}
			gjson.GetBytes(body, "input.#.content.#.refusal").ForEach(func(_, v gjson.Result) bool {
				v.ForEach(func(_, v gjson.Result) bool { refusals[v.String()] = true; return true })
				return true
			})
			for _, x := range modelFacts(r) {
				switch {
				case x.Kind == "image" && strings.Contains(string(body), `"function_call_output"`) && !slices.Contains(chatImages(tr.Body), x.Text):
					// Translate dropped a tool output's images, which the model carries.
				case x.Kind == "assistant" && refusals[x.Text]:
					// Translate read a refusal part's text where OpenAI puts it in refusal.
				case x.Kind == "user" && x.Text == "":
				default:
					model = append(model, x)
				}
			}
			if !reflect.DeepEqual(chat, model) {
				t.Fatalf("conversation\n got %+v\nwant %+v", model, chat)
			}
			c := gjson.ParseBytes(tr.Body)
			var tools []string
			for _, tool := range c.Get("tools").Array() {
				tools = append(tools, tool.Get("function.name").String()+"|"+tool.Get("function.description").String()+"|"+compact(tool.Get("function.parameters").Raw))
			}
			var mine []string
			for _, tool := range r.Tools {
				if tool.Kind == convo.ToolFunction {
					params := string(tool.Parameters)
					if params == "" {
						params = `{"type":"object","properties":{}}`
					}
					mine = append(mine, tool.Name+"|"+tool.Description+"|"+compact(params))
				}
			}
			if !slices.Equal(tools, mine) {
				t.Errorf("tools\n got %v\nwant %v", mine, tools)
			}
			settings := func(max, temp, topP, effort, user, stream, parallel, choice, format string) []string {
				return []string{max, temp, topP, effort, user, stream, parallel, choice, format}
			}
			want := settings(c.Get("max_tokens").Raw, c.Get("temperature").Raw, c.Get("top_p").Raw, c.Get("reasoning_effort").String(),
				c.Get("user").String(), c.Get("stream").Raw, c.Get("parallel_tool_calls").Raw, compact(c.Get("tool_choice").Raw),
				compact(c.Get("response_format").Raw))
			got := settings(intOr(r.MaxTokens), floatOr(r.Temperature), floatOr(r.TopP), r.ReasoningEffort, r.User, boolOr(r.Stream),
				ptrOr(r.ParallelToolCalls, len(mine) > 0), choiceOf(r, len(mine) > 0), formatOf(r.Format))
			if !slices.Equal(want, got) {
				t.Errorf("settings\n got %q\nwant %q", got, want)
			}
			for _, d := range tr.Dropped {
				if !slices.Contains(r.Dropped, d) && !slices.Contains(carried, d) && !strings.HasPrefix(d, "tools[].type=") {
					t.Errorf("translate dropped %s, the reader neither drops nor carries it (dropped %v)", d, r.Dropped)
				}
			}
		})
	}
}

func chatImages(body []byte) []string {
	var out []string
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		for _, p := range m.Get("content").Array() {
			if u := p.Get("image_url.url"); u.Exists() {
				out = append(out, u.String())
			}
		}
	}
	return out
}

func compact(raw string) string {
	if raw == "" {
		return ""
	}
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func intOr(n int) string {
	if n == 0 {
		return ""
	}
	b, _ := json.Marshal(n)
	return string(b)
}

func floatOr(f *float64) string {
	if f == nil {
		return ""
	}
	return string(appendFloat(nil, *f))
}

func boolOr(b bool) string {
	if b {
		return "true"
	}
	return ""
}

func ptrOr(b *bool, tools bool) string {
	if b == nil || !tools {
		return ""
	}
	return string(boolJSON(*b))
}

func choiceOf(r *convo.Request, tools bool) string {
	if !tools {
		return ""
	}
	switch r.ToolChoice.Mode {
	case convo.ChoiceAuto:
		return `"auto"`
	case convo.ChoiceNone:
		return `"none"`
	case convo.ChoiceAny:
		return `"required"`
	case convo.ChoiceTool:
		return `{"function":{"name":"` + r.ToolChoice.Name + `"},"type":"function"}`
	}
	return ""
}

func formatOf(f *convo.ResponseFormat) string {
	if f == nil {
		return ""
	}
	switch f.Kind {
	case convo.FormatJSONObject:
		return `{"type":"json_object"}`
	case convo.FormatJSONSchema:
		js := map[string]any{"name": f.Name, "schema": json.RawMessage(f.Schema)}
		if f.Strict != nil {
			js["strict"] = *f.Strict
		}
		return compact(mustJSON(map[string]any{"type": "json_schema", "json_schema": js}))
	}
	return ""
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// echoNormal is a Responses answer or stream event with the echo's fields in one form: the
// reasoning object with both its keys, the text object as its format (translate echoed the
// client's text object whole, verbosity included; the model keeps the format).
func echoNormal(t *testing.T, b []byte, req *convo.Request) any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	r := v
	if inner, ok := v["response"].(map[string]any); ok {
		r = inner
	}
	if rs, ok := r["reasoning"].(map[string]any); ok {
		for _, k := range []string{"effort", "summary"} {
			if _, ok := rs[k]; !ok {
				rs[k] = nil
			}
		}
	}
	if slices.Contains(req.Dropped, "tool_choice") { // allowed_tools and the like: not in the model
		delete(r, "tool_choice")
	}
	if tools, ok := r["tools"].([]any); ok {
		r["tools"] = slices.DeleteFunc(tools, func(t any) bool { return t == nil })
	}
	if text, ok := r["text"].(map[string]any); ok {
		f, ok := text["format"]
		if !ok {
			f = map[string]any{"type": "text"}
		}
		r["text"] = map[string]any{"format": f}
	}
	return v
}

// For every request fixture, a whole answer and a stream written for it are translate's, echo
// of the request included (up to echoNormal).
func TestOracleAnswerAndStreamEchoTheRequest(t *testing.T) {
	answerEvents := []convo.Event{start("chatcmpl-9XYZ", "gpt-x"),
		blockStart(0, convo.BlockThinking), delta(0, "Need both cities."), blockStop(0),
		blockStart(1, convo.BlockText), delta(1, "Checking the weather."), blockStop(1),
		callStart(2, "call_1", "get_weather"), delta(2, `{\"city\":\"Paris\"}`), blockStop(2),
		callStart(3, "call_2", "get_weather"), delta(3, "not json"), blockStop(3),
		usage(150, 50, 30), stop(convo.StopToolUse), end}
	streamEvents := []convo.Event{start("chatcmpl-1", "gpt-x"),
		blockStart(0, convo.BlockThinking), delta(0, "Two "), delta(0, "cities."), blockStop(0),
		blockStart(1, convo.BlockText), delta(1, "Checking"), delta(1, " both."), blockStop(1),
		callStart(2, "call_1", "get_weather"), delta(2, `{\"city\":\"Paris\"}`), blockStop(2),
		callStart(3, "call_2", "get_weather"), delta(3, `{\"city\":`), delta(3, `\"Rome\"}`), blockStop(3),
		stop(convo.StopToolUse), usage(30, 42, 5), end}
	for _, f := range files(t, "request", ".json") {
		t.Run(strings.TrimSuffix(f[len("testdata/request/"):], ".json"), func(t *testing.T) {
			body := read(t, f)
			echo := translate.EchoOf(body)
			r := mustRead(t, string(body))

			want, err := translate.ChatResponseToResponses(read(t, "testdata/client/answer_text_tools_reasoning.chat.json"), echo)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := AppendAnswer(nil, r, answerEvents, 1700000000)
			if w, g := echoNormal(t, want, r), echoNormal(t, got, r); !reflect.DeepEqual(w, g) {
				t.Fatalf("answer\n got %s\nwant %s", got, want)
			}

			s := &translate.ChatToResponsesStream{Echo: echo, Created: 1700000000}
			var tout []byte
			for _, ev := range splitEvents(read(t, "testdata/client/stream_reasoning_text_tools.chat.sse")) {
				tout = s.Event(tout, ev)
			}
			wantEvents := splitEvents(tout)
			gotEvents := splitEvents(writeStream(r, streamEvents))
			if len(wantEvents) != len(gotEvents) {
				t.Fatalf("%d events, translate %d", len(gotEvents), len(wantEvents))
			}
			for i := range wantEvents {
				wn, wd := dataOf(wantEvents[i])
				gn, gd := convo.ParseEvent(gotEvents[i])
				if wn != gn || !reflect.DeepEqual(echoNormal(t, wd, r), echoNormal(t, gd, r)) {
					t.Fatalf("event %d\n got %s\nwant %s", i, gotEvents[i], wantEvents[i])
				}
			}
		})
	}
}

// dataOf reads an event translate wrote, whose data may span lines: translate echoed the
// client's raw JSON, line breaks of a pretty-printed request included (which cut the data line
// short for an SSE parser; the writer here writes the echo without them).
func dataOf(ev []byte) (string, []byte) {
	name, _ := convo.ParseEvent(ev)
	_, data, _ := strings.Cut(string(ev), "\ndata: ")
	return name, []byte(data)
}
