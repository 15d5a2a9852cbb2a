package jsonstr

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// The two flavours write what encoding/json and slog's JSON handler write.
func FuzzAgreesWithEncoders(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "\n\r\t\b\f\x00\x1f", "<a&b>", "\u2028\u2029", "\xff\xfe", "é漢字😀", "a\x7fb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendMarshal(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendMarshal(%q) = %s, json.Marshal %s", s, got, want)
		}
		var line bytes.Buffer
		slog.New(slog.NewJSONHandler(&line, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == "time" || a.Key == "level" || a.Key == "msg" {
				return slog.Attr{}
			}
			return a
		}})).Info("", "v", s)
		got := `{"v":` + string(Append(nil, s)) + "}\n"
		if got != line.String() {
			t.Fatalf("Append(%q) in a line = %s, slog %s", s, got, strings.TrimSpace(line.String()))
		}
	})
}
