package settings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"switchyard/services/errs"
)

// rulesJSON is a list of n valid error rules, each with the given body markers.
func rulesJSON(n int, markers ...string) string {
	rules := make([]ErrorRule, n)
	for i := range rules {
		rules[i] = ErrorRule{Name: fmt.Sprintf("r%d", i), Statuses: []int{429}, Reason: "rate_limit", Scope: "connection",
			BodyMarkers: markers}
	}
	b, _ := json.Marshal(rules)
	return string(b)
}

func fieldMsg(t *testing.T, err error, key string) string {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is no *errs.Error", err)
	}
	m, ok := e.Fields[key]
	if !ok {
		t.Fatalf("no message for %s in %v", key, e.Fields)
	}
	return m.Key
}

// Every list and map of the resilience document holds at most 1,000 entries and every string at
// most 4 KiB: larger ones are refused with the field named, and nothing is saved.
func TestResilienceDocumentIsBounded(t *testing.T) {
	long := strings.Repeat("x", MaxTextBytes+1)
	many := func(v string) string { return "[" + strings.TrimSuffix(strings.Repeat(v+",", MaxEntries+1), ",") + "]" }
	tests := []struct {
		name, patch, key, msg string
	}{
		{"1,001 error rules", `{"error_rules":` + rulesJSON(MaxEntries+1) + `}`, "error_rules", "err.too_many_entries"},
		{"1,001 restatements", `{"status_restatements":[` + strings.TrimSuffix(strings.Repeat(`{"name":"r","from_status":403,"to_status":429},`, MaxEntries+1), ",") + `]}`,
			"status_restatements", "err.too_many_entries"},
		{"a 5 KiB body marker", `{"error_rules":` + rulesJSON(1, "ok", long) + `}`, "error_rules[0].body_markers[1]", "err.text_too_long"},
		{"1,001 body markers", `{"error_rules":` + rulesJSON(1, strings.Split(strings.Repeat("m,", MaxEntries+1), ",")[:MaxEntries+1]...) + `}`,
			"error_rules[0].body_markers", "err.too_many_entries"},
		{"a 5 KiB rule name", `{"error_rules":[{"name":"` + long + `","statuses":[429],"reason":"rate_limit","scope":"connection"}]}`,
			"error_rules[0].name", "err.text_too_long"},
		{"a 5 KiB header name", `{"error_rules":[{"name":"h","header_matches":{"` + long + `":"x"},"reason":"rate_limit","scope":"connection"}]}`,
			"error_rules[0].header_matches", "err.key_too_long"},
		{"a 5 KiB header value", `{"error_rules":[{"name":"h","header_matches":{"x-why":"` + long + `"},"reason":"rate_limit","scope":"connection"}]}`,
			"error_rules[0].header_matches.x-why", "err.text_too_long"},
		{"1,001 retry statuses", `{"retry":{"retry_on_statuses":` + many(`"429"`) + `}}`, "retry.retry_on_statuses", "err.too_many_entries"},
		{"1,001 breaker statuses", `{"circuit_breaker":{"failure_on_statuses":` + many(`"5xx"`) + `}}`, "circuit_breaker.failure_on_statuses", "err.too_many_entries"},
		{"1,001 lockout codes", `{"model_lockout":{"error_codes":` + many("429") + `}}`, "model_lockout.error_codes", "err.too_many_entries"},
		{"1,001 family patterns", `{"model_lockout":{"families":{"anthropic":{"opus":` + many(`"claude-opus-*"`) + `}}}}`,
			"model_lockout.families.anthropic.opus", "err.too_many_entries"},
		{"a 5 KiB family pattern", `{"model_lockout":{"families":{"anthropic":{"opus":["` + long + `"]}}}}`,
			"model_lockout.families.anthropic.opus[0]", "err.text_too_long"},
		{"a 5 KiB provider name in families", `{"model_lockout":{"families":{"` + long + `":{"opus":["claude-opus-*"]}}}}`,
			"model_lockout.families", "err.key_too_long"},
		{"a 5 KiB breaker scope", `{"circuit_breaker":{"scope":"` + long + `"}}`, "circuit_breaker.scope", "err.text_too_long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewMemoryStore()
			s := newService(t, store, nil)
			_, err := s.Patch(context.Background(), []byte(tt.patch))
			if err == nil {
				t.Fatal("accepted")
			}
			if got := fieldMsg(t, err, tt.key); got != tt.msg {
				t.Fatalf("%s: %s, want %s", tt.key, got, tt.msg)
			}
			fieldKeys(t, err) // every message has its catalog keys
			if _, saves := store.snapshot(); saves != 0 {
				t.Fatal("something was saved")
			}
		})
	}
	// At the bounds everything is accepted.
	s := newService(t, NewMemoryStore(), nil)
	if _, err := s.Patch(context.Background(), []byte(`{"error_rules":`+rulesJSON(MaxEntries, strings.Repeat("y", MaxTextBytes))+`}`)); err != nil {
		t.Fatalf("1,000 rules with 4 KiB markers: %v", err)
	}
	if n := len(s.Snapshot().Resilience().ErrorRules); n != MaxEntries {
		t.Fatalf("%d rules saved", n)
	}
}

// The OAuth document and the override documents have the same bounds.
func TestOtherDocumentsAreBounded(t *testing.T) {
	long := strings.Repeat("x", MaxTextBytes+1)
	o, err := NewOAuth(context.Background(), NewMemoryStore(), nil, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	scopes := strings.TrimSuffix(strings.Repeat(`"user:profile",`, MaxEntries+1), ",")
	for key, patch := range map[string]string{
		"claude.scopes":        `{"claude":{"scopes":[` + scopes + `]}}`,
		"claude.authorize_url": `{"claude":{"authorize_url":"https://claude.ai/` + long + `"}}`,
	} {
		_, err := o.Patch(context.Background(), []byte(patch))
		if err == nil || fieldMsg(t, err, key) == "" {
			t.Fatalf("%s: %v", key, err)
		}
	}
	statuses := strings.TrimSuffix(strings.Repeat(`"429",`, MaxEntries+1), ",")
	if _, fields := CheckProviderOverrides([]byte(`{"retry":{"retry_on_statuses":[` + statuses + `]}}`)); fields["retry.retry_on_statuses"].Key != "err.too_many_entries" {
		t.Fatalf("provider overrides: %v", fields)
	}
	if _, fields := CheckProviderOverrides([]byte(`{"circuit_breaker":{"scope":"` + long + `"}}`)); fields["circuit_breaker.scope"].Key != "err.text_too_long" {
		t.Fatalf("provider overrides: %v", fields)
	}
}

// The walk covers any field of any shape, so a setting added later is bounded too.
func TestCheckBoundsWalksEveryField(t *testing.T) {
	type inner struct {
		Words []string `json:"words"`
	}
	type doc struct {
		Name   string                `json:"name"`
		Inner  *inner                `json:"inner,omitempty"`
		ByName map[string]inner      `json:"by_name"`
		Nested map[string][]string   `json:"nested"`
		Plain  string                // no tag: the field's name
		Skip   []string              `json:"-"`
		hidden []string              // unexported: not part of any document
		Deep   map[string]*[]*string `json:"deep"`
	}
	long := strings.Repeat("é", MaxTextBytes/2+1) // counted in bytes
	tooMany := make([]string, MaxEntries+1)
	s := &long
	fe := fieldErrors{}
	ok := checkBounds("x", doc{Name: "ok", Inner: &inner{Words: tooMany}, ByName: map[string]inner{"a": {Words: []string{long}}},
		Nested: map[string][]string{"n": {"ok", long}}, Plain: long, Skip: tooMany, hidden: tooMany,
		Deep: map[string]*[]*string{"d": {nil, s}}}, fe)
	want := map[string]string{"x.inner.words": "err.too_many_entries", "x.by_name.a.words[0]": "err.text_too_long",
		"x.nested.n[1]": "err.text_too_long", "x.Plain": "err.text_too_long", "x.deep.d[1]": "err.text_too_long"}
	if ok || len(fe) != len(want) {
		t.Fatalf("ok %v, problems %v", ok, fe)
	}
	for k, key := range want {
		if fe[k].Key != key {
			t.Errorf("%s: %q, want %s", k, fe[k].Key, key)
		}
	}
	if !checkBounds("x", doc{Name: strings.Repeat("a", MaxTextBytes), Skip: tooMany}, fieldErrors{}) {
		t.Fatal("values at the bounds refused")
	}
}
