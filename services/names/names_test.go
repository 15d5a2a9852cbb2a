package names

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, in, key string
	}{
		{"plain", "prod-eu", ""},
		{"inner spaces", "main key 2", ""},
		{"umlauts and emoji", "Büro 🚀 Köln", ""},
		{"emoji joined with ZWJ", "team 👩\u200d💻", ""},
		{"quotes, braces and backslash", `we"ird\{x="1"}`, ""},
		{"an address", "ops@example.com", ""},
		{"exactly the limit in characters", strings.Repeat("ü", MaxLen), ""},
		{"empty", "", "err.name_required"},
		{"too long", strings.Repeat("a", MaxLen+1), "err.name_required"},
		{"not UTF-8", "ab\xffcd", "err.name_utf8"},
		{"NUL", "a\x00b", "err.name_invisible"},
		{"tab", "a\tb", "err.name_invisible"},
		{"newline", "a\nb", "err.name_invisible"},
		{"DEL", "a\x7fb", "err.name_invisible"},
		{"C1 control", "a\u0085b", "err.name_invisible"},
		{"right-to-left override", "prod\u202eved", "err.name_invisible"},
		{"left-to-right embedding", "\u202aab", "err.name_invisible"},
		{"isolate", "a\u2066b\u2069", "err.name_invisible"},
		{"right-to-left mark", "a\u200fb", "err.name_invisible"},
		{"left-to-right mark", "a\u200eb", "err.name_invisible"},
		{"arabic letter mark", "a\u061cb", "err.name_invisible"},
		{"line separator", "a\u2028b", "err.name_invisible"},
		{"paragraph separator", "a\u2029b", "err.name_invisible"},
		{"zero-width space", "a\u200bb", "err.name_invisible"},
		{"byte order mark", "\ufeffab", "err.name_invisible"},
		{"leading space", " ab", "err.name_spaces"},
		{"trailing no-break space", "ab\u00a0", "err.name_spaces"},
		{"trailing ideographic space", "ab\u3000", "err.name_spaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, bad := Check(tc.in)
			if bad != (tc.key != "") || m.Key != tc.key {
				t.Fatalf("Check(%q) = %q, %v; want %q", tc.in, m.Key, bad, tc.key)
			}
		})
	}
}

func TestCheckNamesTheInvisibleCharacter(t *testing.T) {
	m, _ := Check("prod\u202eved")
	if len(m.Args) != 1 || m.Args[0] != "U+202E" {
		t.Fatalf("args %v", m.Args)
	}
	if m, _ := Check("a\x00"); m.Args[0] != "U+0000" {
		t.Fatalf("args %v", m.Args)
	}
}
