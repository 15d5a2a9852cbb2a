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
		out, ok := withoutReplayOK(FormatResponses, body, dropAll)
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
		if _, ok := withoutReplayOK(FormatResponses, out, dropAll); ok {
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
		out, ok := withoutReplayOK(FormatMessages, body, dropAll)
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
			if out, ok := withoutReplayOK(c.f, []byte(c.body), dropAll); ok || string(out) != c.body {
				t.Fatalf("%s: ok %v, %s", c.body, ok, out)
			}
		}
	})
}

// Earlier turns: the reasoning before the user's last words goes, the current turn's (after
// them, across tool calls and their results) stays.
func TestWithoutReplayOfEarlierTurns(t *testing.T) {
	responses := `{"input":[{"role":"user","content":"one"},{"type":"reasoning","encrypted_content":"old"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"two"}]},` +
		`{"type":"reasoning","encrypted_content":"new"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c","output":"ok"},{"type":"reasoning","encrypted_content":"newer"}]}`
	out, ok := withoutReplayOK(FormatResponses, []byte(responses), dropEarlierTurns)
	if got := gjson.GetBytes(out, `input.#(type=="reasoning")#.encrypted_content`).String(); !ok || got != `["new","newer"]` {
		t.Fatalf("ok %v, reasoning left %s", ok, got)
	}
	messages := `{"messages":[{"role":"user","content":"one"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"old"},{"type":"text","text":"a"}]},` +
		`{"role":"user","content":[{"type":"text","text":"two"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"y","signature":"new"},{"type":"tool_use","id":"t","name":"f","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}`
	out, ok = withoutReplayOK(FormatMessages, []byte(messages), dropEarlierTurns)
	if !ok || gjson.GetBytes(out, "messages.1.content.#").Int() != 1 || gjson.GetBytes(out, "messages.3.content.0.signature").String() != "new" {
		t.Fatalf("ok %v: %s", ok, out)
	}
	// All of it in the current turn: nothing of earlier turns to leave out.
	current := `{"input":[{"role":"user","content":"one"},{"type":"reasoning","encrypted_content":"new"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`
	if out, ok := withoutReplayOK(FormatResponses, []byte(current), dropEarlierTurns); ok || string(out) != current {
		t.Fatalf("ok %v: %s", ok, out)
	}
	if _, ok := withoutReplayOK(FormatResponses, []byte(current), dropAll); !ok {
		t.Fatal("dropAll left the current turn's reasoning")
	}
}

// withoutReplayOK is withoutReplay with whether anything was dropped.
func withoutReplayOK(f Format, body []byte, what replayDrop) ([]byte, bool) {
	out, seals := withoutReplay(f, body, what)
	return out, seals != nil
}
