package proxy

import (
	"slices"
	"testing"
)

func TestReadStoredRefs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		refs   []string
		record bool
	}{
		{"nothing stored named", `{"model":"gpt-5","input":"hi"}`, nil, true},
		{"store false", `{"model":"gpt-5","store":false,"input":"hi"}`, nil, false},
		{"previous response", `{"model":"gpt-5","previous_response_id":"resp_1","input":[{"role":"user","content":"go on"}]}`,
			[]string{"resp_1"}, true},
		{"conversation by id", `{"conversation":"conv_1","input":"hi"}`, []string{"conv_1"}, true},
		{"conversation object", `{"conversation":{"id":"conv_2"},"input":"hi"}`, []string{"conv_2"}, true},
		// The Vercel AI SDK with store on: earlier reasoning and messages by reference, newest first.
		{"item references", `{"model":"o4-mini","input":[{"role":"user","content":"a"},{"type":"item_reference","id":"rs_1"},` +
			`{"type":"item_reference","id":"msg_1"},{"role":"user","content":"b"},{"type":"item_reference","id":"rs_2"}],"reasoning":{"effort":"low"}}`,
			[]string{"rs_2", "msg_1", "rs_1"}, true},
		// A reasoning item by its id alone is looked up upstream; one with its encrypted content is not.
		{"reasoning by id", `{"input":[{"type":"reasoning","id":"rs_a","summary":[]},{"type":"reasoning","id":"rs_b","summary":[],"encrypted_content":"gAAA"}]}`,
			[]string{"rs_a"}, true},
		// The Codex CLI: store off, reasoning carried whole, nothing stored named.
		{"codex", `{"model":"gpt-5-codex","store":false,"include":["reasoning.encrypted_content"],"input":[{"type":"reasoning","summary":[],"encrypted_content":"gAAA"},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`, nil, false},
		{"store off, references", `{"store":false,"input":[{"type":"reasoning","id":"rs_1","summary":[]},{"type":"item_reference","id":"msg_1"}]}`,
			[]string{"msg_1", "rs_1"}, false},
		{"previous response first", `{"previous_response_id":"resp_9","input":[{"type":"item_reference","id":"msg_9"}]}`,
			[]string{"resp_9", "msg_9"}, true},
		{"white space first", " \n\t{\"previous_response_id\":\"resp_w\"}", []string{"resp_w"}, true},
		{"not strings", `{"previous_response_id":7,"conversation":null,"input":[{"type":"item_reference","id":{"x":1}}]}`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs, record := readStoredRefs([]byte(tc.body))
			if !slices.Equal(refs, tc.refs) || record != tc.record {
				t.Errorf("got %q record %v, want %q record %v", refs, record, tc.refs, tc.record)
			}
		})
	}
	var body []byte
	body = append(body, `{"input":[`...)
	for i := range maxStoredRefs + 4 {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"type":"item_reference","id":"i`...)
		body = append(body, byte('a'+i))
		body = append(body, `"}`...)
	}
	body = append(body, `]}`...)
	refs, _ := readStoredRefs(body)
	if len(refs) != maxStoredRefs || refs[0] != "i"+string(rune('a'+maxStoredRefs+3)) {
		t.Errorf("%d refs starting %q; want the newest %d", len(refs), refs[0], maxStoredRefs)
	}
}

func TestStoredIDsOfAnswers(t *testing.T) {
	var made []string
	s := storedCall{keep: func(ids []string) { made = append(made, ids...) }}
	s.observeAnswer([]byte(`{"id":"resp_1","object":"response","output":[{"type":"reasoning","id":"rs_1"},{"type":"message","id":"msg_1"}],"usage":{}}`))
	s.observeEvent([]byte(`{"type":"response.completed","sequence_number":9,"response":{"id":"resp_2","output":[{"type":"function_call","id":"fc_2","call_id":"call_2"}]}}`))
	if want := []string{"resp_1", "rs_1", "msg_1", "resp_2", "fc_2"}; !slices.Equal(made, want) {
		t.Errorf("kept %q, want %q", made, want)
	}
}

func TestStoredStateField(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","input":"hi"}`, ""},
		{`{"model":"m","input":"hi","previous_response_id":null,"conversation":""}`, ""},
		{` {"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"m","conversation":{"id":"conv_1"},"input":"hi"}`, "conversation"},
		{`{"model":"m","conversation":"conv_1","input":"hi"}`, "conversation"},
		// The Vercel AI SDK's second turn with store on: the earlier answer by reference.
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]},` +
			`{"type":"item_reference","id":"msg_1"},{"role":"user","content":[{"type":"input_text","text":"And?"}]}]}`, "input[].type=item_reference"},
		// The words alone are no reference; nor is a reasoning item by id (reasoning another
		// model cannot read in any case).
		{`{"model":"m","input":[{"role":"user","content":"what is an \"item_reference\"?"},{"type":"reasoning","id":"rs_1","summary":[]}]}`, ""},
		{`not json`, ""},
	} {
		if got := storedStateField([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.want)
		}
	}
}
