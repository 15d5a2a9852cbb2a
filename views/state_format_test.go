package views

import (
	"context"
	"testing"

	"switchyard/i18n"
)

func TestFormatCountdown(t *testing.T) {
	en, de := i18n.WithLang(context.Background(), i18n.EN), i18n.WithLang(context.Background(), i18n.DE)
	cases := []struct {
		name string
		ctx  context.Context
		ms   int64
		want string
	}{
		{"ended", en, 0, "0:00"},
		{"past", en, -5000, "0:00"},
		{"a millisecond left rounds up", en, 1, "0:01"},
		{"exact seconds", en, 90_000, "1:30"},
		{"just under a minute", en, 59_001, "1:00"},
		{"hours", en, 3_723_000, "1:02:03"},
		{"days", en, 2*86_400_000 + 3_723_000, "2 d 01:02:03"},
		{"days in German", de, 86_400_000, "1 Tg. 00:00:00"},
	}
	for _, c := range cases {
		if got := FormatCountdown(c.ctx, c.ms); got != c.want {
			t.Errorf("%s: FormatCountdown(%d) = %q, want %q", c.name, c.ms, got, c.want)
		}
	}
}
