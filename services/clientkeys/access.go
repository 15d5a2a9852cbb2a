package clientkeys

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"switchyard/db"
	"switchyard/services/errs"
	"switchyard/services/names"
	"switchyard/services/spend"
)

// MaxAllowedConnections bounds a key's allowed_connections.
const MaxAllowedConnections = 1000

// knownScopes are the scopes a key may have.
var knownScopes = map[string]bool{ScopeLeaseExclusive: true}

// apply validates the fields of in that are set and writes them into row, merged with what row
// holds: the lease scope needs allowed connections whether both come in one request or not.
// Lists are kept in the order given, without duplicates; every problem is reported at once, per
// field (allowed_models[2], allowed_connections[0], …).
func (s *Service) apply(row *db.ClientKey, in Input) error {
	fields := map[string]errs.Msg{}
	if in.Name != nil {
		name := strings.TrimSpace(*in.Name)
		if m, bad := names.Check(name); bad {
			fields["name"] = m
		}
		row.Name = name
	}
	models := decodeStrings(row.AllowedModels)
	if in.AllowedModels != nil {
		models = models[:0]
		if len(*in.AllowedModels) > MaxPatterns {
			fields["allowed_models"] = errs.M("keys.err.too_many_patterns", MaxPatterns)
		}
		for i, p := range *in.AllowedModels {
			p = strings.TrimSpace(p)
			if m, bad := CheckModelPattern(p); bad {
				fields["allowed_models["+strconv.Itoa(i)+"]"] = m
				continue
			}
			models = appendNew(models, p)
		}
	}
	scopes := decodeStrings(row.Scopes)
	if in.Scopes != nil {
		scopes = scopes[:0]
		for i, sc := range *in.Scopes {
			sc = strings.TrimSpace(sc)
			if !knownScopes[sc] {
				fields["scopes["+strconv.Itoa(i)+"]"] = errs.M("keys.err.unknown_scope", sc, ScopeLeaseExclusive)
				continue
			}
			scopes = appendNew(scopes, sc)
		}
	}
	var conns []int64
	for _, id := range decodeIDs(row.AllowedConnections) {
		if s.exists(id) { // a deleted connection's id leaves the list with the next change
			conns = append(conns, id)
		}
	}
	if in.AllowedConnections != nil {
		conns = conns[:0]
		if len(*in.AllowedConnections) > MaxAllowedConnections {
			fields["allowed_connections"] = errs.M("keys.err.too_many_connections", MaxAllowedConnections)
		}
		for i, id := range *in.AllowedConnections {
			if !s.exists(id) {
				fields["allowed_connections["+strconv.Itoa(i)+"]"] = errs.M("keys.err.no_connection", id)
				continue
			}
			if !slices.Contains(conns, id) {
				conns = append(conns, id)
			}
		}
	}
	if slices.Contains(scopes, ScopeLeaseExclusive) && len(conns) == 0 && !hasPrefix(fields, "allowed_connections") {
		fields["allowed_connections"] = errs.M("keys.err.lease_needs_connections", ScopeLeaseExclusive)
	}
	limits := decodeLimits(row.Limits)
	limits.Apply(in.LimitsInput, fields)
	if len(fields) > 0 {
		return errs.Fields(fields)
	}
	row.AllowedModels, row.Scopes, row.AllowedConnections = encode(models), encode(scopes), encode(conns)
	row.Limits = encodeLimits(limits)
	return nil
}

// decodeLimits reads a key's stored limits; unreadable ones (a hand-edited database) are none.
func decodeLimits(s string) spend.Limits {
	var l spend.Limits
	_ = json.Unmarshal([]byte(s), &l)
	return l
}

func encodeLimits(l spend.Limits) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// compileAccess builds a key's Access from its stored lists; nil when the key restricts nothing.
func compileAccess(r db.ClientKey) (*Access, error) {
	var models, scopes []string
	var conns []int64
	if err := json.Unmarshal([]byte(r.AllowedModels), &models); err != nil {
		return nil, fmt.Errorf("allowed_models: %w", err)
	}
	if err := json.Unmarshal([]byte(r.Scopes), &scopes); err != nil {
		return nil, fmt.Errorf("scopes: %w", err)
	}
	if err := json.Unmarshal([]byte(r.AllowedConnections), &conns); err != nil {
		return nil, fmt.Errorf("allowed_connections: %w", err)
	}
	if len(models) == 0 && len(scopes) == 0 && len(conns) == 0 {
		return nil, nil
	}
	p, err := CompileModelPatterns(models)
	if err != nil {
		return nil, err
	}
	return &Access{Models: p, Exclusive: slices.Contains(scopes, ScopeLeaseExclusive), Connections: conns}, nil
}

func decodeStrings(s string) []string {
	var out []string
	_ = json.Unmarshal([]byte(s), &out)
	return out
}

func decodeIDs(s string) []int64 {
	var out []int64
	_ = json.Unmarshal([]byte(s), &out)
	return out
}

// encode stores a list as JSON; an empty one as [].
func encode[T any](list []T) string {
	if len(list) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(list)
	return string(b)
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// hasPrefix reports whether a field error names the field or one of its elements.
func hasPrefix(fields map[string]errs.Msg, field string) bool {
	for k := range fields {
		if k == field || strings.HasPrefix(k, field+"[") {
			return true
		}
	}
	return false
}
