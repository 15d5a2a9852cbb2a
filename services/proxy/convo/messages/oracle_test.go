package messages

// The old pairwise translators are the oracle of what the gateway does today: this package must
// carry at least what they carry, in the same words. This file goes away with package translate.

import (
	"encoding/json"
	"reflect"
	"testing"

	"switchyard/services/proxy/convo"
	"switchyard/services/proxy/translate"
)

// A malformed request is refused with translate's words.
func TestOracleRequestErrors(t *testing.T) {
	for _, c := range requestErrors {
		_, terr := translate.MessagesToChat([]byte(c.body), translate.Target{})
		_, err := ReadRequest([]byte(c.body))
		if terr == nil || err == nil || terr.Error() != err.Error() {
			t.Errorf("%s: translate says %v, this package %v", c.body, terr, err)
		}
	}
}

// Every messages request translate writes (from its chat and Responses goldens) is read and
// written back unchanged, nothing dropped: the writer says what translate's said.
func TestOracleTranslateRequestsSurvive(t *testing.T) {
	check := func(t *testing.T, body []byte) {
		r, err := ReadRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Dropped) > 0 {
			t.Fatalf("dropped %q of %s", r.Dropped, body)
		}
		out, err := AppendRequest(nil, r, convo.Target{})
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, canonical(decode(t, body), nil), canonical(decode(t, out), nil))
	}
	for name, in := range files(t, "../../translate/testdata/chat_request", ".json") {
		t.Run("chat/"+name, func(t *testing.T) {
			m, err := translate.ChatToMessages(in, translate.Target{})
			if err != nil {
				t.Fatal(err)
			}
			check(t, m.Body)
		})
	}
	for name, in := range files(t, "../../translate/testdata/responses_request", ".json") {
		t.Run("responses/"+name, func(t *testing.T) {
			c, err := translate.ResponsesToChat(in, translate.Target{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := translate.ChatToMessages(c.Body, translate.Target{})
			if err != nil {
				t.Fatal(err)
			}
			check(t, m.Body)
		})
	}
}

// The same for the answers and streams translate writes from its chat goldens.
func TestOracleTranslateAnswersSurvive(t *testing.T) {
	for name, in := range files(t, "../../translate/testdata/chat_response", ".json") {
		t.Run(name, func(t *testing.T) {
			want, err := translate.ChatResponseToMessages(in)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := ReadAnswer(nil, want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendAnswer(nil, nil, evs, 0)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, decode(t, want), decode(t, got))
		})
	}
	for name, in := range files(t, "../../translate/testdata/chat_stream", ".sse") {
		t.Run(name, func(t *testing.T) {
			s := translate.NewChatToMessagesStream()
			var want []byte
			for _, ev := range splitEvents(in) {
				want = s.Event(want, ev)
			}
			got := streamThrough(want, NewStreamWriter(nil, 0))
			wantMsg, wantErr := accumulate(t, want)
			gotMsg, gotErr := accumulate(t, got)
			sameJSON(t, wantMsg, gotMsg)
			sameJSON(t, wantErr, gotErr)
			w, g := parseSSE(t, want), parseSSE(t, got)
			if len(w) != len(g) {
				t.Fatalf("%d events, want %d:\n%s", len(g), len(w), got)
			}
			for i := range w {
				if w[i].Name != g[i].Name {
					t.Fatalf("event %d is %s, want %s", i, g[i].Name, w[i].Name)
				}
			}
		})
	}
}

// Error types cross between the formats in translate's words: an Anthropic error read here
// has the OpenAI type translate gave it, an OpenAI type written here the Anthropic type
// translate gave it.
func TestOracleErrorTypes(t *testing.T) {
	for _, typ := range []string{"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
		"request_too_large", "rate_limit_error", "api_error", "overloaded_error", "billing_error", "timeout_error", "odd"} {
		ev := []byte(`event: error` + "\n" + `data: {"type":"error","error":{"type":"` + typ + `","message":"m"}}` + "\n\n")
		chat := (&translate.MessagesToChatStream{}).Event(nil, ev)
		_, data := translate.ParseEvent(chat)
		var want struct {
			Error struct{ Type, Code string }
		}
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		evs := NewStreamReader().Read(nil, ev)
		if len(evs) != 1 || evs[0].Err.Type != want.Error.Type || evs[0].Err.Code != want.Error.Code {
			t.Errorf("%s: read as %+v, translate says %+v", typ, evs[0].Err, want.Error)
		}
	}
	for _, typ := range []string{"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
		"rate_limit_error", "server_error", "upstream_error", "insufficient_quota", ""} {
		chat := []byte(`data: {"error":{"message":"m","type":"` + typ + `","code":"c"}}` + "\n\n")
		want := translate.NewChatToMessagesStream().Event(nil, chat)
		got := NewStreamWriter(nil, 0).Write(nil, &convo.Event{Kind: convo.EvError, Err: &convo.Error{Type: typ, Code: "c", Message: "m"}})
		w, g := parseSSE(t, want), parseSSE(t, got)
		if len(w) != 1 || len(g) != 1 || w[0].Name != g[0].Name || !reflect.DeepEqual(w[0].Data, g[0].Data) {
			t.Errorf("%s: wrote %s, translate %s", typ, got, want)
		}
	}
}

// Usage in the model is what translate reported as the prompt and completion tokens of an
// Anthropic stream: the cached input counted in.
func TestOracleStreamUsage(t *testing.T) {
	in := files(t, "testdata/stream", ".sse")["thinking_text_tools"]
	s := &translate.MessagesToChatStream{}
	rd := NewStreamReader()
	var u convo.Usage
	for _, ev := range splitEvents(in) {
		s.Event(nil, ev)
		for _, e := range rd.Read(nil, ev) {
			if e.Kind == convo.EvUsage {
				u.Merge(e.Usage)
			}
		}
	}
	if in, out := s.Usage(); u.Input != in || u.Output != out {
		t.Fatalf("usage %d/%d, translate %d/%d", u.Input, u.Output, in, out)
	}
}
