package translate

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// appendString writes what encoding/json reads back as the same string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" back \\ slash", "ctl \x00\x1f\n\t\r", "ü € 😀", "\xff\xfe bad", "\u2028\u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q → %s: %v", s, b, err)
		}
		want, _ := json.Marshal(s)
		var w string
		json.Unmarshal(want, &w)
		if got != w {
			t.Fatalf("%q → %q, want %q", s, got, w)
		}
	})
}

// Text read from an answer is written back as it stood, escapes and all, and two text blocks
// join into one string that decodes to both.
func TestAnswerTextKeepsItsEscapes(t *testing.T) {
	body := []byte(`{"id":"msg_1","model":"m","content":[{"type":"text","text":"a\"b\\c\n\u00e9\ud83d\ude00"},` +
		`{"type":"text","text":"/\/x"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}`)
	out, err := MessagesResponseToChat(body, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"content":"a\"b\\c\n\u00e9\ud83d\ude00/\/x"`)) {
		t.Fatalf("content not kept as it stood: %s", out)
	}
	var got struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Choices[0].Message.Content != "a\"b\\c\né😀//x" {
		t.Fatalf("%v %q", err, got)
	}
	// A non-string text (a number) is written as its string form.
	if string(textOf(gjson.Parse(`12`))) != "12" || textOf(gjson.Parse(`null`)) != "" {
		t.Fatal("textOf of a non-string")
	}
}
