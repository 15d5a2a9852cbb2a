package convo

import (
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
		b := AppendString(nil, s)
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

// A Text is read and written as it stood, escapes and all; String and Len see the characters.
func TestTextKeepsItsEscapes(t *testing.T) {
	v := gjson.Parse(`"a\"b\\c\n\u00e9\ud83d\ude00"`)
	txt := TextOf(v)
	if string(txt) != `a\"b\\c\n\u00e9\ud83d\ude00` {
		t.Fatalf("not kept as it stood: %s", txt)
	}
	if txt.String() != "a\"b\\c\né😀" {
		t.Fatalf("String = %q", txt.String())
	}
	if !json.Valid(txt.JSON()) {
		t.Fatalf("JSON = %s", txt.JSON())
	}
	if n := Text("ab\\n").Len(); n != 3 {
		t.Fatalf("Len = %d", n)
	}
	// A non-string text (a number) is written as its string form.
	if string(TextOf(gjson.Parse(`12`))) != "12" || TextOf(gjson.Parse(`null`)) != "" {
		t.Fatal("TextOf of a non-string")
	}
}
