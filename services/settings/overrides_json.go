package settings

import (
	"encoding/json"
	"errors"

	"switchyard/services/errs"
)

// CheckProviderOverrides decodes and validates a provider's resilience document and returns it
// in canonical form, or per-field messages keyed like the JSON.
func CheckProviderOverrides(raw []byte) ([]byte, map[string]errs.Msg) {
	var o ProviderOverrides
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, map[string]errs.Msg{"": overridesJSONError(err)}
	}
	return canonical(o, o.Validate())
}

// CheckConnectionOverrides decodes and validates a connection's override document and returns
// it in canonical form, or per-field messages. max_concurrent lives on the connection itself.
func CheckConnectionOverrides(raw []byte) ([]byte, map[string]errs.Msg) {
	var o ConnectionOverrides
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, map[string]errs.Msg{"": overridesJSONError(err)}
	}
	if o.MaxConcurrent != nil {
		return nil, map[string]errs.Msg{"max_concurrent": errs.M("err.max_concurrent_on_connection")}
	}
	return canonical(o, o.Validate())
}

// ParseConnectionOverrides decodes a stored override document; a broken one yields no overrides.
func ParseConnectionOverrides(raw []byte) ConnectionOverrides {
	var o ConnectionOverrides
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &o)
	}
	return o
}

// ParseProviderOverrides decodes a stored provider override document; a broken one yields none.
func ParseProviderOverrides(raw []byte) ProviderOverrides {
	var o ProviderOverrides
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &o)
	}
	return o
}

// overridesJSONError says why an override document cannot be read.
func overridesJSONError(err error) errs.Msg {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) && te.Field == "" {
		return errs.M("err.json_object")
	}
	var oe *overridesError
	if errors.As(err, &oe) {
		err = oe.err
	}
	return jsonError(err)
}

// overridesError wraps the strict decoder's error of an override document.
type overridesError struct {
	what string
	err  error
}

func (e *overridesError) Error() string { return e.what + ": " + e.err.Error() }
func (e *overridesError) Unwrap() error { return e.err }

func canonical(v any, verr error) ([]byte, map[string]errs.Msg) {
	if verr != nil {
		e := errs.As(verr)
		if len(e.Fields) > 0 {
			return nil, e.Fields
		}
		return nil, map[string]errs.Msg{"": e.Msg}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, map[string]errs.Msg{"": errs.M("err.internal")}
	}
	return b, nil
}
