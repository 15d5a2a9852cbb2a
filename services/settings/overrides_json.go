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
		return nil, map[string]errs.Msg{"": errs.M("err.plain", err.Error())}
	}
	return canonical(o, o.Validate())
}

// CheckConnectionOverrides decodes and validates a connection's override document and returns
// it in canonical form, or per-field messages. max_concurrent lives on the connection itself.
func CheckConnectionOverrides(raw []byte) ([]byte, map[string]errs.Msg) {
	var o ConnectionOverrides
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, map[string]errs.Msg{"": errs.M("err.plain", err.Error())}
	}
	if o.MaxConcurrent != nil {
		return nil, map[string]errs.Msg{"max_concurrent": errs.M("err.plain", "set max_concurrent on the connection, not in its overrides")}
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

func canonical(v any, verr error) ([]byte, map[string]errs.Msg) {
	if verr != nil {
		var ve *ValidationError
		if errors.As(verr, &ve) {
			out := make(map[string]errs.Msg, len(ve.Fields))
			for k, msg := range ve.Fields {
				out[k] = errs.M("err.plain", msg)
			}
			return nil, out
		}
		return nil, map[string]errs.Msg{"": errs.M("err.plain", verr.Error())}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, map[string]errs.Msg{"": errs.M("err.plain", err.Error())}
	}
	return b, nil
}
