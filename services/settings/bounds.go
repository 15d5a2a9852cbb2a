package settings

import (
	"reflect"
	"slices"
	"strings"

	"switchyard/services/errs"
)

// Every settings document is bounded, whatever its fields: a list or a map holds at most
// MaxEntries entries, and a string (a map's keys included) at most MaxTextBytes bytes. The bounds
// are checked by walking the decoded value, so a field added later is bounded without a line of
// its own; the setting's own validation runs only on a value within them.
const (
	MaxEntries   = 1_000
	MaxTextBytes = 4 << 10
)

// checkBounds reports, under its path, every list or map in v longer than MaxEntries and every
// string longer than MaxTextBytes ("error_rules[3].body_markers[0]",
// "model_lockout.families.anthropic"). It says whether v is within bounds.
func checkBounds(path string, v any, fe fieldErrors) bool {
	return walkBounds(path, reflect.ValueOf(v), fe)
}

func walkBounds(path string, v reflect.Value, fe fieldErrors) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || walkBounds(path, v.Elem(), fe)
	case reflect.String:
		if v.Len() > MaxTextBytes {
			fe.add(path, errs.M("err.text_too_long", MaxTextBytes>>10))
			return false
		}
	case reflect.Slice, reflect.Array:
		if v.Len() > MaxEntries {
			fe.add(path, errs.M("err.too_many_entries", MaxEntries))
			return false
		}
		ok := true
		for i := range v.Len() {
			ok = walkBounds(ruleKey(path, i), v.Index(i), fe) && ok
		}
		return ok
	case reflect.Map:
		if v.Len() > MaxEntries {
			fe.add(path, errs.M("err.too_many_entries", MaxEntries))
			return false
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		ok := true
		for _, k := range keys {
			if k.Kind() == reflect.String && k.Len() > MaxTextBytes {
				fe.add(path, errs.M("err.key_too_long", MaxTextBytes>>10))
				ok = false
				continue
			}
			ok = walkBounds(joinPath(path, k.String()), v.MapIndex(k), fe) && ok
		}
		return ok
	case reflect.Struct:
		t := v.Type()
		ok := true
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			ok = walkBounds(joinPath(path, name), v.Field(i), fe) && ok
		}
		return ok
	}
	return true
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
