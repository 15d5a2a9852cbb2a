package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/tidwall/gjson"

	"switchyard/services/resilience"
)

// FuzzReadEvent: the SSE reader never panics, never loses bytes, and events it returns end with
// their blank line; reading events written back out yields the same events (round trip).
func FuzzReadEvent(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: x\r\ndata: y\r\n\r\n"))
	f.Add([]byte("\n\n\ndata: partial"))
	f.Add([]byte("data: [DONE]\rX\n\ndata: [DONE]\r\r"))
	f.Add([]byte("data: [DONE]data: [DONE]"))
	f.Add([]byte("xdata: [DONE]\ndata: [DONE]]\n"))
	f.Add([]byte(": comment\n\ndata: " + strings.Repeat("z", 70000) + "\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var events [][]byte
		var total int
		for {
			ev, err := readEvent(br)
			total += len(ev)
			if err != nil {
				break
			}
			if !bytes.HasSuffix(ev, []byte("\n")) {
				t.Fatalf("complete event without its line end: %q", ev)
			}
			events = append(events, append([]byte(nil), ev...))
		}
		if total > len(in) {
			t.Fatalf("read %d bytes from %d", total, len(in))
		}
		var out bytes.Buffer
		for _, ev := range events {
			out.Write(ev)
		}
		br = bufio.NewReaderSize(bytes.NewReader(out.Bytes()), 16)
		for i := range events {
			ev, err := readEvent(br)
			if err != nil || !bytes.Equal(ev, events[i]) {
				t.Fatalf("round trip event %d: %q vs %q (%v)", i, ev, events[i], err)
			}
		}
		_, _, _ = streamError(in)
		slow := false
		for _, line := range bytes.Split(in, []byte("\n")) {
			if bytes.Equal(bytes.TrimRight(line, "\r"), doneLine) {
				slow = true
			}
		}
		if hasDone(in) != slow {
			t.Fatalf("hasDone(%q) = %v, line scan says %v", in, !slow, slow)
		}
	})
}

// FuzzDecodeRequest: the decoder never panics; what it accepts has a model, and rewriting
// the model keeps the body valid JSON with the new model and every other field.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"p/m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	f.Add([]byte(`{"model":""}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"model":"a","model":"b"}`))
	f.Add([]byte(`  {"model":"x\u0000y","n":1e400}`))
	f.Add([]byte(`{"model":"m","store":false,"previous_response_id":"resp_1","conversation":{"id":"c"},"input":[{"type":"item_reference","id":"rs_1"},{"type":"reasoning","id":"rs_2"}]}`))
	// The gateway's own answers (items.go): an item and a response that continues another.
	items := resilience.NewAnswerItems(clockwork.NewFakeClock(), time.Hour, 100, 1<<20)
	items.Keep(1, "msg_1", `{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hi."}]}`)
	items.Keep(1, "resp_0", `{"previous":"","items":[{"role":"user","content":"Hello."}]}`)
	items.Keep(1, "resp_1", `{"previous":"resp_0","items":[{"type":"item_reference","id":"msg_1"}]}`)
	e := &Engine{opt: Options{AnswerItems: items}}
	f.Add([]byte(`{"model":"m","previous_response_id":"resp_1","input":[{"type":"item_reference","id":"msg_1"},"x"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, derr := DecodeRequest(body)
		if derr != nil {
			return
		}
		if req.Model == "" || !json.Valid(req.Body) {
			t.Fatalf("accepted %q with model %q", body, req.Model)
		}
		out, err := withModel(req.Body, "upstream-model")
		if err != nil {
			return
		}
		if !json.Valid(out) || gjson.GetBytes(out, "model").String() != "upstream-model" {
			t.Fatalf("rewrite broke the body: %q", out)
		}
		// What a Responses body names of stored state (stored.go): ids that are not empty, at
		// most the previous response, the conversation and maxStoredRefs items.
		refs, _ := readStoredRefs(out)
		if len(refs) > 2+maxStoredRefs || slices.Contains(refs, "") {
			t.Fatalf("stored refs %q of %q", refs, out)
		}
		// Whether it names stored state at all is one of the fields the reader knows.
		if f := storedStateField(out); f != "" && f != "previous_response_id" && f != "conversation" && f != "input[].type=item_reference" {
			t.Fatalf("stored state field %q of %q", f, out)
		}
		// What the gateway resolves of its own answers leaves valid JSON that names none of it.
		if x, _, field, err := e.expandStored(out, 1); err == nil && field == "" {
			named := false
			gjson.GetBytes(x, "input").ForEach(func(_, it gjson.Result) bool {
				named = named || it.Get("type").Str == "item_reference"
				return true
			})
			if !json.Valid(x) || named || gjson.GetBytes(x, "previous_response_id").Type == gjson.String && gjson.GetBytes(x, "previous_response_id").Str != "" {
				t.Fatalf("expanded %q into %q", out, x)
			}
		}
	})
}

// FuzzSplitModel: splitting never panics, and provider + "/" + name gives back the address.
func FuzzSplitModel(f *testing.F) {
	f.Add("openai/gpt-4o")
	f.Add("openrouter/meta-llama/llama-3")
	f.Add("bare")
	f.Add("/x")
	f.Add("openai/")
	f.Fuzz(func(t *testing.T, model string) {
		known := func(p string) bool { return p == "openai" || p == "openrouter" || p == "" }
		prov, name, ok := SplitModel(model, known)
		if ok && prov+"/"+name != model {
			t.Fatalf("%q split into %q + %q", model, prov, name)
		}
		if !ok && name != model {
			t.Fatalf("bare %q became %q", model, name)
		}
	})
}

// FuzzReplayAndNaming: what the gateway does to bodies it did not write — dropping replayed
// reasoning from a client's request, naming the model in an upstream's answer — never panics,
// never changes the bytes it was given, and keeps a valid JSON document valid.
func FuzzReplayAndNaming(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":[{"type":"reasoning","encrypted_content":"gAAAA"},{"type":"message","role":"user","content":"hi"}]}`), "a/b")
	f.Add([]byte(`{"messages":[{"role":"assistant","content":[{"type":"thinking","signature":"s"},{"type":"text","text":"x"}]}]}`), "")
	f.Add([]byte(`{"id":"msg","model":"claude-x","content":[]}`), "anthropic/claude-x")
	f.Add([]byte(`{"type":"message_start","message":{"model":"m\u00e9"}}`), "we\"ird")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		orig := string(body)
		valid := json.Valid(body)
		for _, fm := range []Format{FormatChat, FormatMessages, FormatResponses} {
			replayRejected(fm, body)
			for _, what := range []replayDrop{dropEarlierTurns, dropAll} {
				if out, ok := withoutReplayOK(fm, body, what); ok && valid && !json.Valid(out) {
					t.Fatalf("%v: dropping the reasoning broke %q into %q", fm, body, out)
				}
			}
		}
		if model != "" {
			if out, _ := namingModel(body, nil, model); valid && !json.Valid(out) {
				t.Fatalf("naming %q broke %q into %q", model, body, out)
			}
			ev := []byte("event: message_start\ndata: " + string(body) + "\n\n")
			l := lookMessages(ev)
			out := (&passthrough{format: FormatMessages, model: model}).Event(nil, ev, l)
			if !bytes.HasPrefix(out, []byte("event: message_start\ndata: ")) || !bytes.HasSuffix(out, []byte("\n\n")) {
				t.Fatalf("the event lost its frame: %q", out)
			}
		}
		if string(body) != orig {
			t.Fatal("the given bytes changed")
		}
	})
}
