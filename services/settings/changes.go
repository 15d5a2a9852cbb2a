package settings

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"switchyard/services/errs"
)

// Changes are edits of the saved settings by path, read from a JSON patch (Service.Patch) or a
// form (ReadForm, or a card of its own), together with the problems met while reading them.
// Service.Apply validates them all at once and saves all of them or nothing.
type Changes struct {
	values   map[string]any // path → new value; nil removes the saved value
	problems fieldErrors
}

// NewChanges returns an empty set of changes.
func NewChanges() *Changes {
	return &Changes{values: map[string]any{}, problems: fieldErrors{}}
}

// Set changes the setting at path to v, a value of the setting's Go type.
func (c *Changes) Set(path string, v any) { c.values[path] = v }

// Revert removes the saved value at path, so the environment or the default applies again.
func (c *Changes) Revert(path string) { c.values[path] = nil }

// Fail records that the value at key (a setting path, or a key inside it such as
// "error_rules[0].statuses") could not be read. The first problem of a key wins.
func (c *Changes) Fail(key string, m errs.Msg) { c.problems.add(key, m) }

// parsePatch reads a partial settings document. A JSON null removes the saved value of a
// setting, or of every setting in a section.
func parsePatch(sc *schema, raw []byte) *Changes {
	ch := NewChanges()
	flat := map[string]json.RawMessage{}
	flatten(sc, raw, "", flat, ch.problems)
	for p, v := range decodeValues(sc, flat, ch.problems) {
		ch.values[p] = v
	}
	return ch
}

// flatten walks a (partial) document into setting path → raw JSON. A null section expands to
// a null for every setting below it.
func flatten(sc *schema, raw []byte, prefix string, out map[string]json.RawMessage, fe fieldErrors) {
	obj, problem := decodeObject(raw)
	if problem != nil {
		if prefix == "" && problem.Key == "err.json_object" {
			*problem = errs.M("err.settings_object")
		}
		fe.add(prefix, *problem)
		return
	}
	for k, v := range obj {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		switch {
		case strings.Contains(k, "."):
			fe.add(p, errs.M("err.unknown_setting"))
		case sc.byPath[p] != nil:
			out[p] = v
		case sc.sections[p] && isNull(v):
			for _, s := range sc.list {
				if strings.HasPrefix(s.path, p+".") {
					out[s.path] = v
				}
			}
		case sc.sections[p]:
			flatten(sc, v, p, out, fe)
		default:
			fe.add(p, errs.M("err.unknown_setting"))
		}
	}
}

// decodeObject reads one JSON object, rejecting repeated keys and trailing data.
func decodeObject(raw []byte) (map[string]json.RawMessage, *errs.Msg) {
	notObject := msg("err.json_object")
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, notObject
	}
	obj := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, notObject
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, notObject
		}
		if _, dup := obj[key]; dup {
			return nil, msg("err.repeated_key", key)
		}
		obj[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, notObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notObject
	}
	return obj, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// decodeValues decodes each flattened value; a nil value marks a JSON null. Values that cannot
// be decoded are reported in fe and left out.
func decodeValues(sc *schema, flat map[string]json.RawMessage, fe fieldErrors) map[string]any {
	out := make(map[string]any, len(flat))
	for p, raw := range flat {
		if isNull(raw) {
			out[p] = nil
			continue
		}
		v, problem := sc.byPath[p].decode(raw)
		if problem != nil {
			fe.add(p, *problem)
			continue
		}
		out[p] = v
	}
	return out
}
