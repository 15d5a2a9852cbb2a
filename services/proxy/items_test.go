package proxy

import "testing"

// A request's answer is recorded for a later previous_response_id when its input begins a
// conversation: nothing of earlier answers in it.
func TestBeginsConversation(t *testing.T) {
	for _, c := range []struct {
		input, own string
		begins     bool
	}{
		{`"Hi."`, `{"role":"user","content":"Hi."}`, true},
		{``, ``, true},
		{`[{"role":"developer","content":"Be brief."},{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi."}]}]`,
			`{"role":"developer","content":"Be brief."},{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi."}]}`, true},
		{`[{"role":"user","content":"Hi."},{"role":"assistant","content":"Hello."}]`, `{"role":"user","content":"Hi."},{"role":"assistant","content":"Hello."}`, false},
		{`[{"role":"user","content":"Hi."},{"type":"item_reference","id":"msg_1"}]`, `{"role":"user","content":"Hi."},{"type":"item_reference","id":"msg_1"}`, false},
		{`[{"type":"function_call_output","call_id":"c","output":"sunny"}]`, `{"type":"function_call_output","call_id":"c","output":"sunny"}`, false},
	} {
		if got := beginsConversation(c.input); got != c.begins {
			t.Errorf("beginsConversation(%s) = %v, want %v", c.input, got, c.begins)
		}
		if got := ownItems(c.input); got != c.own {
			t.Errorf("ownItems(%s) = %s, want %s", c.input, got, c.own)
		}
	}
}
