package views

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"switchyard/i18n"
)

// htmxConfig makes htmx swap 422 answers (a card or form re-rendered with its field errors)
// like 2xx ones; other 4xx and 5xx stay unswapped errors, as htmx 2 does by default. htmx
// must not add its indicator <style> element: the Content-Security-Policy allows no inline
// style (and no page uses htmx indicators).
const htmxConfig = `{"includeIndicatorStyles":false,"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},` +
	`{"code":"422","swap":true,"error":false},{"code":"[45]..","swap":false,"error":true}]}`

// FormatInt writes n with the thousands separator of the context's language.
func FormatInt(ctx context.Context, n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	sep := i18n.T(ctx, "format.thousands")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(sep)
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatTime writes a point in time in the context's language, in UTC and saying so; the page
// script rewrites the visible ones (when) into the browser's time zone.
func formatTime(ctx context.Context, t time.Time) string {
	return t.UTC().Format(i18n.T(ctx, "format.datetime")) + " UTC"
}

// HumanMS writes a millisecond duration the way a person reads it ("30 min", "1 h 30 min").
func HumanMS(ctx context.Context, ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	d := time.Duration(ms) * time.Millisecond
	type unit struct {
		size time.Duration
		key  string
	}
	units := []unit{{24 * time.Hour, "unit.day"}, {time.Hour, "unit.hour"}, {time.Minute, "unit.minute"}, {time.Second, "unit.second"}}
	var parts []string
	for _, u := range units {
		if n := d / u.size; n > 0 && len(parts) < 2 {
			parts = append(parts, fmt.Sprintf("%d %s", n, i18n.T(ctx, u.key)))
			d -= n * u.size
		} else if len(parts) > 0 {
			break // only adjacent units: "1 h 30 min", never "1 h 5 s"
		}
	}
	if d > 0 {
		return "≈ " + strings.Join(parts, " ")
	}
	return strings.Join(parts, " ")
}

// langURL is the language switch link that comes back to path.
func langURL(code, path string) templ.SafeURL {
	return templ.SafeURL("/lang/" + code + "?next=" + url.QueryEscape(path))
}

// loginAction is where the login form posts: /login, carrying the page to go back to in the
// query string too, so that it survives an answer that does not read the form (throttled).
func loginAction(next string) templ.SafeURL {
	if next == "" || next == "/" {
		return "/login"
	}
	return templ.SafeURL("/login?next=" + url.QueryEscape(next))
}

// idURL builds a dashboard URL from a prefix, an id and an optional suffix.
func idURL(prefix string, id int64, suffix string) string {
	return prefix + strconv.FormatInt(id, 10) + suffix
}

// FieldErrors maps a form field's name to its (already translated) message.
type FieldErrors map[string]string

type assetsKey struct{}

// WithAssets returns ctx carrying how the views link a static file (its fingerprinted address).
func WithAssets(ctx context.Context, url func(name string) string) context.Context {
	return context.WithValue(ctx, assetsKey{}, url)
}

// asset is the address of a static file: fingerprinted when the edge said how, else plain.
func asset(ctx context.Context, name string) string {
	if url, ok := ctx.Value(assetsKey{}).(func(string) string); ok {
		return url(name)
	}
	return "/static/" + name
}

// FormatDuration writes a latency the way a person reads it: "850 ms", "1.2 s", "2 min 5 s";
// "–" for none.
func FormatDuration(ctx context.Context, d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Millisecond:
		return "< 1 ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return FormatDecimal(ctx, d.Seconds(), 1) + " s"
	}
	return HumanMS(ctx, d.Milliseconds())
}

// FormatElapsed is FormatDuration for a time that was measured (0 is "< 1 ms", not "none").
func FormatElapsed(ctx context.Context, d time.Duration) string {
	if d <= 0 {
		return "< 1 ms"
	}
	return FormatDuration(ctx, d)
}

// FormatDecimal writes v with the given number of decimals and the language's decimal mark.
func FormatDecimal(ctx context.Context, v float64, decimals int) string {
	return strings.Replace(strconv.FormatFloat(v, 'f', decimals, 64), ".", i18n.T(ctx, "format.decimal"), 1)
}

// FormatPercent writes a share (0.025) as a percentage ("2.5 %"); "–" when there was nothing to
// share (total 0).
func FormatPercent(ctx context.Context, part, total int64) string {
	if total == 0 {
		return "–"
	}
	p := float64(part) / float64(total) * 100
	if p == 0 || p >= 10 {
		return FormatDecimal(ctx, p, 0) + " %"
	}
	return FormatDecimal(ctx, p, 1) + " %"
}
