package handlers

import (
	"context"

	"regexp"

	"strconv"
	"strings"

	"switchyard/i18n"
	"switchyard/services/errs"

	"switchyard/views"
)

// knownMessages maps the services' field messages (English, stable) to catalog keys, so the
// dashboard shows them in the user's language. A message not listed is shown as it is.
var knownMessages = map[string]string{
	"is required": "err.required",
	"use 1–63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit": "err.provider_name",
	"must be an absolute http(s) URL such as https://api.openai.com/v1":                     "err.base_url",
	"must not contain a query or fragment":                                                  "err.base_url_query",
	"a provider with this name already exists":                                              "err.provider_exists",
	"no provider with this name":                                                            "err.no_provider",
	"is required (at most 100 characters)":                                                  "err.name_required",
	"must be a non-empty key without spaces":                                                "err.api_key",
	"must be between 0 and 1000 (lower is tried first)":                                     "err.priority",
	"must be between 1 and 10000, or empty for unlimited":                                   "err.max_concurrent",
	"this provider already has a connection with this name":                                 "err.connection_exists",
	"only api_key connections can be created here":                                          "err.auth_type",
	"must be a whole number":                                                                "err.whole_number",
	"must be a number":                                                                      "err.number",
	"must be true or false":                                                                 "err.bool",
}

var (
	betweenRE  = regexp.MustCompile(`^must be between (-?[0-9.]+) and (-?[0-9.]+)$`)
	atLeastRE  = regexp.MustCompile(`^must be at least ([a-z_]+) \((-?[0-9]+)\)$`)
	atMostRE   = regexp.MustCompile(`^must not exceed ([a-z_]+) \((-?[0-9]+)\)$`)
	oneOfRE    = regexp.MustCompile(`^must be one of:? (.+)$`)
	errorKeyRE = regexp.MustCompile(`^err\.`)
)

// translateMessage puts a service's field message into the user's language. related, when
// given, turns a setting name mentioned in a message into that setting's label.
func translateMessage(ctx context.Context, msg string, related func(name string) string) string {
	if errorKeyRE.MatchString(msg) && i18n.Has(i18n.EN, msg) {
		return i18n.T(ctx, msg) // one of ours
	}
	if key, ok := knownMessages[msg]; ok {
		return i18n.T(ctx, key)
	}
	label := func(name string) string {
		if related != nil {
			if l := related(name); l != "" {
				return l
			}
		}
		return name
	}
	if m := betweenRE.FindStringSubmatch(msg); m != nil {
		return i18n.T(ctx, "err.between", localNumber(ctx, m[1]), localNumber(ctx, m[2]))
	}
	if m := atLeastRE.FindStringSubmatch(msg); m != nil {
		return i18n.T(ctx, "err.at_least", label(m[1]), localNumber(ctx, m[2]))
	}
	if m := atMostRE.FindStringSubmatch(msg); m != nil {
		return i18n.T(ctx, "err.at_most", label(m[1]), localNumber(ctx, m[2]))
	}
	if m := oneOfRE.FindStringSubmatch(msg); m != nil {
		return i18n.T(ctx, "err.one_of", m[1])
	}
	return msg
}

// localNumber writes a whole number with the language's thousands separator; anything else
// (a fraction) in the language's decimal notation.
func localNumber(ctx context.Context, s string) string {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return views.FormatInt(ctx, n)
	}
	return strings.Replace(s, ".", i18n.T(ctx, "format.decimal"), 1)
}

// formErrors splits a service error into translated messages for the form's fields (named

// plainText is the English text of a message, for the settings messages still matched by text.
func plainText(m errs.Msg) string {
	if m.Key == "err.plain" && len(m.Args) == 1 {
		if s, ok := m.Args[0].(string); ok {
			return s
		}
	}
	return m.String()
}
