package translate

import (
	"encoding/json"
	"testing"
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
