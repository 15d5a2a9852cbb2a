package proxy

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestReplayRejected(t *testing.T) {
	cases := []struct {
		f    Format
		body string
		want bool
	}{
		{FormatResponses, `{"error":{"message":"The encrypted content gAAA...Rg== could not be verified.","type":"invalid_request_error","param":null,"code":"invalid_encrypted_content"}}`, true},
		{FormatResponses, `{"error":{"message":"The encrypted content for item rs_1 could not be verified. Reason: Encrypted content could not be decrypted or parsed.","type":"invalid_request_error"}}`, true},
		{FormatResponses, `{"error":{"message":"Unsupported parameter: temperature","type":"invalid_request_error","code":"unsupported_parameter"}}`, false},
		{FormatMessages, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: Invalid ` + "`signature`" + ` in ` + "`thinking`" + ` block"}}`, true},
		{FormatMessages, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.3.content.0: thinking blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response."}}`, true},
		{FormatMessages, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.3.content.0: ` + "`thinking`" + ` or ` + "`redacted_thinking`" + ` blocks in the latest assistant message cannot be modified."}}`, true},
		{FormatMessages, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.thinking.signature: Field required"}}`, true},
		{FormatMessages, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`, false},
		// Chat completions carry no signed reasoning; a body that is no error object is none.
		{FormatChat, `{"error":{"message":"The encrypted content could not be verified.","code":"invalid_encrypted_content"}}`, false},
		{FormatResponses, `not json`, false},
	}
	for i, c := range cases {
		if got := replayRejected(c.f, []byte(c.body)); got != c.want {
			t.Errorf("case %d: replayRejected = %v, want %v: %s", i, got, c.want, c.body)
		}
	}
}

func TestWithoutReplay(t *testing.T) {
	t.Run("responses", func(t *testing.T) {
		body := []byte(`{"model":"m","input":[{"type":"message","role":"user","content":"hi"},` +
			`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA1"},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"ok"},` +
			`{"type":"reasoning","summary":[],"encrypted_content":"gAAAA2"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}],"stream":true}`)
		orig := string(body)
		out, ok := withoutReplay(FormatResponses, body)
		want := `{"model":"m","input":[{"type":"message","role":"user","content":"hi"},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"ok"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}],"stream":true}`
		if !ok || string(out) != want {
			t.Fatalf("ok %v\n got %s\nwant %s", ok, out, want)
		}
		if string(body) != orig {
			t.Fatal("the body it was given changed")
		}
		if _, ok := withoutReplay(FormatResponses, out); ok {
			t.Fatal("a body without reasoning has reasoning to drop")
		}
	})
	t.Run("messages", func(t *testing.T) {
		body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"a","signature":"s1"},{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},` +
			`{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"},{"type":"thinking","thinking":"b","signature":"s2"},{"type":"text","text":"done"}]},` +
			`{"role":"user","content":"go on"},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"only","signature":"s3"}]},` +
			`{"role":"user","content":[{"type":"thinking","thinking":"not the model's"}]}]}`)
		orig := string(body)
		out, ok := withoutReplay(FormatMessages, body)
		if !ok || string(body) != orig {
			t.Fatalf("ok %v, body changed %v", ok, string(body) != orig)
		}
		kinds := func(i int) (list []string) {
			content := gjson.GetBytes(out, "messages."+string(rune('0'+i))+".content")
			if !content.IsArray() {
				return nil // a string
			}
			for _, b := range content.Array() {
				list = append(list, b.Get("type").String())
			}
			return list
		}
		for i, want := range [][]string{nil, {"tool_use"}, {"tool_result"}, {"text"}, nil, {"thinking"}, {"thinking"}} {
			if got := kinds(i); len(got) != len(want) || len(want) > 0 && got[0] != want[0] {
				t.Fatalf("message %d: %v, want %v\n%s", i, got, want, out)
			}
		}
	})
	t.Run("nothing to drop", func(t *testing.T) {
		for _, c := range []struct {
			f    Format
			body string
		}{
			{FormatMessages, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"plain"}]}`},
			{FormatResponses, `{"model":"m","input":"hi"}`},
			{FormatChat, `{"model":"m","messages":[{"role":"assistant","content":"x","reasoning_content":"y"}]}`},
		} {
			if out, ok := withoutReplay(c.f, []byte(c.body)); ok || string(out) != c.body {
				t.Fatalf("%s: ok %v, %s", c.body, ok, out)
			}
		}
	})
}
