package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"switchyard/i18n"
	"switchyard/services/errs"
	"switchyard/views"
)

// Text renders a service message in the request's language; whole numbers among its arguments
// get the language's thousands separator, fractions its decimal mark.
func Text(ctx context.Context, m errs.Msg) string {
	if len(m.Args) == 0 {
		return i18n.T(ctx, m.Key)
	}
	args := make([]any, len(m.Args))
	for i, a := range m.Args {
		args[i] = localArg(ctx, a)
	}
	return i18n.T(ctx, m.Key, args...)
}

// English renders a message in English, the language of the admin API, the request log and
// the logs, with the messages among its arguments in English too. It reads the catalog itself:
// the edge does not depend on the renderer app installs for the services (errs.SetRenderer).
func English(m errs.Msg) string { return In(i18n.EN, m) }

// In renders a message in a language with its arguments as given, except messages among them,
// which are rendered in the same language. Unlike Text it leaves numbers as Go prints them.
func In(l i18n.Lang, m errs.Msg) string {
	if len(m.Args) == 0 {
		return i18n.TL(l, m.Key)
	}
	args := make([]any, len(m.Args))
	for i, a := range m.Args {
		if n, ok := a.(errs.Msg); ok {
			a = In(l, n)
		}
		args[i] = a
	}
	return i18n.TL(l, m.Key, args...)
}

// localArg formats one message argument for the language: numbers as the language writes them,
// nested messages translated, anything else as fmt prints it.
func localArg(ctx context.Context, a any) any {
	switch v := a.(type) {
	case int:
		return localNumber{ctx: ctx, v: float64(v), whole: int64(v)}
	case int64:
		return localNumber{ctx: ctx, v: float64(v), whole: v}
	case float64:
		n := localNumber{ctx: ctx, v: v, fraction: true}
		if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
			n.whole, n.fraction = int64(v), false
		}
		return n
	case errs.Msg:
		return Text(ctx, v)
	}
	return a
}

// localNumber is a number argument that writes itself as the reader's language writes numbers
// under whatever verb the catalog gives it: a count under %d or %s gets the thousands separator,
// an amount under %.2f its decimals with the language's decimal mark. (Turned into text before
// formatting, a number under %d came out as "%!d(string=100)".)
type localNumber struct {
	ctx      context.Context
	v        float64
	whole    int64 // v when it has no fraction
	fraction bool
}

// Format implements fmt.Formatter.
func (n localNumber) Format(s fmt.State, verb rune) {
	prec, fixed := s.Precision()
	switch {
	case fixed && strings.ContainsRune("eEfFgG", verb):
		_, _ = io.WriteString(s, views.FormatDecimal(n.ctx, n.v, prec))
	case verb == 'd' || verb == 's' || verb == 'v' || strings.ContainsRune("eEfFgG", verb):
		if !n.fraction {
			_, _ = io.WriteString(s, views.FormatInt(n.ctx, n.whole))
			return
		}
		_, _ = io.WriteString(s, strings.Replace(strconv.FormatFloat(n.v, 'f', -1, 64), ".", i18n.T(n.ctx, "format.decimal"), 1))
	default: // a verb no catalog uses for a number (%x): as fmt writes the number
		if n.fraction {
			_, _ = fmt.Fprintf(s, fmt.FormatString(s, verb), n.v)
			return
		}
		_, _ = fmt.Fprintf(s, fmt.FormatString(s, verb), n.whole)
	}
}

// formErrors splits a service error into translated messages for the form's fields (named in
// shown) and one message for the whole form, which also collects messages for fields the form
// does not show. ok is false for an internal error, which the caller returns.
func formErrors(ctx context.Context, err error, shown ...string) (fields views.FieldErrors, form string, ok bool) {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code == errs.Internal {
		return nil, "", false
	}
	fields = views.FieldErrors{}
	var rest []string
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		msg := Text(ctx, e.Fields[k])
		switch {
		case slices.Contains(shown, k):
			fields[k] = msg
		case k == "":
			rest = append(rest, msg)
		default:
			rest = append(rest, k+": "+msg)
		}
	}
	if len(e.Fields) == 0 {
		rest = append(rest, Text(ctx, e.Msg))
	}
	return fields, strings.Join(rest, "; "), true
}
