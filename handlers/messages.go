package handlers

import (
	"context"
	"errors"
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
		return views.FormatInt(ctx, int64(v))
	case int64:
		return views.FormatInt(ctx, v)
	case float64:
		if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
			return views.FormatInt(ctx, int64(v))
		}
		return strings.Replace(strconv.FormatFloat(v, 'f', -1, 64), ".", i18n.T(ctx, "format.decimal"), 1)
	case errs.Msg:
		return Text(ctx, v)
	}
	return a
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
