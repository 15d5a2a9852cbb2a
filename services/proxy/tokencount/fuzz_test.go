package tokencount

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzMessages: any JSON object the gateway would accept is counted without a panic, and a
// count is never below the reply's framing.
func FuzzMessages(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"Hello, world"}]}`,
		`{"system":[{"type":"text","text":"x"}],"messages":[{"role":"user","content":[{"type":"image","source":{}},{"type":"document","source":{"type":"content","content":"y"}}]}]}`,
		`{"messages":[{"content":[{"type":"tool_use","input":{"a":[1,2,{"b":null}]}},{"type":"tool_result","content":[{"type":"text","text":"z"}]},{"type":"x","k":{"v":"w"}}]}],"tools":[{"name":1,"input_schema":"s"}]}`,
		`{"messages":[{"content":{"type":"text","text":" \n \n \n"}}],"system":null}`,
		`{"messages":{}}`,
	} {
		f.Add(s)
	}
	c := New()
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) || len(body) == 0 || body[0] != '{' {
			return
		}
		n, _, err := c.Messages(context.Background(), []byte(body), "gpt-5")
		if err != nil && !errors.Is(err, ErrNoMessages) {
			t.Fatalf("%q: %v", body, err)
		}
		if err == nil && n < ReplyOverhead {
			t.Fatalf("%q counted %d", body, n)
		}
	})
}

// FuzzCut: pieces cover the text, stay within chunkBytes and end on character boundaries.
func FuzzCut(f *testing.F) {
	f.Add("hello world")
	f.Add(string(make([]byte, chunkBytes+3)))
	f.Fuzz(func(t *testing.T, s string) {
		for len(s) > 0 {
			k := cut(s)
			if k <= 0 || k > len(s) || len(s) > chunkBytes && k > chunkBytes {
				t.Fatalf("cut %d of %d", k, len(s))
			}
			if k < len(s) && utf8.ValidString(s) && !utf8.RuneStart(s[k]) {
				t.Fatalf("cut inside a character at %d", k)
			}
			s = s[k:]
		}
	})
}
