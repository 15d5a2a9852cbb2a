// Package i18n holds the English and German catalogs and looks up user-visible strings for the
// language carried in the request context.
package i18n

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// Each language is a folder of JSON files (one per area of the dashboard) merged at start; a key
// defined twice is a build error caught by the tests.
//
//go:embed en/*.json de/*.json
var files embed.FS

// Lang is a supported language code.
type Lang string

// The supported languages; English is the fallback.
const (
	EN Lang = "en"
	DE Lang = "de"
)

// Langs lists the supported languages in display order.
var Langs = []Lang{EN, DE}

var catalogs = mustLoad()

func mustLoad() map[Lang]map[string]string {
	out, err := load()
	if err != nil {
		panic(err) // the catalogs are embedded at build time; the tests load them too
	}
	return out
}

func load() (map[Lang]map[string]string, error) {
	out := map[Lang]map[string]string{}
	for _, l := range Langs {
		names, err := fs.Glob(files, string(l)+"/*.json")
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, name := range names {
			b, err := files.ReadFile(name)
			if err != nil {
				return nil, err
			}
			part := map[string]string{}
			if err := json.Unmarshal(b, &part); err != nil {
				return nil, fmt.Errorf("i18n: %s: %w", name, err)
			}
			for k, v := range part {
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("i18n: %s: key %q is defined twice", name, k)
				}
				m[k] = v
			}
		}
		out[l] = m
	}
	return out, nil
}

type ctxKey struct{}

// WithLang returns ctx carrying the language.
func WithLang(ctx context.Context, l Lang) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// FromContext returns the language in ctx, English when none.
func FromContext(ctx context.Context) Lang {
	if l, ok := ctx.Value(ctxKey{}).(Lang); ok {
		return l
	}
	return EN
}

// Parse returns the supported language for a code such as "de" or "de-AT".
func Parse(code string) (Lang, bool) {
	code = strings.ToLower(strings.TrimSpace(code))
	if i := strings.IndexAny(code, "-_"); i > 0 {
		code = code[:i]
	}
	for _, l := range Langs {
		if string(l) == code {
			return l, true
		}
	}
	return EN, false
}

// Negotiate picks the language: an explicit choice (cookie) wins, then the first supported
// language of an Accept-Language header, then English.
func Negotiate(choice, acceptLanguage string) Lang {
	if l, ok := Parse(choice); ok {
		return l
	}
	for _, part := range strings.Split(acceptLanguage, ",") {
		tag, _, _ := strings.Cut(part, ";")
		if l, ok := Parse(tag); ok {
			return l
		}
	}
	return EN
}

// T returns the text for key in the context's language, formatted with args when given. A
// missing key shows as the key itself (a test keeps both catalogs complete).
func T(ctx context.Context, key string, args ...any) string {
	return TL(FromContext(ctx), key, args...)
}

// TL is T for an explicit language.
func TL(l Lang, key string, args ...any) string {
	s, ok := catalogs[l][key]
	if !ok || s == "" {
		s, ok = catalogs[EN][key]
		if !ok {
			return key
		}
	}
	if len(args) > 0 {
		return fmt.Sprintf(s, args...)
	}
	return s
}

// Keys returns every key of a language's catalog, sorted (for tests).
func Keys(l Lang) []string {
	out := make([]string, 0, len(catalogs[l]))
	for k := range catalogs[l] {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Has reports whether key exists with a non-empty text in l.
func Has(l Lang, key string) bool { return catalogs[l][key] != "" }
