package handlers

import (
	"strings"
	"testing"
)

func TestStrictJSON(t *testing.T) {
	cases := []struct {
		name, body, reason string // reason "" = accepted
	}{
		{"object", `{"a":1,"b":{"c":[1,{"d":2}]}}`, ""},
		{"surrounding whitespace", " \n{\"a\":1}\n\t ", ""},
		{"same key in sibling objects", `{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]}`, ""},
		{"scalar", `42`, ""},
		{"duplicate key", `{"model":"a","model":"b"}`, "duplicate_key"},
		{"duplicate nested key", `{"a":{"stream":false,"x":1,"stream":true}}`, "duplicate_key"},
		{"duplicate in array element", `[{"a":1},{"b":1,"b":2}]`, "duplicate_key"},
		{"duplicate by case, as encoding/json matches fields", `{"name":"a","NAME":"b"}`, "duplicate_key"},
		{"duplicate by Unicode folding (Kelvin sign)", "{\"k\":1,\"\u212a\":2}", "duplicate_key"},
		{"two objects", `{"name":"a"}{"name":"b"}`, "trailing_data"},
		{"two objects with space", `{"name":"a"} {"name":"b"}`, "trailing_data"},
		{"trailing garbage", `{"name":"a"} x`, "trailing_data"},
		{"trailing bracket", `{"name":"a"}]`, "trailing_data"},
		{"empty", ``, "bad_json"},
		{"syntax", `{"a":}`, "bad_json"},
		{"unterminated", `{"a":1`, "bad_json"},
		{"too deep", strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), "too_deep"},
		{"deep enough", strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := strictJSON([]byte(c.body))
			switch {
			case c.reason == "" && e != nil:
				t.Fatalf("refused: %v", e)
			case c.reason != "" && e == nil:
				t.Fatal("accepted")
			case e != nil && e.Reason != c.reason:
				t.Fatalf("reason %s, want %s (%v)", e.Reason, c.reason, e)
			}
		})
	}
}
