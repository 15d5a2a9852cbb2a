package errs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Without a renderer a message is its data: the key with its arguments in Go syntax.
func TestStringWithoutRendererIsTheData(t *testing.T) {
	cases := []struct {
		name string
		m    Msg
		want string
	}{
		{"no arguments", M("err.internal"), "err.internal"},
		{"numbers", M("err.combo_target_timeout", 100, int64(3_600_000)), "err.combo_target_timeout(100, 3600000)"},
		{"strings quoted", M("err.combo_cycle", `x → "y"`), `err.combo_cycle("x → \"y\"")`},
		{"nested message", M("proxy.unreachable", "p", M("proxy.transport_op", "dial", "refused")),
			`proxy.unreachable("p", proxy.transport_op("dial", "refused"))`},
		{"error quoted", M("oauth.refresh_dead", errors.New("invalid_grant")), `oauth.refresh_dead("invalid_grant")`},
		{"float", M("proxy.key_budget_exceeded_daily", 5.5, 30), "proxy.key_budget_exceeded_daily(5.5, 30)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.m.String(); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

// upper is a renderer that shows which text it wrote.
func upper(key string, args ...any) string {
	return strings.ToUpper(key) + fmt.Sprint(args...)
}

// The renderer the composition root installs writes String and Error, fields and nested
// messages included; removing it brings the data back.
func TestSetRendererWritesStringAndError(t *testing.T) {
	SetRenderer(upper)
	t.Cleanup(func() { SetRenderer(nil) })
	if got := M("a.b", 1).String(); got != "A.B1" {
		t.Fatalf("String: %s", got)
	}
	if got := M("a.b", M("c.d")).String(); got != "A.BC.D" {
		t.Fatalf("nested: %s", got)
	}
	e := Fields(map[string]Msg{"z": M("f.z"), "a": M("f.a", 2), "": M("f.form")})
	e.Err = errors.New("cause")
	if got := e.Error(); got != "ERR.VALIDATION (F.FORM; a: F.A2; z: F.Z): cause" {
		t.Fatalf("Error: %s", got)
	}
	SetRenderer(nil)
	if got := e.Error(); got != "err.validation (f.form; a: f.a(2); z: f.z): cause" {
		t.Fatalf("Error without renderer: %s", got)
	}
}

// Render writes every message of an error with the renderer it is given, whatever is installed.
func TestRenderUsesTheGivenText(t *testing.T) {
	SetRenderer(upper)
	t.Cleanup(func() { SetRenderer(nil) })
	e := Field("name", "err.name_taken", "x")
	got := e.Render(func(m Msg) string { return "<" + m.Key + ">" })
	if got != "<err.validation> (name: <err.name_taken>)" {
		t.Fatalf("Render: %s", got)
	}
}
