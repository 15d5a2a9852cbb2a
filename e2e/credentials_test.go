package e2e

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// An API key with control characters (NUL, other C0 controls, DEL) is refused on create and on
// update, with its own message; an empty key is "required", a key with spaces says so; a key
// pasted with a trailing line break is trimmed and accepted.
func TestConnectionKeysRefuseControlCharacters(t *testing.T) {
	e := testenv.New(t)
	e.AddProvider("up", "http://127.0.0.1:9/v1")
	control, required, spaces := i18n.TL(i18n.EN, "err.api_key_control"), i18n.TL(i18n.EN, "err.required"), i18n.TL(i18n.EN, "err.api_key")
	cases := []struct {
		name, key, want string
	}{
		{"NUL", "sk-abc\x00def", control},
		{"leading NUL", "\x00sk-abcdef", control},
		{"SOH", "sk-\x01abcdef", control},
		{"escape", "sk-abc\x1b[0mdef", control},
		{"DEL", "sk-abc\x7fdef", control},
		{"line break inside", "sk-abc\r\nX-Injected: 1", control},
		{"tab inside", "sk-abc\tdef", control},
		{"C1 control", "sk-abc\u0085def", control},
		{"empty", "", required},
		{"only spaces", "   ", required},
		{"space inside", "sk-abc def", spaces},
	}
	id := e.AddConnection("up", "good", "sk-good-key", 0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out struct {
				Error struct {
					Fields map[string]string `json:"fields"`
				} `json:"error"`
			}
			st := e.API("POST", "/api/connections", map[string]any{"provider": "up", "name": "c", "auth_type": "api_key", "api_key": c.key}, &out)
			if st != http.StatusUnprocessableEntity || out.Error.Fields["api_key"] != c.want {
				t.Fatalf("create: %d %v, want 422 %q", st, out.Error.Fields, c.want)
			}
			st = e.API("PATCH", "/api/connections/"+itoa(id), map[string]any{"api_key": c.key}, &out)
			if st != http.StatusUnprocessableEntity || out.Error.Fields["api_key"] != c.want {
				t.Fatalf("update: %d %v, want 422 %q", st, out.Error.Fields, c.want)
			}
		})
	}
	if items := e.MustAPI("GET", "/api/connections", nil, 200)["items"].([]any); len(items) != 1 {
		t.Fatalf("connections: %v", items)
	}
	e.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"api_key": "sk-new-key\n"}, 200)

	// The dashboard form says the same, in the operator's language.
	c := e.Login()
	req, _ := http.NewRequest("POST", e.Base+"/connections", strings.NewReader(url.Values{"provider": {"up"}, "name": {"d"},
		"api_key": {"sk-abc\x00def"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept-Language", "de")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, html.EscapeString(i18n.TL(i18n.DE, "err.api_key_control"))) {
		t.Fatalf("dashboard form: %d", resp.StatusCode)
	}
}
