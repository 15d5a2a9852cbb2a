package translate

import (
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

// A top-level response_format (chat's field, not the Responses API's) is dropped like any unknown
// field, and text.format is what becomes the chat request's response_format.
func TestResponsesResponseFormatComesFromTextFormat(t *testing.T) {
	out, err := ResponsesToChat([]byte(`{"model":"m","input":"hi","response_format":{"type":"json_object"}}`), Target{})
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(out.Body, "response_format").Exists() || !slices.Contains(out.Dropped, "response_format") {
		t.Fatalf("%s dropped %v", out.Body, out.Dropped)
	}
	out, err = ResponsesToChat([]byte(`{"model":"m","input":"hi","text":{"format":{"type":"json_object"}}}`), Target{})
	if err != nil || gjson.GetBytes(out.Body, "response_format.type").String() != "json_object" {
		t.Fatalf("%v %s", err, out.Body)
	}
}

// A translated Responses answer is stored nowhere, so it says store: false whatever the request
// asked for (true, absent, false): in a whole answer and in the response objects of a stream's
// response.created and response.completed events.
func TestTranslatedResponsesSayStoreFalse(t *testing.T) {
	chat := []byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	for _, req := range []string{`{"model":"m","input":"hi","store":true}`, `{"model":"m","input":"hi"}`, `{"model":"m","input":"hi","store":false}`} {
		echo := EchoOf([]byte(req))
		out, err := ChatResponseToResponses(chat, echo)
		if err != nil {
			t.Fatal(err)
		}
		if st := gjson.GetBytes(out, "store"); st.Type != gjson.False {
			t.Fatalf("%s: answer says store %s", req, st.Raw)
		}
		s := &ChatToResponsesStream{Echo: echo, Created: 1}
		var events []byte
		for _, ev := range []string{
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}` + "\n\n",
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
			"data: [DONE]\n\n",
		} {
			events = s.Event(events, []byte(ev))
		}
		seen := map[string]bool{}
		for _, ev := range splitEvents(events) {
			name, data := ParseEvent(ev)
			if name != "response.created" && name != "response.completed" {
				continue
			}
			seen[name] = true
			if st := gjson.GetBytes(data, "response.store"); st.Type != gjson.False {
				t.Fatalf("%s: %s says store %s", req, name, st.Raw)
			}
		}
		if !seen["response.created"] || !seen["response.completed"] {
			t.Fatalf("%s: events %s", req, events)
		}
	}
}
