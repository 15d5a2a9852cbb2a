package settings

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

func TestFamiliesDefaultIsEmpty(t *testing.T) {
	d := Defaults()
	if d.ModelLockout.Families == nil || len(d.ModelLockout.Families) != 0 {
		t.Fatalf("default families = %#v, want an empty map", d.ModelLockout.Families)
	}
	b, err := json.Marshal(d.ModelLockout)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if got := string(doc["families"]); got != "{}" {
		t.Errorf("families renders as %s, want {}", got)
	}
	// Two documents must never share the registry's default map.
	d.ModelLockout.Families["x"] = map[string][]string{"y": {"z"}}
	if len(Defaults().ModelLockout.Families) != 0 {
		t.Error("modifying one document changed the defaults")
	}
}

func TestFamiliesValidation(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		wantKeys []string // nil = valid
	}{
		{"empty", `{}`, nil},
		{"exact and prefix", `{"anthropic": {"opus": ["claude-opus-*", "claude-3-opus-20240229"], "sonnet": ["claude-sonnet-*"]}}`, nil},
		{"whole provider", `{"codex": {"all": ["*"]}}`, nil},
		{"provider without families", `{"openai": {}}`, nil},
		{"blank provider", `{" ": {"opus": ["claude-opus-*"]}}`, []string{"model_lockout.families. "}},
		{"empty family name", `{"anthropic": {"": ["claude-opus-*"]}}`, []string{"model_lockout.families.anthropic"}},
		{"no patterns", `{"anthropic": {"opus": []}}`, []string{"model_lockout.families.anthropic.opus"}},
		{"null patterns", `{"anthropic": {"opus": null}}`, []string{"model_lockout.families.anthropic.opus"}},
		{"empty pattern", `{"anthropic": {"opus": ["claude-opus-*", ""]}}`, []string{"model_lockout.families.anthropic.opus"}},
		{"blank pattern", `{"anthropic": {"opus": ["  "]}}`, []string{"model_lockout.families.anthropic.opus"}},
		{"star in the middle", `{"anthropic": {"opus": ["claude-*-opus"]}}`, []string{"model_lockout.families.anthropic.opus"}},
		{"star at the start", `{"anthropic": {"opus": ["*-opus"]}}`, []string{"model_lockout.families.anthropic.opus"}},
		{"two stars", `{"anthropic": {"opus": ["claude-opus-**"]}}`, []string{"model_lockout.families.anthropic.opus"}},
		{"errors in two families", `{"anthropic": {"opus": ["a*b"], "sonnet": []}}`, []string{"model_lockout.families.anthropic.opus", "model_lockout.families.anthropic.sonnet"}},
		{"not an object", `["claude-opus-*"]`, []string{"model_lockout.families"}},
		{"patterns not a list", `{"anthropic": {"opus": "claude-opus-*"}}`, []string{"model_lockout.families"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewMemoryStore()
			s := newService(t, store, nil)
			snap, err := s.Patch(context.Background(), patchOf("model_lockout.families", tt.value))
			if tt.wantKeys == nil {
				if err != nil {
					t.Fatalf("Patch: %v", err)
				}
				var want map[string]map[string][]string
				if err := json.Unmarshal([]byte(tt.value), &want); err != nil {
					t.Fatal(err)
				}
				if got := snap.Resilience().ModelLockout.Families; !reflect.DeepEqual(got, want) {
					t.Errorf("families = %#v, want %#v", got, want)
				}
				return
			}
			if keys := fieldKeys(t, err); !slices.Equal(keys, tt.wantKeys) {
				t.Errorf("keys = %v, want %v (%v)", keys, tt.wantKeys, err)
			}
			if _, saves := store.snapshot(); saves != 0 {
				t.Error("an invalid patch was saved")
			}
		})
	}
}

func TestFamiliesPatchPersistsAndResets(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	s := newService(t, store, nil)
	body := `{"model_lockout": {"enabled": true, "families": {"anthropic": {"opus": ["claude-opus-*"]}}}}`
	snap, err := s.Patch(ctx, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][]string{"anthropic": {"opus": {"claude-opus-*"}}}
	if got := snap.Resilience().ModelLockout.Families; !reflect.DeepEqual(got, want) {
		t.Fatalf("families = %#v", got)
	}
	if src := snap.Source("model_lockout.families"); src != SourcePersisted {
		t.Errorf("source = %q, want persisted", src)
	}

	// A restart reads the saved value back.
	again := newService(t, store, nil).Snapshot()
	if got := again.Resilience().ModelLockout.Families; !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart families = %#v", got)
	}

	// The whole map is one leaf: a patch replaces it, it does not merge.
	snap, err = s.Patch(ctx, []byte(`{"model_lockout": {"families": {"openai": {"gpt5": ["gpt-5*"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Resilience().ModelLockout.Families; !reflect.DeepEqual(got, map[string]map[string][]string{"openai": {"gpt5": {"gpt-5*"}}}) {
		t.Fatalf("replaced families = %#v", got)
	}

	// null reverts to the default.
	snap, err = s.Patch(ctx, []byte(`{"model_lockout": {"families": null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Resilience().ModelLockout.Families; len(got) != 0 || snap.Source("model_lockout.families") != SourceDefault {
		t.Fatalf("after null: %#v from %s", got, snap.Source("model_lockout.families"))
	}
}

func TestFamiliesFromEnv(t *testing.T) {
	const variable = "SWITCHYARD_MODEL_LOCKOUT_FAMILIES"
	snap := newService(t, NewMemoryStore(), map[string]string{
		variable: `{"anthropic": {"opus": ["claude-opus-*", "claude-3-opus-20240229"]}}`,
	}).Snapshot()
	want := map[string]map[string][]string{"anthropic": {"opus": {"claude-opus-*", "claude-3-opus-20240229"}}}
	if got := snap.Resilience().ModelLockout.Families; !reflect.DeepEqual(got, want) {
		t.Errorf("families = %#v, want %#v", got, want)
	}
	if src := snap.Source("model_lockout.families"); src != SourceEnv {
		t.Errorf("source = %q, want env", src)
	}

	for name, value := range map[string]string{
		"not JSON":      `anthropic=claude-opus-*`,
		"unknown shape": `{"anthropic": ["claude-opus-*"]}`,
		"invalid":       `{"anthropic": {"opus": ["*opus"]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), NewMemoryStore(), envFrom(map[string]string{variable: value}), fixedNow)
			if err == nil {
				t.Fatal("New succeeded")
			}
			if keys := fieldKeys(t, err); !slices.Equal(keys, []string{variable}) {
				t.Errorf("keys = %v, want [%s]", keys, variable)
			}
		})
	}
}
