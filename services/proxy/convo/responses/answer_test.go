package responses

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// The upstream fixtures in testdata/upstream are answers and streams of a Responses upstream in
// the shapes OpenAI documents (streaming events with their sequence numbers, obfuscation
// fields, summary parts, encrypted reasoning on the item done): a text, reasoning with two
// summary parts and encrypted content before a message and two parallel function calls (one in
// a namespace) with cached and reasoning tokens, an answer cut by its output limit, one stopped
// by the content filter, a failed one, an error event mid-stream, and a hosted tool's call. Each
// .json is the answer its .sse ends with.

// Each fixture reads into the model as its golden says: a request of testdata/request (texts
// unescaped, dropped fields named), an upstream's answer and its stream as their events.
func TestReadGoldens(t *testing.T) {
	for _, c := range []struct {
		name, dir, ext string
		dump           func(t *testing.T, in []byte) []byte
	}{
		{"model", "request", ".json", func(t *testing.T, in []byte) []byte { return dumpRequest(t, mustRead(t, string(in))) }},
		{"answer", "upstream", ".json", func(t *testing.T, in []byte) []byte { return dumpEvents(mustReadAnswer(t, in)) }},
		{"stream", "upstream", ".sse", func(t *testing.T, in []byte) []byte {
			return dumpEvents(convotest.ReadStream(NewStreamReader(), in))
		}},
	} {
		t.Run(c.name, func(t *testing.T) { convotest.Goldens(t, c.dir, c.ext, "."+c.name+".golden", c.dump) })
	}
}

// collapse joins the consecutive deltas of a block (a stream brings a text in pieces, an answer
// whole) and copies the texts out of the reader's input.
func collapse(evs []convo.Event) []convo.Event {
	var out []convo.Event
	for _, e := range evs {
		e.Text = convo.Text(strings.Clone(string(e.Text)))
		if n := len(out); n > 0 && e.Kind == convo.EvDelta && out[n-1].Kind == convo.EvDelta && out[n-1].Index == e.Index {
			out[n-1].Text += e.Text
			continue
		}
		out = append(out, e)
	}
	return out
}

// A stream and the answer it ends with read as the same events (the contract: an answer reader
// emits what the stream reader of its format emits for the same answer).
func TestStreamAndAnswerReadAlike(t *testing.T) {
	for _, f := range files(t, "upstream", ".sse") {
		name := strings.TrimSuffix(f, ".sse")
		body, err := readIfExists(name + ".json")
		if err != nil || body == nil {
			continue
		}
		t.Run(name[len("testdata/upstream/"):], func(t *testing.T) {
			stream := collapse(convotest.ReadStream(NewStreamReader(), convotest.Read(t, f)))
			answer := collapse(mustReadAnswer(t, body))
			if last := stream[len(stream)-1]; last.Kind == convo.EvError {
				// A failed stream's partial items are not in its failed answer: the error is.
				if !reflect.DeepEqual(last, answer[len(answer)-1]) {
					t.Fatalf("stream error %+v, answer %+v", last.Err, answer[len(answer)-1].Err)
				}
				return
			}
			if !reflect.DeepEqual(stream, answer) {
				t.Fatalf("stream\n%s\nanswer\n%s", dumpEvents(stream), dumpEvents(answer))
			}
		})
	}
}

// client is a Responses client's request: it asks for encrypted reasoning and has the tools the
// upstream fixtures call.
const client = `{"model":"gpt-5-codex","include":["reasoning.encrypted_content"],"tools":[
 {"type":"function","name":"get_weather","parameters":{"type":"object"}},
 {"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[{"type":"function","name":"spawn_agent"}]}]}`

// project is what a Responses answer says, without what a gateway writes its own way (ids,
// timestamps, the echo of the request): status, details, error, usage, and the items it carries
// (messages, reasoning, function calls).
func project(t *testing.T, answer []byte) map[string]any {
	t.Helper()
	a := gjson.ParseBytes(answer)
	out := map[string]any{"status": a.Get("status").String(), "model": a.Get("model").String(),
		"incomplete_details": a.Get("incomplete_details").Value()}
	if e := a.Get("error"); e.IsObject() {
		out["error"] = map[string]any{"code": e.Get("code").String(), "message": e.Get("message").String()}
	}
	if u := a.Get("usage"); u.IsObject() {
		out["usage"] = []int64{u.Get("input_tokens").Int(), u.Get("input_tokens_details.cached_tokens").Int(),
			u.Get("output_tokens").Int(), u.Get("output_tokens_details.reasoning_tokens").Int(), u.Get("total_tokens").Int()}
	}
	var items []any
	for _, it := range a.Get("output").Array() {
		switch typ := it.Get("type").String(); typ {
		case "message":
			var text string
			for _, p := range it.Get("content").Array() {
				text += p.Get("text").String() + p.Get("refusal").String()
			}
			items = append(items, []string{typ, text})
		case "reasoning":
			var texts []string
			for _, p := range it.Get("summary").Array() {
				texts = append(texts, p.Get("text").String())
			}
			items = append(items, []string{typ, strings.Join(texts, "\n\n"), it.Get("encrypted_content").String()})
		case "function_call":
			items = append(items, []string{typ, it.Get("call_id").String(), it.Get("name").String(),
				it.Get("namespace").String(), it.Get("arguments").String()})
		}
	}
	out["output"] = items
	return out
}

// An upstream's answer, read into events and written for a Responses client, says what it said:
// its texts, reasoning summary and encrypted content, parallel function calls in their
// namespaces, usage with cached and reasoning tokens, its status and its error. The same holds
// for its stream, whose final answer is checked the same way, and whose events read back into the
// events they were written from.
func TestAnswerAndStreamRoundTrip(t *testing.T) {
	r := mustRead(t, client)
	for _, f := range files(t, "upstream", ".sse") {
		name := strings.TrimSuffix(f, ".sse")
		t.Run(name[len("testdata/upstream/"):], func(t *testing.T) {
			if body, _ := readIfExists(name + ".json"); body != nil {
				out, err := AppendAnswer(nil, r, mustReadAnswer(t, body), 1)
				if err != nil || !json.Valid(out) {
					t.Fatalf("%v %s", err, out)
				}
				if want, got := project(t, body), project(t, out); !reflect.DeepEqual(want, got) {
					t.Fatalf("answer\n got %v\nwant %v", got, want)
				}
			}

			upstream := convotest.Read(t, f)
			evs := convotest.ReadStream(NewStreamReader(), upstream)
			w := NewStreamWriter(r, 1)
			out := w.Abort(convotest.Write(w, nil, evs), "stream_incomplete", "the upstream stream ended before it was complete")
			names, datas := convotest.NamedEvents(t, out)
			for i, d := range datas {
				if n := gjson.GetBytes(d, "sequence_number"); n.Int() != int64(i) || gjson.GetBytes(d, "type").String() != names[i] {
					t.Fatalf("event %d: %s", i, d)
				}
			}
			// The terminal events say what the upstream's did.
			up := convotest.SplitEvents(upstream)
			upName, upData := convo.ParseEvent(up[len(up)-1])
			if upName == "error" {
				// An upstream's error, whichever event brought it, ends the client's stream in
				// response.failed with its code and message (as translate ends it for a chat
				// upstream's error).
				last := datas[len(datas)-1]
				if names[len(names)-1] != "response.failed" || gjson.GetBytes(last, "response.error.code").String() != "rate_limit_exceeded" ||
					!strings.HasPrefix(gjson.GetBytes(last, "response.error.message").String(), "Rate limit reached") {
					t.Fatalf("ends with %s", last)
				}
			} else if names[len(names)-1] != upName {
				t.Fatalf("ends with %s, the upstream with %s", names[len(names)-1], upName)
			} else if want, got := project(t, []byte(gjson.GetBytes(upData, "response").Raw)),
				project(t, []byte(gjson.GetBytes(datas[len(datas)-1], "response").Raw)); !reflect.DeepEqual(want, got) {
				t.Fatalf("final answer\n got %v\nwant %v", got, want)
			}
			// What was written reads back into the events it was written from.
			back := collapse(convotest.ReadStream(NewStreamReader(), out))
			orig := collapse(evs)
			for i := range back { // the writer's ids are its own
				if back[i].Kind == convo.EvStart || back[i].Kind == convo.EvBlockStart && back[i].Block == convo.BlockThinking {
					back[i].ID, orig[i].ID = "", ""
				}
			}
			if !reflect.DeepEqual(back, orig) && upName != "error" {
				t.Fatalf("read back\n%s\nwritten from\n%s", dumpEvents(back), dumpEvents(orig))
			}
		})
	}
}

func readIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	return b, nil
}

// A call a format without namespaces made by its flat name reaches a Responses client as the
// namespaced call it knows, in a whole answer and in a stream.
func TestWritersMapFlatNamesBack(t *testing.T) {
	r := mustRead(t, client)
	evs := []convo.Event{start("chatcmpl-7", "gpt-x"), callStart(0, "call_1", "multi_agent_v1__spawn_agent"),
		delta(0, `{\"message\":\"hi\"}`), blockStop(0), callStart(1, "call_2", "get_weather"), delta(1, `{}`), blockStop(1),
		stop(convo.StopToolUse), end}
	out, _ := AppendAnswer(nil, r, evs, 1)
	calls := gjson.GetBytes(out, "output").Array()
	if calls[0].Get("name").String() != "spawn_agent" || calls[0].Get("namespace").String() != "multi_agent_v1" ||
		calls[1].Get("name").String() != "get_weather" || calls[1].Get("namespace").Exists() {
		t.Fatalf("answer output %s", gjson.GetBytes(out, "output").Raw)
	}
	stream := writeStream(r, evs)
	if !bytes.Contains(stream, []byte(`"call_id":"call_1","name":"spawn_agent","namespace":"multi_agent_v1","arguments":""`)) ||
		!bytes.Contains(stream, []byte(`"call_id":"call_1","name":"spawn_agent","namespace":"multi_agent_v1","arguments":"{\"message\":\"hi\"}","status":"completed"`)) {
		t.Fatalf("stream %s", stream)
	}
}

// Reasoning's encrypted content reaches a client that asked for it (include
// reasoning.encrypted_content), and only such a client, as OpenAI does.
func TestEncryptedReasoningOnlyWhenAskedFor(t *testing.T) {
	evs := []convo.Event{start("resp_1", "m"), blockStart(0, convo.BlockThinking), delta(0, "Hm."),
		{Kind: convo.EvSignature, Index: 0, Text: "gAAAAABsecret"}, blockStop(0),
		blockStart(1, convo.BlockRedactedThinking), {Kind: convo.EvSignature, Index: 1, Text: "gAAAAABonly"}, blockStop(1),
		stop(convo.StopEnd), end}
	for _, asked := range []bool{true, false} {
		r := &convo.Request{}
		if asked {
			r.Include = []string{"reasoning.encrypted_content"}
		}
		out, _ := AppendAnswer(nil, r, evs, 1)
		stream := writeStream(r, evs)
		items := gjson.GetBytes(out, "output").Array()
		if asked {
			if len(items) != 2 || items[0].Get("encrypted_content").String() != "gAAAAABsecret" || items[1].Get("encrypted_content").String() != "gAAAAABonly" ||
				!bytes.Contains(stream, []byte(`"encrypted_content":"gAAAAABonly"`)) {
				t.Fatalf("asked: %s\n%s", out, stream)
			}
		} else if len(items) != 1 || bytes.Contains(out, []byte("gAAAA")) || bytes.Contains(stream, []byte("gAAAA")) {
			t.Fatalf("not asked: %s\n%s", out, stream)
		}
	}
}

// The echo of a pretty-printed request (its tools' schemas span lines) stays on the data line of
// each event: a line break there would end the data line for an SSE parser.
func TestStreamEchoStaysOnItsDataLine(t *testing.T) {
	r, err := ReadRequest(convotest.Read(t, "testdata/request/codex_cli.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := writeStream(r, []convo.Event{start("resp_1", "m"), blockStart(0, convo.BlockText), delta(0, "hi"), blockStop(0), stop(convo.StopEnd), end})
	names, datas := convotest.NamedEvents(t, out)
	last := gjson.ParseBytes(datas[len(datas)-1])
	if names[len(names)-1] != "response.completed" || last.Get("response.tools.0.parameters.properties.cmd.type").String() != "string" ||
		last.Get("response.tools.4.tools.0.name").String() != "close_agent" {
		t.Fatalf("%s", datas[len(datas)-1])
	}
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && !strings.HasPrefix(line, "event: ") && !strings.HasPrefix(line, "data: ") {
			t.Fatalf("a line that is neither event nor data: %q", line)
		}
	}
}
