package messages

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"switchyard/services/proxy/convo"
)

// files are the inputs of a testdata directory.
func files(t testing.TB, dir, ext string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil || len(names) == 0 {
		t.Fatalf("no cases in %s", dir)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(n), ext)] = b
	}
	return out
}

// decode is a JSON document as encoding/json reads it into any.
func decode(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// sameKinds fails unless evs are events of the kinds want, in that order.
func sameKinds(t *testing.T, evs []convo.Event, want ...convo.EventKind) {
	t.Helper()
	var kinds []convo.EventKind
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// sameJSON fails unless want and got are the same JSON value.
func sameJSON(t *testing.T, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("JSON differs\n--- got\n%s\n--- want\n%s", mustJSON(got), mustJSON(want))
	}
}
