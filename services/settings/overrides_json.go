package settings

import (
	"encoding/json"
	"errors"
)

// CheckProviderOverrides decodes and validates a provider's resilience document and returns it
// in canonical form, or per-field messages keyed like the JSON.
func CheckProviderOverrides(raw []byte) ([]byte, map[string]string) {
	var o ProviderOverrides
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, map[string]string{"": err.Error()}
	}
	return canonical(o, o.Validate())
}

// CheckConnectionOverrides decodes and validates a connection's override document and returns
// it in canonical form, or per-field messages. max_concurrent lives on the connection itself.
func CheckConnectionOverrides(raw []byte) ([]byte, map[string]string) {
	var o ConnectionOverrides
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, map[string]string{"": err.Error()}
	}
	if o.MaxConcurrent != nil {
		return nil, map[string]string{"max_concurrent": "set max_concurrent on the connection, not in its overrides"}
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

func canonical(v any, verr error) ([]byte, map[string]string) {
	if verr != nil {
		var ve *ValidationError
		if errors.As(verr, &ve) {
			return nil, ve.Fields
		}
		return nil, map[string]string{"": verr.Error()}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, map[string]string{"": err.Error()}
	}
	return b, nil
}
