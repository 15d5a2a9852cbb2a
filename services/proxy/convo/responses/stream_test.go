package responses

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/convo/convotest"
)

// Parallel tool calls that interleave (a chat upstream may send the second call's start before
// the first call's arguments end) are each an item of their own, filled by their own deltas and
// done when their block stops; the final answer lists them in output order.
func TestStreamWriterInterleavedCalls(t *testing.T) {
	evs := []convo.Event{start("chatcmpl-1", "m"), callStart(0, "call_a", "f"), callStart(1, "call_b", "g"),
		delta(0, `{\"x\":`), delta(1, `{\"y\":2}`), delta(0, `1}`), blockStop(1), blockStop(0), stop(convo.StopToolUse), end}
	names, datas := convotest.NamedEvents(t, writeStream(&convo.Request{}, evs))
	args := map[string]string{}
	var done []string
	for i, name := range names {
		d := gjson.ParseBytes(datas[i])
		switch name {
		case "response.function_call_arguments.delta":
			args[d.Get("item_id").String()] += d.Get("delta").String()
		case "response.output_item.done":
			done = append(done, d.Get("item.call_id").String()+"="+d.Get("item.arguments").String())
		}
	}
	if args["fc_call_a"] != `{"x":1}` || args["fc_call_b"] != `{"y":2}` || strings.Join(done, " ") != `call_b={"y":2} call_a={"x":1}` {
		t.Fatalf("deltas %v, done %v", args, done)
	}
	final := gjson.ParseBytes(datas[len(datas)-1])
	if final.Get("response.output.0.call_id").String() != "call_a" || final.Get("response.output.1.call_id").String() != "call_b" ||
		final.Get("response.output.0.arguments").String() != `{"x":1}` || final.Get("response.output.0.status").String() != "completed" {
		t.Fatalf("final %s", final.Get("response.output").Raw)
	}
}

// A text or reasoning block a reader left open when the next item starts is done first (they do
// not interleave), and the stream still ends well when the reader sent no block stops at all.
func TestStreamWriterClosesWhatIsLeftOpen(t *testing.T) {
	evs := []convo.Event{start("msg_1", "m"), blockStart(0, convo.BlockThinking), delta(0, "hm"),
		blockStart(1, convo.BlockText), delta(1, "Hi"), callStart(2, "toolu_1", "f"), delta(2, `{}`),
		stop(convo.StopToolUse), end}
	names, datas := convotest.NamedEvents(t, writeStream(&convo.Request{}, evs))
	var order []string
	for i, name := range names {
		if strings.HasPrefix(name, "response.output_item.") {
			order = append(order, strings.TrimPrefix(name, "response.output_item.")+":"+gjson.GetBytes(datas[i], "item.type").String())
		}
	}
	if strings.Join(order, " ") != "added:reasoning done:reasoning added:message done:message added:function_call done:function_call" {
		t.Fatalf("%v", order)
	}
	if id := gjson.GetBytes(datas[0], "response.id").String(); id != "resp_1" {
		t.Fatalf("an Anthropic id gives %s", id)
	}
}

// The reader copes with streams that skip events OpenAI sends: deltas of an item never added,
// an item only done, items only in the final answer; it ignores events it does not know and
// anything after the terminal event.
func TestStreamReaderToleratesMissingEvents(t *testing.T) {
	for name, c := range map[string]struct{ sse, want string }{
		"delta without added": {`data: {"type":"response.output_text.delta","output_index":0,"delta":"Hi"}` + "\n\n" +
			`data: {"type":"response.completed","response":{"status":"completed"}}`,
			"start;block_start 0 text;delta 0 \"Hi\";block_stop 0;stop end;end"},
		"item only done": {`data: {"type":"response.created","response":{"id":"resp_9","model":"m"}}` + "\n\n" +
			`data: {"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}}` + "\n\n" +
			`data: {"type":"response.web_search_call.searching","output_index":1}` + "\n\n" +
			`data: {"type":"response.completed","response":{"status":"completed"}}` + "\n\n" +
			`data: {"type":"response.output_text.delta","output_index":2,"delta":"late"}`,
			"start;block_start 0 tool_call;delta 0 \"{}\";block_stop 0;stop tool_use;end"},
		"items only at the end": {`event: response.completed` + "\n" + `data: {"response":{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"All"}]}],"usage":{"input_tokens":1,"output_tokens":2}}}`,
			"start;block_start 0 text;delta 0 \"All\";block_stop 0;usage;stop end;end"},
		"nested error": {`data: {"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Too long","param":"input"}}`,
			"error invalid_request_error context_length_exceeded Too long input"},
		"bare error": {`event: error` + "\n" + `data: {"code":null,"message":"boom","param":null}`,
			"error server_error  boom "},
		"not JSON": {"data: {oops\n\ndata: [DONE]", ""},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range convotest.ReadStream(NewStreamReader(), []byte(c.sse+"\n\n")) {
				s := strings.TrimSpace(string(dumpEvents([]convo.Event{e})))
				switch e.Kind {
				case convo.EvStart, convo.EvUsage:
					s = strings.Fields(s)[0]
				case convo.EvBlockStart:
					s = strings.Join(strings.Fields(s)[:3], " ")
				case convo.EvError:
					s = "error " + e.Err.Type + " " + e.Err.Code + " " + e.Err.Message + " " + e.Err.Param
				}
				got = append(got, s)
			}
			if strings.Join(got, ";") != c.want {
				t.Fatalf("got  %s\nwant %s", strings.Join(got, ";"), c.want)
			}
		})
	}
}

// A whole answer that failed, was cancelled, or is not JSON.
func TestReadAnswerFailures(t *testing.T) {
	if _, err := ReadAnswer(nil, []byte(`[1]`)); err == nil {
		t.Fatal("a list read as an answer")
	}
	for body, want := range map[string]string{
		`{"status":"failed"}`: "server_error||the upstream reported an error",
		`{"status":"failed","error":{"code":"rate_limit_exceeded","message":"slow down"}}`: "rate_limit_error|rate_limit_exceeded|slow down",
		`{"status":"cancelled"}`: "server_error|cancelled|the upstream cancelled the response",
		`{"status":"completed","error":{"code":"invalid_prompt","message":"flagged"}}`: "invalid_request_error|invalid_prompt|flagged",
	} {
		evs := mustReadAnswer(t, []byte(body))
		last := evs[len(evs)-1]
		if last.Kind != convo.EvError || last.Err.Type+"|"+last.Err.Code+"|"+last.Err.Message != want {
			t.Errorf("%s: %s", body, dumpEvents(evs))
		}
	}
}

// Items are the output items of a completed answer, as its last event lists them, with their
// ids; an answer that failed or did not end has none.
func TestStreamWriterItems(t *testing.T) {
	evs := []convo.Event{start("chatcmpl-1", "m"), blockStart(0, convo.BlockText), delta(0, "Hi"), blockStop(0),
		callStart(1, "call_a", "f"), callStart(2, "call_b", "g"), delta(2, `{}`), delta(1, `{\"x\":1}`), blockStop(2), blockStop(1),
		stop(convo.StopToolUse)}
	// ids and raws are the items', answer the answer's own id (handed last, without an item).
	items := func(evs []convo.Event) (ids, raws []string, answer string, out []byte) {
		w := NewStreamWriter(&convo.Request{}, 1)
		for i := range evs {
			out = w.Write(out, &evs[i])
		}
		w.Items(func(id string, item []byte) {
			if item == nil {
				answer = id
				return
			}
			ids, raws = append(ids, id), append(raws, string(item))
		})
		return ids, raws, answer, out
	}
	ids, raws, answer, out := items(append(evs, end))
	_, datas := convotest.NamedEvents(t, out)
	final := gjson.GetBytes(datas[len(datas)-1], "response.output").Array()
	if strings.Join(ids, " ") != "msg_1_0 fc_call_a fc_call_b" || len(final) != 3 || answer != "resp_1" {
		t.Fatalf("items %v of the answer's %d, answer %q", ids, len(final), answer)
	}
	for i, it := range final {
		if raws[i] != it.Raw || it.Get("id").String() != ids[i] {
			t.Fatalf("item %d: %s, the answer lists %s", i, raws[i], it.Raw)
		}
	}
	failed := append(evs, convo.Event{Kind: convo.EvError, Err: &convo.Error{Type: "server_error", Message: "overloaded"}})
	for name, evs := range map[string][]convo.Event{"failed": failed, "unfinished": evs} {
		if ids, _, answer, _ := items(evs); len(ids) != 0 || answer != "" {
			t.Fatalf("%s: items %v, answer %q, want none", name, ids, answer)
		}
	}
}

// The items of an answer kept for later references (the request has an IDSuffix) are the
// client's, except that a reasoning item carries the thinking's signature as its encrypted
// content also when the client did not ask for it; whole and streamed alike, with ids of the
// answer's own.
func TestKeptItemsCarryTheSignature(t *testing.T) {
	sig := convo.Event{Kind: convo.EvSignature, Index: 0, Text: "EqQBsig"}
	evs := []convo.Event{start("msg_01", "claude"), blockStart(0, convo.BlockThinking), delta(0, "Let me see."), sig, blockStop(0),
		blockStart(1, convo.BlockText), delta(1, "Calling."), blockStop(1), callStart(2, "toolu_1", "f"), delta(2, `{}`), blockStop(2),
		stop(convo.StopToolUse), end}
	for _, include := range []bool{false, true} {
		r := &convo.Request{IDSuffix: "k3y"}
		if include {
			r.Include = []string{"reasoning.encrypted_content"}
		}
		ids := map[string][]string{}
		kept := map[string][]string{}
		answers := map[string]string{}
		keep := func(how string) func(string, []byte) {
			return func(id string, item []byte) {
				if item == nil {
					answers[how] = id
					return
				}
				ids[how], kept[how] = append(ids[how], id), append(kept[how], string(item))
			}
		}
		whole, err := AppendAnswerKeeping(nil, r, evs, 1, keep("whole"))
		if err != nil {
			t.Fatal(err)
		}
		w := NewStreamWriter(r, 1)
		out := convotest.Write(w, nil, evs)
		w.Items(keep("stream"))
		_, datas := convotest.NamedEvents(t, out)
		shown := map[string][]gjson.Result{"whole": gjson.GetBytes(whole, "output").Array(),
			"stream": gjson.GetBytes(datas[len(datas)-1], "response.output").Array()}
		for _, how := range []string{"whole", "stream"} {
			items := shown[how]
			if len(items) != 3 || len(kept[how]) != 3 || !strings.Contains(ids[how][0], "_k3y") || !strings.Contains(ids[how][2], "_k3y") {
				t.Fatalf("include %v, %s: ids %v, shown %d items", include, how, ids[how], len(items))
			}
			for i, it := range items {
				k := gjson.Parse(kept[how][i])
				if k.Get("id").String() != it.Get("id").String() || ids[how][i] != it.Get("id").String() {
					t.Fatalf("include %v, %s: kept %s as %s, shown %s", include, how, ids[how][i], kept[how][i], it.Raw)
				}
				if i > 0 && kept[how][i] != it.Raw {
					t.Fatalf("include %v, %s: kept %s, shown %s", include, how, kept[how][i], it.Raw)
				}
			}
			if answers[how] != "resp_01_k3y" {
				t.Fatalf("include %v, %s: the answer's id %q", include, how, answers[how])
			}
			if got := gjson.Get(kept[how][0], "encrypted_content").String(); got != "EqQBsig" ||
				gjson.Get(kept[how][0], "summary.0.text").String() != "Let me see." {
				t.Fatalf("include %v, %s: kept reasoning %s", include, how, kept[how][0])
			}
			if shownSig := items[0].Get("encrypted_content"); shownSig.Exists() != include {
				t.Fatalf("include %v, %s: the client was shown %s", include, how, items[0].Raw)
			}
		}
	}
}
