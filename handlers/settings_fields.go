package handlers

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"switchyard/i18n"
	"switchyard/services/errs"
	"switchyard/services/settings"
	"switchyard/views"
)

// settingField is the view of one setting: the input its kind needs, holding in, with its
// source badge and error.
func settingField(st *settings.Setting, in settings.Input, source, errText string) views.SettingField {
	f := views.SettingField{Name: st.Path(), Value: in.Text, Unit: st.Unit(), Source: source, Error: errText}
	switch st.Kind() {
	case settings.KindToggle:
		f.Kind, f.Checked = views.FieldToggle, in.Text == "true"
	case settings.KindSelect:
		f.Kind, f.Options = views.FieldSelect, st.Options()
	case settings.KindStatuses, settings.KindCodes:
		f.Kind, f.Values, f.Adding, f.Suggestions = views.FieldChips, in.List, in.Adding, st.Suggestions()
		f.Codes = st.Kind() == settings.KindCodes
	case settings.KindFamilies:
		f.Kind, f.Rows = views.FieldText, 4
	case settings.KindText, settings.KindWords:
		f.Kind = views.FieldLine
	default:
		f.Kind = views.FieldNumber
		f.Min, f.Max, f.Ranged = st.Range()
	}
	return f
}

// placedErrors are the messages of a refused save, translated and placed on a card.
type placedErrors struct {
	fields map[string]string // by the path of the field shown on the card
	card   []string          // messages that belong to no field shown on the card
}

// placeErrors places the messages of a service error on a card with fields at paths: a message
// keyed by one of paths, or by something inside it (model_lockout.families.anthropic.opus),
// goes to that field (the first one per field); anything else to the top of the card, named by
// its setting's label. ok is false for an internal error, which the caller returns.
func placeErrors(ctx context.Context, err error, paths []string) (placed placedErrors, ok bool) {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code == errs.Internal {
		return placedErrors{}, false
	}
	placed.fields = map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		msg := Text(ctx, e.Fields[k])
		if p, inner, found := fieldOf(k, paths); found {
			if inner != "" {
				msg = inner + ": " + msg
			}
			if _, taken := placed.fields[p]; !taken {
				placed.fields[p] = msg
			}
			continue
		}
		placed.card = append(placed.card, labelled(ctx, k, msg))
	}
	if len(e.Fields) == 0 {
		placed.card = append(placed.card, Text(ctx, e.Msg))
	}
	return placed, true
}

// labelled prefixes a message with the label of the setting at key, or with the key itself.
func labelled(ctx context.Context, key, msg string) string {
	if key == "" {
		return msg
	}
	if st, ok := settings.Lookup(key); ok {
		return i18n.T(ctx, st.LabelKey()) + ": " + msg
	}
	return key + ": " + msg
}

// fieldOf finds the path among paths that a message key belongs to, and what inside it the key
// names ("anthropic.opus" for model_lockout.families.anthropic.opus).
func fieldOf(key string, paths []string) (path, inner string, ok bool) {
	for _, p := range paths {
		switch {
		case key == p:
			return p, "", true
		case strings.HasPrefix(key, p+"."):
			return p, key[len(p)+1:], true
		case strings.HasPrefix(key, p+"["):
			return p, key[len(p):], true
		}
	}
	return "", "", false
}

// splitPath splits a dotted setting path into its names.
func splitPath(path string) []string { return strings.Split(path, ".") }
